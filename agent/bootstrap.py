"""The suite-wide first pass: run the agent on every (task, target) pair to fill the experience graph.

A bootstrap is a `Bootstrap` node plus one `Run` per pair, named `<bootstrap id>-<task>-<target>` so that a
resume finds exactly the runs it planned. Each run is an ordinary agent run (resumable from the graph after
kill -9, every evaluation recorded once by this process); runs go side by side up to the executor's slots,
so a Ray cluster with many boards fills them all. Re-planning the same pairs never creates a run twice.
"""

from __future__ import annotations

import json
import statistics
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from agent.optimizer import Optimizer
from agent.types import ProgressEvent, RunRequest
from core.errors import EokError, InvalidInput, NotFound
from evaluator.targets import load_target
from evaluator.tasks import Category, list_tasks
from knowledge.models import Bootstrap, Run, RunStatus, utcnow

BootstrapEventKind = Literal["started", "run_started", "evaluation", "run_finished", "finished", "interrupted"]
FINISHED = {RunStatus.DONE}  # a failed, cancelled or interrupted run is picked up again by a resume


class BootstrapRequest(BaseModel):
    tasks: str = Field("all", description="all, a category (blas, quantized, ...), or task names, comma separated")
    targets: list[str] = Field(default_factory=lambda: ["k1-x60"], min_length=1)
    budget: int = Field(8, ge=1, le=2000)
    directions: int = Field(2, ge=1, le=16)
    generator: Literal["auto", "llm", "offline"] = "offline"
    runner: str | None = None
    seed: int = 0


class PairRow(BaseModel):
    task: str
    target: str
    run_id: str
    status: str
    evaluations: int = 0
    budget: int = 0
    best_speedup: float | None = None
    best_competent_speedup: float | None = None
    # Over a built library's own routine where the task maps to one and it was configured (the EoK paper's
    # yardstick: over what human experts ship), with the build ("openblas@0123456789").
    best_speedup_over_library: float | None = None
    library_label: str | None = None
    error: str | None = None


class Yardsticks(BaseModel):
    """The bootstrap's medians: over the competent baseline across every pair with one, and over the library
    across the pairs that have a library baseline (the EoK paper's yardstick: speedup over human experts)."""

    median_over_competent: float | None = None
    competent_pairs: int = 0
    median_over_library: float | None = None
    library_pairs: int = 0
    libraries: list[str] = []

    @classmethod
    def of(cls, rows: list[PairRow]) -> Yardsticks:
        competent = [r.best_competent_speedup for r in rows if r.best_competent_speedup]
        library = [r.best_speedup_over_library for r in rows if r.best_speedup_over_library]
        return cls(
            median_over_competent=statistics.median(competent) if competent else None,
            competent_pairs=len(competent),
            median_over_library=statistics.median(library) if library else None,
            library_pairs=len(library),
            libraries=sorted({r.library_label for r in rows if r.best_speedup_over_library and r.library_label}),
        )

    def lines(self) -> list[str]:
        """What the summary prints; the library line only where a library baseline exists."""
        out = []
        if self.median_over_competent is not None:
            out.append(
                f"median best speedup over the competent baseline {self.median_over_competent:.2f}x "
                f"over {self.competent_pairs} runs"
            )
        if self.median_over_library is not None:
            out.append(
                f"median best speedup over the library {self.median_over_library:.2f}x over {self.library_pairs} "
                f"runs with one ({', '.join(self.libraries)}): the EoK paper's yardstick, over human experts' kernels"
            )
        return out


class BootstrapEvent(BaseModel):
    bootstrap_id: str
    kind: BootstrapEventKind
    run_id: str | None = None
    task: str | None = None
    target: str | None = None
    runs_done: int = 0
    runs_total: int = 0
    evaluations: int = 0
    evaluations_per_min: float = 0.0
    best_speedup: float | None = None  # of this event's run
    message: str = ""


class BootstrapOutcome(BaseModel):
    bootstrap: Bootstrap
    rows: list[PairRow]
    seconds: float = 0.0
    artifacts: dict[str, str] = {}

    @property
    def yardsticks(self) -> Yardsticks:
        return Yardsticks.of(self.rows)

    @property
    def complete(self) -> bool:
        return all(r.status in {s.value for s in FINISHED} for r in self.rows)


