"""One sandbox for every step that touches candidate text or code: preprocess, compile, link, every run.

Every step runs through `run()` and gets:
- its own session and process group, killed whole at the end of the step (and on timeout), plus
  PR_SET_PDEATHSIG so the program dies if we do;
- RLIMIT_CPU, RLIMIT_AS, RLIMIT_FSIZE, RLIMIT_NOFILE, RLIMIT_NPROC, no core dumps, stdout/stderr captured
  with a cap (a flood is killed), a wall-clock limit, and a minimal environment (no HOME, no secrets);
- when we are root: a fresh, never reused uid (it cannot read root-only files or write ours; every
  process it leaves behind is found and killed by uid), a private network namespace (no network), and a
  private mount namespace in which the places secrets live (/root, /home, /tmp, /run, /work, the project
  checkout, ...) are covered by empty tmpfs, except the step's own directory and scratch folder, and
  /proc shows only the sandbox uid's own processes (hidepid=2);
- without root: the caller's uid inside an unprivileged user + network + mount namespace when the kernel
  allows one (same hiding), otherwise only the limits and seccomp (reported in RunOutput);
- a seccomp allow-list (classic BPF, x86_64 only; other hosts run without it and say so): the syscalls
  clang-22, ld.lld, qemu-user and the harness were measured to make. No sockets, no ptrace, no mounts;
  processes only in the `link` profile (clang runs ld.lld), threads only otherwise; any other syscall
  kills the process with SIGSYS, reported as a sandbox violation.

All of this is set up by a small launcher (sandbox_exec.c, built on first use with clang-22) that the
step's program is exec'd from: the evaluator starts it with vfork + exec and never forks itself, which
for a process holding a gigabyte cost ~80 ms of system time per step (~7 ms now).

The trusted side reads what a step wrote only after the step's processes are all dead, and only regular
files opened without following links (`take`).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import resource
import selectors
import shutil
import signal
import stat
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Literal

from core.private_dir import private_build_dir

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
EXIT_GRACE_S = 0.5  # how long pipes may stay open after the program itself exited
SANDBOX_UID_BASE = 1_900_000_000  # far above any real account; one random uid per run (EOK_SANDBOX_UID_BASE)
LAUNCHER_SOURCE = Path(__file__).with_name("sandbox_exec.c")
PID_PLACEHOLDER = 0x7EC0DE01  # in the seccomp program: the launcher writes its own pid over it (sandbox_exec.c)
OOM_MARKER = "eok: out of memory"  # printed by the harness's malloc wrappers
PROJECT_ROOT = Path(__file__).resolve().parent.parent
# Covered by an empty tmpfs in the step's mount namespace: where secrets, keys, tokens, other users' and
# other evaluations' files live. The toolchain (/usr, /lib, /etc) stays visible; it holds nothing secret
# that a fresh uid may read. The step's own directory and scratch folder are mounted back on top.
HIDDEN_ROOTS = (
    "/root", "/home", "/tmp", "/var/tmp", "/dev/shm", "/run", "/mnt", "/media", "/srv", "/opt", "/work",
    "/var/lib", "/var/log", "/var/mail", "/var/spool", "/var/backups", "/var/cache", "/var/www", "/boot",
    "/etc/ssh", "/etc/ssl/private",
)  # fmt: skip
# run: a program under qemu (threads only); native: a harness on this host (also no executable memory);
# compile: clang -E/-c (threads only); link: clang driving ld.lld (may spawn and exec)
Profile = Literal["run", "native", "compile", "link"]


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
    isolate: bool = True  # fresh uid + network and mount namespaces when available
    profile: Profile = "run"  # seccomp allow-list (see Profile)


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
    seccomp: bool = False
    files_hidden: bool = False
    extra: dict[str, str] = field(default_factory=dict)
    stdout_bytes: bytes = b""  # stdout as written (the harness writes binary result frames there)

    @property
    def signal(self) -> int | None:
        return -self.returncode if self.returncode is not None and self.returncode < 0 else None

    @property
    def violation(self) -> bool:
        """Killed by the seccomp filter: the program made a system call outside the allow-list."""
        return self.seccomp and self.signal == signal.SIGSYS

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


def uid_base() -> int:
    """Fresh uids are drawn from [base, base + 2**20): EOK_SANDBOX_UID_BASE keeps installations apart."""
    return int(os.environ.get("EOK_SANDBOX_UID_BASE", SANDBOX_UID_BASE))


def is_root() -> bool:
    return os.geteuid() == 0


@cache
def network_isolation() -> str:
    """How runs are cut off from the network here: 'netns' (root), 'userns' or 'none'."""
    if os.environ.get("EOK_SANDBOX_NETWORK") in ("netns", "userns", "none"):  # told by a parent that probed
        return os.environ["EOK_SANDBOX_NETWORK"]
    probe = [
        sys.executable,
        "-S",
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


def run(
    argv: list[str],
    cwd: Path,
    limits: Limits,
    env: dict[str, str] | None = None,
    *,
    scratch: Path | None = None,
    readable: Sequence[Path] = (),
    hidden: Sequence[Path] = (),
    pass_fds: Sequence[int] = (),
) -> RunOutput:
    """Run `argv` in `cwd` under `limits`; never raises for what the program does, only if it cannot start.

    `cwd` is readable, not writable, by the program. `scratch` (created here, inside `cwd` or not) is the
    one folder it may write; read what it wrote with `take()` once this returns. `readable` folders stay
    visible (read-only by permissions) where the mount namespace hides everything else; `hidden` folders
    (inside `cwd`: the trusted binary beside a candidate's) are covered by an empty tmpfs. `pass_fds` stay
    open in the program (the cost model's key pipe for its plugin).
    """
    uid = uid_base() + int.from_bytes(os.urandom(4), "little") % (1 << 20) if limits.isolate and is_root() else None
    netmode = network_isolation() if limits.isolate else "none"
    if uid is not None:
        os.chmod(cwd, 0o755)  # readable, not writable, by the sandbox uid
    if scratch is not None:
        scratch.mkdir(mode=0o700)
        if uid is not None:
            os.chown(scratch, uid, uid)
    hide = limits.isolate and netmode != "none"
    filt = limits.profile if limits.isolate and seccomp_available() else None
    start = time.monotonic()
    visible = [cwd, scratch, *readable]
    nproc = _nproc_limit(limits, uid)
    proc = _start(
        argv,
        cwd,
        env if env is not None else clean_env(scratch),
        lambda err_fd: _launcher_args(limits, uid, netmode, nproc, hide, cwd, visible, hidden, filt, err_fd),
        tuple(pass_fds),
    )
    out, err, timed_out, flooded, truncated = _collect(proc, limits, start)
    _kill_all(proc, uid, can_spawn=filt is None or filt == "link")
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
        seccomp=filt is not None,
        files_hidden=hide,
        stdout_bytes=out,
    )


def take(scratch: Path, name: str, dest: Path) -> Path:
    """Copy the regular file `scratch/name` a finished step wrote to `dest` (ours), never through a link."""
    fd = os.open(scratch / name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{name} written by the sandbox is not a regular file")
        tmp = dest.with_name(f".{dest.name}.{os.urandom(4).hex()}")
        with os.fdopen(os.dup(fd), "rb") as src, open(tmp, "wb") as out:
            while chunk := src.read(1 << 20):
                out.write(chunk)
        os.chmod(tmp, 0o755)
        os.replace(tmp, dest)
    finally:
        os.close(fd)
    return dest


def read_written(path: Path, limit: int = 1 << 30) -> bytes:
    """What a finished step wrote at `path`: b"" unless it is a regular file (never through a link)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return b""
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return b""
        with os.fdopen(os.dup(fd), "rb") as f:
            return f.read(limit)
    finally:
        os.close(fd)


def clean_env(scratch: Path | None = None) -> dict[str, str]:
    """A minimal environment: nothing of ours (API keys, tokens, HOME) leaks to the program."""
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LC_ALL": "C"}
    if scratch is not None:
        env["TMPDIR"] = str(scratch)
    return env


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


def _launcher_args(
    limits: Limits,
    uid: int | None,
    netmode: str,
    nproc: int,
    hide: bool,
    cwd: Path,
    visible: list[Path | None],
    hidden: Sequence[Path],
    filt: Profile | None,
    err_fd: int,
) -> list[str]:
    """The launcher's options (evaluator/sandbox_exec.c): the step's whole setup between fork and exec."""
    cpu = int(limits.cpu_s if limits.cpu_s is not None else limits.wall_s + 1) + 1
    memory = limits.memory_mb << 20
    fsize = limits.fsize_mb << 20
    exec_fd = max(limits.nofile, 3)  # the first descriptor the step itself can never have (RLIMIT_NOFILE)
    args = [str(launcher()), "-e", str(err_fd), "-n", netmode, "-x", str(exec_fd)]
    if hide:
        args += ["-h", "-w", str(cwd.resolve())]
        if uid is not None:
            args.append("-s")  # root: any failure stops the step, and /proc shows the step's own processes
        covers, keeps = _hidden_layout(visible)
        for root in covers:
            args += ["-c", root]
        for path in keeps:
            args += ["-k", str(path)]
        for path in hidden:
            args += ["-C", str(path.resolve())]
    rlimits = (
        (resource.RLIMIT_CPU, cpu, cpu + 1),
        (resource.RLIMIT_AS, memory, memory),
        (resource.RLIMIT_FSIZE, fsize, fsize),
        (resource.RLIMIT_NOFILE, limits.nofile, limits.nofile),
        (resource.RLIMIT_CORE, 0, 0),
        (resource.RLIMIT_NPROC, nproc, nproc),
    )
    for number, soft, hard in rlimits:
        args += ["-r", f"{number}={soft}:{hard}"]
    if uid is not None:
        args += ["-u", str(uid)]
    if filt is not None:
        args += ["-f", seccomp_filter(filt, PID_PLACEHOLDER, exec_fd).hex()]
    return args


def _hidden_layout(visible: list[Path | None]) -> tuple[list[str], list[Path]]:
    """What the step's mount namespace covers with empty tmpfs (HIDDEN_ROOTS, the checkout), what it shows.

    Computed here before the step starts (the filesystem is the same on both sides of the unshare); the
    launcher opens the folders it shows before it covers their parents, then mounts them back on top.
    """
    covered: list[str] = []
    for root in sorted((*HIDDEN_ROOTS, str(PROJECT_ROOT)), key=len):
        inside = any(Path(root).is_relative_to(c) for c in covered)
        if os.path.isdir(root) and not os.path.islink(root) and root != "/" and not inside:
            covered.append(root)
    keep = sorted({p.resolve() for p in visible if p is not None}, key=lambda p: len(p.parts))
    shown: list[Path] = []
    for path in keep:
        if any(path.is_relative_to(k) for k in shown):
            continue  # already visible through a parent
        if any(path.is_relative_to(c) for c in covered):
            shown.append(path)
    return covered, shown


def _start(
    argv: list[str],
    cwd: Path,
    env: dict[str, str],
    launcher_args: Callable[[int], list[str]],
    pass_fds: tuple[int, ...] = (),
) -> subprocess.Popen[bytes]:
    """Start `argv` through the launcher (vfork + exec: no copy of this process); raise if its setup failed."""
    err_r, err_w = os.pipe()
    try:
        proc = subprocess.Popen(
            [*launcher_args(err_w), "--", *argv],
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            start_new_session=True,
            pass_fds=(err_w, *pass_fds),
        )
    except BaseException:
        os.close(err_r)
        raise
    finally:
        os.close(err_w)
    with os.fdopen(err_r, "rb") as pipe:
        failure = pipe.read()  # EOF once the program is exec'd: the launcher made the pipe close-on-exec
    if failure:
        _killpg(proc)
        proc.wait()
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()
        proc.stderr.close()
        raise OSError(failure.decode(errors="replace"))
    return proc


_build_lock = threading.Lock()


@cache
def launcher() -> Path:
    """The launcher binary, built from evaluator/sandbox_exec.c on first use (keyed by the source's hash)."""
    source = LAUNCHER_SOURCE.read_bytes()
    digest = hashlib.sha256(source).hexdigest()[:16]
    folder = private_build_dir("eok-sandbox")
    target = folder / f"sandbox-exec-{digest}"
    with _build_lock:
        if target.exists():
            return target
        compiler = os.environ.get("EOK_CLANG", "clang-22")
        if shutil.which(compiler) is None:
            raise OSError(f"sandbox: {compiler} not found (it builds the sandbox launcher): apt-get install clang-22")
        tmp = folder / f".sandbox-exec-{digest}.{os.getpid()}"
        proc = subprocess.run([compiler, "-O2", "-o", str(tmp), str(LAUNCHER_SOURCE)], capture_output=True, text=True)
        if proc.returncode != 0:
            raise OSError(
                f"sandbox: could not build the launcher ({proc.stderr.strip()[:300]}): the host needs libc "
                "headers (apt-get install libc6-dev) next to clang-22"
            )
        os.chmod(tmp, 0o755)
        os.replace(tmp, target)
    return target


# ------------------------------------------------------------------------------------------ seccomp

AUDIT_ARCH_X86_64 = 0xC000003E
X32_SYSCALL_BIT = 0x40000000
RET_KILL_PROCESS, RET_ALLOW, RET_ERRNO = 0x80000000, 0x7FFF0000, 0x00050000
CLONE_THREAD = 0x10000
ENOSYS = 38
# x86_64 numbers (arch/x86/entry/syscalls/syscall_64.tbl). The set is what clang-22 (-E, -c), ld.lld,
# qemu-riscv64 7.2 (with TB logging) and the static harness were measured to call under strace -f,
# plus the libc start-up family and rt_sigsuspend (qemu-user, dying of a guest's fatal signal, kills itself
# and waits there; when another of its threads takes the signal first the wait is reached, and refusing it
# turned a plain SIGSEGV into SIGSYS, seen as a false sandbox violation under load); nothing for sockets,
# ptrace, mounts, namespaces, keys, bpf, io_uring.
SYSCALLS_X86_64 = {
    "read": 0, "write": 1, "open": 2, "close": 3, "stat": 4, "fstat": 5, "lstat": 6, "poll": 7, "lseek": 8,
    "mmap": 9, "mprotect": 10, "munmap": 11, "brk": 12, "rt_sigaction": 13, "rt_sigprocmask": 14,
    "rt_sigreturn": 15, "ioctl": 16, "pread64": 17, "pwrite64": 18, "readv": 19, "writev": 20, "access": 21,
    "pipe": 22, "select": 23, "sched_yield": 24, "mremap": 25, "msync": 26, "mincore": 27, "madvise": 28,
    "dup": 32, "dup2": 33, "nanosleep": 35, "getpid": 39, "clone": 56, "fork": 57, "vfork": 58, "execve": 59,
    "exit": 60, "wait4": 61, "kill": 62, "uname": 63, "fcntl": 72, "fsync": 74, "fdatasync": 75, "ftruncate": 77,
    "getdents": 78, "getcwd": 79, "chdir": 80, "fchdir": 81, "rename": 82, "mkdir": 83, "rmdir": 84,
    "unlink": 87, "readlink": 89, "chmod": 90, "fchmod": 91, "umask": 95, "gettimeofday": 96,
    "getrlimit": 97, "getrusage": 98, "sysinfo": 99, "times": 100, "getuid": 102, "getgid": 104,
    "geteuid": 107, "getegid": 108, "getppid": 110, "getpgrp": 111, "sigaltstack": 131, "statfs": 137,
    "fstatfs": 138, "sched_getparam": 143, "sched_getscheduler": 145, "arch_prctl": 158, "gettid": 186,
    "time": 201, "futex": 202, "sched_getaffinity": 204, "getdents64": 217, "set_tid_address": 218,
    "restart_syscall": 219, "fadvise64": 221, "clock_gettime": 228, "clock_getres": 229,
    "clock_nanosleep": 230, "exit_group": 231, "tgkill": 234, "mbind": 237, "set_mempolicy": 238,
    "get_mempolicy": 239, "openat": 257, "mkdirat": 258, "newfstatat": 262, "unlinkat": 263, "renameat": 264,
    "readlinkat": 267, "faccessat": 269, "pselect6": 270, "ppoll": 271, "set_robust_list": 273,
    "get_robust_list": 274, "fallocate": 285, "dup3": 292, "pipe2": 293, "prlimit64": 302, "renameat2": 316,
    "getrandom": 318, "membarrier": 324, "statx": 332, "rseq": 334, "clone3": 435, "close_range": 436,
    "faccessat2": 439, "prctl": 157, "seccomp": 317, "execveat": 322, "rt_sigsuspend": 130,
    "landlock_create_ruleset": 444, "landlock_add_rule": 445, "landlock_restrict_self": 446,
    "rt_tgsigqueueinfo": 297, "alarm": 37,  # LLVM's crash handler: a watchdog on itself, then the re-raise
}  # fmt: skip
_SPAWN = {"fork", "vfork", "wait4", "execve"}  # only the link step (the clang driver runs ld.lld)
_CHECKED = {"clone", "clone3", "prlimit64", "tgkill", "rt_tgsigqueueinfo", "kill", "execveat", "prctl", "seccomp"}
_NO_EXEC_MEMORY = {"mmap", "mprotect"}  # native profile: only without PROT_EXEC
PROT_EXEC, AT_EMPTY_PATH = 0x4, 0x1000
PR_SET_DUMPABLE, PR_SET_SECCOMP, PR_SET_NO_NEW_PRIVS = 4, 22, 38


@cache
def seccomp_available() -> bool:
    import platform

    return platform.machine() == "x86_64"


def seccomp_filter(profile: Profile, pid: int, exec_fd: int) -> bytes:
    """The classic-BPF program for `profile` run as process `pid` (x86_64; see `seccomp_available`).

    The step's program is started by the launcher with execveat(exec_fd, "", AT_EMPTY_PATH), and that is
    the only exec the filter allows outside the link step: exec_fd is at or above the step's descriptor
    limit, so once the launcher's close-on-exec descriptor is gone nothing in the step can make it again,
    and no program it runs can exec another (the trusted binary, a second qemu, a shell).
    """
    nr = SYSCALLS_X86_64
    prog = [
        _stmt(0x20, 4),  # A = arch
        _jump(0x15, AUDIT_ARCH_X86_64, 1, 0),
        _stmt(0x06, RET_KILL_PROCESS),
        _stmt(0x20, 0),  # A = syscall number
        _jump(0x35, X32_SYSCALL_BIT, 0, 1),  # x32 ABI numbers: not ours
        _stmt(0x06, RET_KILL_PROCESS),
    ]
    for name, number in sorted(nr.items(), key=lambda kv: kv[1]):
        if name in _CHECKED or (name in _SPAWN and profile != "link"):
            continue
        if name in _NO_EXEC_MEMORY and profile == "native":
            continue
        prog += [_jump(0x15, number, 0, 1), _stmt(0x06, RET_ALLOW)]
    exec_only = [*_arg_equals(0, exec_fd), *_arg_equals(4, AT_EMPTY_PATH), _stmt(0x06, RET_ALLOW)]
    prog += _arg_block(nr["execveat"], exec_only)
    if profile == "native":
        # a native harness never makes memory executable: the kernel mapped its static image, and code a
        # candidate writes at run time is code no check has seen
        for name in sorted(_NO_EXEC_MEMORY):
            prog += _arg_block(nr[name], [*_arg_lacks(2, PROT_EXEC), _stmt(0x06, RET_ALLOW)])
    # prctl and seccomp only to restrict further: no new privileges, another filter, not dumpable (the
    # cost model's plugin closes /proc/self/mem and /proc/self/fd to the guest that way)
    prog += _arg_block(
        nr["prctl"],
        [
            _stmt(0x20, 16),
            _jump(0x15, PR_SET_NO_NEW_PRIVS, 4, 0),
            _jump(0x15, PR_SET_SECCOMP, 3, 0),
            _jump(0x15, PR_SET_DUMPABLE, 0, 3),
            _stmt(0x20, 24),  # A = arg1 (low half): dumpable may only be turned off
            _jump(0x15, 0, 0, 1),
            _stmt(0x06, RET_ALLOW),
            _stmt(0x06, RET_KILL_PROCESS),
        ],
    )
    prog += [_jump(0x15, nr["seccomp"], 0, 1), _stmt(0x06, RET_ALLOW)]
    # clone3 passes its flags in memory, out of BPF's reach: ENOSYS makes libc fall back to clone.
    prog += [_jump(0x15, nr["clone3"], 0, 1), _stmt(0x06, RET_ERRNO | ENOSYS)]
    if profile == "link":
        prog += [_jump(0x15, nr["clone"], 0, 1), _stmt(0x06, RET_ALLOW)]
    else:  # threads yes, processes no: a child could outlive the step or hide from the limits
        prog += _arg_block(nr["clone"], [_stmt(0x20, 16), _jump(0x45, CLONE_THREAD, 0, 1), _stmt(0x06, RET_ALLOW)])
    # prlimit64 on itself only (pid 0); tgkill only to its own thread group (abort, qemu's own signals)
    prog += _arg_block(nr["prlimit64"], [*_arg0_equals(0), _stmt(0x06, RET_ALLOW)])
    prog += _arg_block(nr["tgkill"], [*_arg0_equals(pid), _stmt(0x06, RET_ALLOW)])
    # the same for LLVM's crash handler, which re-raises a fatal signal (SIGXFSZ: an object over the file size
    # limit) this way: the step then dies by that signal, which says what happened
    prog += _arg_block(nr["rt_tgsigqueueinfo"], [*_arg0_equals(pid), _stmt(0x06, RET_ALLOW)])
    # kill only itself: qemu-user re-raises a guest's fatal signal that way so it dies by that signal
    prog += _arg_block(nr["kill"], [*_arg0_equals(pid), _stmt(0x06, RET_ALLOW)])
    prog += [_stmt(0x06, RET_KILL_PROCESS)]
    return b"".join(prog)


def _stmt(code: int, k: int) -> bytes:
    return struct.pack("<HBBI", code, 0, 0, k)


def _jump(code: int, k: int, jt: int, jf: int) -> bytes:
    return struct.pack("<HBBI", code, jt, jf, k)


def _arg_equals(n: int, value: int) -> list[bytes]:
    """Fall through when argument `n` == value (both halves), else kill."""
    lo, hi = 16 + 8 * n, 20 + 8 * n
    return [
        _stmt(0x20, lo),
        _jump(0x15, value & 0xFFFFFFFF, 0, 3),
        _stmt(0x20, hi),
        _jump(0x15, value >> 32, 0, 1),
        _stmt(0x05, 1),  # ja +1: skip the kill
        _stmt(0x06, RET_KILL_PROCESS),
    ]


def _arg_lacks(n: int, bits: int) -> list[bytes]:
    """Fall through when argument `n` has none of `bits` (low half), else kill."""
    return [_stmt(0x20, 16 + 8 * n), _jump(0x45, bits, 0, 1), _stmt(0x06, RET_KILL_PROCESS)]


def _arg0_equals(value: int) -> list[bytes]:
    """Fall through when the first argument == value (both halves), else kill."""
    return [
        _stmt(0x20, 16),
        _jump(0x15, value & 0xFFFFFFFF, 0, 3),
        _stmt(0x20, 20),
        _jump(0x15, value >> 32, 0, 1),
        _stmt(0x05, 1),  # ja +1: skip the kill
        _stmt(0x06, RET_KILL_PROCESS),
    ]


def _arg_block(number: int, block: list[bytes]) -> list[bytes]:
    """`block` runs for syscall `number` (it must end in a return; a failed check kills)."""
    body = [*block, _stmt(0x06, RET_KILL_PROCESS)]
    return [_jump(0x15, number, 0, len(body)), *body]


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


def _kill_all(proc: subprocess.Popen[bytes], uid: int | None, can_spawn: bool = True) -> None:
    """Leave nothing behind: the process group, and with a sandbox uid every process of that uid.

    Under a seccomp profile that forbids new processes, the reaped program was the uid's only process
    (its threads died with it), so the uid sweep is skipped: it costs a fork and a /proc scan per step.
    """
    _killpg(proc)
    if uid is None or not can_spawn:
        return
    # kill(-1) as the sandbox uid signals exactly the processes of that uid, including ones that left
    # the process group with setsid(); the helper dies with them. Repeat until none is left alive: a
    # killed process takes a moment to exit, and on a loaded machine a fork may just have completed.
    deadline = time.monotonic() + 5
    while True:
        subprocess.run([str(launcher()), "-K", str(uid)], stdin=subprocess.DEVNULL, capture_output=True, check=False)
        if not _alive(uid) or time.monotonic() > deadline:
            return
        time.sleep(0.05)


def _alive(uid: int) -> bool:
    """Whether a process of `uid` is still running (zombies are dead; their parent or init reaps them).

    Read from /proc/<pid>/status, not the directory's owner: a non-dumpable process shows as root there.
    """
    want = f"\nUid:\t{uid}\t"
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            status = Path(entry.path, "status").read_text()
        except OSError:
            continue
        if want in status and "\nState:\tZ" not in status:
            return True
    return False
