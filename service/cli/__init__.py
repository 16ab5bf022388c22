"""The `eok` command. Each command group lives in its own module and registers itself here."""

from __future__ import annotations

import signal
import sys

from service.cli.app import app, interrupted, run_cli

__all__ = ["app", "main"]


# The module that defines each top-level command. `eok mine` imports only the mine command: all of them
# cost about 0.5 s of imports (the Cypher guard, the API models, Ray's client) that most commands never use.
COMMAND_MODULES = {
    "db": "db",
    "tasks": "tasks",
    "eval": "tasks",
    "mine": "mine",
    "ideas": "ideas",
    "optimize": "optimize",
    "cypher": "cypher",
    "serve": "serve",
    "up": "main_job",
    "worker": "cluster",
    "bootstrap": "cluster",
    "calibrate": "calibrate",
    "upstream": "upstream",
    "export": "export",
}
ALL_MODULES = tuple(dict.fromkeys(COMMAND_MODULES.values()))


def _register(argv: list[str] | None = None) -> None:
    """Add the commands to `app`: the module of the command `argv` names, else all (help, a typo, None)."""
    # Imported for their side effect of adding commands to `app`; a group missing its module is skipped
    # so partial checkouts still give a working CLI for what exists.
    import importlib

    first = next((a for a in argv or () if not a.startswith("-")), None)
    for name in (COMMAND_MODULES[first],) if first in COMMAND_MODULES else ALL_MODULES:
        try:
            importlib.import_module(f"service.cli.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"service.cli.{name}":
                raise


def main() -> None:
    # Ctrl-C acts at once, wherever the main thread waits (a thread pool's shutdown would otherwise wait out
    # running evaluations). `eok serve` replaces this with uvicorn's graceful shutdown while it serves.
    signal.signal(signal.SIGINT, lambda *_: interrupted())
    _register(sys.argv[1:])
    sys.exit(run_cli())
