"""The competent baseline's flags follow from each task's tolerance (evaluator.toolchain.competent_cflags)."""

from __future__ import annotations

from pathlib import Path

from evaluator.tasks import load_task
from evaluator.toolchain import baseline_note, check_cflags, competent_cflags
from tests.unit.test_evaluator_tasks import GOOD, REFERENCE, make_task


def test_a_reduction_with_a_loose_tolerance_may_be_reassociated() -> None:
    flags = competent_cflags(load_task("sdot"))  # rtol 1e-4
    assert {"-fassociative-math", "-fno-signed-zeros", "-fno-trapping-math", "-ffp-contract=fast"} <= set(flags)


def test_an_exact_task_gets_no_value_changing_flag() -> None:
    assert competent_cflags(load_task("sscal")) == ["-fno-math-errno"]  # rtol = atol = 0


def test_a_tight_float_tolerance_allows_contraction_but_not_reassociation() -> None:
    flags = competent_cflags(load_task("saxpy"))  # rtol 1e-5
    assert "-ffp-contract=fast" in flags and "-fassociative-math" not in flags


def test_no_task_gets_finite_math_only_and_every_flag_is_one_a_candidate_may_use() -> None:
    for name in ("sdot", "softmax", "snrm2", "exp_f32"):
        flags = competent_cflags(load_task(name))
        assert "-ffast-math" not in flags and "-ffinite-math-only" not in flags
        assert check_cflags(flags) == (flags, None)


def test_a_baseline_that_calls_scalar_libm_says_so() -> None:
    note = baseline_note(load_task("softmax"))
    assert note is not None and "scalar libm expf" in note and note.startswith("weak baseline")
    assert "erff" in (baseline_note(load_task("gelu_erf")) or "")
    # sqrtf is an instruction (fsqrt.s), not a libm call: snrm2's baseline is not weak; nor is sdot's.
    assert baseline_note(load_task("snrm2")) is None and baseline_note(load_task("sdot")) is None


def test_a_task_declares_its_baselines_weakness_in_task_toml(tmp_path: Path) -> None:
    d = make_task(tmp_path, GOOD)
    spec = d / "task.toml"
    text = spec.read_text()
    spec.write_text(text.replace('flops = "2*n"', 'flops = "2*n"\nbaseline_note = "the reference re-reads x"'))
    assert baseline_note(load_task(d)) == "the reference re-reads x"
    # A comment that mentions expf is not a call.
    (d / "reference.c").write_text("/* no expf( here */\n" + REFERENCE)
    spec.write_text(text)
    assert baseline_note(load_task(d)) is None
