"""The trusted side's comparison, frame parsing and held-out sizes, on synthetic results (no compiler)."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from evaluator import verdict
from evaluator.evaluate import EvalStatus
from evaluator.tasks import load_task
from knowledge.models import ExperienceStatus


def _frame(call: verdict.Call, y: np.ndarray, before: bytes = b"\xe7" * 64, after: bytes = b"\xe7" * 8) -> bytes:
    payload = struct.pack("<QQ", len(before), len(after)) + before + y.tobytes() + after + b"\0" * 8
    return verdict.FRAME_HEAD.pack(b"EOKO", call.id, 123, len(payload)) + payload


def _saxpy_call(n: int = 5) -> tuple[verdict.Call, verdict.Expected]:
    task = load_task("saxpy")
    call = verdict.fresh_calls(task, {"n": n}, seed=7, n=1, first_id=3)[0]
    want = np.arange(n, dtype=np.float32)
    return call, verdict.Expected(image=b"", outputs={"y": want.tobytes()}, ret=b"\0" * 8)


def test_every_status_the_evaluator_gives_can_be_stored() -> None:
    assert {s.value for s in EvalStatus} <= {s.value for s in ExperienceStatus}


def test_right_outputs_pass_and_a_wrong_element_is_located() -> None:
    task = load_task("saxpy")
    call, want = _saxpy_call()
    ok = verdict.results_from(task, [call], _frame(call, np.arange(5, dtype=np.float32)))
    assert verdict.compare(task, call, ok[call.id], want, verdict.Stats()) is None
    bad = np.arange(5, dtype=np.float32)
    bad[3] = 9.0
    got = verdict.results_from(task, [call], _frame(call, bad))
    f = verdict.compare(task, call, got[call.id], want, verdict.Stats())
    assert f is not None and (f.what, f.arg, f.index, f.got, f.want) == ("mismatch", "y", 3, 9.0, 3.0)


def test_the_poison_left_in_place_counts_as_unwritten() -> None:
    task = load_task("saxpy")
    call, want = _saxpy_call()
    y = np.arange(5, dtype=np.float32)
    y[2:3].view(np.uint32)[0] = 0x7FC0A5A5  # pattern 0
    f = verdict.compare(task, call, verdict.results_from(task, [call], _frame(call, y))[call.id], want, verdict.Stats())
    assert f is not None and f.unwritten and f.index == 2


@pytest.mark.parametrize(
    ("before", "after", "what"),
    [
        (b"\xe7" * 63 + b"\0", b"\xe7" * 8, "wrote_before_start"),
        (b"\xe7" * 64, b"\xe7\0" + b"\xe7" * 6, "wrote_past_end"),
    ],
)
def test_touched_canary_bytes_are_writes_outside_the_buffer(before: bytes, after: bytes, what: str) -> None:
    task = load_task("saxpy")
    call, want = _saxpy_call()
    got = verdict.results_from(task, [call], _frame(call, np.arange(5, dtype=np.float32), before, after))
    f = verdict.compare(task, call, got[call.id], want, verdict.Stats())
    assert f is not None and f.what == what


def test_anything_but_frames_in_the_stream_is_malformed() -> None:
    task = load_task("saxpy")
    call, _ = _saxpy_call()
    frame = _frame(call, np.arange(5, dtype=np.float32))
    for stream in (b'{"mode": "check", "ok": true}\n' + frame, frame + b"x", frame[:-1]):
        with pytest.raises(verdict.Malformed):
            verdict.results_from(task, [call], stream)
    got, problem = verdict.scan_results(task, [call], frame + b"junk")
    assert call.id in got and problem  # the finished call is still compared
    assert verdict.looks_forged('noise\n{"mode": "check", "ok": true}')


def test_held_out_sizes_are_new_odd_around_vlmax_twice_the_bench_and_every_residue_mod_8() -> None:
    task = load_task("saxpy")
    held = verdict.heldout_sizes(task, vlen=256, max_bytes=1 << 30, seed=1)
    bench = task.sizes[task.bench_index]["n"]
    values = [h["n"] for h in held]
    assert all(h not in task.sizes for h in held) and 2 * bench in values
    assert any(v % 2 for v in values) and any(0 < v % 64 < 4 or v % 64 > 60 for v in values)
    assert {v % 8 for v in values} == set(range(8))  # a kernel wrong when n % 4 == 2 meets one of them
    assert verdict.heldout_sizes(task, vlen=256, max_bytes=1, seed=1) == []  # nothing fits: no gate sizes


def test_held_out_sizes_cannot_be_predicted() -> None:
    task = load_task("saxpy")
    draws = {tuple(h["n"] for h in verdict.heldout_sizes(task, 256, 1 << 30, verdict.secret_seed())) for _ in range(8)}
    assert len(draws) > 1  # drawn per evaluation from a secret seed, not a function of the task


def test_every_check_holds_one_secret_unlisted_size() -> None:
    task = load_task("saxpy")
    sizes = [{c.size["n"] for c in verdict.check_calls(task, verdict.secret_seed())} for _ in range(6)]
    listed = {s["n"] for s in task.sizes}
    extra = [s - listed for s in sizes]
    assert all(len(e) == 1 for e in extra) and len({min(e) for e in extra}) > 1


def test_held_out_sizes_keep_the_granularity_the_task_lists() -> None:
    task = load_task("rope")
    for seed in range(5):
        for size in verdict.heldout_sizes(task, vlen=256, max_bytes=1 << 30, seed=seed):
            assert size["head_dim"] % 2 == 0  # every listed head_dim is even


def test_seeds_are_per_evaluation_and_calls_differ() -> None:
    task = load_task("saxpy")
    a, b = verdict.secret_seed(), verdict.secret_seed()
    assert a != b
    calls = verdict.fresh_calls(task, {"n": 8}, a, 2, first_id=0)
    assert calls[0].seed != calls[1].seed and calls[0].line(task, with_seed=False) == "0 0 0 0 1 -1 8 8 8"


def test_a_time_faster_than_the_core_can_work_is_not_a_timing() -> None:
    from evaluator.evaluate import _beyond_ceiling
    from evaluator.targets import load_target

    task = load_task("saxpy")  # 2n FLOP and 12n bytes per call at n=16384
    k1, host = load_target("k1-x60"), load_target("host")
    honest = 16384 * 0.9 / 1.6e9  # ~0.9 modeled cycles per element at 1.6 GHz
    assert _beyond_ceiling(task, k1, honest) is None
    assert _beyond_ceiling(task, host, 30e-6) is None  # a plausible host time
    forged = _beyond_ceiling(task, host, 30e-9)  # the red team's 30 ns: 6.5 TB/s
    assert forged and "more than one host core can" in forged
    assert _beyond_ceiling(task, k1, 1e-6) and "k1-x60" in (_beyond_ceiling(task, k1, 1e-6) or "")


def _exp_case(task_name: str, want: list[float], got: list[float]) -> verdict.Failure | None:
    task = load_task(task_name)
    call = verdict.fresh_calls(task, {"n": len(want)}, seed=7, n=1, first_id=0)[0]
    expected = verdict.Expected(image=b"", outputs={"y": np.array(want, dtype=np.float32).tobytes()}, ret=b"\0" * 8)
    frame = _frame(call, np.array(got, dtype=np.float32))
    return verdict.compare(task, call, verdict.results_from(task, [call], frame)[call.id], expected, verdict.Stats())


FLT_MAX = float(np.finfo(np.float32).max)
DENORMAL_STEP = 2.0**-149


@pytest.mark.parametrize(
    ("want", "got", "passes"),
    [
        (0.0, 1.97e-39, False),  # a clamped exp's masked softmax position: atol must not hide it
        (0.0, 1.2e-38, False),  # exp(-inf) clamped to FLT_MIN
        (0.0, -0.0, True),  # either zero
        (0.0, DENORMAL_STEP, True),  # one rounding step at the underflow edge
        (0.0, 2 * DENORMAL_STEP, False),
        (float("inf"), FLT_MAX, False),  # exp(100) clamped to FLT_MAX
        (float("inf"), float("inf"), True),
        (float("nan"), 0.0, False),
        (float("nan"), float("nan"), True),
        (5.5e-42, 0.0, False),  # a denormal result flushed to zero
        (5.5e-42, 5.5e-42 + DENORMAL_STEP, True),  # one step off on the denormal grid (atol 3e-45)
        (1.0, 1.00005, True),  # rtol 1e-4
    ],
)
def test_exp_f32s_special_values_are_exact(want: float, got: float, passes: bool) -> None:
    failure = _exp_case("exp_f32", [1.0, want, 2.0], [1.0, got, 2.0])
    assert (failure is None) == passes, failure
    if failure is not None:
        assert (failure.what, failure.index) == ("mismatch", 1)


def test_without_exact_special_atol_still_covers_tiny_results() -> None:
    # sigmoid(-100): 0 in the reference, ~1e-8 in MLAS's clamped logistic; both within atol 1e-5
    assert load_task("sigmoid").tolerance.exact_special is False
    assert _exp_case("sigmoid", [0.5, 0.0, 0.7], [0.5, 1e-8, 0.7]) is None
    # but an infinite or NaN expected value is exact in every task
    assert _exp_case("sigmoid", [0.5, float("nan"), 0.7], [0.5, 1.0, 0.7]) is not None


def test_element_bound_is_zero_for_infinities_and_one_step_for_exact_zeros() -> None:
    tol = load_task("exp_f32").tolerance
    want = np.array([float("inf"), float("-inf"), 0.0, 1.0])
    bound = verdict.element_bound(tol, want, DENORMAL_STEP)
    assert bound.tolist() == [0.0, 0.0, DENORMAL_STEP, tol.atol + tol.rtol]


def test_an_all_zero_expected_output_is_judged_by_the_elements_alone() -> None:
    # sigmoid(-100) alone at n = 1: 0 in the reference, 3e-39 from an exp clamped at FLT_MAX; the
    # normalized error has no scale there (it was inf), atol 1e-5 decides
    assert _exp_case("sigmoid", [0.0], [3e-39]) is None
    assert _exp_case("sigmoid", [0.0], [1e-3]) is not None
    # under exact_special the same tiny value is wrong
    assert _exp_case("exp_f32", [0.0], [3e-39]) is not None


def test_the_normalized_error_needs_a_whole_output() -> None:
    # one value that cancels to near 0, off by 2% yet within atol 1e-5: an honest approximation, not a
    # wrong scale; the element check decides alone below NORM_MIN_ELEMENTS
    assert load_task("sigmoid").tolerance.norm_bound < 0.02
    assert _exp_case("sigmoid", [2e-4], [2.04e-4]) is None
    assert _exp_case("sigmoid", [2e-4, -3e-4], [2.04e-4, -3.06e-4]) is None
    # a whole output within atol only because every expected value is tiny still fails as a whole
    n = verdict.NORM_MIN_ELEMENTS
    failure = _exp_case("sigmoid", [2e-6] * n, [0.0] * n)
    assert failure is not None and failure.what == "norm"
