"""The pipeline: modeled cycles of one kernel call on a SpacemiT core, without a board.

qemu-riscv64 runs the harness once, logging every translation block (TB) it executes and, through the
memory plugin, every data access into a simulated cache of the target. The TBs between
`eok_region_begin()` and `eok_region_end()` are grouped into dynamic loops (priced as steady-state cycles
per iteration) and the remaining TBs (priced as the cycles each adds after its dynamic predecessor); every
such unit is simulated by llvm-mca-22 with LLVM's `spacemit-x60` scheduling model (mca.py), and then costs
max(core cycles, L2 traffic / L2 bandwidth, DRAM traffic / DRAM bandwidth): a roofline per unit, plus, for
a unit that copies through DRAM, the target's exposed share of the smaller of its core and DRAM times.
docs/COSTMODEL.md gives the method, limits and accuracy.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from pydantic import BaseModel, ConfigDict

from core.errors import InvalidInput
from evaluator.costmodel.blocks import costing_units, executed_blocks
from evaluator.costmodel.elf import Disassembly, ElfSymbols, disassemble, require_objdump
from evaluator.costmodel.loops import Loop, find_loops
from evaluator.costmodel.mca import (
    MODEL_VERSION,
    CostCache,
    Pricing,
    assumed_overrides,
    cost_units,
    llvm_version,
    require_mca,
)
from evaluator.costmodel.memory import (
    CacheGeometry,
    MemoryStats,
    TraceGuard,
    Vouched,
    check_vouched,
    plugin_argv,
    plugin_path,
    read_stats,
)
from evaluator.costmodel.trace import (
    DEFAULT_MAX_LOG_BYTES,
    CandidateFault,
    RegionMismatch,
    RegionTrace,
    trace_region,
)

if TYPE_CHECKING:
    from evaluator.targets import TargetProfile, VectorOverride

BEGIN_MARKER, END_MARKER = "eok_region_begin", "eok_region_end"
BOUNDS = ("compute", "L2", "DRAM")


class ModeledTiming(BaseModel):
    """Cycles the model predicts for the code between the markers, and how it got them."""

    model_config = ConfigDict(frozen=True)

    cycles: float
    instructions: int  # dynamic instructions between the markers
    blocks_executed: int  # dynamic TBs between the markers
    unique_blocks: int  # distinct (TB, vtype, vl class) blocks among them
    model: str  # e.g. "spacemit-x60/llvm-mca-22.1.8/decoupled+mem/v3"
    approximate: bool  # True: stand-in model (K3 cores), or some instructions had no llvm-mca cost
    # Roofline view (all zero when the memory stage was off).
    bound: str = "compute"  # what dominated the cycles: "compute" (core incl. L1 hits), "L2" or "DRAM"
    core_cycles: float = 0.0  # the cycles with every access an L1 hit (the pipeline alone)
    bytes_accessed: float = 0.0  # loads + stores the kernel made
    l2_bytes: float = 0.0  # lines moved between L1 and L2 (fills and write-backs)
    dram_bytes: float = 0.0  # lines moved between L2 and DRAM
    flops: float = 0.0  # floating-point operations (an FMA is 2), vector ones times vl
    peak_flops_per_cycle: float = 0.0  # the target's roofline: compute ceiling...
    peak_l2_bytes_per_cycle: float = 0.0  # ...and the two bandwidth ceilings it was priced with
    peak_dram_bytes_per_cycle: float = 0.0
    # instruction prices the run used that no measurement gives (the target's override cells marked assumed)
    assumed_prices: tuple[str, ...] = ()

    @property
    def bytes_per_cycle(self) -> float:
        return self.bytes_accessed / self.cycles if self.cycles else 0.0

    @property
    def dram_bytes_per_cycle(self) -> float:
        return self.dram_bytes / self.cycles if self.cycles else 0.0

    @property
    def flops_per_cycle(self) -> float:
        return self.flops / self.cycles if self.cycles else 0.0


@dataclass(frozen=True)
class Bandwidth:
    """One memory level's figures for one core, bytes per cycle (evaluator/targets/*.toml, [costmodel])."""

    read: float  # a stream that reads
    write: float  # a stream that only writes
    mixed: float  # all that moves when a stream reads and writes (a copy)
    in_place: float  # lines read and written back in place, both ways counted

    @classmethod
    def of(cls, read: float, write: float | None, mixed: float | None, in_place: float | None) -> Bandwidth:
        return cls(read, write or read, mixed or read, in_place or read)