def select_tasks(spec: str) -> list[str]:
    """`all`, a category name, or comma-separated task names -> task names in suite order."""
    tasks = list_tasks()
    spec = spec.strip()
    if spec in ("", "all"):
        return [t.name for t in tasks]
    if spec in {c.value for c in Category}:
        return [t.name for t in tasks if t.category == spec]
    names = [n.strip() for n in spec.split(",") if n.strip()]
    known = {t.name for t in tasks}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise InvalidInput(
            f"--tasks: unknown task {unknown[0]!r}",
            f"use all, a category ({', '.join(c.value for c in Category)}) or names from `eok tasks list`",
        )
    return names


def run_id_for(bootstrap_id: str, task: str, target: str) -> str:
    return f"{bootstrap_id}-{task}-{target}"


class Bootstrapper:
    def __init__(self, optimizer: Optimizer) -> None:
        self.opt = optimizer
        self.store = optimizer.c.store
        self.home = optimizer.settings.home

    # ----------------------------------------------------------------------------------------- plan

    def plan(self, req: BootstrapRequest) -> Bootstrap:
        """A new bootstrap with its runs created (queued); nothing is evaluated yet."""
        tasks = select_tasks(req.tasks)
        if not tasks:
            raise InvalidInput(f"--tasks {req.tasks!r} selects no task", "see `eok tasks list`")
        targets = [load_target(t).key for t in req.targets]  # raises a clear error for an unknown target
        boot = Bootstrap(
            id=f"boot-{utcnow():%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:6]}",
            tasks=json.dumps(tasks),
            targets=json.dumps(targets),
            budget=req.budget,
            directions=req.directions,
            generator=req.generator,
            runner=req.runner,
            seed=req.seed,
            executor=self.opt.executor.describe(),
        )
        self.opt.c.ingestor.ingest([boot])
        self._ensure_runs(boot)
        return boot

    def get(self, bootstrap_id: str) -> Bootstrap:
        boot = self.store.get_node(Bootstrap, bootstrap_id)
        if boot is None:
            raise NotFound(f"bootstrap {bootstrap_id!r} does not exist", "list them with `eok bootstrap --list`")
        return boot

    def list(self) -> list[Bootstrap]:
        rows = self.store.read("MATCH (b:Bootstrap) RETURN b.id AS id ORDER BY b.started_at DESC LIMIT 50")
        return [self.get(r["id"]) for r in rows]

    def _ensure_runs(self, boot: Bootstrap) -> list[Run]:
        """One run per pair, created only if missing (a resume after kill -9 re-plans safely)."""
        runs = []
        for task in json.loads(boot.tasks):
            for target in json.loads(boot.targets):
                rid = run_id_for(boot.id, task, target)
                run = self.store.get_node(Run, rid)
                if run is None:
                    req = RunRequest(
                        task=task,
                        target=target,
                        budget=boot.budget,
                        directions=boot.directions,
                        generator=boot.generator,  # type: ignore[arg-type]
                        seed=boot.seed,
                        runner=boot.runner,
                    )
                    run = self.opt.create_run(req, run_id=rid, bootstrap_id=boot.id)
                runs.append(run)
        return runs

    # -------------------------------------------------------------------------------------- execute

    def execute(
        self,
        bootstrap_id: str,
        on_event: Callable[[BootstrapEvent], None] | None = None,
        cancel: threading.Event | None = None,
    ) -> BootstrapOutcome:
        """Run every pair not done yet; failed or cancelled runs go again, keeping their experiences."""
        boot = self.get(bootstrap_id)
        emit = on_event or (lambda e: None)
        cancel = cancel or threading.Event()
        runs = self._ensure_runs(boot)
        todo = [r for r in runs if RunStatus(r.status) not in FINISHED]
        for r in todo:
            if r.status != RunStatus.QUEUED and r.status != RunStatus.RUNNING:
                self.opt.recorder.update_run(r.id, status=RunStatus.QUEUED.value, error=None, finished_at=None)
        self._set_status(boot.id, RunStatus.RUNNING)
        where = self._record_executor(boot)
        tracker = _Tracker(boot.id, total=len(runs), done=len(runs) - len(todo))
        emit(tracker.event("started", message=f"{len(todo)} of {len(runs)} runs to go; {where}"))
        t0 = time.monotonic()
        at_once = max(1, min(len(todo) or 1, self._runs_at_once(todo)))
        interrupted = False
        with ThreadPoolExecutor(max_workers=at_once, thread_name_prefix="eok-bootstrap") as pool:
            pending: dict[Future, Run] = {}
            queue = list(todo)
            while queue or pending:
                while queue and len(pending) < at_once and not cancel.is_set():
                    run = queue.pop(0)
                    emit(tracker.event("run_started", run=run))
                    pending[pool.submit(self._run_one, run, tracker, emit, cancel)] = run
                if not pending:
                    break
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for fut in done:
                    run = pending.pop(fut)
                    error = fut.exception()
                    tracker.finished(run.id)
                    emit(tracker.event("run_finished", run=run, message=str(error or "")[:300]))
                    if error is not None and _cluster_lost(error):
                        cancel.set()  # every other run would fail the same way: stop and let --resume go on
                        interrupted = True
        outcome = self.outcome(boot.id, seconds=time.monotonic() - t0, write=False)
        final = RunStatus.DONE if outcome.complete else RunStatus.INTERRUPTED
        if cancel.is_set() and not outcome.complete:
            interrupted = True
        self._set_status(boot.id, final)
        # summary.json and the plot first: a listener acting on the terminal event finds them written.
        written = self.outcome(boot.id, seconds=outcome.seconds)
        emit(
            tracker.event(
                "interrupted" if interrupted or not outcome.complete else "finished",
                message=f"resume with `eok bootstrap --resume {boot.id}`" if not outcome.complete else "",
            )
        )
        return written

    def _runs_at_once(self, runs: list[Run]) -> int:
        """Enough runs side by side to keep every slot of the executor busy (each run fills its directions)."""
        if not runs:
            return 1
        slots = 0
        for key in {r.target_key for r in runs}:
            runner = next(json.loads(r.settings or "{}").get("runner") for r in runs if r.target_key == key)
            slots += self.opt.executor.slots(runner or self.opt.settings.default_runner, load_target(key))
        return max(1, slots)

    def _run_one(self, run: Run, tracker: _Tracker, emit: Callable, cancel: threading.Event) -> None:
        def on_event(e: ProgressEvent) -> None:
            if e.kind in ("evaluation", "improved"):
                tracker.evaluated(run.id, e.best_speedup)
                emit(tracker.event("evaluation", run=run, best=e.best_speedup))

        self.opt.execute(run.id, on_event=on_event, cancel=cancel)

    def _record_executor(self, boot: Bootstrap) -> str:
        """The executor this execution really has (a resume may have fewer nodes than the plan saw): it
        becomes `executor`, and `executors` gets one line per execution (the first, then each resume)."""
        where = self.opt.executor.describe()
        self.store.write(
            "MATCH (b:Bootstrap {id: $id}) SET b.executor = $where, b.executors = coalesce(b.executors, []) + $where",
            id=boot.id,
            where=where,
        )
        return where

    def _set_status(self, bootstrap_id: str, status: RunStatus) -> None:
        finished = utcnow() if status in (RunStatus.DONE, RunStatus.INTERRUPTED) else None
        self.store.write(
            "MATCH (b:Bootstrap {id: $id}) SET b.status = $status, b.finished_at = $finished",
            id=bootstrap_id,
            status=status.value,
            finished=finished,
        )

    # -------------------------------------------------------------------------------------- outcome

    def outcome(self, bootstrap_id: str, seconds: float = 0.0, write: bool = True) -> BootstrapOutcome:
        """Rows per pair from the graph; `write` also saves summary.json and the plot."""
        boot = self.get(bootstrap_id)
        rows = self.store.read(
            "MATCH (r:Run {bootstrap_id: $id}) "
            "OPTIONAL MATCH (x:Experience {run_id: r.id}) "
            "RETURN r.id AS run_id, r.task_id AS task, r.target_key AS target, r.status AS status, "
            "r.budget AS budget, r.best_speedup AS best, r.best_competent_speedup AS best_competent, "
            "r.best_speedup_over_library AS best_library, r.library_label AS library_label, r.error AS error, "
            "count(x) AS evaluations",
            id=bootstrap_id,
        )
        order = {(t, g): i for i, (t, g) in enumerate(_pairs(boot))}
        pairs = sorted(
            (
                PairRow(
                    task=r["task"],
                    target=r["target"],
                    run_id=r["run_id"],
                    status=r["status"],
                    evaluations=r["evaluations"],
                    budget=r["budget"],
                    best_speedup=r["best"],
                    best_competent_speedup=r["best_competent"],
                    best_speedup_over_library=r["best_library"],
                    library_label=r["library_label"],
                    error=r["error"],
                )
                for r in rows
            ),
            key=lambda p: order.get((p.task, p.target), 1 << 30),
        )
        out = BootstrapOutcome(bootstrap=boot, rows=pairs, seconds=seconds)
        if write:
            out.artifacts = write_summary(self.home / "bootstraps" / boot.id, out)
        return out


