"""Run harnesses on this host: quick checks of tasks and portable candidates, real seconds."""

from __future__ import annotations

from dataclasses import replace

from core.errors import InvalidInput
from evaluator.runners.base import Measurement
from evaluator.sandbox import Limits, RunOutput, run
from evaluator.targets import TargetProfile
from evaluator.toolchain import Build, BuildKind


class NativeRunner:
    name = "native"
    measurement: Measurement = "native"
    build_kind: BuildKind = "host"

    def check(self, target: TargetProfile) -> None:
        # Measuring this host for a RISC-V target would answer a different question than the one asked.
        if target.is_riscv:
            raise InvalidInput(
                f"runner 'native' cannot serve target {target.key!r}: it builds and times this host",
                "use --runner qemu (the emulated core) or ssh (a board), or --target host",
            )

    def execute(self, build: Build, args: list[str], target: TargetProfile, limits: Limits) -> RunOutput:
        # the native profile: the harness runs this host's code directly, so it may not make memory executable
        return run([build.program, *args], build.workdir, replace(limits, profile="native"), hidden=build.hidden)

    def release(self, build: Build) -> None:
        return None