@dataclass(frozen=True)
class ScatteredStore:
    """Cycles a scattered (strided or indexed) vector store adds when the unit's stores find their lines in
    L2 or in DRAM rather than in L1 (docs/COSTMODEL.md "Scattered stores beyond L1")."""

    l2: float
    dram: float


@dataclass(frozen=True)
class Machine:
    """How one cost-model name is priced: its target's data (evaluator/targets/*.toml, [costmodel])."""

    name: str
    mca_cpu: str
    approximate: bool
    vlen: int
    geometry: CacheGeometry
    peak_flops_per_cycle: float
    l2: Bandwidth
    dram: Bandwidth
    scalar_scale: float = 1.0
    vector_scale: float = 1.0
    ooo_issue: int = 0  # > 0: an out-of-order core of this issue width (loops priced by throughput/recurrence)
    issue: int = 2  # instructions issued per cycle at most (every unit costs at least its count / issue)
    overrides: tuple[VectorOverride, ...] = ()  # measured instruction classes replacing LLVM's price
    scattered_store: ScatteredStore | None = None  # a strided/indexed store's wait beyond L1 (fitted)
    dram_copy_exposed: float = 0.0  # share of min(core, DRAM copy time) a copying unit does not overlap (fitted)
    strip_vsetvl_cycles: float = 0.0  # fewest cycles a strip of a strip-mining loop takes (fitted; 0: none)

    def pricing(self) -> Pricing:
        return Pricing(
            self.scalar_scale, self.vector_scale, self.ooo_issue, self.issue, self.overrides, self.strip_vsetvl_cycles
        )

    @property
    def l2_bytes_per_cycle(self) -> float:  # the roofline ceilings a report quotes: the read figures
        return self.l2.read

    @property
    def dram_bytes_per_cycle(self) -> float:
        return self.dram.read


@cache
def machines() -> dict[str, Machine]:
    """Every cost-model name a target in evaluator/targets/ declares, with its data."""
    from evaluator.targets import list_targets  # evaluator.targets reads TOML only; imported late on purpose

    return {t.cost_model: machine_for(t) for t in list_targets() if t.cost_model and t.costmodel is not None}


def machine_for(target: TargetProfile) -> Machine:
    """How `target` is priced: its own [costmodel] data, whichever file it came from (a target given by
    path, e.g. one written by `eok calibrate`, is priced with its figures, not those of the built-in
    target with the same cost_model name)."""
    c = target.costmodel
    if not target.cost_model or c is None:
        raise InvalidInput(f"target {target.key!r} has no cost model", "give it cost_model and a [costmodel] table")
    geometry = CacheGeometry(target.l1d_kb * 1024, c.l1d_ways, target.l2_kb * 1024, c.l2_ways, target.cache_line)
    ghz = target.clock_ghz
    return Machine(
        target.cost_model,
        c.mca_cpu,
        c.approximate,
        target.vlen,
        geometry,
        c.peak_flops_per_cycle,
        Bandwidth.of(
            c.l2_bytes_per_cycle, c.l2_write_bytes_per_cycle, c.l2_mixed_bytes_per_cycle, c.l2_rmw_bytes_per_cycle
        ),
        Bandwidth.of(*(g / ghz if g else None for g in (c.dram_gbps, c.dram_write_gbps, None, c.dram_rmw_gbps))),
        c.scalar_scale,
        c.vector_scale,
        target.issue if target.out_of_order else 0,
        target.issue,
        tuple(c.vector_overrides),
        ScatteredStore(c.scattered_store_l2_cycles, c.scattered_store_dram_cycles)
        if c.scattered_store_dram_cycles or c.scattered_store_l2_cycles
        else None,
        c.dram_copy_exposed,
        c.strip_vsetvl_cycles,
    )


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
    cycles_by_bound: dict[str, float] = field(default_factory=dict)


