"""`eok --help` prints from COMMAND_SUMMARY without importing the command modules: the same text as when
every module is imported, so the summary cannot fall out of step with the commands."""

from __future__ import annotations

import subprocess
import sys

from core.settings import PROJECT_ROOT

RENDER = """
import sys
from service.cli import _register
from service.cli.app import run_cli
_register({argv})
sys.stdout.write(repr(sorted(m for m in sys.modules if m.startswith("service.cli."))) + "\\n")
run_cli(["--help"])
"""


def _help(argv: str) -> tuple[str, str]:
    done = subprocess.run(
        [sys.executable, "-c", RENDER.format(argv=argv)],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        env={"COLUMNS": "80", "PATH": "/usr/bin:/bin", "HOME": "/tmp"},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    modules, text = done.stdout.split("\n", 1)
    return modules, text


def test_top_level_help_from_the_summary_matches_the_commands() -> None:
    summary_modules, from_summary = _help("['--help']")
    all_modules, from_commands = _help("None")
    assert from_summary == from_commands
    assert "service.cli.optimize" in all_modules and "service.cli.optimize" not in summary_modules
