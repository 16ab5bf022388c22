"""`eok worker` (join or start a Ray cluster, with boards) and `eok bootstrap` (the suite-wide first pass)."""

from __future__ import annotations

import threading
from typing import Annotated

import typer
from rich.live import Live
from rich.table import Table

from core.errors import InvalidInput
from core.settings import get_settings
from service.cli.app import JsonOpt, app, console, print_json

DEFAULT_HEAD_PORT = 6380


@app.command()
def worker(
    cluster: Annotated[str | None, typer.Option(help="the head's address HOST:PORT (omit with --head)")] = None,
    head: Annotated[bool, typer.Option("--head", help="start the cluster's head node here")] = False,
    port: Annotated[int, typer.Option(help="the head's port (with --head)", min=1, max=65535)] = DEFAULT_HEAD_PORT,
    board: Annotated[
        list[str] | None, typer.Option(help="a board attached to this node: TARGET=[USER@]HOST[:PORT] (repeatable)")
    ] = None,
    num_cpus: Annotated[int | None, typer.Option(help="CPUs this node offers for qemu evaluations", min=0)] = None,
    node_ip: Annotated[str | None, typer.Option(help="this node's address as the others reach it")] = None,
    detach: Annotated[bool, typer.Option("--detach", help="return once the node is up (stop: ray stop)")] = False,
    json_out: bool = JsonOpt,
) -> None:
    """Join this machine to the evaluation cluster (or start its head), offering CPUs and boards."""
    from evaluator.cluster import Board, node_start_args, start_node

    if head == bool(cluster):
        raise InvalidInput("give either --head or --cluster HOST:PORT", "e.g. eok worker --cluster 10.0.0.2:6380")
    boards = [Board.parse(spec) for spec in board or []]
    args = node_start_args(
        head=head, address=cluster, port=port, num_cpus=num_cpus, boards=boards, node_ip=node_ip, block=not detach
    )
    what = f"head on port {port}" if head else f"worker of {cluster}"
    offers = ", ".join(f"{b.target} at {b.address()}" for b in boards) or "no boards"
    if json_out:
        print_json({"node": "head" if head else "worker", "args": args, "boards": [b.address() for b in boards]})
    else:
        console.print(f"eok worker: starting a Ray {what} ({offers}); Ctrl-C stops it", highlight=False)
    code = start_node(args, boards)
    if code:
        raise typer.Exit(code)


@app.command()
def bootstrap(
    tasks: Annotated[str, typer.Option(help="all, a category (blas, nn, ...), or task names, comma separated")] = "all",
    targets: Annotated[str, typer.Option(help="target keys, comma separated")] = "k1-x60",
    budget: Annotated[int, typer.Option(help="evaluations per (task, target)", min=1, max=2000)] = 8,
    directions: Annotated[int, typer.Option(help="ideas explored side by side per run", min=1, max=16)] = 2,
    generator: Annotated[str, typer.Option(help="auto | llm | offline")] = "offline",
    runner: Annotated[str | None, typer.Option(help="qemu | ssh | native (default from settings)")] = None,
    seed: Annotated[int, typer.Option(help="random seed")] = 0,
    cluster: Annotated[str | None, typer.Option(help="Ray cluster HOST:PORT or auto (default EOK_RAY_ADDRESS)")] = None,
    resume: Annotated[str | None, typer.Option(help="resume the bootstrap with this id")] = None,
    list_: Annotated[bool, typer.Option("--list", help="list bootstraps and exit")] = False,
    json_out: bool = JsonOpt,
) -> None:
    """The brute-force first stage: run the agent on every (task, target) pair to fill the graph."""
    from agent.bootstrap import Bootstrapper, BootstrapRequest
    from agent.optimizer import Optimizer
    from evaluator.executor import build_executor
    from service.bootstrap import Container

    if generator not in ("auto", "llm", "offline"):
        raise InvalidInput(f"--generator {generator!r} is not known", "use auto, llm or offline")
    settings = get_settings()
    container = Container(settings)
    try:
        executor = build_executor(settings, cluster) if not list_ else None
        boots = Bootstrapper(Optimizer(container, executor=executor))
        if list_:
            _print_list(boots, json_out)
            return
        if resume:
            boot = boots.get(resume)
        else:
            req = BootstrapRequest(
                tasks=tasks,
                targets=[t.strip() for t in targets.split(",") if t.strip()],
                budget=budget,
                directions=directions,
                generator=generator,  # type: ignore[arg-type]
                runner=runner,
                seed=seed,
            )
            boot = boots.plan(req)
        outcome = _execute(boots, boot.id, quiet=json_out)
        if json_out:
            print_json(
                {
                    "bootstrap": outcome.bootstrap.model_dump(mode="json"),
                    "rows": [r.model_dump() for r in outcome.rows],
                    "yardsticks": outcome.yardsticks.model_dump(),
                    "seconds": outcome.seconds,
                    "artifacts": outcome.artifacts,
                }
            )
        else:
            _print_summary(outcome)
        if not outcome.complete:
            raise typer.Exit(3)
    finally:
        container.close()