def model_kernel_cycles(
    binary: Path,
    qemu_argv: list[str],
    cache_dir: Path,
    mcpu: str | Machine = "spacemit-x60",
    timeout_s: float = 60.0,
    regions: int | None = None,
    cwd: Path | None = None,
    writable: Path | None = None,
) -> ModeledTiming:
    """Modeled cycles of the kernel calls between the markers of `binary` (summed over all regions).

    `qemu_argv` is the complete qemu-riscv64 command that runs the harness; it runs in `cwd` (default:
    `binary`'s directory) with TB logging and the memory plugin added. Unit costs are cached in `cache_dir`
    (one SQLite file). With `regions`, a log with any other number of begin/end pairs raises RegionMismatch.
    `writable` is the one folder the guest may still create files in once the plugin restricts it.
    """
    return model_kernel_breakdown(
        binary, qemu_argv, cache_dir, mcpu, timeout_s, regions=regions, cwd=cwd, writable=writable
    ).timing


def model_kernel_breakdown(
    binary: Path,
    qemu_argv: list[str],
    cache_dir: Path | None,
    mcpu: str | Machine = "spacemit-x60",
    timeout_s: float = 60.0,
    *,
    decoupled: bool = True,
    memory: bool = True,
    max_log_bytes: int = DEFAULT_MAX_LOG_BYTES,
    regions: int | None = None,
    cwd: Path | None = None,
    writable: Path | None = None,
) -> ModelBreakdown:
    """`model_kernel_cycles` with its internals.

    `decoupled=False` prices with plain in-order llvm-mca; `memory=False` leaves the memory stage out (every
    access an L1 hit, every vector op at its full VLMAX: the model before issue 11).
    """
    target = _target(mcpu)
    require_mca()
    binary = Path(binary)
    t0 = time.perf_counter()
    machine = target if memory else None
    trace, dis, mem = trace_kernel(
        binary, qemu_argv, timeout_s, max_log_bytes, machine, cache_dir, cwd=cwd, writable=writable
    )
    if regions is not None and trace.regions != regions:
        raise RegionMismatch(f"the modeled run has {trace.regions} regions for {regions} calls")
    t1 = time.perf_counter()
    blocks = executed_blocks(trace, dis, target.vlen, mem)
    loops = find_loops(blocks.ids)
    units, weights, traffic = costing_units(blocks.segments, blocks.ids, loops, blocks.traffic)
    cache = CostCache(cache_dir) if cache_dir is not None else None
    try:
        costs, simulated = cost_units(units, target.mca_cpu, cache, decoupled, pricing=target.pricing())
    finally:
        if cache:
            cache.close()
    w = np.array(weights)
    pipeline = np.array([c.cycles for c in costs])
    # A scattered store's lines beyond L1 hold the store pipe: its cycles add to the pipeline's.
    core = pipeline + scattered_store_cycles(target, traffic)
    # Roofline per unit: the pipeline (L1 hits included) against the bandwidth of each level below it.
    levels = np.stack([core, l2_cycles(target, traffic), dram_cycles(target, traffic)], axis=1)
    levels = levels.reshape(len(units), 3)
    per_unit = levels.max(axis=1) if len(units) else np.zeros(0)
    # A copy through DRAM overlaps the core's work only partly: the exposed share of the smaller time adds.
    per_unit = per_unit + exposed_copy_cycles(target, core, levels[:, 2], traffic)
    which = levels.argmax(axis=1) if len(units) else np.zeros(0, dtype=np.int64)
    by_bound = {b: float((w * per_unit)[which == i].sum()) for i, b in enumerate(BOUNDS)}
    is_loop = np.array([u.kind == "loop" for u in units], dtype=bool)
    total = float((w * per_unit).sum())
    totals = (w[:, None] * traffic).sum(axis=0) if len(units) else np.zeros(traffic.shape[1])
    mode = ("decoupled" if decoupled else "in-order") + ("+mem" if memory else "")
    name = target.name if target.name == target.mca_cpu else f"{target.name}~{target.mca_cpu}"
    timing = ModeledTiming(
        cycles=total,
        instructions=blocks.instructions,
        blocks_executed=len(blocks.ids),
        unique_blocks=len(blocks.segments),
        model=f"{name}/llvm-mca-{llvm_version()}/{mode}/v{MODEL_VERSION}",
        approximate=target.approximate or any(c.unsupported for c in costs),
        bound=max(by_bound, key=lambda b: by_bound[b]) if total > 0 else "compute",
        core_cycles=float((w * pipeline).sum()),
        bytes_accessed=float(totals[0]),
        l2_bytes=float(totals[1]),
        dram_bytes=float(totals[2]),
        flops=float(totals[3]),
        peak_flops_per_cycle=target.peak_flops_per_cycle,
        peak_l2_bytes_per_cycle=target.l2_bytes_per_cycle,
        peak_dram_bytes_per_cycle=target.dram_bytes_per_cycle,
        assumed_prices=tuple(assumed_overrides(blocks.segments, target.overrides) + one_line_assumed(target, traffic)),
    )
    t2 = time.perf_counter()
    seconds = {"qemu": trace.qemu_seconds, "trace": t1 - t0 - trace.qemu_seconds, "mca": t2 - t1, "total": t2 - t0}
    loop_cycles = float((w * per_unit)[is_loop].sum())
    return ModelBreakdown(
        timing, loops, loop_cycles, total - loop_cycles, simulated, len(units), trace.log_bytes, seconds, by_bound
    )


