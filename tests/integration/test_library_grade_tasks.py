"""Library-grade contracts (issue 21, item 3): a kernel written to the narrow task's contract fails the
library's (real clang and qemu; correctness only, no timing). That each variant's reference and competent
build pass their own check is tests/integration/test_evaluator_suite.py's, like every suite task's."""

from __future__ import annotations

import pytest

from core.settings import Settings
from evaluator.evaluate import Candidate, EvalResult, EvalStatus, Evaluator
from evaluator.targets import load_target
from evaluator.tasks import load_task


@pytest.fixture(scope="module")
def evaluator(tmp_path_factory: pytest.TempPathFactory) -> Evaluator:
    return Evaluator(Settings(home=tmp_path_factory.mktemp("home"), eval_timeout_s=60, eval_memory_mb=512))


def _check(evaluator: Evaluator, task: str, code: str | None = None) -> EvalResult:
    spec = load_task(task)
    cand = Candidate(code=code or spec.reference_code)
    return evaluator.evaluate(spec, load_target("k1-x60"), cand, "qemu", timing=False)


def test_a_dot_product_that_ignores_increments_fails_sdot_blas(evaluator: Evaluator) -> None:
    narrow = """
float sdot_blas(int n, const float *x, int incx, const float *y, int incy) {
    float s = 0.0f;
    for (int i = 0; i < n; i++) s += x[i] * y[i];
    return s;
}
"""
    r = _check(evaluator, "sdot_blas", narrow)
    assert r.status == EvalStatus.WRONG, r.feedback
    assert "incx=-1" in r.feedback or "incx=2" in r.feedback or "incx=3" in r.feedback, r.feedback


def test_an_axpy_without_the_quick_return_fails_saxpy_blas(evaluator: Evaluator) -> None:
    # alpha == 0 must leave y alone; 0 * NaN from x makes NaN where y was a number
    no_quick_return = """
#include <stddef.h>
void saxpy_blas(int n, float alpha, const float *x, int incx, float *y, int incy) {
    if (n <= 0) return;
    ptrdiff_t ix = incx < 0 ? (ptrdiff_t)(1 - n) * incx : 0, iy = incy < 0 ? (ptrdiff_t)(1 - n) * incy : 0;
    for (int i = 0; i < n; i++, ix += incx, iy += incy) y[iy] += alpha * x[ix];
}
"""
    r = _check(evaluator, "saxpy_blas", no_quick_return)
    assert r.status == EvalStatus.WRONG, r.feedback
    assert "= nan, expected" in r.feedback, r.feedback