class _View:
    """The one progress view: runs done, evaluations per minute, best so far per task."""

    def __init__(self) -> None:
        self.last = None
        self.best: dict[tuple[str, str], float | None] = {}

    def update(self, e) -> None:
        self.last = e
        if e.task and e.target and e.best_speedup is not None:
            self.best[(e.task, e.target)] = e.best_speedup

    def render(self) -> Table:
        e = self.last
        head = (
            f"runs {e.runs_done}/{e.runs_total}   evaluations {e.evaluations}   {e.evaluations_per_min:.1f}/min"
            if e
            else "starting"
        )
        t = Table(title=head, title_justify="left")
        t.add_column("task", no_wrap=True)
        t.add_column("target", no_wrap=True)
        t.add_column("best so far", justify="right")
        for (task, target), best in sorted(self.best.items(), key=lambda kv: -(kv[1] or 0))[:12]:
            t.add_row(task, target, f"{best:.2f}x" if best else "-")
        return t


def _execute(boots, bootstrap_id: str, quiet: bool):
    cancel = threading.Event()
    if quiet:
        return boots.execute(bootstrap_id, cancel=cancel)
    console.print(f"bootstrap [bold]{bootstrap_id}[/] (resume with `eok bootstrap --resume {bootstrap_id}`)")
    view = _View()
    with Live(view.render(), console=console, refresh_per_second=2, transient=True) as live:

        def on_event(e) -> None:
            view.update(e)
            live.update(view.render())

        try:
            return boots.execute(bootstrap_id, on_event=on_event, cancel=cancel)
        except KeyboardInterrupt:
            cancel.set()
            raise


def _print_summary(out) -> None:
    t = Table(title=f"bootstrap {out.bootstrap.id}: {len(out.rows)} runs in {out.seconds:.0f} s")
    for col, kw in (("task", {"no_wrap": True}), ("target", {"no_wrap": True}), ("status", {}), ("evals", {})):
        t.add_column(col, **kw)
    t.add_column("best", justify="right")
    for r in out.rows:
        t.add_row(
            r.task,
            r.target,
            r.status,
            f"{r.evaluations}/{r.budget}",
            f"{r.best_speedup:.2f}x" if r.best_speedup else "-",
        )
    console.print(t)
    speedups = sorted(r.best_speedup for r in out.rows if r.best_speedup)
    if speedups:
        console.print(f"median best speedup {speedups[len(speedups) // 2]:.2f}x over {len(speedups)} runs")
    for line in out.yardsticks.lines():  # over competent; over the library where one was configured
        console.print(line, highlight=False, markup=False)
    for name, path in out.artifacts.items():
        console.print(f"{name}: {path}", highlight=False)
    if not out.complete:
        console.print(f"not complete: resume with `eok bootstrap --resume {out.bootstrap.id}`", highlight=False)


def _print_list(boots, json_out: bool) -> None:
    items = boots.list()
    if json_out:
        print_json([b.model_dump(mode="json") for b in items])
        return
    t = Table(title="bootstraps (newest first)")
    for col in ("id", "status", "budget", "started"):
        t.add_column(col, no_wrap=col == "id")
    for b in items:
        t.add_row(b.id, str(b.status), str(b.budget), f"{b.started_at:%Y-%m-%d %H:%M}")
    console.print(t)
