"""The competent baseline's flags follow from each task's tolerance (evaluator.toolchain.competent_cflags)."""

from __future__ import annotations

from evaluator.tasks import load_task
from evaluator.toolchain import check_cflags, competent_cflags


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
