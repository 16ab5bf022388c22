"""The `eok` command. Each command group lives in its own module and registers itself here."""

from __future__ import annotations

import signal
import sys

from service.cli.app import app, interrupted, run_cli

__all__ = ["app", "main"]


def _register() -> None:
    # Imported for their side effect of adding commands to `app`; a group missing its module is skipped
    # so partial checkouts still give a working CLI for what exists.
    import importlib

    for name in ("db", "tasks", "mine", "ideas", "optimize", "cypher", "serve", "main_job", "cluster"):
        try:
            importlib.import_module(f"service.cli.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"service.cli.{name}":
                raise


def main() -> None:
    # Ctrl-C acts at once, wherever the main thread waits (a thread pool's shutdown would otherwise wait out
    # running evaluations). `eok serve` replaces this with uvicorn's graceful shutdown while it serves.
    signal.signal(signal.SIGINT, lambda *_: interrupted())
    _register()
    sys.exit(run_cli())
