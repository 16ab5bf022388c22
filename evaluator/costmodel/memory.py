"""Stage 1b: the region's memory traffic, from its real access stream, per guest instruction.

qemu-riscv64 7.2 loads memsim.c (built here once per source version into a shared object) as a TCG plugin
in the same run that logs the TBs. Every data access of the run goes through a simulated L1D/L2 of the
target (write-back, write-allocate, LRU, 64 B lines); for each instruction of the region the plugin counts
its accesses (one per vector element: that is how qemu 7.2 performs RVV loads and stores), the lines it
brought into L1 and from DRAM, and the dirty lines its misses evicted. docs/COSTMODEL.md "Memory".
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import shutil
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from core.errors import EokError, Unavailable
from core.private_dir import private_build_dir
from evaluator.costmodel.trace import RegionMismatch

SOURCE = Path(__file__).with_name("memsim.c")
HOST_CC = "clang-22"  # already required for the harness builds; builds the host plugin too
# scattered: element accesses not next to the same instruction's previous one (strided and indexed ones);
# multi_line: executions of a strided or indexed vector store whose elements fall in more than one line.
STAT_FIELDS = (
    "accesses", "bytes", "stores", "l1_fills", "l2_fills", "l1_writebacks", "l2_writebacks", "scattered", "multi_line",
)  # fmt: skip


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


@dataclass
class TraceGuard:
    """What makes the plugin vouch for a run's TB log (memsim.c, docs/EVALUATION.md "Trace integrity").

    A fresh secret key goes to the plugin through a pipe the qemu process inherits (`fd`, readable once,
    before any guest instruction runs); the plugin signs its table with it. `elf` is the binary whose
    bytes every executed instruction must match; `ro`/`rw` are the only folders the guest may still open
    once the plugin restricts it (Landlock, where the kernel has it).
    """

    key: bytes
    fd: int
    elf: Path
    ro: Path | None = None
    rw: Path | None = None

    @classmethod
    def new(cls, elf: Path, ro: Path | None, rw: Path | None) -> TraceGuard:
        key = os.urandom(32)
        r, w = os.pipe()
        os.write(w, key)
        os.close(w)
        return cls(key, r, elf.resolve(), ro.resolve() if ro else None, rw.resolve() if rw else None)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)

    def options(self) -> list[str]:
        out = [f"keyfd={self.fd}", f"elf={self.elf}"]
        out += [f"ro={self.ro}"] if self.ro else []
        return out + ([f"rw={self.rw}"] if self.rw else [])


@dataclass
class Vouched:
    """What the plugin counted and signed: the region's TB executions per start pc, their keyed order hash,
    instructions that differed from the ELF, and whether Landlock restricted the guest (its ABI, 0: none)."""

    execs: dict[int, int]
    order: int
    count: int
    smc: int
    smc_first: int
    landlock: int


def plugin_argv(
    so: Path, markers: tuple[int, int], out: Path, geometry: CacheGeometry, guard: TraceGuard | None = None
) -> list[str]:
    """qemu arguments that load the plugin for one run."""
    g = geometry
    spec = [f"{so}", f"begin={markers[0]:#x}", f"end={markers[1]:#x}", f"out={out}"]
    spec += [f"l1={g.l1_bytes}", f"l1ways={g.l1_ways}", f"l2={g.l2_bytes}", f"l2ways={g.l2_ways}", f"line={g.line}"]
    spec += guard.options() if guard else []
    return ["-plugin", ",".join(spec)]


def order_hash(pcs: np.ndarray, key: bytes) -> int:
    """The plugin's order-sensitive hash of a TB start-pc sequence: sum of fmix64(pc ^ k) * (2i + 1) mod 2**64."""
    k = np.uint64(int.from_bytes(key[:8], "little"))
    x = pcs.astype(np.uint64) ^ k
    with np.errstate(over="ignore"):
        for shift, mult in ((33, 0xFF51AFD7ED558CCD), (33, 0xC4CEB9FE1A85EC53)):
            x ^= x >> np.uint64(shift)
            x *= np.uint64(mult)
        x ^= x >> np.uint64(33)
        weights = np.arange(len(x), dtype=np.uint64) * np.uint64(2) + np.uint64(1)
        return int(np.sum(x * weights, dtype=np.uint64))


