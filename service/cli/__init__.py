"""The `eok` command. Each command group lives in its own module and registers itself here."""

from __future__ import annotations

import os
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

# What `eok --help` lists, in the order the modules register them: (name, is_group, first help paragraph).
# The top-level help is asked for far more often than it changes, and importing every module to print it
# cost ~0.6 s; tests/unit/test_cli_help.py renders it both ways and fails when this falls out of step.
COMMAND_SUMMARY: tuple[tuple[str, bool, str], ...] = (
    ("db", True, "Start, stop and inspect the Neo4j that holds the experience graph."),
    ("tasks", True, "List and inspect kernel tasks (bundled suite + EOK_TASK_DIRS)."),
    ("eval", False, "Evaluate a candidate (or the reference itself) on a target: correctness, then timing."),
    ("mine", False, "Mine a repository's history for optimization commits; incremental and idempotent."),
    ("ideas", True, "Search and show mined ideas and thoughts."),
    ("optimize", False, "Optimize a kernel task for a target; every evaluated candidate is recorded in the graph."),
    ("cypher", False, "Run a saved Cypher query read-only (with the API's timeout and row cap), or list them."),
    ("serve", False, "Serve the API (OpenAPI docs at /docs) and the web page (/) until interrupted."),
    ("up", False, "Run the main job end to end on the embedded defaults, then serve the API and the page."),
    ("worker", False, "Join this machine to the evaluation cluster (or start its head), offering CPUs and boards."),
    ("bootstrap", False, "The brute-force first stage: run the agent on every (task, target) pair to fill the graph."),
    (
        "calibrate",
        False,
        "Time the calibration kernels on a board, fit the target's bandwidths and instruction-class prices,\n"
        "and write a target file to pass with `--target` to `eok eval` and `eok optimize`.",
    ),
    ("upstream", True, "Build OpenBLAS, ggml or ONNX Runtime's MLAS for a target; run their own tests."),
    (
        "export",
        False,
        "Write the run's best kernel into the library in its own conventions, as one commit on a new branch\n"
        "eok/<task>-<run>; build it, run the library's own tests for the routine under qemu and its benchmark\n"
        "under the cost model at HEAD and on the branch. Exits non-zero when a library test fails.",
    ),
)


def _register(argv: list[str] | None = None) -> None:
    """Add the commands to `app`: the module of the command `argv` names, else all (help, a typo, None)."""
    # Imported for their side effect of adding commands to `app`; a group missing its module is skipped
    # so partial checkouts still give a working CLI for what exists.
    import importlib

    first = next((a for a in argv or () if not a.startswith("-")), None)
    if (first is None and argv is not None and any(a in ("--help", "-h") for a in argv)) or argv == []:
        _register_summary()
        return
    for name in (COMMAND_MODULES[first],) if first in COMMAND_MODULES else ALL_MODULES:
        try:
            importlib.import_module(f"service.cli.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"service.cli.{name}":
                raise


def _register_summary() -> None:
    """Stand-ins that carry only each command's name and help: enough for the top-level help."""
    import typer

    def stand_in() -> None:  # never run: the help exits before any command does
        raise AssertionError("a help stand-in was invoked")

    for name, is_group, help_text in COMMAND_SUMMARY:
        if is_group:
            app.add_typer(typer.Typer(help=help_text), name=name)
        else:
            app.command(name, help=help_text)(stand_in)


def main() -> None:
    # Ctrl-C acts at once, wherever the main thread waits (a thread pool's shutdown would otherwise wait out
    # running evaluations). `eok serve` replaces this with uvicorn's graceful shutdown while it serves.
    signal.signal(signal.SIGINT, lambda *_: interrupted())
    # EoK uses no pydantic plugins; looking for them scans every installed package's entry points (~8 ms of
    # each command's start in a .venv holding torch). A user who sets the variable keeps their choice.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    _register(sys.argv[1:])
    sys.exit(run_cli())
