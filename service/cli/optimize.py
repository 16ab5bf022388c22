"""`eok optimize`: run the agent on one task and target, with live progress and a report at the end."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Annotated

import typer
from rich.live import Live
from rich.table import Table

from agent.report import yardstick
from agent.types import ProgressEvent, RunOutcome, RunRequest
from core.errors import InvalidInput
from core.settings import get_settings
from knowledge.models import RunStatus, utcnow
from service.cli.app import (
    GeneratorName,
    JsonOpt,
    LibraryOpt,
    RunnerName,
    app,
    console,
    on_interrupt,
    print_json,
    with_libraries,
)


class _Progress:
    """Per-direction counters rendered as a live table: over the competent baseline first, -O3 beside it."""

    def __init__(self, budget: int, note: str | None = None) -> None:
        self.budget = budget
        self.note = note  # why the baselines are weak (scalar libm calls, ...), shown under the table
        self.rows: dict[str, dict] = {}
        self.evaluations = 0
        self.best: tuple[float | None, float | None] = (None, None)
        self.last = ""

    def update(self, e: ProgressEvent) -> None:
        self.evaluations, self.best = e.evaluations, (e.best_competent_speedup, e.best_speedup)
        if e.direction:
            row = self.rows.setdefault(e.direction, {"evals": 0, "ok": 0, "best": (None, None)})
            row["evals"] += 1
            row["ok"] += e.status == "ok"
            if e.speedup and e.speedup > (row["best"][1] or 0):
                row["best"] = (e.competent_speedup, e.speedup)
        self.last = e.message

    def table(self) -> Table:
        t = Table(
            title=f"evaluations {self.evaluations}/{self.budget}   best {yardstick(*self.best)}",
            title_justify="left",
            caption_justify="left",
        )
        for col in ("direction (idea)", "evals", "correct", "best: competent / -O3"):
            t.add_column(col)
        for d, r in self.rows.items():
            t.add_row(d, str(r["evals"]), str(r["ok"]), f"{_x(r['best'][0])} / {_x(r['best'][1])}")
        # Wraps at the terminal width rather than being cut mid-word.
        t.caption = "\n".join(x for x in (self.note, self.last) if x)
        return t


def _x(v: float | None) -> str:
    return f"{v:.2f}x" if v else "-"


@app.command()
def optimize(
    task: Annotated[str | None, typer.Argument(help="suite task name or task directory")] = None,
    target: Annotated[
        str | None, typer.Option(help="target key: k1-x60, k3-x100, k3-a100, host (default: EOK_DEFAULT_TARGET)")
    ] = None,
    budget: Annotated[int, typer.Option(min=1, max=2000, help="evaluations to spend")] = 32,
    directions: Annotated[int, typer.Option(min=1, max=16, help="ideas explored side by side")] = 4,
    generator: Annotated[GeneratorName, typer.Option(help="auto: the LLM when configured, else offline")] = (
        GeneratorName.auto
    ),
    seed: Annotated[int, typer.Option(help="random seed")] = 0,
    runner: Annotated[RunnerName | None, typer.Option(help="default: EOK_DEFAULT_RUNNER (qemu)")] = None,
    resume: Annotated[str | None, typer.Option(help="resume the run with this id")] = None,
    show_prompt: Annotated[
        bool, typer.Option("--show-prompt", help="print the first LLM prompt for this task and exit (runs nothing)")
    ] = False,
    cluster: Annotated[str | None, typer.Option(help="Ray cluster HOST:PORT or auto (default EOK_RAY_ADDRESS)")] = None,
    library: list[Path] = LibraryOpt,
    json_out: bool = JsonOpt,
) -> None:
    """Optimize a kernel task for a target; every evaluated candidate is recorded in the graph."""
    from agent.optimizer import Optimizer
    from evaluator.executor import build_executor
    from evaluator.upstream.baseline import configured_libraries
    from service.bootstrap import Container

    if not task and not resume:
        raise InvalidInput("give a TASK (e.g. saxpy) or --resume RUN_ID", "see `eok tasks list`")
    target = target or get_settings().default_target  # as `eok eval` does
    if show_prompt:
        if not task:
            raise InvalidInput("--show-prompt needs a TASK", "e.g. `eok optimize sdot --show-prompt`")
        container = Container(get_settings())
        req = RunRequest(
            task=task, target=target, directions=directions, seed=seed, runner=runner.value if runner else None
        )
        _print_prompt(Optimizer(container).first_prompt(req), json_out)
        container.close()
        return
    if not resume:
        _check_up_front(task or "", target, runner.value if runner else None)
    settings = with_libraries(get_settings(), library)
    configured_libraries(settings.library)  # a bad manifest is one line before the graph is touched
    container = Container(settings)
    opt = Optimizer(container, executor=build_executor(settings, cluster))
    if resume:
        run = opt.get_run(resume)
    else:
        req = RunRequest(
            task=task or "",
            target=target,
            budget=budget,
            directions=directions,
            generator=generator.value,
            seed=seed,
            runner=runner.value if runner else None,
        )
        run = opt.create_run(req)
    outcome = _execute(opt, run.id, run.budget, quiet=json_out)
    if json_out:
        print_json(_outcome_json(outcome))
    else:
        _print_outcome(outcome)
    container.close()


def _print_prompt(messages: list[dict[str, str]], json_out: bool) -> None:
    if json_out:
        print_json({"messages": messages})
        return
    for m in messages:  # plain print: the prompt is markdown with code; rich would restyle it
        print(f"===== {m['role']} =====\n{m['content']}\n")


def _check_up_front(task: str, target: str, runner: str | None) -> None:
    """Task, target and runner errors before the graph is touched (they need no Neo4j)."""
    from evaluator.runners import get_runner
    from evaluator.targets import load_target
    from evaluator.tasks import load_task

    settings = get_settings()
    load_task(task, settings)
    profile = load_target(target)
    get_runner(runner or (settings.default_runner if profile.is_riscv else "native"), settings).check(profile)


def _execute(opt, run_id: str, budget: int, quiet: bool) -> RunOutcome:
    progress = _Progress(budget, opt.get_run(run_id).baseline_note)
    cancel = threading.Event()

    def mark_interrupted() -> str:
        # Resumable: `--resume` (or `eok serve`) continues from the experiences already recorded.
        cancel.set()
        opt.recorder.flush(timeout=0.5)  # queued evaluations go in while the budget allows; the rest re-run
        opt.recorder.update_run(run_id, status=RunStatus.INTERRUPTED.value, finished_at=utcnow())
        return f"run {run_id} marked interrupted; resume with `eok optimize --resume {run_id}`"

    on_interrupt(mark_interrupted)
    if quiet:
        return opt.execute(run_id, cancel=cancel)
    # Two short lines: at 80 columns the resume command must not break where a user copies it.
    console.print(f"run [bold]{run_id}[/]", highlight=False)
    console.print(f"resume with: eok optimize --resume {run_id}", highlight=False, soft_wrap=True)
    with Live(progress.table(), console=console, refresh_per_second=4, transient=False) as live:

        def on_event(e: ProgressEvent) -> None:
            progress.update(e)
            live.update(progress.table())

        outcome = opt.execute(run_id, on_event=on_event, cancel=cancel)
    console.print()
    return outcome


def _outcome_json(o: RunOutcome) -> dict:
    return {
        "run": o.run.model_dump(mode="json"),
        "best": o.best.model_dump(mode="json", exclude={"code"}) if o.best else None,
        "lineage": o.lineage,
        "history": o.history,
        "artifacts": o.artifacts,
        "seconds": o.seconds,
    }


def _print_outcome(o: RunOutcome) -> None:
    from agent.report import MODELED_CAVEAT, improved, over_baseline

    r = o.run
    t = Table(
        title=f"run {r.id}: {r.task_id} on {r.target_key}",
        title_justify="left",
        caption=r.baseline_note or "",
        caption_justify="left",
    )
    for col in ("over competent", "over -O3", "evals", "LLM calls", "tokens", "time", "status"):  # fits 80 columns
        t.add_column(col)
    t.add_row(
        _x(r.best_competent_speedup),
        _x(r.best_speedup),
        f"{r.evaluations}/{r.budget}",
        str(r.llm_calls),
        str(r.llm_tokens),
        f"{o.seconds:.0f} s",
        str(r.status),
    )
    console.print(t)
    if r.best_speedup_over_library and r.library_label:  # only where a built library was configured
        console.print(f"over the library: {_x(r.best_speedup_over_library)} over {r.library_label}", highlight=False)
    if not (o.best and improved(over_baseline(o.best))):
        gain = over_baseline(o.best) if o.best else None
        best = f" (best correct candidate {gain:.2f}x)" if gain else ""
        console.print(f"[bold yellow]no improvement: keep the baseline[/]{best}", highlight=False)
    else:
        console.print(
            f"[bold green]best kernel: {_x(o.best.competent_speedup)} over the competent baseline[/], "
            f"{_x(o.best.speedup)} over -O3"
            + (
                f", {_x(o.best.speedup_over_library)} over {o.best.library_label}"
                if o.best.speedup_over_library
                else ""
            )
            + f" ({o.best.measurement})",
            highlight=False,
        )
        console.print(o.artifacts.get("code", "-"), highlight=False, soft_wrap=True)
        if o.best.cflags:
            console.print(f"flags: {' '.join(o.best.cflags)}", highlight=False)
        if o.best.measurement == "modeled":
            console.print(f"[dim]{MODELED_CAVEAT}[/]", highlight=False)
        _print_lineage(o.lineage)
    for name in ("report", "plot"):
        if name in o.artifacts:
            console.print(f"{name}: ", end="", highlight=False)
            console.print(o.artifacts[name], highlight=False, soft_wrap=True)  # a path is never wrapped


def _print_lineage(rows: list[dict]) -> None:
    if not rows:
        return
    lt = Table(title="lineage of the best kernel (root first)", title_justify="left")
    lt.add_column("step", no_wrap=True)
    lt.add_column("thought (technique)", overflow="fold", ratio=3)
    lt.add_column("competent / -O3", no_wrap=True)
    lt.add_column("evidence", overflow="fold", ratio=2)
    for row in rows:
        commits = ", ".join(f"{c['repo']}@{c['sha'][:8]}" for c in row.get("commits") or []) or "-"
        thought = f"{row['thought_title']} ({row['technique']})" if row.get("thought_title") else "- (fallback move)"
        lt.add_row(
            str(row["depth"]),
            thought,
            f"{_x(row.get('competent_speedup'))} / {_x(row['speedup'])}" if row.get("speedup") else str(row["status"]),
            commits,
        )
    console.print(lt)
