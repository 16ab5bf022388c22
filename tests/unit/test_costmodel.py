"""Cost-model pieces that need no qemu: log parsing, loop finding, instruction text, llvm-mca pricing."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from core.errors import EokError, InvalidInput, Unavailable
from evaluator import costmodel
from evaluator.costmodel.blocks import TRAFFIC_FIELDS, _scattered_store, _vector_lengths
from evaluator.costmodel.elf import make_insn
from evaluator.costmodel.loops import find_loops, loop_mask, previous_distance
from evaluator.costmodel.mca import (
    STEADY_ITERATIONS,
    CostCache,
    Segment,
    Unit,
    _operands,
    assumed_overrides,
    cost_units,
    needs_coupling,
    recurrence,
    require_mca,
    streams,
)
from evaluator.costmodel.memory import (
    STAT_FIELDS,
    CacheGeometry,
    MemoryStats,
    TraceGuard,
    Unvouched,
    Vouched,
    check_vouched,
    order_hash,
    plugin_argv,
    read_stats,
)
from evaluator.costmodel.model import scattered_store_cycles
from evaluator.costmodel.trace import Vtype, decode_vtype, parse_in_asm, parse_log, qemu_with_logging

# ---------------------------------------------------------------------------------------------- trace

# Flags qemu 7.2 printed after these vsetvli (recorded once with qemu-riscv64 7.2 and kept here as data).
QEMU72_FLAGS = {
    0x03206680: ("E32", "M1"),
    0x02206688: ("E32", "M2"),
    0x03206690: ("E32", "M4"),
    0x00206698: ("E32", "M8"),
    0x03206638: ("E8", "MF2"),
    0x03206E70: ("E16", "MF4"),
    0x032066D8: ("E64", "M8"),
    0x03206EC0: ("E64", "M1"),
}


@pytest.mark.parametrize(("flags", "expected"), QEMU72_FLAGS.items())
def test_decode_vtype_reads_qemu72_tb_flags(flags: int, expected: tuple[str, str]) -> None:
    assert decode_vtype(flags) == Vtype(*expected)


def test_decode_vtype_vill_is_none() -> None:
    assert decode_vtype(0x00207600) is None  # e16 mf8 at ELEN 64: qemu sets vill


def _exec_line(pc: int, flags: int, sym: str = "f") -> str:
    return f"Trace 0: 0x7f00000000a0 [0000000000000000/{pc:016x}/{flags:08x}/00000200] {sym}\n"


def _in_asm(addrs: list[tuple[int, str]]) -> str:
    lines = "".join(f"0x{a:016x}:  {raw}          insn\n" for a, raw in addrs)
    return f"----------------\nIN: f\n{lines}\n"


def _log(*parts: str) -> bytes:
    return "".join(parts).encode()


BEGIN, END = 0x1000, 0x1004


def test_parse_log_keeps_only_the_region_and_reads_extents() -> None:
    data = _log(
        _in_asm([(0x2000, "8082")]),
        _exec_line(0x2000, 0x03206680),  # before the region: ignored
        _exec_line(BEGIN, 0x03206680, "eok_region_begin"),
        _in_asm([(0x3000, "0207e487"), (0x3004, "9532"), (0x3006, "fe0698e3")]),
        _exec_line(0x3000, 0x03206680, "operator[]"),  # a '[' in the symbol must not confuse the parser
        _exec_line(0x3000, 0x03206690),
        _exec_line(END, 0x03206680, "eok_region_end"),
        _exec_line(0x2000, 0x03206680),
    )
    keys, extents, regions = parse_log(data, BEGIN, END)
    assert regions == 1
    assert [(int(k) >> 16, decode_vtype(int(k) & 0xFFFF)) for k in keys] == [
        (0x3000, Vtype("E32", "M1")),
        (0x3000, Vtype("E32", "M4")),
    ]
    assert extents[0x3000] == (0x3000, 0x3004, 0x3006)
    assert extents[0x2000] == (0x2000,)


def test_parse_log_sums_several_regions() -> None:
    body = _exec_line(0x3000, 0x03206680)
    data = _log(
        _in_asm([(0x3000, "9532")]),
        _exec_line(BEGIN, 0),
        body,
        _exec_line(END, 0),
        _exec_line(BEGIN, 0),
        body,
        body,
        _exec_line(END, 0),
    )
    keys, _, regions = parse_log(data, BEGIN, END)
    assert regions == 2 and len(keys) == 3


def test_parse_log_without_begin_says_what_to_fix() -> None:
    with pytest.raises(EokError, match="eok_region_begin was never executed") as err:
        parse_log(_log(_exec_line(0x3000, 0)), BEGIN, END)
    assert "harness must call" in (err.value.hint or "")


def test_parse_log_without_end_names_the_marker() -> None:
    with pytest.raises(EokError, match="eok_region_end was not reached"):
        parse_log(_log(_exec_line(BEGIN, 0), _exec_line(0x3000, 0)), BEGIN, END)


def test_later_translation_of_a_pc_replaces_the_earlier_one() -> None:
    data = _log(_in_asm([(0x3000, "9532"), (0x3002, "9532")]), _in_asm([(0x3000, "9532")]))
    assert parse_in_asm(data)[0x3000] == (0x3000,)


def test_logging_options_are_added_after_the_emulator() -> None:
    argv = qemu_with_logging(["qemu-riscv64", "-cpu", "rv64,v=true", "./h", "model", "cand"], Path("/t/log"))
    logging = ["-d", "in_asm,exec,nochain", "-D", "/t/log"]
    assert argv == ["qemu-riscv64", *logging, "-cpu", "rv64,v=true", "./h", "model", "cand"]


@pytest.mark.parametrize("argv", [[], ["qemu-riscv64", "-d", "exec", "./h"]])
def test_bad_qemu_argv_is_invalid_input(argv: list[str]) -> None:
    with pytest.raises(InvalidInput, match="qemu_argv"):
        qemu_with_logging(argv, Path("/t/log"))


# ---------------------------------------------------------------------------------------------- loops


def test_previous_distance() -> None:
    assert previous_distance(np.array([5, 6, 5, 5, 6])).tolist() == [0, 0, 2, 1, 3]


def test_self_loop_and_multi_tb_loop_are_found() -> None:
    # 9 = prologue, 1 = self loop x4, then a 3-TB loop (4,2,3) x3 with exit glue 7
    ids = np.array([9, 1, 1, 1, 1, 4, 2, 3, 4, 2, 3, 4, 2, 3, 7])
    loops = find_loops(ids)
    assert [(lp.body, lp.iterations, lp.start, lp.stop) for lp in loops] == [
        ((1,), 4, 1, 5),
        ((2, 3, 4), 3, 5, 14),  # rotated to start at the smallest id
    ]
    assert loop_mask(len(ids), loops).tolist() == [False] + [True] * 13 + [False]


def test_nested_loop_resolves_to_the_inner_loop() -> None:
    outer = [5, 6, 6, 6, 6, 7]  # head, inner self-loop x4, latch
    loops = find_loops(np.array(outer * 3))
    assert {lp.body for lp in loops} == {(6,)}
    assert sum(lp.iterations for lp in loops) == 12


def test_irregular_paths_are_not_loops() -> None:
    assert find_loops(np.array([1, 2, 3, 1, 3, 2, 1, 2, 3, 2, 1])) == []


# ------------------------------------------------------------------------------------ instruction text


def test_branch_targets_become_dot_and_symbols_are_dropped() -> None:
    assert make_insn("bltu", "a3, a2, 0x302e2 <sdot+0xc>").text == "bltu a3, a2, ."
    assert make_insn("jal", "0x5b5d6 <malloc>").text == "jal ."
    assert make_insn("j", "0x30244").text == "j ."
    assert make_insn("auipc", "a0, 0x12 <x>").text == "auipc a0, 0x12"


def test_vector_and_sync_classification() -> None:
    assert make_insn("vfmacc.vv", "v8, v9, v10").is_vector
    assert not make_insn("vsetvli", "a4, a4, e32, m1, ta, ma").is_vector  # issues on the scalar IEUA
    assert make_insn("vfmv.f.s", "fa0, v8").to_scalar
    assert make_insn("csrr", "a0, vl").to_scalar
    assert not make_insn("csrr", "a0, vlenb").to_scalar
    assert not make_insn("add", "a0, a0, a1").is_vector


# ----------------------------------------------------------------------------------------------- mca


def _seg(lines: list[str], vtype: Vtype | None = Vtype("E32", "M1")) -> Segment:
    insns = tuple(make_insn(*line.partition(" ")[::2]) for line in lines)
    return Segment(insns, vtype if any(i.is_vector for i in insns) else None)


FMA_INDEPENDENT = [f"vfmacc.vf v{8 + k}, fa0, v1" for k in range(8)] + ["addi a0, a0, -1", "bnez a0, 0x10 <l>"]
FMA_CHAIN = ["vfmacc.vf v8, fa0, v1", "addi a0, a0, -1", "bnez a0, 0x10 <l>"]


def test_streams_split_vector_and_scalar_with_the_vtype_stated() -> None:
    got = streams([_seg(FMA_CHAIN, Vtype("E32", "M4"))], split=True)
    assert got["v"] == (["# LLVM-MCA-RISCV-LMUL M4", "# LLVM-MCA-RISCV-SEW E32", "vfmacc.vf v8, fa0, v1"], 0.0)
    assert got["s"] == (["addi a0, a0, -1", "bnez a0, ."], 0.0)
    assert list(streams([_seg(FMA_CHAIN)], split=False)) == ["c"]


def test_a_run_of_an_assumed_override_cell_is_named_and_a_measured_one_is_not() -> None:
    """Issue 19: the X60's vluxei8 price is fitted at e8m4 only; a kernel that runs it at e8m1 rests on an
    assumption and its result must say so, one at e8m4 must not."""
    from evaluator.targets import load_target

    overrides = load_target("k1-x60").costmodel.vector_overrides
    gather = ["vluxei8.v v8, (a0), v16", "addi a0, a0, 1", "bnez a0, 0x10 <l>"]
    assert assumed_overrides([_seg(gather, Vtype("E8", "M4"))], overrides) == []
    assert assumed_overrides([_seg(gather, Vtype("E8", "M1"))], overrides) == ["vl[uo]xei8.v e8m1 cycles"]
    assert assumed_overrides([_seg(FMA_CHAIN, Vtype("E8", "M1"))], overrides) == []  # no override at all


def test_a_vector_to_scalar_move_couples_the_streams() -> None:
    assert needs_coupling([_seg(["vfredusum.vs v8, v8, v9", "vfmv.f.s fa0, v8", "fadd.s fa1, fa1, fa0"])])
    assert not needs_coupling([_seg(FMA_CHAIN)])


def test_loop_costs_follow_the_x60_latency_table() -> None:
    chain, independent = (Unit("loop", (_seg(lines),)) for lines in (FMA_CHAIN, FMA_INDEPENDENT))
    costs, simulated = cost_units([chain, independent], "spacemit-x60", None)
    assert simulated == 2
    assert costs[0].cycles == pytest.approx(5.0, abs=0.1)  # vfmacc latency 5
    assert costs[1].cycles == pytest.approx(8.0, abs=0.1)  # one vfmacc per cycle on VFP


def test_in_order_llvm_mca_stalls_scalar_behind_vector_write_back() -> None:
    unit = Unit("loop", (_seg(FMA_INDEPENDENT),))
    (coupled,), _ = cost_units([unit], "spacemit-x60", None, decoupled=False)
    (split,), _ = cost_units([unit], "spacemit-x60", None, decoupled=True)
    assert coupled.cycles > split.cycles + 3  # addi waits for the last vfmacc to retire


def test_lmul_changes_the_cost() -> None:
    units = [Unit("loop", (_seg(FMA_INDEPENDENT, Vtype("E32", lmul)),)) for lmul in ("M1", "M2", "M4", "M8")]
    costs, _ = cost_units(units, "spacemit-x60", None)
    assert [round(c.cycles) for c in costs] == [8, 16, 32, 64]  # occupancy 1, 2, 4, 8 per vfmacc


def test_pass_cost_is_what_a_block_adds_after_its_predecessor() -> None:
    divide = _seg(["div a0, a1, a2"])  # 20 cycles, not pipelined
    dependent, independent = _seg(["add a3, a3, a0"]), _seg(["add a3, a3, a4"])
    (dep, indep), _ = cost_units(
        [Unit("pass", (dependent,), (divide,)), Unit("pass", (independent,), (divide,))], "spacemit-x60", None
    )
    assert indep.cycles == 0.5  # finishes in the shadow of the divide: only its issue slot counts
    assert dep.cycles >= 1  # must wait for the quotient, then adds its own cycle


def test_calls_cost_a_jump_not_llvm_mca_default_100_cycles() -> None:
    (cost,), _ = cost_units([Unit("loop", (_seg(["jal 0x5b5d6 <malloc>"]),))], "spacemit-x60", None)
    assert cost.cycles < 2


def test_instructions_without_a_model_are_counted_and_charged() -> None:
    (cost,), _ = cost_units([Unit("loop", (_seg(["fence", "add a0, a0, a1"]),))], "spacemit-x60", None)
    assert cost.unsupported == 1
    assert cost.cycles >= 1.0


def test_cache_returns_the_same_cost_without_simulating(tmp_path: Path) -> None:
    unit = Unit("loop", (_seg(FMA_CHAIN),))
    cache = CostCache(tmp_path)
    first, simulated_first = cost_units([unit], "spacemit-x60", cache)
    second, simulated_second = cost_units([unit], "spacemit-x60", cache)
    cache.close()
    assert (simulated_first, simulated_second) == (1, 0)
    assert first == second
    assert (tmp_path / "x60-mca-costs.sqlite").is_file()


def test_steady_state_iterations_cover_the_longest_latency() -> None:
    # vfredusum m8 has latency 57: a chain of them still converges to its steady state.
    unit = Unit("loop", (_seg(["vfredusum.vs v8, v16, v8"], Vtype("E32", "M8")),))
    (cost,), _ = cost_units([unit], "spacemit-x60", None)
    assert STEADY_ITERATIONS >= 2  # differencing two run lengths needs a steady state after one iteration
    assert cost.cycles == pytest.approx(57, abs=1)


# -------------------------------------------------------------------------------------------- errors


def test_unknown_mcpu_lists_the_known_ones(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="spacemit-x60"):
        costmodel.model_kernel_cycles(tmp_path / "h", ["qemu-riscv64", "./h"], tmp_path, mcpu="cortex-a53")


def test_missing_llvm_mca_is_unavailable_with_an_install_hint(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # a real environment where llvm-mca-22 is not installed
    with pytest.raises(Unavailable, match="llvm-mca-22") as err:
        require_mca()
    assert "apt-get install llvm-22" in (err.value.hint or "")


# ---------------------------------------------------------------------------------------- memory, vl


def test_plugin_table_is_read_by_pc(tmp_path: Path) -> None:
    out = tmp_path / "memsim.txt"
    out.write_text("# header\n302ec 4096 16384 0 4 1 3 0 0 0\n302e8 10 40 10 2 2 0 1 9 1\n")
    stats, vouched = read_stats(out, 64)
    assert vouched is None  # no guard: nothing to verify
    assert stats.pcs.tolist() == [0x302E8, 0x302EC]
    assert stats.of(0x302EC).tolist() == [4096, 16384, 0, 4, 1, 3, 0, 0, 0]  # type: ignore[union-attr]
    assert stats.counts.shape[1] == len(STAT_FIELDS)
    assert stats.of(0x1234) is None
    (tmp_path / "empty.txt").write_text("# header only: the region made no access\n")
    assert len(read_stats(tmp_path / "empty.txt", 64)[0].pcs) == 0
    with pytest.raises(EokError, match="memory plugin wrote no table"):
        read_stats(tmp_path / "absent.txt", 64)  # the plugin never ran: say so, do not price memory as free


def _signed(key: bytes, body: str) -> str:
    import hashlib
    import hmac

    return body + "mac " + hmac.new(key, body.encode(), hashlib.sha256).hexdigest() + "\n"


def _guard(tmp_path: Path) -> TraceGuard:
    guard = TraceGuard.new(tmp_path / "harness", tmp_path, None)
    guard.close()
    return guard


def test_a_table_the_plugin_did_not_sign_is_refused(tmp_path: Path) -> None:
    guard = _guard(tmp_path)
    body = "# header\n302ec 4096 16384 0 4 1 3 0\ntb 10000 3\norder 00000000000000ff 3\nsmc 0 0\nlandlock 7\n"
    out = tmp_path / "memsim.txt"
    out.write_text(_signed(guard.key, body))
    stats, vouched = read_stats(out, 64, guard)
    assert vouched is not None and vouched.execs == {0x10000: 3} and vouched.count == 3 and vouched.landlock == 7
    assert stats.pcs.tolist() == [0x302EC]  # the integrity lines are not memory rows
    for forged in (
        body,
        _signed(b"another key" * 3, body),
        _signed(guard.key, body).replace("tb 10000 3", "tb 10000 2"),
    ):
        out.write_text(forged)
        with pytest.raises(Unvouched, match="not the one it signed"):
            read_stats(out, 64, guard)


def test_the_log_must_be_exactly_what_the_plugin_saw_execute(tmp_path: Path) -> None:
    guard = _guard(tmp_path)
    ran = np.array([0x10000, 0x10040, 0x10040, 0x10080, 0x10040], dtype=np.int64)
    truth = Vouched(execs={0x10000: 1, 0x10040: 3, 0x10080: 1}, order=order_hash(ran, guard.key), count=5,
                    smc=0, smc_first=0, landlock=7)  # fmt: skip
    check_vouched(truth, ran, guard.key)  # the honest log passes
    tampered = {
        "reordered": ran[[0, 1, 1, 4, 3]],  # same TBs and counts, other order
        "blacked out": ran[:3],
        "injected": np.concatenate([ran, [0x10000]]),
        "relabelled": np.array([0x10000, 0x10040, 0x10040, 0x10084, 0x10040]),
    }
    for what, log in tampered.items():
        with pytest.raises(Unvouched, match="not what ran"):
            check_vouched(truth, log, guard.key)
            pytest.fail(what)
    with pytest.raises(Unvouched, match="not the binary's own"):
        check_vouched(Vouched(truth.execs, truth.order, 5, smc=1, smc_first=0x10040, landlock=7), ran, guard.key)


def test_plugin_options_carry_markers_and_cache_geometry(tmp_path: Path) -> None:
    argv = plugin_argv(tmp_path / "m.so", (0x10, 0x20), tmp_path / "o.txt", CacheGeometry(32768, 8, 524288, 16))
    assert argv[0] == "-plugin"
    assert "begin=0x10" in argv[1] and "end=0x20" in argv[1] and "l2=524288" in argv[1] and "line=64" in argv[1]
    assert qemu_with_logging(["qemu-riscv64", "./h"], tmp_path / "l", argv)[5:7] == argv


def test_unit_prices_follow_lmul() -> None:
    # rvv-bench's X60 page: "a vl=1 and a vl=VLMAX instruction with LMUL=8 take the same amount of time".
    full = Unit("loop", (_seg(["vle32.v v8, (a0)", "vse32.v v8, (a1)"], Vtype("E32", "M8")),))
    short = Unit("loop", (_seg(["vle32.v v8, (a0)", "vse32.v v8, (a1)"], Vtype("E32", "M1")),))
    (m8,), _ = cost_units([full], "spacemit-x60", None)
    (m1,), _ = cost_units([short], "spacemit-x60", None)
    assert m8.cycles > 4 * m1.cycles  # the price follows LMUL; nothing in the unit depends on vl


def test_short_vl_is_what_the_plugin_counted_beyond_the_full_runs() -> None:
    seg = _seg(["vle32.v v8, (a0)", "vfadd.vv v8, v8, v8"], Vtype("E32", "M4"))
    addrs = ((0x100, 0x104), (0x100, 0x104))
    stats = MemoryStats(np.array([0x100], np.uint64), np.array([[10 * 32 + 2 * 5, 0, 0, 0, 0, 0, 0]]), 64)
    vls = _vector_lengths([seg, seg], list(addrs), [True, False], np.array([10, 2]), 256, stats)
    assert vls == [32.0, 5.0]  # 10 full strips of 32 elements, 2 tails of 5


def test_operands_of_loads_stores_branches_and_accumulates() -> None:
    assert _operands("vle32.v v8, (a4)") == ("v8", ["a4"])
    assert _operands("vse32.v v12, (a4)") == (None, ["v12", "a4"])
    assert _operands("vfmacc.vf v12, fa0, v8") == ("v12", ["fa0", "v8", "v12"])  # reads its accumulator
    assert _operands("sd ra, 8(sp)") == (None, ["ra", "sp"])
    assert _operands("bnez a1, .") == (None, ["a1"])


def test_recurrence_is_the_loop_carried_chain() -> None:
    body = ["vle32.v v8, (a0)", "vfmacc.vv v12, v8, v9", "addi a0, a0, 32", "bnez a1, ."]
    assert recurrence(body, [3, 5, 1, 1]) == 5.0  # the accumulator: one FMA latency per iteration
    independent = ["vle32.v v8, (a0)", "vfmul.vv v12, v8, v9", "addi a0, a0, 32", "bnez a1, ."]
    assert recurrence(independent, [3, 5, 1, 1]) == 1.0  # only the pointer increment carries over


SCALAR_WORK = ["fdiv.d fa1, fa2, fa3", "fdiv.d fa4, fa5, fa6", "addi a1, a1, 1", "addi a2, a2, 1"]
VECTOR_WORK = ["vfmacc.vv v8, v16, v24", "vfmacc.vv v9, v17, v25", "vfmacc.vv v10, v18, v26"]


def _straight_line(blocks: list[list[str]]) -> float:
    """Cycles of straight-line code: every block priced after the one before it, as the model does."""
    segs = [_seg(b, Vtype("E32", "M4")) for b in blocks]
    units = [Unit("pass", (seg,), (segs[k - 1],) if k else ()) for k, seg in enumerate(segs)]
    costs, _ = cost_units(units, "spacemit-x60", None)
    return sum(c.cycles for c in costs)


@pytest.mark.parametrize(
    "blocks",
    [
        [SCALAR_WORK, VECTOR_WORK],
        [VECTOR_WORK, SCALAR_WORK, VECTOR_WORK],
        [SCALAR_WORK * 2, VECTOR_WORK, SCALAR_WORK],
    ],
)
def test_added_work_never_lowers_straight_line_cycles(blocks: list[list[str]]) -> None:
    base = _straight_line(blocks)
    for k in range(len(blocks) + 1):  # dead scalar divides, then a duplicated block, at every position
        assert _straight_line([*blocks[:k], SCALAR_WORK, *blocks[k:]]) >= base - 1e-9
        if k < len(blocks):
            assert _straight_line([*blocks[: k + 1], blocks[k], *blocks[k + 1 :]]) >= base - 1e-9


def test_straight_line_cycles_scale_with_the_work() -> None:
    once = _straight_line([SCALAR_WORK, VECTOR_WORK])
    twice = _straight_line([SCALAR_WORK, VECTOR_WORK, SCALAR_WORK, VECTOR_WORK])
    assert twice >= 1.8 * once  # the same work again costs about as much again, never ~0


def test_no_unit_issues_more_than_two_instructions_a_cycle() -> None:
    mixed = Unit("loop", (_seg(VECTOR_WORK + ["addi a1, a1, 1"] * 12 + ["bnez a0, 0x10 <l>"], Vtype("E32", "M1")),))
    (cost,), _ = cost_units([mixed], "spacemit-x60", None)
    assert cost.cycles >= 16 / 2  # 16 instructions, dual issue: the decoupled streams alone would say 6


def _strip_loop(body: list[str], lmul: str, per_strip: bool) -> Unit:
    scalar = ["add a0, a0, a5", "sub a2, a2, a5", "bnez a2, 0x10 <l>"]
    vset = [f"vsetvli a5, a2, e8, {lmul.lower()}, ta, ma"] if per_strip else []
    return Unit("loop", (_seg(vset + body + scalar, Vtype("E8", lmul)),))


@pytest.mark.parametrize("body", [["vse8.v v8, (a0)"], ["vle8.v v8, (a1)", "vse8.v v8, (a0)"]])
def test_a_vsetvli_per_strip_drains_the_vector_unit(body: list[str]) -> None:
    # rvv-bench, BPI-F3: a vsetvli per strip vs hoisted, memset m1 2.21x and memcpy m1 1.26x slower.
    costs, _ = cost_units([_strip_loop(body, "M1", per) for per in (True, False)], "spacemit-x60", None)
    per_strip, hoisted = (c.cycles for c in costs)
    assert per_strip > 1.1 * hoisted
    kept = Unit("loop", (_seg(["vsetvli zero, zero, e8, m1, ta, ma", *body, "bnez a2, 0x10 <l>"], Vtype("E8", "M1")),))
    (same,), _ = cost_units([kept], "spacemit-x60", None)
    assert same.cycles < per_strip  # a vsetvli that keeps vl and vtype is no barrier


def test_a_strip_mining_loop_takes_the_x60s_fewest_cycles_a_strip_and_a_long_strip_hides_it() -> None:
    # rvv-bench on a BPI-F3 at 16 KiB (fit set): memset rvv_m1 (a vsetvli per 32-byte strip) 6.07 cycles a strip,
    # rvv_tail_m1 (hoisted) 2.75: 2.21x; at m8 (19.5 cycles a strip) the two take the same time (1.00x).
    from evaluator.costmodel.model import machines

    x60 = machines()["spacemit-x60"].pricing()
    assert 5.0 <= x60.strip_cycles <= 7.0  # the target's fitted floor (k1-x60.toml strip_vsetvl_cycles)
    store = ["vse8.v v8, (a0)"]
    loops = [_strip_loop(store, lmul, per) for lmul in ("M1", "M8") for per in (True, False)]
    m1, m1_hoisted, m8, m8_hoisted = (c.cycles for c in cost_units(loops, "spacemit-x60", None, pricing=x60)[0])
    assert m1 == pytest.approx(x60.strip_cycles) and m1 / m1_hoisted > 1.8
    assert m8 / m8_hoisted < 1.1  # LLVM's one-cycle drain only: the floor is below a long strip's own time
    (without,), _ = cost_units(loops[:1], "spacemit-x60", None, pricing=replace(x60, strip_cycles=0.0))
    assert without.cycles / m1_hoisted < 1.5  # LLVM's drain alone: memset m1 at 0.66 of the published


def test_dram_time_follows_what_a_stream_reads_and_writes() -> None:
    from evaluator.costmodel.model import dram_cycles, machines

    x60 = machines()["spacemit-x60"]
    mib = float(1 << 20)
    # bytes, l2, dram total, flops, dram written, dram allocated by stores, l2 written, l2 allocated
    rows = np.array(
        [
            [0, 0, mib, 0, mib, mib, 0, 0],  # memset: writes only
            [0, 0, 2 * mib, 0, mib, mib, 0, 0],  # memcpy: reads the source, allocates the destination
            [0, 0, 2 * mib, 0, mib, 0, 0, 0],  # in place: every line read and written back
            [0, 0, mib, 0, 0, 0, 0, 0],  # a read stream
        ]
    )
    memset, memcpy, in_place, read = dram_cycles(x60, rows)
    assert memset == pytest.approx(mib / x60.dram.write)
    assert memcpy == pytest.approx(2 * mib / x60.dram.mixed)
    assert in_place == pytest.approx(2 * mib / x60.dram.in_place)
    assert read == pytest.approx(mib / x60.dram.read)
    # the published BPI-F3 figures at 1 MiB: memset 10.1 GB/s, memcpy 7.4 GB/s moved, in place 2.2 GB/s
    assert memset < memcpy < in_place


def test_a_dram_copy_exposes_part_of_its_core_time_and_other_streams_do_not() -> None:
    from evaluator.costmodel.model import dram_cycles, exposed_copy_cycles, machines

    x60 = machines()["spacemit-x60"]
    assert 0 < x60.dram_copy_exposed < 1
    mib = float(1 << 20)
    rows = np.zeros((4, len(TRAFFIC_FIELDS)))  # columns: bytes, l2, dram total, flops, dram written, dram allocated
    rows[0, [2, 4, 5]] = [2 * mib, mib, mib]  # memcpy: reads the source, allocates the destination
    rows[1, [2, 4, 5]] = [mib, mib, mib]  # memset: writes only
    rows[2, 2] = mib  # a read stream
    rows[3, [2, 4]] = [2 * mib, mib]  # in place
    dram = dram_cycles(x60, rows)
    # memcpy at 1 MiB on a BPI-F3: rvv_m1 (a vsetvli per strip, 8x the loads and stores) 535,594 cycles, rvv_m8
    # 486,736: the same lines moved, 1.10x apart. The model's core cycles for the two loops there are about half
    # and a third of the copy's DRAM time
    core_m1, core_m8 = 0.5 * dram[0], 0.3 * dram[0]

    def cycles(core: float, row: int) -> float:
        c = np.full(4, core)
        return float(max(core, dram[row]) + exposed_copy_cycles(x60, c, dram, rows)[row])

    m1, m8 = cycles(core_m1, 0), cycles(core_m8, 0)
    assert m1 > m8 > dram[0]  # published direction: rvv_m1 slower, both slower than the stream alone
    assert m1 - m8 == pytest.approx(x60.dram_copy_exposed * (core_m1 - core_m8))
    for row in (1, 2, 3):  # only writing (memset), only reading, in place: the roofline, core hidden
        assert cycles(0.5 * dram[row], row) == cycles(0.3 * dram[row], row) == dram[row]
    # never falls when the work grows: more core time, or more DRAM time, adds
    grow = exposed_copy_cycles(x60, np.full(4, 2 * core_m1), dram, rows)[0]
    assert grow >= exposed_copy_cycles(x60, np.full(4, core_m1), dram, rows)[0] > 0


def test_l2_copies_move_faster_than_l2_reads_alone() -> None:
    from evaluator.costmodel.model import l2_cycles, machines

    x60 = machines()["spacemit-x60"]
    kib = 1024.0
    rows = np.array([[0, 2 * kib, 0, 0, 0, 0, kib, kib], [0, kib, 0, 0, 0, 0, 0, 0]])
    copy, read = l2_cycles(x60, rows)
    # rvv-bench on a BPI-F3 in L2: a read stream at 4.9 B/cycle, a copy at 3.9 B/cycle copied (7.8 moved)
    assert kib / read == pytest.approx(4.9, rel=0.01)
    assert kib / copy == pytest.approx(3.9, rel=0.01)


def test_error_bars_come_from_modeled_vs_published_speedups_on_the_test_set() -> None:
    from evaluator.costmodel.calibration import Figure
    from evaluator.costmodel.calibration.fidelity import error_bars

    def fig(kernel: str, label: str, kind: str, n: int, cycles: float, set_: str) -> Figure:
        return Figure("x60", "k1-x60", kernel, label, label, kind, n, n / cycles, set_, {})

    pairs = []
    for k, (scalar, vector, model_ratio) in {"LUT4": (1000, 100, 2.0), "memreverse": (800, 100, 0.8)}.items():
        pairs.append((fig(k, "scalar", "scalar", 1024, scalar, "test"), float(scalar)))
        pairs.append((fig(k, "rvv", "vector", 1024, vector, "test"), vector / model_ratio))
    bars = error_bars(pairs)["targets"]["k1-x60"]
    assert bars["kernels"] == 2
    assert bars["speedup_worst"] == pytest.approx(2.0)  # modeled speedup 2x the published one
    assert bars["speedup_median"] == pytest.approx((2.0 + 1.25) / 2)


def test_a_result_names_the_assumed_figures_it_rests_on() -> None:
    from evaluator.costmodel import confidence

    assert confidence.rests_on("k1-x60", "L2") == ["l2_ways"]  # the L2 bandwidths are fitted, the ways not
    assert confidence.rests_on("k1-x60", "compute") == []
    k3 = confidence.rests_on("k3-a100", "compute")
    assert "dram_gbps" in k3 and "issue" in k3  # a proxy model names every unverified figure


def test_only_strided_or_indexed_stores_with_scattered_elements_are_scattered() -> None:
    assert _scattered_store("vsse8.v v8, (a0), a3", stores=32, scattered=31)  # stride 4: every element apart
    assert not _scattered_store("vsse8.v v8, (a0), t1", stores=32, scattered=1)  # stride -1: contiguous
    assert _scattered_store("vsuxei32.v v16, (a0), v8", stores=8, scattered=8)
    assert not _scattered_store("vse8.v v8, (a0)", stores=32, scattered=32)  # unit stride is never one
    assert not _scattered_store("vlse8.v v8, (a0), a3", stores=0, scattered=32)  # loads are not stores


def test_scattered_store_cycles_follow_where_the_stores_found_their_lines() -> None:
    x60 = costmodel.machines()["spacemit-x60"]
    cost = x60.scattered_store
    assert cost is not None and cost.dram > cost.l2 > 0
    col = {name: i for i, name in enumerate(TRAFFIC_FIELDS)}
    traffic = np.zeros((3, len(TRAFFIC_FIELDS)))
    traffic[:, col["scattered_stores"]] = 2.0
    traffic[1, col["l2_alloc_bytes"]] = 128.0  # both lines allocated from L2
    traffic[2, col["l2_alloc_bytes"]] = traffic[2, col["dram_alloc_bytes"]] = 128.0  # both from DRAM
    got = scattered_store_cycles(x60, traffic).tolist()
    assert got == pytest.approx([0.0, 2 * cost.l2, 2 * cost.dram])  # all in L1: no wait
