"""The generated harness on a task that uses every parameter kind, generator and comparison mode."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from core.settings import Settings
from evaluator.evaluate import Candidate, EvalStatus, Evaluator
from evaluator.harness import generate
from evaluator.targets import load_target
from evaluator.tasks import load_task

pytestmark = pytest.mark.qemu

SPEC = textwrap.dedent(
    """\
    name = "kitchen"
    category = "general"
    operator = "other"
    dtype = "mixed"
    description = "every kind of argument at once"
    signature = '''double kitchen(size_t n, double alpha, int shift, const double *xd, const int8_t *xi,
        const uint16_t *xh, const float *srt, const uint8_t *q, float *acc, uint16_t *hout, int32_t *iout)'''
    tolerance = { rtol = 1e-12, atol = 1e-12 }
    sizes = [ { n = 0 }, { n = 1 }, { n = 37 }, { n = 320, bench = true } ]

    [args.alpha]
    kind = "scalar"
    value = 0.5

    [args.shift]
    kind = "scalar"
    gen = "int"
    range = [1, 3]

    [args.xd]
    kind = "in"
    count = "n"
    gen = "normal"
    scale = 2.0

    [args.xi]
    kind = "in"
    count = "n"
    gen = "int"
    range = [-100, 100]

    [args.xh]
    kind = "in"
    count = "n"
    gen = "fp16"
    range = [-4.0, 4.0]

    [args.srt]
    kind = "in"
    count = "n"
    gen = "sorted"
    range = [0.0, 10.0]

    [args.q]
    kind = "in"
    count = "34*((n+31)/32)"
    gen = "q8_0"

    [args.acc]
    kind = "inout"
    count = "n"
    gen = "zeros"

    [args.hout]
    kind = "out"
    count = "n"
    compare = "fp16"

    [args.iout]
    kind = "out"
    count = "max(n, 1)"
    """
)

REFERENCE = textwrap.dedent(
    """\
    #include <stddef.h>
    #include <stdint.h>

    double kitchen(size_t n, double alpha, int shift, const double *xd, const int8_t *xi, const uint16_t *xh,
                   const float *srt, const uint8_t *q, float *acc, uint16_t *hout, int32_t *iout) {
        double sum = 0.0;
        for (size_t i = 0; i < n; i++) {
            sum += xd[i] * alpha;
            acc[i] += srt[i] + (float)(int8_t)q[2 + (i / 32) * 34 + i % 32];
            hout[i] = xh[i];
            iout[i] = (int32_t)xi[i] << shift;
        }
        if (n == 0) iout[0] = 7;
        return sum;
    }
    """
)


@pytest.fixture(scope="module")
def kitchen(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("tasks") / "kitchen"
    d.mkdir()
    (d / "task.toml").write_text(SPEC)
    (d / "reference.c").write_text(REFERENCE)
    return d


@pytest.fixture(scope="module")
def evaluator(tmp_path_factory: pytest.TempPathFactory) -> Evaluator:
    return Evaluator(Settings(home=tmp_path_factory.getbasetemp() / "eok-evaluator-home"))


@pytest.mark.parametrize(("runner", "target"), [("qemu", "k1-x60"), ("native", "host")])
def test_every_argument_kind_round_trips(kitchen: Path, evaluator: Evaluator, runner: str, target: str) -> None:
    task = load_task(kitchen)
    r = evaluator.evaluate(task, load_target(target), Candidate(code=REFERENCE), runner, timing=False)
    assert r.status == EvalStatus.OK, r.feedback
    assert r.sizes_checked == 4
    assert r.reference_nonzero["return"] == 1 and 300 < r.reference_nonzero["iout"] <= 320
    assert 0 < r.reference_nonzero["hout"] <= 320 and r.reference_nonzero["acc"] == 320


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("hout[i] = xh[i];", "hout[i] = (uint16_t)(xh[i] ^ 1);", "hout["),  # one fp16 ulp off
        ("iout[i] = (int32_t)xi[i] << shift;", "iout[i] = (int32_t)xi[i] << 1;", "iout["),  # ignores a scalar
        ("if (n == 0) iout[0] = 7;", "", "never written"),  # an int32 output left unwritten at n = 0
        ("acc[i] += srt[i]", "acc[i] = srt[i]", "acc["),  # overwrites instead of accumulating... into zeros
        ("sum += xd[i] * alpha;", "sum += xd[i] * 0.5f + 1e-9;", "returned"),
    ],
)  # fmt: skip
def test_each_comparison_catches_its_error(
    kitchen: Path, evaluator: Evaluator, old: str, new: str, expected: str
) -> None:
    assert old in REFERENCE
    r = evaluator.evaluate(
        load_task(kitchen), load_target("k1-x60"), Candidate(code=REFERENCE.replace(old, new)), "qemu", timing=False
    )
    if old.startswith("acc"):
        # acc starts as zeros, so "=" and "+=" agree: this one must pass (the check is not over-strict)
        assert r.status == EvalStatus.OK, r.feedback
        return
    assert r.status == EvalStatus.WRONG, r.feedback
    assert expected in r.feedback


def test_generated_harness_declares_the_four_kernels(kitchen: Path) -> None:
    text = generate(load_task(kitchen))
    for name in ("kitchen", "eok_ref_kitchen", "eok_base_kitchen", "eok_comp_kitchen"):
        assert f"double {name}(size_t n, double alpha, int shift, const double *xd," in text
    assert "eok_region_begin(); eok_v = kitchen(" in text
