"""Decisions re-rendered for another target or task (agent/transfer.py), on the real offline families."""

from __future__ import annotations

from agent.offline import OfflineGenerator
from agent.transfer import adapt, learned_shifts, target_weight, task_weight
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


def _best(task: str, target: str, family: str, **knobs: int) -> tuple[str, str, dict]:
    return (task, target, {"family": family, "knobs": knobs})


def test_a_knob_moves_as_other_tasks_best_moved_between_the_two_targets() -> None:
    decisions = [
        _best("sasum", "k1-x60", "rvv_reduction", lmul=1, accumulators=2),
        _best("sasum", "k3-x100", "rvv_reduction", lmul=8, accumulators=2),
        _best("reduce_sum", "k1-x60", "rvv_reduction", lmul=2, accumulators=4),
        _best("reduce_sum", "k3-x100", "rvv_reduction", lmul=8, accumulators=2),
        _best("rmsnorm", "k1-x60", "norm", lmul=4),  # another family: says nothing about reductions
        _best("rmsnorm", "k3-x100", "norm", lmul=1),
        _best("reduce_max", "k3-x100", "rvv_reduction", lmul=1),  # the run's own task is left out
    ]
    shifts = learned_shifts(decisions, "rvv_reduction", "k1-x60", "k3-x100", "reduce_max")
    assert set(shifts) == {"lmul"}  # accumulators kept by one task and halved by the other: no move
    assert shifts["lmul"].factor == 2**2.5 and shifts["lmul"].tasks == ("reduce_sum", "sasum")
    gen = OfflineGenerator(load_task("reduce_max"), load_target("k3-x100"))
    made = adapt({"family": "rvv_reduction", "knobs": {"lmul": 1, "accumulators": 2}}, [], 256, gen, shifts)
    assert made is not None
    variant, note = made
    assert variant.knobs["lmul"] == 4  # 1 x 5.66 snapped to the largest grid value below
    assert note == "lmul 1 -> 4 as other tasks' best moved (x5.66: reduce_sum, sasum)"


def test_disagreeing_or_missing_moves_change_nothing() -> None:
    decisions = [
        _best("sasum", "k1-x60", "rvv_reduction", lmul=1),
        _best("sasum", "k3-x100", "rvv_reduction", lmul=8),
        _best("reduce_sum", "k1-x60", "rvv_reduction", lmul=4),
        _best("reduce_sum", "k3-x100", "rvv_reduction", lmul=2),
        _best("snrm2", "k1-x60", "rvv_reduction", lmul=2),  # measured on one target only
    ]
    assert learned_shifts(decisions, "rvv_reduction", "k1-x60", "k3-x100", "reduce_max") == {}
    # with no measured move of LMUL, the VLEN rule of thumb still applies
    gen = OfflineGenerator(load_task("sgemm_tall_n16"), load_target("k3-a100"))
    decision = {"family": "rvv_gemm", "knobs": {"lmul": 4, "mr": 4, "nv": 1, "unroll": 2}}
    assert adapt(decision, [], 256, gen, {})[1] == "lmul 4 -> 1 for VLEN 256 -> 1024"  # type: ignore[index]
