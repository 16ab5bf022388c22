"""Metamorphic tests of the cost model on real builds (clang-22, qemu-riscv64, llvm-mca-22): work that is
added never lowers the modeled cycles, and the same work again costs about as much again. Straight-line
code is where a composition error hides (each block is priced after the one before it); the padding trick
(scalar work nobody reads between vector blocks) once took an honest sgemm_64 from 7.59x to 12.73x."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from evaluator.costmodel import ModeledTiming, model_kernel_breakdown
from evaluator.costmodel.bench import build, qemu_argv

pytestmark = pytest.mark.qemu

DATA = Path(__file__).resolve().parents[1] / "data" / "costmodel"
Model = Callable[..., ModeledTiming]


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Model:
    out = tmp_path_factory.mktemp("metamorphic")

    def run(**defines: object) -> ModeledTiming:
        binary = out / ("m" + "".join(f"_{k}{v}" for k, v in sorted(defines.items())))
        if not binary.exists():
            build(DATA / "metamorphic.c", binary, defines)
        return model_kernel_breakdown(binary, qemu_argv(binary), out / "cache").timing

    return run


def test_padding_with_dead_scalar_work_costs_at_least_its_issue_slots(model: Model) -> None:
    base = model()
    for pad in (8, 16, 32):
        padded = model(PAD=pad)
        added = padded.instructions - base.instructions
        assert added > 0
        # An in-order dual-issue core spends at least one cycle per two added instructions. The model before
        # the sound composition let padding hide under the vector blocks (PAD=8: +224 instructions, +62 cycles).
        assert padded.cycles - base.cycles >= added / 2


def test_the_same_work_twice_costs_about_twice(model: Model) -> None:
    once, twice = model(), model(DUP=2)
    assert twice.cycles >= 1.8 * once.cycles
    padded_once, padded_twice = model(PAD=8), model(PAD=8, DUP=2)
    assert padded_twice.cycles >= 1.8 * padded_once.cycles


def test_unrolled_and_looped_forms_of_the_same_work_agree(model: Model) -> None:
    unrolled, looped = model(), model(LOOP=1)
    assert unrolled.cycles == pytest.approx(looped.cycles, rel=0.35)


def test_no_region_beats_the_flop_ceiling_or_the_issue_width(model: Model) -> None:
    for defines in ({}, {"PAD": 8}, {"DUP": 2}):
        t = model(**defines)
        assert t.flops_per_cycle <= t.peak_flops_per_cycle
        assert t.cycles >= t.instructions / 2  # the X60 issues two instructions a cycle at most