def _pairs(boot: Bootstrap) -> list[tuple[str, str]]:
    return [(t, g) for t in json.loads(boot.tasks) for g in json.loads(boot.targets)]


def _cluster_lost(error: BaseException) -> bool:
    """A run failed because the evaluation cluster went away (not because of its task)."""
    if isinstance(error, EokError):
        return False
    names = {type(e).__name__ for e in _chain(error)}
    return bool(names & {"RaySystemError", "NodeDiedError", "WorkerCrashedError", "GetTimeoutError"}) or any(
        "connection" in str(e).lower() and "ray" in type(e).__module__ for e in _chain(error)
    )


def _chain(error: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    e: BaseException | None = error
    while e is not None and e not in seen:
        seen.append(e)
        e = e.__cause__ or e.__context__
    return seen


class _Tracker:
    """Counters behind the one progress view: runs done, evaluations per minute, best per run."""

    def __init__(self, bootstrap_id: str, total: int, done: int) -> None:
        self.bootstrap_id, self.total, self.done = bootstrap_id, total, done
        self.evaluations = 0
        self.best: dict[str, float | None] = {}
        self.t0 = time.monotonic()
        self.lock = threading.Lock()

    def evaluated(self, run_id: str, best: float | None) -> None:
        with self.lock:
            self.evaluations += 1
            self.best[run_id] = best

    def finished(self, run_id: str) -> None:
        with self.lock:
            self.done += 1

    def event(self, kind: BootstrapEventKind, run: Run | None = None, best: float | None = None, message: str = ""):
        with self.lock:
            minutes = max(time.monotonic() - self.t0, 1e-6) / 60
            return BootstrapEvent(
                bootstrap_id=self.bootstrap_id,
                kind=kind,
                run_id=run.id if run else None,
                task=run.task_id if run else None,
                target=run.target_key if run else None,
                runs_done=self.done,
                runs_total=self.total,
                evaluations=self.evaluations,
                evaluations_per_min=self.evaluations / minutes,
                best_speedup=best if best is not None else (self.best.get(run.id) if run else None),
                message=message,
            )


def write_summary(folder: Path, out: BootstrapOutcome) -> dict[str, str]:
    """summary.json and a bar chart of the best speedup per task and target."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = {"summary": str(folder / "summary.json")}
    (folder / "summary.json").write_text(
        json.dumps(
            {
                "bootstrap": out.bootstrap.model_dump(mode="json"),
                "rows": [r.model_dump() for r in out.rows],
                "yardsticks": out.yardsticks.model_dump(),
            },
            indent=1,
        )
    )
    if out.rows:
        paths["plot"] = str(_plot(folder / "summary.png", out))
    return paths


def _plot(path: Path, out: BootstrapOutcome) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    targets = json.loads(out.bootstrap.targets)
    tasks = json.loads(out.bootstrap.tasks)
    best = {(r.task, r.target): r.best_speedup or 0.0 for r in out.rows}
    fig, ax = plt.subplots(figsize=(max(6.0, 0.35 * len(tasks) * len(targets)), 4.0))
    width = 0.8 / max(1, len(targets))
    for j, target in enumerate(targets):
        xs = [i + j * width for i in range(len(tasks))]
        ax.bar(xs, [best.get((t, target), 0.0) for t in tasks], width, label=target)
    ax.axhline(1.0, color="grey", linewidth=0.8, linestyle="--")
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(tasks))], tasks, rotation=75, fontsize=7)
    ax.set_ylabel("best speedup over the baseline")
    ax.set_title(f"bootstrap {out.bootstrap.id}: best per task (modeled unless measured on a board)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


__all__ = [
    "BootstrapEvent",
    "BootstrapOutcome",
    "BootstrapRequest",
    "Bootstrapper",
    "PairRow",
    "Yardsticks",
    "select_tasks",
]
