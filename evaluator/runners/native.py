"""Run harnesses on this host: quick checks of tasks and portable candidates, real seconds."""

from __future__ import annotations

from evaluator.runners.base import Measurement
from evaluator.sandbox import Limits, RunOutput, run
from evaluator.targets import TargetProfile
from evaluator.toolchain import Build, BuildKind


class NativeRunner:
    name = "native"
    measurement: Measurement = "native"
    build_kind: BuildKind = "host"

    def check(self, target: TargetProfile) -> None:
        return None  # native builds use the host profile whatever the target; the result says so

    def execute(self, build: Build, args: list[str], target: TargetProfile, limits: Limits) -> RunOutput:
        return run(["./" + build.binary.name, *args], build.workdir, limits)

    def release(self, build: Build) -> None:
        return None
