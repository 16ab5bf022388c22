"""Full-range contracts (docs/TASKS.md, "Full-range contracts") with real clang-22 and qemu-riscv64.

exp_f32's inputs reach past overflow and underflow at positions drawn from the secret seed, and its
exact results (inf, 0, NaN) are compared exactly: a kernel that clamps its argument (FLT_MAX for
exp(100), FLT_MIN where a denormal or 0 is due), flushes denormals or is right only at some fixed
positions is `wrong`; one that handles the range as C's expf does (overflow to inf, underflow through
the denormals to 0) passes without calling libm. softmax's masked positions must come out exactly 0.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from core.settings import Settings
from evaluator import verdict
from evaluator.evaluate import Candidate, EvalResult, EvalStatus, Evaluator
from evaluator.targets import load_target
from evaluator.tasks import load_task
from evaluator.toolchain import Toolchain

pytestmark = pytest.mark.qemu

# exp from the math, no libm: n = round(x log2 e), r = x - n ln2 (two-part ln2), e^r by its Taylor
# polynomial of degree 7 (|r| <= ln2/2: error < 1e-8), and 2^n applied as two normal factors 2^a * 2^b
# so that the last multiplication rounds once, to inf above the range and through the denormals to 0
# below it. NaN is passed through; the clamp to [-104, 89] changes no result (e^x is 0 or inf beyond).
FULL_RANGE_EXP = """
#include <stdint.h>
#include <string.h>

static float pow2(int e) {  /* 2^e for a normal exponent e in [-126, 127] */
    uint32_t bits = (uint32_t)(e + 127) << 23;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

void exp_f32(int n, const float *x, float *y) {
    for (int i = 0; i < n; i++) {
        float v = x[i];
        if (v != v) { y[i] = v; continue; }
        v = v < -104.0f ? -104.0f : (v > 89.0f ? 89.0f : v);
        float t = v * 1.44269504f;
        int k = (int)(t < 0 ? t - 0.5f : t + 0.5f);
        float r = (v - (float)k * 0.693145751953125f) - (float)k * 1.42860682e-6f;
        float p = 1.0f + r * (1.0f + r * (0.5f + r * (1.6666667e-1f + r * (4.1666668e-2f
                  + r * (8.3333338e-3f + r * (1.3888889e-3f + r * 1.9841270e-4f))))));
        int a = k / 2, b = k - a;
        y[i] = (p * pow2(a)) * pow2(b);
    }
}
"""

# The clamp of the finding: x limited to [-87.33, 88.72], so exp(100) is 3.4e38 and exp(-100) 1.2e-38.
CLAMPED_EXP = """
#include <math.h>
void exp_f32(int n, const float *x, float *y) {
    for (int i = 0; i < n; i++) y[i] = expf(fminf(fmaxf(x[i], -87.33f), 88.72f));
}
"""

# Right through the normal range, but denormal results flushed to 0.
FLUSHING_EXP = """
#include <float.h>
#include <math.h>
void exp_f32(int n, const float *x, float *y) {
    for (int i = 0; i < n; i++) { float e = expf(x[i]); y[i] = e < FLT_MIN ? 0.0f : e; }
}
"""

# Right only where specials used to sit at fixed positions (every 16th element), clamped elsewhere.
FIXED_POSITIONS_EXP = """
#include <math.h>
void exp_f32(int n, const float *x, float *y) {
    for (int i = 0; i < n; i++) y[i] = i % 16 == 15 ? expf(x[i]) : expf(fminf(fmaxf(x[i], -87.33f), 88.72f));
}
"""


@pytest.fixture(scope="module")
def evaluator(tmp_path_factory: pytest.TempPathFactory) -> Evaluator:
    return Evaluator(Settings(home=tmp_path_factory.getbasetemp() / "eok-contracts-home", eval_timeout_s=120))


def check(evaluator: Evaluator, task: str, code: str) -> EvalResult:
    return evaluator.evaluate(load_task(task), load_target("k1-x60"), Candidate(code=code), "qemu", timing=False)


@pytest.mark.parametrize(
    "code", [CLAMPED_EXP, FLUSHING_EXP, FIXED_POSITIONS_EXP], ids=["clamped", "flushing", "fixed_positions"]
)
def test_an_exp_short_of_the_full_range_is_wrong(evaluator: Evaluator, code: str) -> None:
    r = check(evaluator, "exp_f32", code)
    assert r.status == EvalStatus.WRONG, r.feedback
    assert "expected" in r.feedback


def test_an_exp_that_overflows_to_inf_and_underflows_through_the_denormals_passes(evaluator: Evaluator) -> None:
    r = check(evaluator, "exp_f32", FULL_RANGE_EXP)
    assert r.status == EvalStatus.OK, r.feedback
    assert r.sizes_checked == len(load_task("exp_f32").sizes)


def test_softmax_must_give_exactly_zero_at_masked_positions(evaluator: Evaluator) -> None:
    reference = load_task("softmax").reference_code
    clamped = reference.replace("expf(in[i] - mx)", "expf(fmaxf(in[i] - mx, -87.33f))")
    assert clamped != reference
    r = check(evaluator, "softmax", clamped)
    # e^-87.33 / sum is ~1e-39: within atol 1e-7, but not the exact 0 of a masked position
    assert r.status == EvalStatus.WRONG and "expected exactly 0" in r.feedback, r.feedback


def test_specials_land_at_positions_drawn_from_the_seed(tmp_path: Path) -> None:
    """The trusted harness (built natively) mixes exp_f32's specials in at about the stated fraction, at
    positions that change with the seed; the reference's outputs hold inf, exact zeros, denormals, NaN."""
    task = load_task("exp_f32")
    binary = tmp_path / "trusted"  # the cached link, made runnable as the evaluator's builds do
    shutil.copyfile(Toolchain(tmp_path / "objects")._trusted_binary(task, load_target("host"), "host"), binary)
    binary.chmod(0o755)
    n = 4096
    calls = [verdict.fresh_calls(task, {"n": n}, seed=s, n=1, first_id=i)[0] for i, s in enumerate((11, 12))]
    verdict.write_plan(tmp_path / "plan", task, calls, with_seed=True)
    out = subprocess.run([binary, "gen", "plan"], cwd=tmp_path, capture_output=True, check=True, timeout=60)
    expected = verdict.expected_from(task, calls, out.stdout)
    specials = np.array([s for s in task.args["x"].specials or [] if s == s], dtype=np.float32)
    masks = []
    for c in calls:
        x = np.frombuffer(expected[c.id].image[: 4 * n], dtype=np.float32)
        masks.append(np.isnan(x) | np.isin(x, specials))
        y = np.frombuffer(expected[c.id].outputs["y"], dtype=np.float32)
        assert np.isposinf(y).any() and np.isnan(y).any() and (y == 0).any()
        assert ((y > 0) & (y < np.finfo(np.float32).tiny)).any()  # denormal results
    for m in masks:
        assert 0.045 < m.mean() < 0.08, m.mean()  # special_fraction = 1/16
    assert (masks[0] != masks[1]).any()
    assert not all(m[15::16].all() for m in masks)  # not a fixed every-16th pattern
