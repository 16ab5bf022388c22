"""The X60 cost model end to end: real clang-22 builds, real qemu-riscv64 runs, real llvm-mca-22.

The expected numbers come from the X60 latency/occupancy table (shared/reference/riscv-k1-k3.md section 3.2,
i.e. LLVM 22's RISCVSchedSpacemitX60.td) and from cpufp's measured 33.4 GFLOPS per core.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from core.errors import EokError, InvalidInput, Unavailable
from evaluator.costmodel import ModeledTiming, model_kernel_breakdown, model_kernel_cycles
from evaluator.costmodel.bench import build, qemu_argv, whole_trace_cycles

pytestmark = pytest.mark.qemu

DATA = Path(__file__).resolve().parents[1] / "data" / "costmodel"
A100_QEMU_CPU = "rv64,v=true,vlen=1024,elen=64,vext_spec=v1.0"

Builder = Callable[..., Path]


@pytest.fixture(scope="module")
def binary(tmp_path_factory: pytest.TempPathFactory) -> Builder:
    """binary(source_stem, **defines) -> a built harness, compiled once per module."""
    out = tmp_path_factory.mktemp("costmodel-bin")
    built: dict[str, Path] = {}

    def get(stem: str, **defines: object) -> Path:
        name = stem + "".join(f"_{k}{v}" for k, v in sorted(defines.items()))
        if name not in built:
            built[name] = build(DATA / f"{stem}.c", out / name, defines)
        return built[name]

    return get


def cycles(path: Path, **kw: object) -> float:
    return model_kernel_breakdown(path, qemu_argv(path), None, **kw).timing.cycles  # type: ignore[arg-type]


def loop_cycles_per_iteration(path: Path, decoupled: bool = True) -> float:
    result = model_kernel_breakdown(path, qemu_argv(path), None, decoupled=decoupled)
    main = max(result.loops, key=lambda lp: lp.iterations)
    return (result.loop_cycles / sum(lp.iterations for lp in result.loops if lp.body == main.body)) if main else 0.0


# ----------------------------------------------------------------------------------- peak and latency


@pytest.mark.parametrize("acc", [8, 16])
def test_independent_vfmacc_run_at_one_per_cycle(binary: Builder, acc: int) -> None:
    per_iter = loop_cycles_per_iteration(binary("fma_peak", ACC=acc))
    assert acc / per_iter == pytest.approx(1.0, abs=0.05)


def test_dependent_vfmacc_chain_shows_the_5_cycle_latency(binary: Builder) -> None:
    assert loop_cycles_per_iteration(binary("fma_peak", ACC=1)) == pytest.approx(5.0, rel=0.05)


def test_four_accumulators_are_still_latency_bound(binary: Builder) -> None:
    # 4 independent chains of latency 5 on one FMA pipe: 4 vfmacc per 5 cycles.
    assert 4 / loop_cycles_per_iteration(binary("fma_peak", ACC=4)) == pytest.approx(0.8, rel=0.05)


def test_cpufp_shaped_loop_matches_the_measured_peak(binary: Builder) -> None:
    """cpufp: 33.4 GFLOPS f32 per core = 16.7 flop/cycle at 2.0 GHz, i.e. one e32 m1 vfmacc (16 flop) per cycle."""
    per_iter = loop_cycles_per_iteration(binary("fma_asm"))
    gflops_at_2ghz = 24 * 16 / per_iter * 2.0
    assert gflops_at_2ghz == pytest.approx(33.4, rel=0.08)
    # Plain in-order llvm-mca retires the addi/bnez after the last vfmacc and misses the measurement.
    in_order = 24 * 16 / loop_cycles_per_iteration(binary("fma_asm"), decoupled=False) * 2.0
    assert in_order < 0.85 * 33.4


# --------------------------------------------------------------------------------- sdot and saxpy


def per_element(path: Path, n: int) -> float:
    return cycles(path) / n


N = 4096


def test_sdot_one_m1_accumulator_is_slower_than_four(binary: Builder) -> None:
    one, two, four = (per_element(binary("sdot", LMUL=1, ACC=a, N=N), N) for a in (1, 2, 4))
    assert one > two > four
    assert one > 1.15 * four


def test_sdot_lmul_ordering_follows_the_load_occupancy(binary: Builder) -> None:
    """Two vle32 per vfmacc: load occupancy 3/4/8/16 cycles for 8/16/32/64 elements (M1/M2/M4/M8), so the
    table bound is 0.75 cycle/element at M1 and 0.5 at M2, M4 and M8."""
    best = {lmul: min(per_element(binary("sdot", LMUL=lmul, ACC=a, N=N), N) for a in (1, 2)) for lmul in (1, 2, 4, 8)}
    assert best[1] == max(best.values())
    assert best[1] == pytest.approx(0.75, rel=0.2)
    for lmul in (2, 4, 8):
        assert best[lmul] == pytest.approx(0.5, rel=0.2)


def test_sdot_strip_mined_loop_spans_several_tbs_and_is_still_one_loop(binary: Builder) -> None:
    path = binary("sdot", LMUL=1, STRIP=1, N=N)
    result = model_kernel_breakdown(path, qemu_argv(path), None)
    main = max(result.loops, key=lambda lp: lp.iterations)
    assert len(main.body) >= 2  # vsetvli ends a qemu TB, so the loop body is several TBs
    assert main.iterations >= N // 8 - 1
    # A vsetvli with its AVL in a register drains the vector unit every strip (rvv-bench on a BPI-F3: memset
    # m1 2.21x, utf8_count m1 1.45x slower than with the vsetvli hoisted), so strips do not overlap.
    hoisted = per_element(binary("sdot", LMUL=1, ACC=1, N=N), N)
    assert 1.2 * hoisted < result.timing.cycles / N < 2.0 * hoisted


@pytest.mark.parametrize(
    ("lmul", "table"),
    [(1, (3 + 3 + 5 + 3) / 8), (2, (4 + 4 + 5 + 4) / 16), (4, (8 + 8 + 5 + 8) / 32), (8, (16 + 16 + 8 + 19) / 64)],
)
def test_saxpy_matches_the_load_fma_store_chain(binary: Builder, lmul: int, table: float) -> None:
    """saxpy per vector: vle x, vle y (occupancy), vfmacc (latency), vse (occupancy), in order."""
    assert per_element(binary("saxpy", LMUL=lmul, ACC=1, N=N), N) == pytest.approx(table, rel=0.1)


def test_saxpy_lmul_ordering(binary: Builder) -> None:
    m1, m2, m4 = (per_element(binary("saxpy", LMUL=lmul, ACC=1, N=N), N) for lmul in (1, 2, 4))
    assert m1 > m2 > m4


# ------------------------------------------------------------------------------- instruction counts


def _objdump(path: Path) -> str:
    return subprocess.run(
        ["llvm-objdump-22", "-d", "--no-show-raw-insn", str(path)], capture_output=True, text=True
    ).stdout


def _function(listing: str, name: str) -> list[tuple[int, str]]:
    body = listing.split(f"<{name}>:\n", 1)[1].split("\n\n", 1)[0]
    return [(int(a, 16), text.strip()) for a, text in re.findall(r"^\s*([0-9a-f]+):\s*(.*)$", body, re.MULTILINE)]


def _region_glue(listing: str) -> int:
    """Instructions main runs between returning from eok_region_begin and calling eok_region_end."""
    main = [text for _, text in _function(listing, "main")]
    start = next(i for i, t in enumerate(main) if "<eok_region_begin>" in t)
    end = next(i for i, t in enumerate(main) if "<eok_region_end>" in t)
    return end - start  # straight-line code: everything after the begin call, the end call included


def test_asm_loop_instruction_count_is_exact(binary: Builder) -> None:
    # Both counts fit a 12-bit immediate, so main loads them with the same single `li`.
    short, long = binary("scalar_count", ITERS=1000), binary("scalar_count", ITERS=2000)
    n_short = model_kernel_cycles(short, qemu_argv(short), short.parent / "cache")
    n_long = model_kernel_cycles(long, qemu_argv(long), long.parent / "cache")
    assert n_long.instructions - n_short.instructions == 3 * 1000  # add, addi, bnez per iteration
    listing = _objdump(short)
    func = _function(listing, "count_loop")
    expected = _region_glue(listing) + (len(func) - 3) + 3 * 1000  # straight code around a 3-insn loop
    assert n_short.instructions == expected


def test_c_loop_instruction_count_matches_its_disassembly(binary: Builder) -> None:
    short, long = binary("scalar_count", ITERS=1000, SUM=1), binary("scalar_count", ITERS=2000, SUM=1)
    func = _function(_objdump(short), "sum_loop")
    targets = {a: int(m.group(1), 16) for a, t in func if (m := re.match(r"b\w*\s.*0x([0-9a-f]+) <sum_loop", t))}
    back_edge, head = next((a, target) for a, target in targets.items() if target <= a)  # the loop's branch
    loop_len = sum(1 for a, _ in func if head <= a <= back_edge)
    assert loop_len >= 3
    difference = model_kernel_cycles(long, qemu_argv(long), long.parent / "cache").instructions
    difference -= model_kernel_cycles(short, qemu_argv(short), short.parent / "cache").instructions
    assert difference == 1000 * loop_len


# ----------------------------------------------------------------------------------------- vtype


def test_one_tb_under_two_vtypes_is_costed_per_vtype(binary: Builder) -> None:
    m1, m8, both = (binary("vtype_switch", PHASES=p) for p in (1, 8, 9))
    timing = {p: model_kernel_cycles(b, qemu_argv(b), b.parent / "cache") for p, b in ((1, m1), (8, m8), (9, both))}
    # vadd_chain: 4 dependent vadd.vv, latency 4 at M1 and 16 at M8 -> 16 vs 64 cycles a call.
    calls = 200
    assert timing[1].cycles / calls == pytest.approx(16, rel=0.1)  # plus the call's own glue
    assert timing[8].cycles / calls == pytest.approx(64, rel=0.1)
    assert timing[9].cycles == pytest.approx(timing[1].cycles + timing[8].cycles, rel=0.02)
    assert timing[9].unique_blocks > timing[1].unique_blocks


# ------------------------------------------------------------------------------- decomposition error


@pytest.mark.parametrize(
    ("stem", "defines"),
    # sdot without a vsetvli per strip: the drain it causes is the model's, not llvm-mca's (no yardstick here)
    [("sdot", {"N": 2048}), ("branchy", {"N": 1024}), ("softmax_libm", {"N": 256})],
)
def test_loop_and_pass_units_add_up_to_the_whole_trace(binary: Builder, stem: str, defines: dict[str, int]) -> None:
    path = binary(stem, **defines)
    whole = whole_trace_cycles(path, qemu_argv(path), decoupled=False)["c"]
    assert cycles(path, decoupled=False) == pytest.approx(whole, rel=0.03)
    bound = max(whole_trace_cycles(path, qemu_argv(path), decoupled=True).values())
    assert cycles(path) == pytest.approx(bound, rel=0.03)
    # Perfect overlap of the two streams bounds it from below, up to the decomposition's own error: a block
    # priced after its predecessor may finish under that predecessor's drain (sdot: 1.1 % under).
    assert cycles(path) >= 0.98 * bound


# -------------------------------------------------------------------------------- contract & cache


def test_contract_and_cache(binary: Builder, tmp_path: Path) -> None:
    path = binary("sdot", LMUL=2, ACC=2, N=N)
    cold = model_kernel_breakdown(path, qemu_argv(path), tmp_path)
    warm = model_kernel_breakdown(path, qemu_argv(path), tmp_path)
    assert isinstance(cold.timing, ModeledTiming)
    assert cold.units_simulated == cold.units_total > 0
    assert warm.units_simulated == 0
    assert warm.timing == cold.timing
    t = cold.timing
    assert t.instructions > t.blocks_executed >= t.unique_blocks > 0
    assert t.model.startswith("spacemit-x60/llvm-mca-22") and "decoupled" in t.model
    assert not t.approximate
    assert (tmp_path / "x60-mca-costs.sqlite").is_file()


def test_qemu_argv_with_a_wrapper_script_works(binary: Builder, tmp_path: Path) -> None:
    """The evaluator runs qemu through a `prlimit ... qemu-riscv64 "$@"` wrapper; logging options pass through."""
    path = binary("sdot", LMUL=1, ACC=4, N=N)
    wrapper = tmp_path / "qemu.sh"
    wrapper.write_text('#!/bin/sh\nexec prlimit --fsize=1073741824 -- qemu-riscv64 "$@"\n')
    wrapper.chmod(0o755)
    argv = [str(wrapper), "-cpu", "rv64,v=true,vlen=256,elen=64,vext_spec=v1.0", "./" + path.name]
    assert model_kernel_cycles(path, argv, tmp_path).cycles == cycles(path)


# ------------------------------------------------------------------------------------------ K3 targets


def test_x100_is_approximate_with_a_faster_scalar_side(binary: Builder, tmp_path: Path) -> None:
    """Scalar code: at least the SPECint-per-GHz scale faster (out-of-order issue also hides its latency),
    never beyond what twice the issue width and that scale allow; FMA-throughput-bound vector code: equal."""
    scalar, vector = binary("branchy", N=1024), binary("fma_peak", ACC=16)
    ratios = {}
    for name, path in (("scalar", scalar), ("vector", vector)):
        x60 = model_kernel_cycles(path, qemu_argv(path), tmp_path)
        x100 = model_kernel_cycles(path, qemu_argv(path), tmp_path, mcpu="spacemit-x100")
        assert x100.approximate and not x60.approximate
        assert x100.model.startswith("spacemit-x100~spacemit-x60/")
        ratios[name] = x100.cycles / x60.cycles
    assert 0.5 * 4.0 / 7.5 <= ratios["scalar"] <= 4.0 / 7.5 * 1.05
    assert ratios["vector"] == pytest.approx(1.0, rel=0.05)


def test_a100_runs_with_vlen_1024_and_is_approximate(binary: Builder, tmp_path: Path) -> None:
    path = binary("sdot", LMUL=1, STRIP=1, N=N)
    x60 = model_kernel_cycles(path, qemu_argv(path), tmp_path)
    a100 = model_kernel_cycles(path, qemu_argv(path, A100_QEMU_CPU), tmp_path, mcpu="spacemit-a100")
    assert a100.approximate
    assert a100.instructions < x60.instructions / 3  # 32 floats per m1 vector instead of 8
    assert a100.cycles < x60.cycles


# ------------------------------------------------------------------------------------------- errors


def test_markers_never_reached(binary: Builder, tmp_path: Path) -> None:
    path = binary("misbehave", MODE=0)
    with pytest.raises(EokError, match="eok_region_begin was never executed"):
        model_kernel_cycles(path, qemu_argv(path), tmp_path)


def test_exit_inside_the_region(binary: Builder, tmp_path: Path) -> None:
    path = binary("misbehave", MODE=1)
    with pytest.raises(EokError, match=r"eok_region_end was not reached.*exit code 3"):
        model_kernel_cycles(path, qemu_argv(path), tmp_path)


def test_timeout(binary: Builder, tmp_path: Path) -> None:
    path = binary("misbehave", MODE=2)
    with pytest.raises(EokError, match="did not finish within 2 s"):
        model_kernel_cycles(path, qemu_argv(path), tmp_path, timeout_s=2.0)


def test_log_too_large(binary: Builder) -> None:
    path = binary("misbehave", MODE=3)
    with pytest.raises(EokError, match="TB log grew beyond") as err:
        model_kernel_breakdown(path, qemu_argv(path), None, max_log_bytes=300_000)
    assert "shrink" in (err.value.hint or "")


def test_log_cut_by_a_file_size_limit(binary: Builder, tmp_path: Path) -> None:
    path = binary("misbehave", MODE=3)
    wrapper = tmp_path / "qemu.sh"
    wrapper.write_text('#!/bin/sh\nexec prlimit --fsize=300000 -- qemu-riscv64 "$@"\n')
    wrapper.chmod(0o755)
    with pytest.raises(EokError, match="SIGXFSZ") as err:
        model_kernel_cycles(path, [str(wrapper), str(path)], tmp_path)
    assert "file-size limit" in (err.value.hint or "")


def test_a_multi_threaded_region_is_refused(binary: Builder, tmp_path: Path) -> None:
    path = binary("threads")
    with pytest.raises(EokError, match="several threads") as err:
        model_kernel_cycles(path, qemu_argv(path), tmp_path)
    assert "single-threaded" in (err.value.hint or "")


def test_missing_qemu_is_unavailable(binary: Builder, tmp_path: Path) -> None:
    path = binary("misbehave", MODE=0)
    with pytest.raises(Unavailable, match="qemu"):
        model_kernel_cycles(path, [str(tmp_path / "no-such-qemu"), str(path)], tmp_path)


def test_missing_binary_and_missing_markers_are_invalid_input(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="does not exist"):
        model_kernel_cycles(tmp_path / "nothing", ["qemu-riscv64", "./nothing"], tmp_path)
    source = tmp_path / "plain.c"
    source.write_text("int main(void) { return 0; }\n")
    plain = build(source, tmp_path / "plain")
    with pytest.raises(InvalidInput, match="eok_region_begin"):
        model_kernel_cycles(plain, qemu_argv(plain), tmp_path)
