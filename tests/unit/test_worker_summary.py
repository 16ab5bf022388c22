"""An experience's summary and its embedding, computed where the evaluation ran (docs/SCALE.md "The graph
writer"): the vector a worker sends is the one the driver's recorder would have computed for the same text."""

from __future__ import annotations

import uuid

import numpy as np

from agent.context import ThoughtCard
from agent.generation import Generated
from agent.optimizer import _summary_spec, _worker_vector
from agent.recorder import Record, _embedded
from evaluator.evaluate import EvalResult, EvalStatus
from evaluator.executor import EvalJob, run_job
from evaluator.targets import load_target
from evaluator.tasks import load_task
from knowledge.models import Experience
from knowledge.store import as_vector
from knowledge.taxonomy import Technique


class StubEvaluator:
    """Answers every job with a fixed verdict: what a worker computes around it is under test, not it."""

    def __init__(self, verdict: EvalResult) -> None:
        self.verdict = verdict

    def evaluate(self, task, target, candidate, runner) -> EvalResult:
        return self.verdict

    verify_generalization = evaluate


def _job(kind: str, description: str, model: str) -> tuple[EvalJob, object]:
    card = ThoughtCard(
        id="t1", idea_id="i1", title="Unroll the k loop", description="",
        technique=Technique.UNROLL, operator="gemm", isa="rvv",
    )  # fmt: skip
    spec = _summary_spec(card, Generated(code="x", description=description), "sgemm_64", model)
    return EvalJob(load_task("relu"), load_target("k1-x60"), "qemu", None, kind=kind, summary=spec), spec


def _experience(i: int, summary: str) -> Experience:
    return Experience(id=f"ws-{i}", task_id="sgemm_64", target_key="k1-x60", status="ok", summary=summary)


def test_the_workers_vector_is_the_one_the_recorder_would_compute(embedder, worker_embedder) -> None:
    nonce = uuid.uuid4().hex[:8]  # text neither embedder has cached
    job, spec = _job("candidate", f"unroll: k_unroll 2 -> 4 ({nonce}) with lmul=4, m_tile=8  ", embedder.model_name)
    job = EvalJob(job.task, job.target, job.runner, object(), summary=spec)  # type: ignore[arg-type]
    verdict = EvalResult(status=EvalStatus.OK, speedup=1.2345, code_hash="c1")
    result = run_job(StubEvaluator(verdict), job, worker_embedder)

    # The text the driver gives the experience for this verdict; the worker embedded it, stripped.
    summary = spec.text("ok", 1.2345)
    assert result.summary == summary and summary.startswith("sgemm_64: unroll (Unroll the k loop) -> 1.23x. unroll")
    assert result.summary_model == embedder.model_name == worker_embedder.model_name
    exp = _experience(0, summary)
    sent = _worker_vector(result, exp, embedder.model_name)
    assert sent is not None and sent.shape == (embedder.dim,)

    # What the driver's recorder computes without it: one model call with other summaries of other lengths.
    others = [_experience(i, f"softmax {nonce}: {'fast exp, ' * i}-> {i}.00x") for i in range(1, 6)]
    rows = _embedded(embedder, [Record(x, True, None, False) for x in [others[0], exp, *others[1:]]])
    head = as_vector(rows[1][1]["embedding"])
    assert np.abs(sent - head).max() < 1e-5
    # ... and the recorder stores the sent vector as it is, under the same text hash and model.
    (sent_row,) = _embedded(embedder, [Record(exp, True, None, False, vector=sent)])
    assert np.array_equal(as_vector(sent_row[1]["embedding"]), sent)
    assert {k: sent_row[1][k] for k in ("embedding_hash", "embedding_model", "summary")} == {
        k: rows[1][1][k] for k in ("embedding_hash", "embedding_model", "summary")
    }


def test_a_gate_sends_a_summary_only_when_it_fails_and_mismatches_are_refused(embedder, worker_embedder) -> None:
    job, spec = _job("gate", "unroll: k_unroll 4 -> 8", embedder.model_name)
    job = EvalJob(job.task, job.target, job.runner, object(), kind="gate", summary=spec)  # type: ignore[arg-type]
    passed = run_job(StubEvaluator(EvalResult(status=EvalStatus.OK)), job, worker_embedder)
    assert passed.summary is None and passed.summary_vector is None  # the candidate's own summary stands

    failed = run_job(StubEvaluator(EvalResult(status=EvalStatus.GENERALIZATION_FAILED)), job, worker_embedder)
    assert failed.summary == spec.text("generalization_failed", None)
    assert failed.summary.endswith("-> generalization_failed. unroll: k_unroll 4 -> 8")
    exp = _experience(1, failed.summary)
    assert _worker_vector(failed, exp, embedder.model_name) is not None

    # Another summary, another model, or a vector that is no embedding: the recorder embeds instead.
    assert _worker_vector(failed, _experience(2, failed.summary + " (edited)"), embedder.model_name) is None
    assert _worker_vector(failed, exp, "another-model") is None
    bad = failed.model_copy(update={"summary_vector": [2.0] * embedder.dim})
    assert _worker_vector(bad, exp, embedder.model_name) is None
    # A worker asked for another model than its own embeds nothing; the vector never reaches a JSON dump.
    other, _ = _job("candidate", "x", "another-model")
    other = EvalJob(other.task, other.target, other.runner, object(), summary=other.summary)  # type: ignore[arg-type]
    assert run_job(StubEvaluator(EvalResult(status=EvalStatus.OK)), other, worker_embedder).summary is None
    assert "summary_vector" not in failed.model_dump(mode="json")
