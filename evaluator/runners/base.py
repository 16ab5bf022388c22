"""The runner port: where a harness binary runs, and what kind of timing that gives."""

from __future__ import annotations

from typing import Literal, Protocol, runtime_checkable

from evaluator.sandbox import Limits, RunOutput
from evaluator.targets import TargetProfile
from evaluator.toolchain import Build, BuildKind

Measurement = Literal["modeled", "measured", "native"]


@runtime_checkable
class Runner(Protocol):
    """Runs harness binaries for one kind of machine.

    `build_kind` says how binaries must be compiled for it (emulator-safe ISA subset, the board's full
    ISA, or the host); `measurement` what its timings are: cycles from the cost model (qemu), seconds on
    a real board (ssh), or seconds on this host (native).
    """

    name: str
    measurement: Measurement
    build_kind: BuildKind

    def check(self, target: TargetProfile) -> None:
        """Raise Unavailable/InvalidInput when this runner cannot serve `target` here."""
        ...

    def execute(self, build: Build, args: list[str], target: TargetProfile, limits: Limits) -> RunOutput:
        """Run `harness <args>` from `build` under `limits`; report what happened, never raise for it."""
        ...

    def release(self, build: Build) -> None:
        """Drop anything kept for `build` (a copy on a board)."""
        ...
