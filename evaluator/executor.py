"""Where evaluations run: in this process (the default) or as tasks on a Ray cluster (evaluator/cluster.py).

The agent hands an executor self-contained jobs (task, target, candidate, runner) and gets futures back;
it never learns where a job ran. Executors only evaluate: the graph is written by the process that
submitted the job (the agent's recorder), so a job retried on another node can never be recorded twice.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from core.settings import Settings, get_settings
from evaluator.evaluate import Candidate, EvalResult, Evaluator
from evaluator.runners import get_runner
from evaluator.targets import TargetProfile
from evaluator.tasks import KernelTask

JobKind = Literal["candidate", "baseline", "gate"]  # gate: the held-out re-verification (correctness only)


@dataclass(frozen=True)
class EvalJob:
    """One evaluation, complete in itself: everything a worker on another machine needs."""

    task: KernelTask
    target: TargetProfile
    runner: str
    candidate: Candidate | None = None  # None for the baseline (the reference with the target's flags)
    kind: JobKind = "candidate"

    @classmethod
    def baseline(cls, task: KernelTask, target: TargetProfile, runner: str) -> EvalJob:
        return cls(task=task, target=target, runner=runner, kind="baseline")


def run_job(evaluator: Evaluator, job: EvalJob) -> EvalResult:
    """What every executor does with a job, wherever it runs."""
    if job.kind == "baseline":
        return evaluator.baseline(job.task, job.target, job.runner)
    if job.candidate is None:
        raise ValueError("a candidate job needs a candidate")
    if job.kind == "gate":
        return evaluator.verify_generalization(job.task, job.target, job.candidate, job.runner)
    return evaluator.evaluate(job.task, job.target, job.candidate, job.runner)


@runtime_checkable
class EvalExecutor(Protocol):
    """Runs evaluation jobs somewhere and says how many may usefully run at once."""

    name: str

    def submit(self, job: EvalJob) -> Future[EvalResult]: ...

    def check(self, runner: str, target: TargetProfile) -> None:
        """Raise a clear error now when jobs for (runner, target) cannot run anywhere this executor reaches."""
        ...

    def slots(self, runner: str, target: TargetProfile) -> int:
        """How many jobs for (runner, target) can run at the same time now."""
        ...

    def describe(self) -> str:
        """One line for users: where evaluations run."""
        ...

    def close(self) -> None: ...


class InProcessExecutor:
    """Evaluations on threads of this process (each is a compile plus a sandboxed run: a core each)."""

    name = "in-process"

    def __init__(self, settings: Settings | None = None, evaluator: Evaluator | None = None) -> None:
        self.settings = settings or get_settings()
        self.evaluator = evaluator or Evaluator(self.settings)
        self.parallelism = max(1, self.settings.eval_parallelism)
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def submit(self, job: EvalJob) -> Future[EvalResult]:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=self.parallelism, thread_name_prefix="eok-eval")
            return self._pool.submit(run_job, self.evaluator, job)

    def check(self, runner: str, target: TargetProfile) -> None:
        get_runner(runner, self.settings).check(target)

    def slots(self, runner: str, target: TargetProfile) -> int:
        return self.parallelism

    def describe(self) -> str:
        return f"in this process, {self.parallelism} at a time"

    def close(self) -> None:
        with self._lock:
            if self._pool is not None:
                self._pool.shutdown(wait=True)
                self._pool = None


def build_executor(settings: Settings, cluster: str | None = None, evaluator: Evaluator | None = None) -> EvalExecutor:
    """The executor for `cluster` (or EOK_RAY_ADDRESS): Ray when set, this process otherwise."""
    address = cluster if cluster is not None else settings.ray_address
    if address:
        from evaluator.cluster import RayExecutor

        return RayExecutor.connect(address, settings)
    return InProcessExecutor(settings, evaluator)


__all__ = ["EvalExecutor", "EvalJob", "InProcessExecutor", "build_executor", "run_job"]
