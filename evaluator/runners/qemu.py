"""Run riscv64 harnesses under qemu-user: correctness here, timing from the X60 cost model."""

from __future__ import annotations

import shlex
import shutil
from dataclasses import replace
from pathlib import Path

from core.errors import InvalidInput, Unavailable
from evaluator.runners.base import Measurement
from evaluator.sandbox import Limits, RunOutput, network_isolation, run
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
        return run(self.argv(target, "./" + build.binary.name, args), build.workdir, qemu_limits)

    def model_argv(self, build: Build, target: TargetProfile, which: str, limits: Limits) -> list[str]:
        """qemu command line for the cost model's traced run, behind a limiting wrapper script.

        The cost model inserts its logging options after argv[0] and runs the command itself, so argv[0]
        is a script that applies address-space, CPU, file-size and descriptor limits and (where we may)
        a private network namespace before exec'ing qemu with whatever arguments it receives. It cannot
        drop to a sandbox uid: qemu must write the model's log into the model's own directory.
        """
        wrapper = build.workdir / "qemu-limited.sh"
        prefix = ["unshare", "--net", "--"] if network_isolation() == "netns" else []
        limit = [
            "prlimit",
            f"--as={(limits.memory_mb + QEMU_AS_OVERHEAD_MB) << 20}",
            f"--cpu={int(limits.wall_s) + 2}",
            f"--fsize={MODEL_LOG_LIMIT_MB << 20}",
            f"--nofile={limits.nofile}",
            "--core=0",
            "--",
        ]
        cmd = " ".join(shlex.quote(a) for a in [*prefix, *limit, shutil.which(QEMU) or QEMU])
        wrapper.write_text(f'#!/bin/sh\nexec {cmd} "$@"\n')
        wrapper.chmod(0o755)
        return [str(wrapper), "-cpu", target.qemu_cpu, "./" + build.binary.name, "model", which]

    def release(self, build: Build) -> None:
        return None


def model_available() -> bool:
    """True when evaluator/costmodel.py is present (it is written alongside this module)."""
    try:
        import evaluator.costmodel  # noqa: F401
    except ImportError:
        return False
    return True


def model_cache_dir(home: Path) -> Path:
    path = home / "cache" / "costmodel"
    path.mkdir(parents=True, exist_ok=True)
    return path