def read_stats(out: Path, line: int, guard: TraceGuard | None = None) -> tuple[MemoryStats, Vouched | None]:
    """Parse the plugin's table. It is written at every end marker, so a missing one means the plugin could
    not run or write (a sandbox hiding the .so or the work folder would otherwise silently drop memory).
    With a guard the table must carry a valid signature: anything else is a table the candidate wrote."""
    try:
        text = out.read_bytes()
    except FileNotFoundError:
        raise EokError(
            f"the cost model's memory plugin wrote no table ({out.name})",
            hint="qemu must be able to load the plugin .so and write into the model's work folder; "
            "check the sandbox around the modeled run",
        ) from None
    vouched = _verified(text, guard) if guard is not None else None
    lines = text.decode("ascii", errors="replace").splitlines()
    rows = [ln.split() for ln in lines if ln and not ln.startswith(("#", "tb ", "order ", "smc ", "landlock ", "mac "))]
    if not rows:
        return MemoryStats(np.zeros(0, np.uint64), np.zeros((0, len(STAT_FIELDS)), np.int64), line), vouched
    pcs = np.array([int(r[0], 16) for r in rows], dtype=np.uint64)
    counts = np.array([[int(x) for x in r[1:]] for r in rows], dtype=np.int64)
    order = np.argsort(pcs)
    return MemoryStats(pcs[order], counts[order], line), vouched


class Unvouched(RegionMismatch):
    """The plugin's signed account of the run is missing, forged or disagrees with the TB log: the run's
    timing is not valid (a RegionMismatch, so the evaluation reports invalid output)."""


def _verified(text: bytes, guard: TraceGuard) -> Vouched:
    body, sep, tail = text.rpartition(b"mac ")
    tag = tail.strip().decode("ascii", errors="replace")
    want = hmac.new(guard.key, body, hashlib.sha256).hexdigest()
    if not sep or not hmac.compare_digest(tag, want):
        raise Unvouched(
            "the memory plugin's table is not the one it signed: something in the run wrote to it",
            hint="the candidate's code must not touch the cost model's files",
        )
    execs: dict[int, int] = {}
    order = count = smc = smc_first = landlock = 0
    for ln in body.decode("ascii").splitlines():
        f = ln.split()
        if f[:1] == ["tb"]:
            execs[int(f[1], 16)] = int(f[2])
        elif f[:1] == ["order"]:
            order, count = int(f[1], 16), int(f[2])
        elif f[:1] == ["smc"]:
            smc, smc_first = int(f[1]), int(f[2], 16)
        elif f[:1] == ["landlock"]:
            landlock = int(f[1])
    return Vouched(execs, order, count, smc, smc_first, landlock)


def check_vouched(vouched: Vouched, region_pcs: np.ndarray, key: bytes) -> None:
    """The TB log's region must be exactly what the plugin saw execute, in the same order, from the ELF's code."""
    if vouched.smc:
        raise Unvouched(
            f"code executed at {vouched.smc_first:#x} is not the binary's own (written at run time): the model "
            "prices the instructions of the ELF, so a kernel that rewrites its code cannot be timed",
            hint="do not modify or generate code at run time",
        )
    pcs, counts = np.unique(region_pcs.astype(np.uint64), return_counts=True)
    logged = dict(zip(pcs.tolist(), counts.tolist(), strict=True))
    if logged != vouched.execs or len(region_pcs) != vouched.count or order_hash(region_pcs, key) != vouched.order:
        missing = sum(abs(logged.get(pc, 0) - n) for pc, n in vouched.execs.items())
        extra = sum(n for pc, n in logged.items() if pc not in vouched.execs)
        raise Unvouched(
            f"the TB log's region ({len(region_pcs)} executions) is not what ran ({vouched.count}; "
            f"{missing + extra} differ or are out of order): the log was written to during the run",
            hint="the candidate's code must not touch qemu's log",
        )
