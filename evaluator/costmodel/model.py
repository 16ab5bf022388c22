"""Modeled cycles of one kernel call on a SpacemiT X60 core, without a board.

qemu-riscv64 runs the harness and logs every translation block (TB) it executes. The TBs between
`eok_region_begin()` and `eok_region_end()` are grouped into dynamic loops (priced as steady-state cycles
per iteration) and the remaining TBs (priced as the cycles each adds after its dynamic predecessor); every
such unit is simulated by llvm-mca-22 with LLVM's `spacemit-x60` scheduling model, vector and scalar
instructions as two streams (see mca.py). docs/COSTMODEL.md gives the method, limits and accuracy.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict

from core.errors import EokError, InvalidInput
from evaluator.costmodel.blocks import costing_units, executed_blocks
from evaluator.costmodel.elf import Disassembly, ElfSymbols, disassemble, require_objdump
from evaluator.costmodel.loops import Loop, find_loops
from evaluator.costmodel.mca import MODEL_VERSION, CostCache, cost_units, llvm_version, require_mca
from evaluator.costmodel.trace import DEFAULT_MAX_LOG_BYTES, RegionMismatch, RegionTrace, trace_region

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
