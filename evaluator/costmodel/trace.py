"""Run a harness under qemu-riscv64 with TB logging and cut out the marked region.

qemu 7.2 is run with `-d in_asm,exec,nochain`:
- `exec` writes one line per executed translation block (TB), `nochain` makes that line appear for every
  execution (chained TBs would otherwise skip the logging);
- `in_asm` prints each TB once, when it is translated, with every guest instruction address. That gives the
  exact extent qemu used (control flow, vsetvl*, CSR writes, page boundaries, the 512-instruction cap, and
  the halving qemu does when a TB's host code overflows) without re-deriving qemu's rules from the ELF.

The TB flags of an exec line carry the vector state at TB entry (qemu 7.2 target/riscv: LMUL in bits 3-5,
SEW in bits 6-8, VILL in bit 12). Every vsetvl* ends its TB in qemu, so all vector instructions of a TB run
under that entry vtype. The layout is checked against the trace on every run (see `check_vtype_layout`).

`-dfilter` is not used: the region's code (kernel, libm, libc helpers) is not known before the run and in
a static binary it is all in one `.text`, so an address filter cannot separate region from harness.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import re
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from core.errors import EokError, InvalidInput, Unavailable

_IN_ASM_RE = re.compile(rb"IN:[^\n]*\n((?:0x[0-9a-f]{16}:[^\n]*\n)+)")
_IN_ASM_LINE_RE = re.compile(rb"0x([0-9a-f]{16}):\s+([0-9a-f]+)\s")

# qemu 7.2 riscv TB flag fields (target/riscv/cpu.h); only these bits matter for costing. VL_EQ_VLMAX (bit 11)
# is set when vl == VLMAX and vstart == 0: TBs run with a shorter vl (tails) are told apart by it.
_LMUL_SHIFT, _SEW_SHIFT, VL_EQ_VLMAX_BIT, _VILL_BIT = 3, 6, 11, 12
VTYPE_FLAG_MASK = (0x7 << _LMUL_SHIFT) | (0x7 << _SEW_SHIFT) | (1 << VL_EQ_VLMAX_BIT) | (1 << _VILL_BIT)

LMUL_NAMES = {0: "M1", 1: "M2", 2: "M4", 3: "M8", 5: "MF8", 6: "MF4", 7: "MF2"}
SEW_NAMES = {0: "E8", 1: "E16", 2: "E32", 3: "E64"}

DEFAULT_MAX_LOG_BYTES = 1 << 30  # ~10M executed TBs; far beyond a sensibly sized model run


class CandidateFault(EokError):
    """The modeled run failed because of what the program did inside it (it looped, crashed, exited or
    ran code no one compiled): the candidate's invalid output, not a failure of the cost model."""


class RegionMismatch(CandidateFault):
    """The log's region markers are not the calls the harness was asked to make: the run is not valid."""


@dataclass(frozen=True)
class Vtype:
    """The vector type a TB runs under; `None` stands for vill (no valid vtype)."""

    sew: str  # "E8".."E64"
    lmul: str  # "MF8".."M8"

    @property
    def asm(self) -> str:
        return f"e{self.sew[1:]}, {self.lmul.lower()}"


def decode_vtype(flags: int) -> Vtype | None:
    if flags & (1 << _VILL_BIT):
        return None
    lmul = LMUL_NAMES.get((flags >> _LMUL_SHIFT) & 0x7)
    sew = SEW_NAMES.get((flags >> _SEW_SHIFT) & 0x7)
    if lmul is None or sew is None:
        return None
    return Vtype(sew=sew, lmul=lmul)


@dataclass
class RegionTrace:
    """The TBs executed between the markers, in order, plus every TB's instruction addresses."""

    keys: np.ndarray  # int64 per execution: pc << 16 | (flags & VTYPE_FLAG_MASK)
    tb_addrs: dict[int, tuple[int, ...]]  # TB start pc -> guest instruction addresses (from in_asm)
    regions: int  # number of begin/end pairs found
    qemu_seconds: float
    log_bytes: int
    returncode: int


def qemu_with_logging(qemu_argv: list[str], log: Path, extra: list[str] | None = None) -> list[str]:
    """`qemu_argv` with TB logging (and `extra` qemu options, e.g. the memory plugin) after argv[0]."""
    if not qemu_argv:
        raise InvalidInput("qemu_argv is empty", hint="pass the full qemu-riscv64 command line of the harness")
    clashing = {"-d", "-D", "-dfilter", "-singlestep", "-plugin"} & set(qemu_argv)
    if clashing:
        raise InvalidInput(
            f"qemu_argv already sets {sorted(clashing)}",
            hint="leave logging options out; the cost model adds -d in_asm,exec,nochain -D <log> itself",
        )
    return [qemu_argv[0], "-d", "in_asm,exec,nochain", "-D", str(log), *(extra or []), *qemu_argv[1:]]


