"""Where `eok calibrate` gets its cycles: a board over SSH, or the cost model itself (docs/COSTMODEL.md,
"eok calibrate").

    SshBoard(runner, profile, cache).measure(pair)   the board's median cycles of one call (the driver built
                                                     with -DEOK_TIMED: rdcycle around the call, R repeats)
    Tracer(cache).cycles(pair, machine)              the model's cycles of the same call, from one traced run
                                                     per pair, re-priced for any figures of the target
    ModeledBoard(tracer, machine)                    a stand-in board whose cycles are the model's under a
                                                     given machine (the tests' board with known figures)

The Tracer splits what a modeled run does (model.model_kernel_breakdown) in two: the qemu trace, the cache
simulation and the units, which depend only on the binary, the size and the cache geometry, run once; the
pricing (llvm-mca per unit, cached, then the roofline) runs again for every set of figures the fit tries.
test_calibrate checks that both give the model's own cycles.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from core.errors import EokError
from evaluator.costmodel.blocks import costing_units, executed_blocks
from evaluator.costmodel.calibration.fidelity import QEMU, build
from evaluator.costmodel.loops import find_loops
from evaluator.costmodel.mca import CostCache, Unit, cost_units
from evaluator.costmodel.model import Machine, dram_cycles, l2_cycles, trace_kernel
from evaluator.costmodel.trace import DEFAULT_MAX_LOG_BYTES
from evaluator.targets import TargetProfile

TRACE_TIMEOUT_S = 1800.0
BOARD_WALL_S = 300.0
_RESULT_RE = re.compile(r"^ok cycles=(-?\d+) ns=(\d+)$", re.MULTILINE)


@dataclass(frozen=True)
class Pair:
    """One calibration kernel at one size: what is timed on the board and modeled."""

    kernel: str
    impl: str
    n: int  # the benchmark's size argument (bytes, or 32-bit words for byteswap32)
    level: str  # where its working set sits on the target: L1, L2 or DRAM
    isolates: str | None = None  # the figure this pair pins down first (see fit.py), None: checked only

    @property
    def key(self) -> str:
        return f"{self.kernel}/{self.impl}@{self.n}"

    @property
    def label(self) -> str:
        return f"{self.kernel}/{self.impl}@{human_size(self.n)}"


def human_size(n: int) -> str:
    for unit, size in (("Mi", 1 << 20), ("Ki", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size}{unit}"
    return str(n)


class Board(Protocol):
    where: str  # what the cycles come from, for the progress lines and the file's annotations

    def measure(self, pair: Pair) -> float:
        """Cycles of one call of `pair` (the median of several)."""
        ...


class SshBoard:
    """A board reached by the ssh runner: the timed driver runs pinned, `repeats` calls on fresh inputs."""

    def __init__(self, runner, profile: TargetProfile, cache: Path, repeats: int = 7, clock_ghz: float = 0.0):
        self.runner, self.profile, self.cache, self.repeats = runner, profile, cache, repeats
        self.clock_ghz = clock_ghz or profile.clock_ghz  # turns ns into cycles when the board forbids rdcycle
        self.where = runner.host
        self.used_clock = False

    def measure(self, pair: Pair) -> float:
        from evaluator.sandbox import Limits
        from evaluator.toolchain import Build

        binary = build(pair.kernel, pair.impl, self.cache, defines=("EOK_TIMED",))
        job = Build(binary=binary, workdir=binary.parent, kind="board", compile_s=0.0)
        limits = Limits(wall_s=BOARD_WALL_S, memory_mb=4096, isolate=False)
        try:
            out = self.runner.execute(job, [str(pair.n), str(self.repeats)], self.profile, limits)
        finally:
            self.runner.release(job)
        found = _RESULT_RE.search(out.stdout)
        if out.returncode != 0 or found is None:
            what = "timed out" if out.timed_out else f"exit {out.returncode}: {(out.stdout + out.stderr).strip()[:200]}"
            raise EokError(f"{pair.label} failed on the board {self.where} ({what})",
                           "check that the board is a RISC-V core with RVV 1.0 (VLEN as the target says)")  # fmt: skip
        cycles, ns = int(found.group(1)), int(found.group(2))
        if cycles >= 0:
            return float(cycles)
        self.used_clock = True  # rdcycle trapped: clock_gettime at the target's clock
        return ns * self.clock_ghz


@dataclass
class Snapshot:
    """A traced run of one pair: its units with their weights and traffic, ready to be priced."""

    units: list[Unit]
    weights: np.ndarray
    traffic: np.ndarray


class Tracer:
    """The model's cycles of a pair under any Machine of the same cache geometry, tracing each pair once."""

    def __init__(self, cache: Path, profile: TargetProfile) -> None:
        self.cache, self.profile = cache.resolve(), profile  # qemu runs in the binary's folder
        self._snapshots: dict[tuple, Snapshot] = {}
        self._cores: dict[tuple, np.ndarray] = {}

    def binary(self, pair: Pair) -> Path:
        return build(pair.kernel, pair.impl, self.cache)

    def argv(self, pair: Pair) -> list[str]:
        return [QEMU, "-cpu", self.profile.qemu_cpu, str(self.binary(pair)), str(pair.n)]

    def snapshot(self, pair: Pair, machine: Machine) -> Snapshot:
        key = (pair.key, machine.geometry, machine.vlen)
        if key not in self._snapshots:
            binary = self.binary(pair)
            trace, dis, mem = trace_kernel(binary, self.argv(pair), TRACE_TIMEOUT_S, DEFAULT_MAX_LOG_BYTES, machine,
                                           self.cache / "model")  # fmt: skip
            blocks = executed_blocks(trace, dis, machine.vlen, mem)
            units, weights, traffic = costing_units(blocks.segments, blocks.ids, find_loops(blocks.ids), blocks.traffic)
            self._snapshots[key] = Snapshot(units, np.array(weights, dtype=float), traffic)
        return self._snapshots[key]

    def core(self, pair: Pair, machine: Machine) -> np.ndarray:
        """Core cycles per unit (llvm-mca under the machine's pricing; cached on disk and here)."""
        pricing = machine.pricing()
        key = (pair.key, machine.geometry, machine.vlen, machine.mca_cpu,
               json.dumps([pricing.scalar_scale, pricing.vector_scale, pricing.key()], sort_keys=True))  # fmt: skip
        if key not in self._cores:
            snap = self.snapshot(pair, machine)
            cache = CostCache(self.cache / "model")
            try:
                costs, _ = cost_units(snap.units, machine.mca_cpu, cache, True, pricing=pricing)
            finally:
                cache.close()
            self._cores[key] = np.array([c.cycles for c in costs], dtype=float)
        return self._cores[key]

    def cycles(self, pair: Pair, machine: Machine) -> float:
        """The roofline of model.model_kernel_breakdown: per unit the max of core, L2 and DRAM time."""
        snap = self.snapshot(pair, machine)
        if not snap.units:
            return 0.0
        core = self.core(pair, machine)
        levels = np.stack([core, l2_cycles(machine, snap.traffic), dram_cycles(machine, snap.traffic)])
        return float((snap.weights * levels.max(axis=0)).sum())


class ModeledBoard:
    """A stand-in board: its cycles are the model's under `machine` (known figures), for the tests."""

    def __init__(self, tracer: Tracer, machine: Machine, where: str = "model") -> None:
        self.tracer, self.machine, self.where = tracer, machine, where

    def measure(self, pair: Pair) -> float:
        return self.tracer.cycles(pair, self.machine)