def level_cycles(bandwidth: Bandwidth, moved: np.ndarray, written: np.ndarray, allocated: np.ndarray) -> np.ndarray:
    """Time each unit's traffic with one memory level takes (docs/COSTMODEL.md "Memory levels"), from what
    it moves (fills it read and lines it wrote back), what it wrote back, and the lines its stores
    allocated without reading them:
    - a unit that only writes (reads under 5 % of its writes) runs at the level's write figure;
    - lines read and written back in place (written, not allocated by a store) move at the in-place figure;
    - the rest moves at the mixed figure, and its reads no faster than the read figure."""
    read = moved - written
    rest, in_place = _mixed_parts(bandwidth, moved, written, allocated)
    return np.where(read < 0.05 * written, written / bandwidth.write, rest + in_place)


def _mixed_parts(
    bandwidth: Bandwidth, moved: np.ndarray, written: np.ndarray, allocated: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """A unit's time with a level when it both reads and writes: (the part at the mixed and read figures, the
    part of lines read and written back in place)."""
    read = moved - written
    in_place = np.clip(np.minimum(read, written - allocated), 0.0, None)
    rest = np.maximum((moved - 2 * in_place) / bandwidth.mixed, (read - in_place) / bandwidth.read)
    return rest, 2 * in_place / bandwidth.in_place


def copy_share(bandwidth: Bandwidth, moved: np.ndarray, written: np.ndarray, allocated: np.ndarray) -> np.ndarray:
    """The share of each unit's time at one memory level (level_cycles) that copies: what it moves at the
    mixed figure, when it both reads and writes (each at least 5 % of the other), out of its whole time at
    that level. 0 for a unit that only writes, only reads, or moves nothing; lines read and written back in
    place are not a copy's."""
    read = moved - written
    rest, in_place = _mixed_parts(bandwidth, moved, written, allocated)
    total = rest + in_place
    both = (read >= 0.05 * written) & (written >= 0.05 * read) & (total > 0)
    return np.where(both, np.divide(rest, total, out=np.zeros(len(moved)), where=total > 0), 0.0)


def exposed_copy_cycles(target: Machine, core: np.ndarray, dram: np.ndarray, traffic: np.ndarray) -> np.ndarray:
    """What a unit that copies through DRAM adds to its roofline: the target's exposed share of the smaller
    of its core and DRAM times, weighted by the copy's share of its DRAM time (docs/COSTMODEL.md "DRAM copies:
    core time overlaps only partly"). Never negative, and it never falls when either time grows."""
    if not target.dram_copy_exposed or not len(traffic):
        return np.zeros(len(traffic))
    share = copy_share(target.dram, traffic[:, 2], traffic[:, 4], traffic[:, 5])
    return target.dram_copy_exposed * share * np.minimum(core, dram)


def scattered_store_cycles(target: Machine, traffic: np.ndarray) -> np.ndarray:
    """What each unit's scattered vector stores add: their count times the target's cycles per instruction,
    by where the unit's stores found their lines (the share of store-allocated lines that came from DRAM at
    the DRAM figure, the rest at the L2 figure; nothing when every store hit L1). Only executions whose
    elements span more than one line count: the fitted wait is flat from two lines to four, and one whose
    elements share a line is assumed to wait no more than a unit-stride store of that line."""
    cost = target.scattered_store
    if cost is None or not len(traffic):
        return np.zeros(len(traffic))
    allocated, from_dram = traffic[:, 7], traffic[:, 5]
    dram_share = np.divide(from_dram, allocated, out=np.zeros(len(traffic)), where=allocated > 0).clip(0.0, 1.0)
    per_line = np.where(allocated > 0, dram_share * cost.dram + (1.0 - dram_share) * cost.l2, 0.0)
    return traffic[:, 8] * per_line


ONE_LINE_ASSUMED = "a one-line scattered store's wait beyond L1 (0 cycles)"


def one_line_assumed(target: Machine, traffic: np.ndarray) -> list[str]:
    """The assumption a run rests on when a scattered store whose elements all fell in one line found its
    lines beyond L1: no published figure prices that wait, and the model adds none (docs/COSTMODEL.md
    "Scattered stores beyond L1")."""
    if target.scattered_store is None or not len(traffic):
        return []
    return [ONE_LINE_ASSUMED] if bool(np.any((traffic[:, 9] > 0) & (traffic[:, 7] > 0))) else []


def dram_cycles(target: Machine, traffic: np.ndarray) -> np.ndarray:
    return level_cycles(target.dram, traffic[:, 2], traffic[:, 4], traffic[:, 5])


def l2_cycles(target: Machine, traffic: np.ndarray) -> np.ndarray:
    return level_cycles(target.l2, traffic[:, 1], traffic[:, 6], traffic[:, 7])


def _target(mcpu: str | Machine) -> Machine:
    if isinstance(mcpu, Machine):  # a target's own data (machine_for), e.g. a calibrated target file
        return mcpu
    known = machines()
    if mcpu not in known:
        raise InvalidInput(f"mcpu {mcpu!r} has no cost model", hint=f"use one of: {', '.join(known)}")
    return known[mcpu]


def trace_kernel(
    binary: Path,
    qemu_argv: list[str],
    timeout_s: float,
    max_log_bytes: int,
    machine: Machine | None = None,
    plugin_dir: Path | None = None,
    cwd: Path | None = None,
    writable: Path | None = None,
) -> tuple[RegionTrace, Disassembly, MemoryStats | None]:
    """Run the harness under logging qemu (with the memory plugin for `machine`, if given); return the
    region's TB trace, the text of what it executed and its per-instruction memory counts.

    With the plugin, the run is vouched for (memory.TraceGuard): the log's region must be exactly the TB
    executions the plugin counted and signed, from the binary's own code, or Unvouched is raised.
    """
    symbols = ElfSymbols(binary)
    markers = symbols.address(BEGIN_MARKER), symbols.address(END_MARKER)
    require_objdump()
    stats: list[MemoryStats] = []
    vouched: list[Vouched | None] = []
    plugin = None
    run_dir = cwd or binary.parent
    guard = TraceGuard.new(binary, run_dir, writable) if machine is not None else None
    if machine is not None:
        so, geometry = plugin_path(plugin_dir), machine.geometry

        def plugin(workdir: Path) -> list[str]:
            return plugin_argv(so, markers, workdir / "memsim.txt", geometry, guard)

        def collect(workdir: Path) -> None:
            table, signed = read_stats(workdir / "memsim.txt", geometry.line, guard)
            stats.append(table)
            vouched.append(signed)

    try:
        trace = trace_region(
            qemu_argv,
            run_dir,
            markers,
            timeout_s,
            max_log_bytes,
            plugin,
            collect if plugin else None,
            pass_fds=(guard.fd,) if guard else (),
        )
    finally:
        if guard is not None:
            guard.close()
    if guard is not None and vouched and vouched[0] is not None:
        check_vouched(vouched[0], trace.keys >> 16, guard.key)
    pcs = {int(k) >> 16 for k in np.unique(trace.keys).tolist()}
    missing = sorted(pc for pc in pcs if pc not in trace.tb_addrs)
    if missing:  # its translation is in the log unless the guest closed or moved qemu's log descriptor
        raise CandidateFault(
            f"qemu executed a TB at {missing[0]:#x} but never printed its translation",
            hint="the qemu log is incomplete; check that the disk is not full and rerun",
        )
    dis = disassemble(symbols, sorted({a for pc in pcs for a in trace.tb_addrs[pc]}))
    return trace, dis, stats[0] if stats else None