def run_logged(
    qemu_argv: list[str],
    cwd: Path,
    workdir: Path,
    timeout_s: float,
    max_log_bytes: int,
    extra: list[str] | None = None,
    pass_fds: tuple[int, ...] = (),
) -> tuple[Path, float, int]:
    """Run qemu with TB logging; stop it when it overruns the time or log budget. Returns (log, secs, rc)."""
    log = workdir / "qemu-exec.log"
    argv = qemu_with_logging(qemu_argv, log, extra)
    out_path, err_path = workdir / "stdout", workdir / "stderr"
    start = time.perf_counter()
    with out_path.open("wb") as out, err_path.open("wb") as err:
        try:
            proc = subprocess.Popen(argv, cwd=cwd, stdout=out, stderr=err, start_new_session=True, pass_fds=pass_fds)
        except FileNotFoundError as exc:
            raise Unavailable(
                f"cannot start {argv[0]!r} for the modeled run",
                hint="install qemu-user (apt-get install qemu-user) or fix qemu_argv[0]",
            ) from exc
        reason = _wait_within_budget(proc, log, timeout_s, max_log_bytes)
    seconds = time.perf_counter() - start
    if reason == "timeout":
        raise CandidateFault(
            f"modeled run did not finish within {timeout_s:.0f} s under qemu with TB logging",
            hint="shrink the problem size the harness uses in model mode, or raise timeout_s",
        )
    if reason == "log":
        raise CandidateFault(
            f"qemu TB log grew beyond {max_log_bytes / 2**20:.0f} MiB",
            hint="the harness runs too much code in model mode: shrink the sizes (a modeled run should stay "
            "below ~1e7 dynamic instructions) or raise max_log_bytes",
        )
    if not log.exists():  # the run died before qemu wrote anything (or its sandbox could not start)
        tail = err_path.read_bytes()[-300:].decode(errors="replace").strip().splitlines()
        raise EokError(
            f"the modeled run left no TB log (exit {proc.returncode}): {tail[-1] if tail else 'no diagnostic'}",
            hint="run `eok eval` on the same candidate again; if it persists, check qemu-user and the sandbox",
        )
    return log, seconds, proc.returncode


def _wait_within_budget(proc: subprocess.Popen[bytes], log: Path, timeout_s: float, max_bytes: int) -> str:
    deadline = time.monotonic() + timeout_s
    step = 0.002  # check the log often at first: most model runs take a fraction of a second
    while True:
        try:
            proc.wait(timeout=step)
            return "done"
        except subprocess.TimeoutExpired:
            pass
        if time.monotonic() > deadline:
            _kill_group(proc)
            return "timeout"
        if _size(log) > max_bytes:
            _kill_group(proc)
            return "log"
        step = min(step * 2, 0.05)


def _size(path: Path) -> int:
    """The log's size, 0 while it is missing. The sandbox launcher swaps its link for the written log when the
    run ends (unlink, then rename): a check between the two finds no file, which is not an error."""
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _signal_note(rc: int) -> str:
    """The signal behind an exit code, from Popen (-N) or from a shell wrapper (128+N)."""
    number = -rc if rc < 0 else rc - 128 if 128 < rc < 160 else 0
    try:
        return f", {signal.Signals(number).name}" if number else ""
    except ValueError:
        return ""


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


TbExtents = dict[int, tuple[int, ...]]  # TB start pc -> guest instruction addresses


def parse_log(data: bytes | mmap.mmap, begin_pc: int, end_pc: int) -> tuple[np.ndarray, TbExtents, int]:
    """Cut every begin..end region out of the log; return (TB keys in order, TB extents, region count)."""
    begin_tag, end_tag = b"/%016x/" % begin_pc, b"/%016x/" % end_pc
    chunks: list[bytes] = []
    pos, last_end = 0, 0
    while True:
        b = data.find(begin_tag, pos)
        if b < 0:
            break
        start = data.find(b"\n", b) + 1
        e = data.find(end_tag, start)
        if e < 0:
            _refuse_threads(data[start:])  # a threaded region that crashed qemu: name the real cause
            raise CandidateFault(
                "eok_region_end was not reached after eok_region_begin in the modeled run",
                hint="the kernel crashed, looped or exited inside the region; run the candidate under qemu "
                "without the model to see its error",
            )
        chunks.append(data[start : data.rfind(b"\n", start, e) + 1])
        pos = last_end = e
    if not chunks:
        raise EokError(
            "eok_region_begin was never executed in the modeled run",
            hint="the harness must call eok_region_begin()/eok_region_end() around the kernel call in model mode",
        )
    keys = np.concatenate([_keys_of(chunk) for chunk in chunks])
    for chunk in chunks:
        _refuse_threads(chunk)
    tb_addrs = parse_in_asm(data[: data.find(b"\n", last_end) + 1])
    begins, ends = _count(data, begin_tag), _count(data, end_tag)
    if begins != len(chunks) or ends != len(chunks) or data.find(b"\0") >= 0:
        raise RegionMismatch(
            f"the modeled run's log has {begins} region begins and {ends} ends for {len(chunks)} regions"
            + (" and NUL bytes" if data.find(b"\0") >= 0 else ""),
            hint="something other than the harness called the region markers or wrote to the log",
        )
    return keys, tb_addrs, len(chunks)


