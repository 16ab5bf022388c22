"""Run riscv64 harnesses under qemu-user: correctness here, timing from the X60 cost model."""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import sys
import threading
from dataclasses import replace
from pathlib import Path

from core.errors import InvalidInput, Unavailable
from core.private_dir import private_build_dir
from evaluator.runners.base import Measurement
from evaluator.sandbox import PROJECT_ROOT, Limits, RunOutput, network_isolation, run
from evaluator.targets import TargetProfile
from evaluator.toolchain import Build, BuildKind

QEMU = "qemu-riscv64"
# qemu-user itself maps ~270 MB of address space (code buffer, guest reservation) before the guest
# allocates anything; RLIMIT_AS below ~250 MB stops it from starting (measured with qemu 7.2).
QEMU_AS_OVERHEAD_MB = 384
MODEL_LOG_LIMIT_MB = 2048  # the cost model's TB log is written by qemu: RLIMIT_FSIZE must allow it


class QemuRunner:
    name = "qemu"
    measurement: Measurement = "modeled"
    build_kind: BuildKind = "emulator"

    def check(self, target: TargetProfile) -> None:
        if not target.is_riscv:
            raise InvalidInput(f"target {target.key!r} is not RISC-V", "use --runner native for the host target")
        if not shutil.which(QEMU):
            raise Unavailable(f"{QEMU} not found", "apt-get install qemu-user")

    def argv(self, target: TargetProfile, binary: str, args: list[str]) -> list[str]:
        return [QEMU, "-cpu", target.qemu_cpu, binary, *args]

    def execute(self, build: Build, args: list[str], target: TargetProfile, limits: Limits) -> RunOutput:
        qemu_limits = replace(limits, memory_mb=limits.memory_mb + QEMU_AS_OVERHEAD_MB)
        return run(self.argv(target, build.program, args), build.workdir, qemu_limits, hidden=build.hidden)

    def model_argv(self, build: Build, target: TargetProfile, args: list[str], limits: Limits) -> list[str]:
        """qemu command line for the cost model's traced run, behind a sandboxing launcher script.

        The cost model inserts its logging options after argv[0] and runs the command itself, so argv[0]
        is a script that execs `evaluator.sandbox_launch`: the same sandbox as every other run (fresh
        uid, no network, secrets hidden, seccomp, limits, nothing left running); qemu writes the TB log
        into the sandbox's scratch folder and the launcher hands it over once the run is over.
        """
        options = [
            f"--wall={limits.wall_s:g}",
            f"--memory-mb={limits.memory_mb + QEMU_AS_OVERHEAD_MB}",
            f"--fsize-mb={MODEL_LOG_LIMIT_MB}",
            f"--nofile={limits.nofile}",
            f"--nproc={limits.nproc}",
            *(f"--hide={h}" for h in build.hidden),
        ]
        python = [sys.executable, "-S", "-P", "-m", "evaluator.sandbox_launch", *options, "--"]
        cmd = " ".join(shlex.quote(a) for a in [*python, shutil.which(QEMU) or QEMU])
        root = shlex.quote(str(PROJECT_ROOT))
        probed = f"EOK_SANDBOX_NETWORK={network_isolation()}"  # spares the launcher its own probe per run
        wrapper = _shared_script(f'#!/bin/sh\nPYTHONPATH={root} {probed} exec {cmd} "$@"\n')
        return [str(wrapper), "-cpu", target.qemu_cpu, build.program, *args]

    def release(self, build: Build) -> None:
        return None


_SCRIPTS: dict[str, Path] = {}
_SCRIPTS_LOCK = threading.Lock()


def _shared_script(text: str) -> Path:
    """An executable script with this content, written once per process and reused.

    Writing a fresh script per evaluation and exec'ing it raced with other threads' forks: a child that
    inherited the still-open write descriptor made the exec fail with ETXTBSY ("Text file busy").
    """
    key = hashlib.sha1(text.encode()).hexdigest()[:16]
    with _SCRIPTS_LOCK:
        if key not in _SCRIPTS:
            folder = private_build_dir("eok-scripts")
            path = folder / f"qemu-limited-{key}.sh"
            if not path.exists():
                tmp = folder / f".{key}.{os.getpid()}.tmp"
                tmp.write_text(text)
                tmp.chmod(0o755)
                os.replace(tmp, path)
            _SCRIPTS[key] = path
        return _SCRIPTS[key]


def model_available() -> bool:
    """True when evaluator/costmodel/ is present (it is written alongside this module)."""
    try:
        import evaluator.costmodel  # noqa: F401
    except ImportError:
        return False
    return True


def model_cache_dir(home: Path) -> Path:
    path = home / "cache" / "costmodel"
    path.mkdir(parents=True, exist_ok=True)
    return path
