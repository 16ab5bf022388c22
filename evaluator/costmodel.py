"""Modeled cycles of one kernel call on a SpacemiT X60 core, without a board.

qemu-riscv64 runs the harness and logs every translation block (TB) it executes. The TBs between
`eok_region_begin()` and `eok_region_end()` are grouped into dynamic loops (priced as steady-state cycles
per iteration) and the remaining TBs (priced as the cycles each adds after its dynamic predecessor); every
such unit is simulated by llvm-mca-22 with LLVM's `spacemit-x60` scheduling model, vector and scalar
instructions as two streams (see costmodel_mca). docs/COSTMODEL.md gives the method, limits and accuracy.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict

from core.errors import EokError, InvalidInput
from evaluator.costmodel_elf import Disassembly, ElfSymbols, disassemble, require_objdump, tb_insns
from evaluator.costmodel_loops import Loop, find_loops, loop_mask
from evaluator.costmodel_mca import MODEL_VERSION, CostCache, Segment, Unit, cost_units, llvm_version, require_mca
from evaluator.costmodel_trace import (
    DEFAULT_MAX_LOG_BYTES,
    RegionMismatch,
    RegionTrace,
    Vtype,
    decode_vtype,
    trace_region,
)

BEGIN_MARKER, END_MARKER = "eok_region_begin", "eok_region_end"


class ModeledTiming(BaseModel):
    """Cycles the model predicts for the code between the markers, and how it got them."""

    model_config = ConfigDict(frozen=True)

    cycles: float
    instructions: int  # dynamic instructions between the markers
    blocks_executed: int  # dynamic TBs between the markers
    unique_blocks: int  # distinct (TB, vtype) pairs among them
    model: str  # e.g. "spacemit-x60/llvm-mca-22.1.8/decoupled/v1"
    approximate: bool  # True: stand-in model (K3 cores), or some instructions had no llvm-mca cost


@dataclass(frozen=True)
class TargetModel:
    """How one -mcpu name is priced: the llvm-mca cpu used and the documented correction, if any."""

    mca_cpu: str
    approximate: bool
    scalar_scale: float = 1.0  # multiplies scalar-stream cycles (a faster scalar core than the X60)


# LLVM 22.1.8 knows neither K3 cpu, so both are approximations built on the X60 model; the factors and
# their sources are in docs/COSTMODEL.md ("K3 targets").
TARGETS: dict[str, TargetModel] = {
    "spacemit-x60": TargetModel("spacemit-x60", approximate=False),
    # Same VLEN 256 / DLEN 128 vector unit as X60 (LLVM TuneDLenFactor2); scalar side from the vendor's
    # SPECint2006 per GHz: X60 > 4.0, X100 7.5, so scalar cycles x 4.0/7.5.
    "spacemit-x100": TargetModel("spacemit-x60", approximate=True, scalar_scale=4.0 / 7.5),
    # LLVM 23 defines spacemit-a100 with the X60 scheduling model unchanged; VLEN 1024 comes from qemu.
    "spacemit-a100": TargetModel("spacemit-x60", approximate=True),
}


@dataclass
class ModelBreakdown:
    """Internals of one modeled run, for the benchmark script and the tests."""

    timing: ModeledTiming
    loops: list[Loop]
    loop_cycles: float
    other_cycles: float
    units_simulated: int  # units llvm-mca ran this time (the rest came from the cache)
    units_total: int
    log_bytes: int
    seconds: dict[str, float] = field(default_factory=dict)


def model_kernel_cycles(
    binary: Path,
    qemu_argv: list[str],
    cache_dir: Path,
    mcpu: str = "spacemit-x60",
    timeout_s: float = 60.0,
    regions: int | None = None,
) -> ModeledTiming:
    """Modeled cycles of the kernel calls between the markers of `binary` (summed over all regions).

    `qemu_argv` is the complete qemu-riscv64 command that runs the harness; it runs in `binary`'s directory
    with TB logging added. Unit costs are cached in `cache_dir` (one SQLite file). With `regions`, a log
    with any other number of begin/end pairs raises RegionMismatch.
    """
    return model_kernel_breakdown(binary, qemu_argv, cache_dir, mcpu, timeout_s, regions=regions).timing


def model_kernel_breakdown(
    binary: Path,
    qemu_argv: list[str],
    cache_dir: Path | None,
    mcpu: str = "spacemit-x60",
    timeout_s: float = 60.0,
    *,
    decoupled: bool = True,
    max_log_bytes: int = DEFAULT_MAX_LOG_BYTES,
    regions: int | None = None,
) -> ModelBreakdown:
    """`model_kernel_cycles` with its internals; `decoupled=False` prices with plain in-order llvm-mca."""
    target = _target(mcpu)
    require_mca()
    binary = Path(binary)
    t0 = time.perf_counter()
    trace, dis = trace_kernel(binary, qemu_argv, timeout_s, max_log_bytes)
    if regions is not None and trace.regions != regions:
        raise RegionMismatch(f"the modeled run has {trace.regions} regions for {regions} calls")
    t1 = time.perf_counter()
    blocks, ids, instructions = executed_blocks(trace, dis)
    loops = find_loops(ids)
    units, weights = costing_units(blocks, ids, loops)
    cache = CostCache(cache_dir) if cache_dir is not None else None
    try:
        costs, simulated = cost_units(units, target.mca_cpu, cache, decoupled, target.scalar_scale)
    finally:
        if cache:
            cache.close()
    loop_cycles = sum(w * c.cycles for w, c, u in zip(weights, costs, units, strict=True) if u.kind == "loop")
    other_cycles = sum(w * c.cycles for w, c, u in zip(weights, costs, units, strict=True) if u.kind != "loop")
    mode = "decoupled" if decoupled else "in-order"
    name = mcpu if mcpu == target.mca_cpu else f"{mcpu}~{target.mca_cpu}"
    timing = ModeledTiming(
        cycles=float(loop_cycles + other_cycles),
        instructions=instructions,
        blocks_executed=len(ids),
        unique_blocks=len(blocks),
        model=f"{name}/llvm-mca-{llvm_version()}/{mode}/v{MODEL_VERSION}",
        approximate=target.approximate or any(c.unsupported for c in costs),
    )
    t2 = time.perf_counter()
    seconds = {"qemu": trace.qemu_seconds, "trace": t1 - t0 - trace.qemu_seconds, "mca": t2 - t1, "total": t2 - t0}
    return ModelBreakdown(timing, loops, loop_cycles, other_cycles, simulated, len(units), trace.log_bytes, seconds)


def _target(mcpu: str) -> TargetModel:
    if mcpu not in TARGETS:
        raise InvalidInput(f"mcpu {mcpu!r} has no cost model", hint=f"use one of: {', '.join(TARGETS)}")
    return TARGETS[mcpu]


def trace_kernel(
    binary: Path, qemu_argv: list[str], timeout_s: float, max_log_bytes: int
) -> tuple[RegionTrace, Disassembly]:
    """Run the harness under logging qemu; return the region's TB trace and the text of what it executed."""
    symbols = ElfSymbols(binary)
    markers = symbols.address(BEGIN_MARKER), symbols.address(END_MARKER)
    require_objdump()
    trace = trace_region(qemu_argv, binary.parent, markers, timeout_s, max_log_bytes)
    pcs = {int(k) >> 16 for k in np.unique(trace.keys).tolist()}
    missing = sorted(pc for pc in pcs if pc not in trace.tb_addrs)
    if missing:
        raise EokError(
            f"qemu executed a TB at {missing[0]:#x} but never printed its translation",
            hint="the qemu log is incomplete; check that the disk is not full and rerun",
        )
    return trace, disassemble(symbols, sorted({a for pc in pcs for a in trace.tb_addrs[pc]}))