def _refuse_threads(region: bytes) -> None:
    """Raise when TBs of the region ran on a guest thread other than the main one ("Trace N:", N > 0)."""
    total, on_cpu0 = region.count(b"Trace "), region.count(b"Trace 0: ")
    if total != on_cpu0:
        raise CandidateFault(
            f"the marked region ran on several threads ({total - on_cpu0} of {total} TBs off the main one)",
            hint="the cost model prices one X60 core: time the single-threaded kernel (no threads in model mode)",
        )


def _count(data: bytes | mmap.mmap, tag: bytes) -> int:
    n, pos = 0, data.find(tag)
    while pos >= 0:
        n, pos = n + 1, data.find(tag, pos + 1)
    return n


def _keys_of(chunk: bytes) -> np.ndarray:
    """TB keys of the exec lines in `chunk`, found by their fixed-width "[cs_base/pc/flags/cflags]" field."""
    raw = np.frombuffer(chunk, dtype=np.uint8)
    opens = np.flatnonzero(raw == ord("["))
    opens = opens[opens + _FIELD_LEN <= len(raw)]
    # A '[' inside a symbol name (C++ operator[]) is not a field: check the separators are where they belong.
    ok = np.ones(len(opens), dtype=bool)
    for offset, char in _FIELD_SEPARATORS:
        ok &= raw[opens + offset] == ord(char)
    opens = opens[ok]
    pcs = _hex_at(raw, opens + 18, 16)
    flags = _hex_at(raw, opens + 35, 8)
    return (pcs << 16) | (flags & VTYPE_FLAG_MASK)


# "[" + 16 hex cs_base + "/" + 16 hex pc + "/" + 8 hex flags + "/" + 8 hex cflags + "]"
_FIELD_LEN = 1 + 16 + 1 + 16 + 1 + 8 + 1 + 8 + 1
_FIELD_SEPARATORS = ((17, "/"), (34, "/"), (43, "/"), (52, "]"))

_HEX_VALUE = np.zeros(256, dtype=np.uint8)
_HEX_VALUE[np.frombuffer(b"0123456789", dtype=np.uint8)] = np.arange(10)
_HEX_VALUE[np.frombuffer(b"abcdef", dtype=np.uint8)] = np.arange(10, 16)


def _hex_at(raw: np.ndarray, starts: np.ndarray, width: int) -> np.ndarray:
    """Parse `width` (8 or 16) hex digits at every start offset, without a Python loop per field."""
    digits = _HEX_VALUE[raw[starts[:, None] + np.arange(width)]]
    packed = np.ascontiguousarray((digits[:, 0::2] << 4) | digits[:, 1::2])  # two digits per byte
    return packed.view(f">u{width // 2}").ravel().astype(np.int64)  # guest addresses stay below 2**63


def parse_in_asm(data: bytes | mmap.mmap) -> TbExtents:
    """TB start pc -> instruction addresses; a later translation of the same pc replaces an earlier one."""
    tbs: TbExtents = {}
    for block in _IN_ASM_RE.finditer(data):
        addrs = tuple(int(a, 16) for a, _ in _IN_ASM_LINE_RE.findall(block.group(1)))
        if addrs:
            tbs[addrs[0]] = addrs
    return tbs


def trace_region(
    qemu_argv: list[str],
    cwd: Path,
    markers: tuple[int, int],
    timeout_s: float,
    max_log_bytes: int = DEFAULT_MAX_LOG_BYTES,
    memory: Callable[[Path], list[str]] | None = None,
    on_done: Callable[[Path], None] | None = None,
    pass_fds: tuple[int, ...] = (),
) -> RegionTrace:
    """Run qemu, then cut out the region between the marker addresses (begin pc, end pc).

    `memory(workdir)` gives extra qemu options for the run (the memory plugin, writing into workdir);
    `on_done(workdir)` reads what they wrote before the directory goes away.
    """
    with tempfile.TemporaryDirectory(prefix="eok-costmodel-") as tmp:
        workdir = Path(tmp)
        extra = memory(workdir) if memory else None
        log, seconds, rc = run_logged(qemu_argv, cwd, workdir, timeout_s, max_log_bytes, extra, pass_fds)
        size = _size(log)
        try:
            if size == 0:
                keys, tb_addrs, regions = parse_log(b"", *markers)
            else:
                with log.open("rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
                    keys, tb_addrs, regions = parse_log(data, *markers)
        except EokError as exc:
            tail = (workdir / "stderr").read_bytes()[-400:].decode(errors="replace").strip()
            exc.message += f" (qemu exit code {rc}{_signal_note(rc)}; stderr: {tail or '-'})"
            if rc in (-signal.SIGXFSZ, 128 + signal.SIGXFSZ):
                exc.hint = "the TB log hit the file-size limit: shrink the model-mode problem size"
            raise
        if on_done:
            on_done(workdir)
    return RegionTrace(keys, tb_addrs, regions, seconds, size, rc)
