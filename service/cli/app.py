"""The root Typer app and the one place that turns errors into a clear line and an exit code."""

from __future__ import annotations

import json
import sys
from typing import Any

import typer
from rich.console import Console

from core.errors import EokError

app = typer.Typer(
    name="eok",
    help="EoK: experience-driven kernel optimizer for SpacemiT K1/K3 (RISC-V).",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
console = Console()
err_console = Console(stderr=True, soft_wrap=True)  # an error stays one line when piped

JsonOpt = typer.Option(False, "--json", help="Print machine-readable JSON instead of tables.")


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


def run_cli(argv: list[str] | None = None) -> int:
    """Run the app; EokError becomes one red line (plus the fix) and its exit code, never a traceback."""
    try:
        app(args=argv, standalone_mode=True)
    except SystemExit as e:  # standalone mode reports usage errors and exits itself
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except EokError as e:
        err_console.print(f"[bold red]error:[/] {e.message}", highlight=False)
        if e.hint:
            err_console.print(f"[yellow]fix:[/] {e.hint}", highlight=False)
        return e.exit_code
    return 0


@app.callback()
def _root() -> None:
    """EoK: experience-driven kernel optimizer for SpacemiT K1/K3 (RISC-V)."""


@app.command()
def version(json_out: bool = JsonOpt) -> None:
    """Print the EoK version."""
    from importlib.metadata import version as pkg_version

    v = pkg_version("eok")
    print_json({"version": v}) if json_out else console.print(f"eok {v}")
