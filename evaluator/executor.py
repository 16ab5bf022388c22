"""Where evaluations run: in this process (the default) or as tasks on a Ray cluster (evaluator/cluster.py).

The agent hands an executor self-contained jobs (task, target, candidate, runner) and gets futures back;
it never learns where a job ran. Executors only evaluate: the graph is written by the process that
submitted the job (the agent's recorder), so a job retried on another node can never be recorded twice.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable

import numpy as np

from core.settings import Settings, get_settings
from evaluator.evaluate import Candidate, EvalResult, Evaluator
from evaluator.runners import get_runner
from evaluator.targets import TargetProfile
from evaluator.tasks import KernelTask

if TYPE_CHECKING:
    from knowledge.embeddings import Embedder

log = logging.getLogger(__name__)
JobKind = Literal["candidate", "baseline", "gate"]  # gate: the held-out re-verification (correctness only)


SUMMARY_CHARS = 500  # an experience's summary is cut here (one line: what was tried and what happened)


@dataclass(frozen=True)
class SummarySpec:
    """An experience's summary as far as the driver knows it before the evaluation: what was tried. The
    verdict fills the gap, on the worker that judged it, which also embeds the text with the driver's
    embedding model (docs/SCALE.md "The graph writer"): the driver then only writes."""

    head: str  # "<task>: <technique> (<thought>) -> "
    tail: str  # ". <what the candidate changed>"
    model: str  # the driver's embedding model: a worker embeds with this one or not at all

    def text(self, status: str, speedup: float | None) -> str:
        """The summary for a verdict: the speedup when it has one, else the status."""
        result = f"{speedup:.2f}x" if speedup else status
        return f"{self.head}{result}{self.tail}"[:SUMMARY_CHARS]


@dataclass(frozen=True)
class EvalJob:
    """One evaluation, complete in itself: everything a worker on another machine needs."""

    task: KernelTask
    target: TargetProfile
    runner: str
    candidate: Candidate | None = None  # None for the baseline (the reference with the target's flags)
    kind: JobKind = "candidate"
    summary: SummarySpec | None = None  # set by the agent: the worker returns the summary with its vector

    @classmethod
    def baseline(cls, task: KernelTask, target: TargetProfile, runner: str) -> EvalJob:
        return cls(task=task, target=target, runner=runner, kind="baseline")


def run_job(evaluator: Evaluator, job: EvalJob, embedder: Embedder | None = None) -> EvalResult:
    """What every executor does with a job, wherever it runs; with an embedder, the result also carries
    the experience's summary and its vector (`with_summary`)."""
    if job.kind == "baseline":
        return evaluator.baseline(job.task, job.target, job.runner)
    if job.candidate is None:
        raise ValueError("a candidate job needs a candidate")
    if job.kind == "gate":
        result = evaluator.verify_generalization(job.task, job.target, job.candidate, job.runner)
    else:
        result = evaluator.evaluate(job.task, job.target, job.candidate, job.runner)
    return with_summary(job, result, embedder) if embedder is not None else result


def with_summary(job: EvalJob, result: EvalResult, embedder: Embedder) -> EvalResult:
    """The result with the summary its verdict gives the experience and that summary's embedding, computed
    here (where the evaluation ran) exactly as the driver's recorder would: same model, same text
    (Experience.embedding_text: the summary, stripped). A candidate's verdict is its status and speedup; a
    held-out gate only changes the experience when it fails (the status, no speedup), so a gate that passes
    carries nothing. The driver uses the vector only when its own summary is this text (agent/optimizer.py);
    if embedding fails here, the result goes back without one and the driver's recorder embeds it."""
    spec = job.summary
    if spec is None or spec.model != embedder.model_name or (job.kind == "gate" and result.ok):
        return result
    summary = spec.text(result.status.value, result.speedup if result.ok else None)
    text = summary.strip()
    if not text:
        return result
    try:
        vector = np.asarray(embedder.embed([text])[0], dtype=np.float32)
    except Exception as e:  # the evaluation stands; the driver embeds the summary instead
        log.warning("embedding the summary of %s on this worker failed: %s", result.code_hash or job.kind, e)
        return result
    return result.model_copy(
        update={"summary": summary, "summary_vector": vector.tolist(), "summary_model": embedder.model_name}
    )


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

    def __init__(
        self, settings: Settings | None = None, evaluator: Evaluator | None = None, embedder: Embedder | None = None
    ) -> None:
        self.settings = settings or get_settings()
        self.evaluator = evaluator or Evaluator(self.settings)
        # None (the default): the recorder embeds the summaries, 16 to a model call. On the driver's own cores
        # an embedding in the evaluation thread is one text per call, which costs more CPU per record for the
        # same cores (docs/SCALE.md); an embedder here moves the work into the evaluation threads anyway.
        self.embedder = embedder
        self.parallelism = max(1, self.settings.eval_parallelism)
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def submit(self, job: EvalJob) -> Future[EvalResult]:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=self.parallelism, thread_name_prefix="eok-eval")
            return self._pool.submit(run_job, self.evaluator, job, self.embedder)

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


__all__ = ["EvalExecutor", "EvalJob", "InProcessExecutor", "SummarySpec", "build_executor", "run_job", "with_summary"]
