"""Run untrusted programs (candidate harnesses, the compiler on candidate code) under limits.

Every run gets: its own session and process group (killed whole on timeout), RLIMIT_CPU, RLIMIT_AS,
RLIMIT_FSIZE, RLIMIT_NOFILE, no core dumps, stdout/stderr captured with a cap (a flood is killed), and
a wall-clock limit. When we are root, the program also runs under a fresh unused uid (so RLIMIT_NPROC
holds, it cannot write our files, and every process it leaves behind is found and killed by uid) and in
a new network namespace (no network). Without root we try an unprivileged user+network namespace, and
otherwise run with the network (reported as `network_isolated = False`); RLIMIT_NPROC then counts all
of our uid's processes, so it is set above the current count.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import secrets
import selectors
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
EXIT_GRACE_S = 0.5  # how long pipes may stay open after the program itself exited
SANDBOX_UID_BASE = 1_900_000_000  # far above any real account; one random uid per run
_libc = ctypes.CDLL(None, use_errno=True)
OOM_MARKER = "eok: out of memory"  # printed by the harness's malloc wrappers


@dataclass(frozen=True)
class Limits:
    wall_s: float = 60.0
    cpu_s: float | None = None  # default: wall_s + 1
    memory_mb: int = 1024  # RLIMIT_AS: address space, not resident memory
    fsize_mb: int = 16
    nproc: int = 64  # processes + threads of the sandbox uid (qemu-user itself uses 2-3 threads)
    nofile: int = 64
    output_bytes: int = 256 << 10  # kept per stream
    flood_bytes: int = 16 << 20  # total output that gets the run killed
    isolate: bool = True  # fresh uid + network namespace when available


@dataclass
class RunOutput:
    argv: list[str]
    returncode: int | None
    stdout: str
    stderr: str
    wall_s: float
    timed_out: bool = False
    flooded: bool = False
    truncated: bool = False
    network_isolated: bool = False
    uid: int | None = None
    extra: dict[str, str] = field(default_factory=dict)
    stdout_bytes: bytes = b""  # stdout as written (the harness writes binary result frames there)

    @property
    def signal(self) -> int | None:
        return -self.returncode if self.returncode is not None and self.returncode < 0 else None

    @property
    def limit_hit(self) -> str | None:
        """Which limit stopped the program, if one did: time | output | memory | cpu."""
        if self.timed_out:
            return "time"
        if self.flooded:
            return "output"
        if OOM_MARKER in self.stderr or "Cannot allocate memory" in self.stderr:
            return "memory"
        if self.signal in (signal.SIGXCPU, signal.SIGKILL) or "CPU time limit" in self.stderr:
            return "cpu"  # RLIMIT_CPU: SIGXCPU at the soft limit, SIGKILL at the hard one
        return None


def is_root() -> bool:
    return os.geteuid() == 0


@cache
def network_isolation() -> str:
    """How runs are cut off from the network here: 'netns' (root), 'userns' or 'none'."""
    probe = [
        "python3",
        "-c",
        "import ctypes,sys; l=ctypes.CDLL(None, use_errno=True); "
        f"sys.exit(0 if l.unshare({CLONE_NEWNET}) == 0 else (2 if l.unshare({CLONE_NEWUSER | CLONE_NEWNET}) == 0 "
        "else 1))",
    ]
    try:
        rc = subprocess.run(probe, timeout=10, capture_output=True).returncode
    except (OSError, subprocess.TimeoutExpired):
        return "none"
    return {0: "netns", 2: "userns"}.get(rc, "none")


def run(argv: list[str], cwd: Path, limits: Limits, env: dict[str, str] | None = None) -> RunOutput:
    """Run `argv` in `cwd` under `limits`; never raises for what the program does, only if it cannot start."""
    uid = SANDBOX_UID_BASE + secrets.randbelow(1 << 20) if limits.isolate and is_root() else None
    netmode = network_isolation() if limits.isolate else "none"
    if uid is not None:
        os.chmod(cwd, 0o755)  # readable, not writable, by the sandbox uid
    start = time.monotonic()
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env if env is not None else _clean_env(),
        start_new_session=True,
        preexec_fn=_child_setup(limits, uid, netmode, _nproc_limit(limits, uid)),
    )
    out, err, timed_out, flooded, truncated = _collect(proc, limits, start)
    _kill_all(proc, uid)
    wall = time.monotonic() - start
    return RunOutput(
        argv=argv,
        returncode=proc.returncode,
        stdout=out.decode(errors="replace"),
        stderr=err.decode(errors="replace"),
        wall_s=wall,
        timed_out=timed_out,
        flooded=flooded,
        truncated=truncated,
        network_isolated=netmode != "none",
        uid=uid,
        stdout_bytes=out,
    )


def _clean_env() -> dict[str, str]:
    """A minimal environment: nothing of ours (API keys, tokens) leaks to the program."""
    return {"PATH": "/usr/local/bin:/usr/bin:/bin", "LC_ALL": "C", "HOME": "/nonexistent"}


def _nproc_limit(limits: Limits, uid: int | None) -> int:
    if uid is not None:
        return limits.nproc
    # Our own uid: RLIMIT_NPROC counts all its processes and threads, so leave room above today's count.
    mine = 0
    for status in Path("/proc").glob("[0-9]*/status"):
        with contextlib.suppress(OSError):
            for line in status.read_text().splitlines():
                if line.startswith("Uid:") and int(line.split()[1]) == os.getuid():
                    mine += 1
                    break
    return mine + limits.nproc


def _child_setup(limits: Limits, uid: int | None, netmode: str, nproc: int) -> Callable[[], None]:
    cpu = int(limits.cpu_s if limits.cpu_s is not None else limits.wall_s + 1) + 1
    memory = limits.memory_mb << 20
    fsize = limits.fsize_mb << 20

    def setup() -> None:  # runs in the child between fork and exec: syscalls only
        if netmode == "netns":
            _libc.unshare(CLONE_NEWNET)
        elif netmode == "userns" and uid is None:
            _libc.unshare(CLONE_NEWUSER | CLONE_NEWNET)
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
        resource.setrlimit(resource.RLIMIT_NOFILE, (limits.nofile, limits.nofile))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
        if uid is not None:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)

    return setup


def _collect(proc: subprocess.Popen[bytes], limits: Limits, start: float) -> tuple[bytes, bytes, bool, bool, bool]:
    """Read both pipes until EOF, the wall limit or the flood limit; keep the first bytes of each."""
    assert proc.stdout is not None and proc.stderr is not None
    out_fd, err_fd = proc.stdout.fileno(), proc.stderr.fileno()
    kept = {out_fd: bytearray(), err_fd: bytearray()}
    total = 0
    timed_out = flooded = truncated = False
    sel = selectors.DefaultSelector()
    for fd in kept:
        os.set_blocking(fd, False)
        sel.register(fd, selectors.EVENT_READ)
    deadline = start + limits.wall_s
    exited_at: float | None = None
    while sel.get_map() and not flooded:
        now = time.monotonic()
        if now >= deadline:
            timed_out = True
            break
        # The program has exited but something it started still holds the pipes: stop waiting soon.
        if exited_at is None and proc.poll() is not None:
            exited_at = now
        if exited_at is not None and now - exited_at > EXIT_GRACE_S:
            break
        for key, _ in sel.select(timeout=min(deadline - now, 0.1 if exited_at else 0.5)):
            chunk = os.read(key.fd, 1 << 16)
            if not chunk:
                sel.unregister(key.fd)
                continue
            total += len(chunk)
            room = limits.output_bytes - len(kept[key.fd])
            kept[key.fd] += chunk[: max(room, 0)]
            truncated |= len(chunk) > room
        flooded = total > limits.flood_bytes
    if not (timed_out or flooded):
        # Whatever the program wrote before exiting is still in the pipes: a loaded machine can deschedule
        # this reader past the grace period, so drain what is buffered instead of dropping the result.
        for key in list(sel.get_map().values()):
            total += _drain(key.fd, kept[key.fd], limits.output_bytes)
    sel.close()
    if timed_out or flooded or exited_at is not None:
        _killpg(proc)
    try:
        proc.wait(timeout=max(0.1, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        timed_out = True
        _killpg(proc)
        proc.wait()
    proc.stdout.close()
    proc.stderr.close()
    return bytes(kept[out_fd]), bytes(kept[err_fd]), timed_out, flooded, truncated


def _drain(fd: int, kept: bytearray, cap: int) -> int:
    """Read what is already buffered in a non-blocking pipe (up to EOF or EAGAIN), keeping at most `cap`."""
    read = 0
    while True:
        try:
            chunk = os.read(fd, 1 << 16)
        except BlockingIOError:
            return read
        if not chunk:
            return read
        read += len(chunk)
        kept += chunk[: max(cap - len(kept), 0)]
        if read > cap:
            return read


def _killpg(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def _kill_all(proc: subprocess.Popen[bytes], uid: int | None) -> None:
    """Leave nothing behind: the process group, and with a sandbox uid every process of that uid."""
    _killpg(proc)
    if uid is None:
        return
    # kill(-1) as the sandbox uid signals exactly the processes of that uid, including ones that left
    # the process group with setsid(); the helper dies with them. Repeat until none is left alive: a
    # killed process takes a moment to exit, and on a loaded machine a fork may just have completed.
    deadline = time.monotonic() + 5
    while True:
        subprocess.run(
            ["kill", "-KILL", "-1"],
            preexec_fn=lambda: (os.setgid(uid), os.setuid(uid)),  # type: ignore[func-returns-value]
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=False,
        )
        if not _alive(uid) or time.monotonic() > deadline:
            return
        time.sleep(0.05)


def _alive(uid: int) -> bool:
    """Whether a process of `uid` is still running (zombies are dead; their parent or init reaps them)."""
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            fields = dict(line.split(":", 1) for line in status.read_text().splitlines() if ":" in line)
        except OSError:
            continue
        if int(fields.get("Uid", "-1 ").split()[0]) == uid and not fields.get("State", "").strip().startswith("Z"):
            return True
    return False
