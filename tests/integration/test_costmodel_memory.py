"""The memory stage and LMUL-priced vector costs end to end: real clang-22 builds, qemu-riscv64 with the memory plugin,
llvm-mca-22. Expected orderings are the ones a board shows (blocking, strides, working set vs cache size);
expected figures come from the target data they were priced with (evaluator/targets/*.toml)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from evaluator.costmodel import ModeledTiming, machines, model_kernel_breakdown
from evaluator.costmodel.bench import build, qemu_argv
from evaluator.costmodel.model import ONE_LINE_ASSUMED

pytestmark = pytest.mark.qemu

DATA = Path(__file__).resolve().parents[1] / "data" / "costmodel"
Model = Callable[..., ModeledTiming]


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Model:
    """model(stem, mcpu=..., memory=..., **defines) -> the modeled timing of that kernel, built once."""
    out = tmp_path_factory.mktemp("costmodel-mem")
    cache = out / "cache"

    def run(stem: str, mcpu: str = "spacemit-x60", memory: bool = True, **defines: object) -> ModeledTiming:
        name = stem + "".join(f"_{k}{v}" for k, v in sorted(defines.items()))
        binary = out / name
        if not binary.exists():
            build(DATA / f"{stem}.c", binary, defines)
        return model_kernel_breakdown(binary, qemu_argv(binary), cache, mcpu, memory=memory).timing

    return run


def test_plugin_counts_every_element_access(model: Model) -> None:
    n = 4096
    copy = model("stream", KERNEL=1, N=n)
    assert copy.bytes_accessed == 8 * n  # one 4-byte load and one 4-byte store per element
    triad = model("stream", KERNEL=4, N=n)
    assert triad.bytes_accessed == 12 * n
    # one FMA per element at the vl each strip ran with, plus the closing reduction of the 32-lane accumulator
    assert triad.flops == 2 * n + 32


def test_l1_resident_kernels_cost_what_they_did_before(model: Model) -> None:
    with_memory = model("saxpy", LMUL=4, N=4096)
    without = model("saxpy", LMUL=4, N=4096, memory=False)
    assert with_memory.bound == "compute"
    assert with_memory.cycles == pytest.approx(without.cycles, rel=0.01)


def test_a_working_set_in_dram_costs_what_dram_delivers(model: Model) -> None:
    small = model("saxpy", LMUL=4, N=4096)  # 32 KiB: L1
    big = model("saxpy", LMUL=4, N=1 << 20)  # 8 MiB: DRAM
    assert big.bound == "DRAM"
    assert big.cycles / (1 << 20) > 2.5 * small.cycles / 4096
    assert big.dram_bytes >= 12 * (1 << 20)  # x and y read, y written back
    # A copy moves its traffic at the DRAM figure plus the share of its core time the stream does not hide
    # (rvv-bench memcpy at 1 MiB on a BPI-F3: 6.9 GB/s moved; docs/COSTMODEL.md "DRAM copies: core time
    # overlaps only partly"); saxpy updates y in place, which the BPI-F3 does far slower (byteswap32: 2.2 GB/s).
    copy = model("stream", KERNEL=1, N=1 << 20)
    x60 = machines()["spacemit-x60"]
    stream = copy.dram_bytes / x60.dram.mixed
    assert copy.core_cycles < stream
    assert copy.cycles == pytest.approx(stream + x60.dram_copy_exposed * copy.core_cycles, rel=0.05)
    assert copy.cycles > 1.05 * stream  # the exposed share is not nothing
    assert big.dram_bytes_per_cycle < copy.dram_bytes_per_cycle


def test_a_short_vl_costs_its_lmul_as_on_the_x60(model: Model) -> None:
    # rvv-bench's X60 page: a vl=1 and a vl=VLMAX instruction at LMUL 8 take the same time (memcpy with
    # vl=16 under m8 runs 5.5x slower than under m1 on the BPI-F3). 7 elements at m8 cost what 64 do.
    m8, m1 = model("saxpy", LMUL=8, N=7), model("saxpy", LMUL=1, N=7)
    full_m8 = model("saxpy", LMUL=8, N=64)
    assert m8.cycles > 2 * m1.cycles
    assert m8.cycles == pytest.approx(full_m8.cycles, rel=0.15)


def test_blocked_sgemm_beats_unblocked_once_b_leaves_l2(model: Model) -> None:
    unblocked, blocked = model("gemm_block", BLOCKED=0), model("gemm_block", BLOCKED=1)
    assert unblocked.bound == "DRAM" and blocked.bound != "DRAM"
    assert unblocked.flops == blocked.flops
    # B streams from L2 instead of DRAM; on the X60 an L2 read stream is only ~1.1x a DRAM one (rvv-bench
    # utf8_count on a BPI-F3: 4.9 B/cycle at 188-526 KB, 4.5 at 1 MiB), so blocking gains little there.
    assert blocked.cycles < unblocked.cycles


def test_unit_stride_beats_strided(model: Model) -> None:
    unit, strided = model("strided", STRIDE=1, M=16384), model("strided", STRIDE=16, M=16384)
    assert unit.bytes_accessed == strided.bytes_accessed
    assert strided.cycles > 4 * unit.cycles  # one 64 B line per element instead of 16 elements per line


def test_a_working_set_in_l2_beats_one_in_dram(model: Model) -> None:
    in_l2 = model("stream", KERNEL=0, N=64 * 1024)  # 256 KiB
    in_dram = model("stream", KERNEL=0, N=1024 * 1024)  # 4 MiB
    assert in_l2.bound != "DRAM" and in_dram.bound == "DRAM"
    # each at its level's read figure (rvv-bench on a BPI-F3: L2 4.9 B/cycle from utf8_count, DRAM 7.4 GB/s from memcpy)
    k1 = machines()["spacemit-x60"]
    assert in_l2.bytes_accessed / in_l2.cycles == pytest.approx(k1.l2.read, rel=0.05)
    assert in_dram.bytes_accessed / in_dram.cycles == pytest.approx(k1.dram.read, rel=0.05)


def test_k1_and_k3_weigh_recompute_and_materialize_differently(model: Model) -> None:
    """3 MiB of arrays: DRAM on the K1, L2 on the X100. Storing f(x) costs the K1 DRAM writes, which run at
    10.1 GB/s without a read of the line (rvv-bench memset/memcpy on a BPI-F3), so it gains little there;
    on the X100 the extra FMAs of recomputing are what costs and storing wins by far."""
    k1 = {m: model("recompute", "spacemit-x60", MATERIALIZE=m) for m in (0, 1)}
    k3 = {m: model("recompute", "spacemit-x100", MATERIALIZE=m) for m in (0, 1)}
    assert k1[0].bound == k1[1].bound == "DRAM" and k3[1].bound != "DRAM"
    assert k1[0].cycles / k1[1].cycles < 1.2
    assert k3[0].cycles / k3[1].cycles > 1.4


def test_the_out_of_order_x100_hides_latency_but_not_a_dependence_chain(model: Model) -> None:
    """One sdot accumulator is latency-bound on the in-order X60 and less so on the X100, which still waits
    for its accumulator; a chain of dependent FMAs (fma_peak ACC=1) is bound by its latency on both."""
    k1 = {a: model("sdot", "spacemit-x60", LMUL=1, ACC=a, N=4096).cycles for a in (1, 4)}
    k3 = {a: model("sdot", "spacemit-x100", LMUL=1, ACC=a, N=4096).cycles for a in (1, 4)}
    assert k1[1] > 1.15 * k1[4]
    assert k3[1] < 0.75 * k1[1]  # the load latency is hidden out of order...
    assert k3[1] > 1.15 * k3[4]  # ...the accumulator's chain (5 cycles per strip) is not
    chain = {m: model("fma_peak", m, ACC=1, ITERS=2000).cycles for m in ("spacemit-x60", "spacemit-x100")}
    assert chain["spacemit-x100"] == pytest.approx(chain["spacemit-x60"], rel=0.02)  # 5 cycles per FMA on both


def test_a_scattered_store_beyond_l1_waits_its_fitted_cycles(model: Model) -> None:
    """The isolating pair of "Scattered stores beyond L1": the same instructions and lines, the byte store
    scattered (stride 4) or contiguous (stride 1). Beyond L1 (256 KiB of words, in L2) the scattered one
    adds the X60's fitted L2 wait per vsse8; inside L1 (8 KiB) it adds nothing."""
    x60 = machines()["spacemit-x60"].scattered_store
    assert x60 is not None
    m = 65536
    scattered, contiguous = model("strided_store", STRIDE=4, M=m), model("strided_store", STRIDE=1, M=m)
    assert scattered.instructions == contiguous.instructions
    assert scattered.cycles - contiguous.cycles >= 0.9 * x60.l2 * (m / 32)  # one vsse8 per 32 bytes
    in_l1 = model("strided_store", STRIDE=4, M=2048), model("strided_store", STRIDE=1, M=2048)
    assert in_l1[0].cycles == pytest.approx(in_l1[1].cycles, rel=0.1)
    assert not scattered.assumed_prices  # two lines per vsse8: the fitted wait, measured


def test_a_scattered_store_within_one_line_waits_nothing_and_says_it_is_assumed(model: Model) -> None:
    """Stride 2: each vsse8's 32 bytes land in one 64-byte line (the fit's stores span 2 and 4 lines). It
    is priced like the contiguous store of the same lines, and the result names the assumption."""
    m = 65536
    one_line, contiguous = model("strided_store", STRIDE=2, M=m), model("strided_store", STRIDE=1, M=m)
    assert one_line.cycles == pytest.approx(contiguous.cycles, rel=0.1)
    assert one_line.assumed_prices == (ONE_LINE_ASSUMED,) and not contiguous.assumed_prices
