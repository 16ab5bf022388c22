"""Decisions re-rendered for another target or task (agent/transfer.py), on the real offline families."""

from __future__ import annotations

from agent.offline import OfflineGenerator
from agent.transfer import adapt, target_weight, task_weight
from evaluator.targets import load_target
from evaluator.tasks import load_task


def test_a_gemm_tile_keeps_its_columns_across_vector_lengths() -> None:
    """K1's m4 register group holds 32 floats; on the A100 (VLEN 1024) m1 does: the rows stay as they were."""
    task = load_task("sgemm_tall_n16")
    decision = {"family": "rvv_gemm", "knobs": {"lmul": 4, "mr": 4, "nv": 1, "unroll": 2}}
    made = adapt(decision, [], 256, OfflineGenerator(task, load_target("k3-a100")))
    assert made is not None
    variant, rescaled = made
    assert (variant.knobs["lmul"], variant.knobs["mr"], variant.knobs["unroll"]) == (1, 4, 2)
    assert rescaled == "lmul 4 -> 1 for VLEN 256 -> 1024"
    same_vlen, note = adapt(decision, [], 256, OfflineGenerator(task, load_target("k3-x100")))  # type: ignore[misc]
    assert same_vlen.knobs["lmul"] == 4 and note == ""


def test_a_generic_decision_does_not_transfer() -> None:
    gen = OfflineGenerator(load_task("sdot"), load_target("k1-x60"))
    assert adapt({"family": "generic", "knobs": {"lmul": 4}}, [], 256, gen) is None


def test_similarity_weights() -> None:
    assert target_weight(256, 256) == 1.0 and target_weight(256, 1024) == 0.333 and target_weight(None, 256) == 0
    assert task_weight("gemv", "gemv") == 1.0 and task_weight("gemv", "quant_dot") == 0.5
    assert task_weight("gemv", "sort") == 0.0
