"""The modeled run's log check survives the log vanishing for a moment (evaluator/costmodel/trace.py).

The sandbox launcher ends a run by swapping its link to the log for the written file (unlink, then rename);
a size check between the two found the path gone and failed the whole run (seen once in the e2e web test).
"""

from __future__ import annotations

import subprocess
from pathlib import PosixPath

from evaluator.costmodel.trace import _wait_within_budget


class VanishingLog(PosixPath):
    """A path that exists when asked and is gone when its size is read: the swap, caught in between."""

    def exists(self, *args, **kwargs) -> bool:  # type: ignore[override]
        return True

    def stat(self, *args, **kwargs):  # type: ignore[override]
        raise FileNotFoundError(2, "No such file or directory", str(self))


def test_a_log_swapped_mid_check_is_not_an_error() -> None:
    proc = subprocess.Popen(["sleep", "0.2"])
    assert _wait_within_budget(proc, VanishingLog("/nonexistent/qemu-exec.log"), 10, 1 << 20) == "done"
