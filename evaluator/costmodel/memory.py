"""Stage 1b: the region's memory traffic, from its real access stream, per guest instruction.

qemu-riscv64 7.2 loads memsim.c (built here once per source version into a shared object) as a TCG plugin
in the same run that logs the TBs. Every data access of the run goes through a simulated L1D/L2 of the
target (write-back, write-allocate, LRU, 64 B lines); for each instruction of the region the plugin counts
its accesses (one per vector element: that is how qemu 7.2 performs RVV loads and stores), the lines it
brought into L1 and from DRAM, and the dirty lines its misses evicted. docs/COSTMODEL.md "Memory".
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from core.errors import EokError, Unavailable
from core.private_dir import private_build_dir

SOURCE = Path(__file__).with_name("memsim.c")
HOST_CC = "clang-22"  # already required for the harness builds; builds the host plugin too
STAT_FIELDS = ("accesses", "bytes", "stores", "l1_fills", "l2_fills", "l1_writebacks", "l2_writebacks")


@dataclass(frozen=True)
class CacheGeometry:
    l1_bytes: int
    l1_ways: int
    l2_bytes: int
    l2_ways: int
    line: int = 64


@dataclass
class MemoryStats:
    """Per-instruction counts inside the region: `pcs` sorted, `counts[i]` = STAT_FIELDS of pcs[i]."""

    pcs: np.ndarray  # uint64
    counts: np.ndarray  # int64, shape (len(pcs), len(STAT_FIELDS))
    line: int

    def of(self, pc: int) -> np.ndarray | None:
        i = int(np.searchsorted(self.pcs, pc))
        return self.counts[i] if i < len(self.pcs) and int(self.pcs[i]) == pc else None


def plugin_path(build_dir: Path | None) -> Path:
    """The plugin shared object, built on first use (keyed by the source's hash)."""
    source = SOURCE.read_bytes()
    digest = hashlib.sha256(source).hexdigest()[:16]
    folder = build_dir if build_dir is not None else private_build_dir("eok-memsim")
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    target = folder / f"memsim-{digest}.so"
    if target.exists():
        return target
    if shutil.which(HOST_CC) is None:
        raise Unavailable(f"{HOST_CC} not found (builds the memory plugin)", hint="apt-get install clang-22")
    # One temporary name per thread: two evaluations of one process may build it at the same time.
    tmp = folder / f".memsim-{digest}.{os.getpid()}.{threading.get_ident()}.so"
    proc = subprocess.run(
        [HOST_CC, "-O2", "-shared", "-fPIC", "-o", str(tmp), str(SOURCE)], capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise EokError(
            f"could not build the cost model's memory plugin: {proc.stderr.strip()[:300]}",
            hint="the host needs libc headers (apt-get install libc6-dev) next to clang-22",
        )
    os.replace(tmp, target)
    return target


def plugin_argv(so: Path, markers: tuple[int, int], out: Path, geometry: CacheGeometry) -> list[str]:
    """qemu arguments that load the plugin for one run."""
    g = geometry
    spec = [f"{so}", f"begin={markers[0]:#x}", f"end={markers[1]:#x}", f"out={out}"]
    spec += [f"l1={g.l1_bytes}", f"l1ways={g.l1_ways}", f"l2={g.l2_bytes}", f"l2ways={g.l2_ways}", f"line={g.line}"]
    return ["-plugin", ",".join(spec)]


def read_stats(out: Path, line: int) -> MemoryStats:
    """Parse the plugin's table. It is written at every end marker, so a missing one means the plugin could
    not run or write (a sandbox hiding the .so or the work folder would otherwise silently drop memory)."""
    try:
        rows = [ln.split() for ln in out.read_text().splitlines() if ln and not ln.startswith("#")]
    except FileNotFoundError:
        raise EokError(
            f"the cost model's memory plugin wrote no table ({out.name})",
            hint="qemu must be able to load the plugin .so and write into the model's work folder; "
            "check the sandbox around the modeled run",
        ) from None
    if not rows:
        return MemoryStats(np.zeros(0, np.uint64), np.zeros((0, len(STAT_FIELDS)), np.int64), line)
    pcs = np.array([int(r[0], 16) for r in rows], dtype=np.uint64)
    counts = np.array([[int(x) for x in r[1:]] for r in rows], dtype=np.int64)
    order = np.argsort(pcs)
    return MemoryStats(pcs[order], counts[order], line)
