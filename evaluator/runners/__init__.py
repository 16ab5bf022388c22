"""Runners: where harness binaries run (qemu-user, a board over SSH, this host)."""

from __future__ import annotations

from core.errors import InvalidInput
from core.settings import Settings
from evaluator.runners.base import Measurement, Runner
from evaluator.runners.native import NativeRunner
from evaluator.runners.qemu import QemuRunner
from evaluator.runners.ssh import SshRunner

__all__ = ["Measurement", "NativeRunner", "QemuRunner", "Runner", "SshRunner", "get_runner"]

RUNNER_NAMES = ("qemu", "ssh", "native")


def get_runner(name: str, settings: Settings) -> Runner:
    """The runner called `name`, configured from settings (the ssh runner reads EOK_SSH_*)."""
    if name == "qemu":
        return QemuRunner()
    if name == "native":
        return NativeRunner()
    if name == "ssh":
        return SshRunner.from_settings(settings)
    raise InvalidInput(f"unknown runner {name!r}", f"use one of: {', '.join(RUNNER_NAMES)}")