# ------------------------------------------------------------------------------------------- blocks


def executed_blocks(trace: RegionTrace, dis: Disassembly) -> tuple[list[Segment], np.ndarray, int]:
    """Distinct (TB, vtype) blocks, the block id of every executed TB, and the dynamic instruction count."""
    uniq, inverse = np.unique(trace.keys, return_inverse=True)
    inverse = inverse.ravel()
    segments: list[Segment] = []
    for key in uniq.tolist():
        pc, flags = key >> 16, key & 0xFFFF
        insns = tb_insns(dis, trace.tb_addrs[pc])
        vtype = decode_vtype(flags) if any(i.is_vector for i in insns) else None
        segments.append(Segment(insns, vtype))
    check_vtype_layout(uniq, inverse, segments)
    index: dict[Segment, int] = {}  # a scalar TB is one block whatever vtype it ran under
    remap = np.array([index.setdefault(s, len(index)) for s in segments], dtype=np.int64)
    ids = remap[inverse]
    lengths = np.array([len(b.insns) for b in index], dtype=np.int64)
    return list(index), ids, int(lengths[ids].sum())


_VSET_IMM_RE = re.compile(r"^vseti?vli\s+\w+,\s*\w+,\s*(e\d+),\s*(mf?\d)")


def check_vtype_layout(uniq: np.ndarray, inverse: np.ndarray, segments: list[Segment]) -> None:
    """A TB right after `vsetvli ..., eSEW, mLMUL` must decode to that vtype, else qemu's flags moved."""
    ends_vset = np.array([bool(s.insns) and s.insns[-1].text.startswith("vset") for s in segments])
    after = np.flatnonzero(ends_vset[inverse[:-1]]) + 1
    for a, b in set(zip(inverse[after - 1].tolist(), inverse[after].tolist(), strict=True)):
        match = _VSET_IMM_RE.match(segments[a].insns[-1].text)
        got = decode_vtype(int(uniq[b]) & 0xFFFF)
        if match is None or got is None:
            continue  # register-form vsetvl or a vill result: nothing to compare with
        want = Vtype(sew=match.group(1).upper(), lmul=match.group(2).upper())
        if got != want:
            raise EokError(
                f"qemu TB flags after {segments[a].insns[-1].text!r} decode to {got.asm}, not {want.asm}",
                hint="this qemu-riscv64 lays out TB flags unlike qemu 7.2; use Debian 12's qemu-user 7.2",
            )


# -------------------------------------------------------------------------------------------- units


def costing_units(blocks: list[Segment], ids: np.ndarray, loops: list[Loop]) -> tuple[list[Unit], list[float]]:
    """Units and their weights: each loop body x its iterations, every other TB x (predecessor, TB) count."""
    loop_weight: Counter[tuple[int, ...]] = Counter()
    for lp in loops:
        loop_weight[lp.body] += lp.iterations
    units = [Unit("loop", tuple(blocks[i] for i in body)) for body in loop_weight]
    weights = [float(w) for w in loop_weight.values()]
    rest = np.flatnonzero(~loop_mask(len(ids), loops))
    if len(rest):
        prev = np.where(rest > 0, ids[np.maximum(rest - 1, 0)], -1)
        pairs, counts = np.unique(np.stack([prev, ids[rest]], axis=1), axis=0, return_counts=True)
        for (p, b), count in zip(pairs.tolist(), counts.tolist(), strict=True):
            units.append(Unit("pass", (blocks[b],), (blocks[p],) if p >= 0 else ()))
            weights.append(float(count))
    return units, weights
