"""The root Typer app and the one place that turns errors into a clear line and an exit code."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import threading
from collections.abc import Callable, Iterator
from enum import StrEnum
from pathlib import Path
from typing import Any, NoReturn

import typer
from pydantic import ValidationError
from rich.console import Console
from typer._click import exceptions as click_errors  # typer vendors click: its own classes

from core.errors import EokError, InvalidInput

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
LibraryOpt = typer.Option(
    None,
    "--library",
    exists=True,
    help="A built library (its eok-library.json or cache folder) timed as a baseline where the task maps to it; "
    "repeatable. Default: EOK_LIBRARY.",
)


def with_libraries(settings: Any, libraries: list[Path] | None) -> Any:
    """The settings with --library in place of EOK_LIBRARY when given (read and checked by the Evaluator)."""
    return settings.model_copy(update={"library": list(libraries)}) if libraries else settings


class RunnerName(StrEnum):
    qemu = "qemu"
    ssh = "ssh"
    native = "native"


class GeneratorName(StrEnum):
    auto = "auto"
    llm = "llm"
    offline = "offline"


# Commands that write under EOK_HOME (Neo4j data, caches, run artefacts): it is checked before they start.
WRITES_HOME = {"db", "eval", "optimize", "mine", "serve", "up", "ideas", "calibrate", "upstream", "export"}
INTERRUPTED_EXIT = 130  # the shell's code for a process stopped by SIGINT


def print_plain_table(title: str, headers: list[str], rows: list[list[str]], wrap: int) -> None:
    """A table of plain cells, drawn like Rich's default box but without Rich's layout engine (~25 ms for
    60 rows, a tenth of the answer-at-once budget of `eok tasks list`). It fits the terminal's width (80 when
    piped) by wrapping column `wrap`'s cells at ", " (or anywhere, for a word longer than the column);
    nothing is read as markup."""
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(headers)]
    over = sum(widths) + 3 * len(widths) + 1 - console.width
    if over > 0:
        widths[wrap] = max(len(headers[wrap]), widths[wrap] - over)

    def lines(cells: list[str], bar: str) -> list[str]:
        wrapped = [_wrap(c, w) if i == wrap else [c[:w]] for i, (c, w) in enumerate(zip(cells, widths, strict=True))]
        height = max(len(parts) for parts in wrapped)
        return [
            bar
            + bar.join(f" {(p[k] if k < len(p) else '').ljust(w)} " for p, w in zip(wrapped, widths, strict=True))
            + bar
            for k in range(height)
        ]

    rules = ["━" * (w + 2) for w in widths]
    out = [title.center(sum(widths) + 3 * len(widths) + 1).rstrip(), "┏" + "┳".join(rules) + "┓"]
    out += [*lines(headers, "┃"), "┡" + "╇".join(rules) + "┩"]
    for row in rows:
        out += lines(row, "│")
    out.append("└" + "┴".join("─" * (w + 2) for w in widths) + "┘")
    console.file.write("\n".join(out) + "\n")


def _wrap(text: str, width: int) -> list[str]:
    """`text` in lines of at most `width`, broken after ", " where it can be."""
    parts, line = [], ""
    pieces = text.split(", ")
    for n, piece in enumerate(pieces):
        candidate = f"{line}, {piece}" if line else piece
        if len(candidate) + (n < len(pieces) - 1) <= width or not line:  # + the comma that follows, if one does
            line = candidate
        else:
            parts.append(line + ",")
            line = piece
        while len(line) > width:
            parts.append(line[:width])
            line = line[width:]
    return [*parts, line]


@contextlib.contextmanager
def working(what: str) -> Iterator[None]:
    """A spinner with the seconds elapsed on stderr while a step that may take seconds runs (connecting to
    Neo4j, loading the embedding model, a query): the user sees at once that something is happening. Gone
    when the step ends; nothing at all when stderr is not a terminal (pipes and --json readers)."""
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    columns = (SpinnerColumn(), TextColumn(what, markup=False), TimeElapsedColumn())
    with Progress(*columns, console=err_console, transient=True) as progress:
        progress.add_task(what, total=None)  # a Progress draws only its tasks: without one it shows nothing
        yield


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


_json_mode = False  # set by run_cli when --json is among the arguments: errors then also go to stdout as JSON


def _error(message: str, hint: str | None) -> None:
    if _json_mode:  # a script reading stdout gets an object even when the command fails
        print_json({"error": message, "fix": hint})
    err_console.print(f"[bold red]error:[/] {message}", highlight=False, markup=True)
    if hint:
        err_console.print(f"[yellow]fix:[/] {hint}", highlight=False)


def run_cli(argv: list[str] | None = None) -> int:
    """Run the app; every error becomes one line (plus the fix) and an exit code, never a traceback.

    Click's own usage errors are caught here too (standalone_mode=False) so a bad option is one line like
    every other error instead of a boxed panel."""
    global _json_mode
    _json_mode = "--json" in (sys.argv[1:] if argv is None else argv)
    # The driver retries a transient error itself (a deadlock between the graph writer and the run's own
    # writes on a busy node) and logs each retry as a multi-line warning on the user's screen; one that
    # still fails after its retries raises, and is reported like any other error.
    logging.getLogger("neo4j.session").setLevel(logging.ERROR)
    try:
        code = app(args=argv, prog_name="eok", standalone_mode=False)
        return code if isinstance(code, int) else 0
    except typer.Exit as e:
        return e.exit_code
    except click_errors.NoArgsIsHelpError as e:  # `eok db` alone: the help, as Typer prints it
        err_console.print(e.format_message() if hasattr(e, "format_message") else str(e))
        return 2
    except click_errors.UsageError as e:
        cmd = e.ctx.command_path if e.ctx else "eok"
        _error(_one_line(e.format_message()), f"see `{cmd} --help`")
        return 2
    except click_errors.ClickException as e:
        _error(_one_line(e.format_message()), None)
        return e.exit_code
    except (KeyboardInterrupt, typer.Abort):
        interrupted()
    except EokError as e:
        _error(_one_line(e.message), e.hint)
        return e.exit_code
    except ValidationError as e:  # a request model built from arguments: name the field
        err = e.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or e.title
        _error(f"{field}: {err['msg']}", "see `eok --help` for the accepted values")
        return 2
    except OSError as e:  # a path we could not create, read or write: name it
        _error(f"{e.filename or ''}: {e.strerror or e}".lstrip(": "), "check the path and its permissions")
        return 1
    except Exception as e:  # a bug: still one line; EOK_DEBUG=1 shows where
        if os.environ.get("EOK_DEBUG"):
            raise
        _error(f"unexpected {type(e).__name__}: {_one_line(str(e))}", "rerun with EOK_DEBUG=1 and report the traceback")
        return 1


# Work a command wants done when Ctrl-C stops it (e.g. mark its run interrupted); each returns a note or None.
_interrupt_hooks: list[Callable[[], str | None]] = []
INTERRUPT_BUDGET_S = 1.5  # Ctrl-C must end any command within 2 s


def on_interrupt(hook: Callable[[], str | None]) -> None:
    _interrupt_hooks.append(hook)


def interrupted() -> NoReturn:
    """Ctrl-C: run the hooks (bounded), end our own child processes, one line, exit 130 at once.

    Exiting with os._exit skips joining worker threads, which could otherwise wait out an evaluation's
    60 s limit; nothing is half-written because graph writes are transactions and files are replaced
    atomically. The local Neo4j is not ours to stop: it keeps running for the next command."""
    notes: list[str] = []

    def run_hooks() -> None:
        for hook in _interrupt_hooks:
            with contextlib.suppress(Exception):
                note = hook()
                if note:
                    notes.append(note)

    # Our compilers and qemu runs are paused (not killed: a killed one would be recorded as a crash) so the
    # hooks' graph writes get the CPU; on a busy 2-core machine they otherwise missed the budget.
    _signal_children(stop=True)
    worker = threading.Thread(target=run_hooks, daemon=True)
    worker.start()
    worker.join(INTERRUPT_BUDGET_S)
    _signal_children(stop=False)
    err_console.print(f"[yellow]interrupted[/]{': ' + '; '.join(notes) if notes else ''}", highlight=False)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(INTERRUPTED_EXIT)


def _signal_children(stop: bool) -> None:
    """Pause (stop=True) or kill the compilers and qemu runs we started (each in its own session, so
    Ctrl-C did not reach them); the local Neo4j is spared."""
    import psutil

    spared = _local_neo4j_pids()
    with contextlib.suppress(psutil.Error):
        for child in psutil.Process().children(recursive=True):
            if child.pid not in spared:
                with contextlib.suppress(psutil.Error):
                    child.suspend() if stop else child.kill()


def _local_neo4j_pids() -> set[int]:
    import psutil

    from core.settings import get_settings

    with contextlib.suppress(Exception):
        from knowledge import local_neo4j

        pid = local_neo4j.pid(get_settings())
        if pid:
            return {pid, *(c.pid for c in psutil.Process(pid).children(recursive=True))}
    return set()


def _one_line(text: str) -> str:
    return " ".join(text.split())


def load_settings() -> Any:
    """The settings, or one line naming the malformed EOK_* variable (pydantic raises a multi-line error)."""
    from core.settings import SettingsError, get_settings

    try:
        return get_settings()
    except SettingsError as e:
        raise InvalidInput(
            f"{e.variable} is malformed: {_one_line(str(e.cause))}",
            f"give {e.variable} as JSON, e.g. " + _EXAMPLES.get(e.field, "a JSON value"),
        ) from None
    except ValidationError as e:
        err = e.errors()[0]
        field = ".".join(str(p) for p in err["loc"])
        raise InvalidInput(
            f"setting {field} ({_env_name(field)}): {err['msg']}", f"fix or unset {_env_name(field)}"
        ) from None


_EXAMPLES = {
    "api_keys": """'{"<key>": "operator"}' (roles: reader, analyst, operator)""",
    "task_dirs": """'["/path/to/tasks"]'""",
    "mine_repos": """'["/path/to/OpenBLAS"]'""",
}


def _env_name(field: str) -> str:
    from core.settings import Settings, variable_names

    return variable_names(field)[0] if field in Settings.model_fields else f"EOK_{field.upper()}"


def check_home(home: Path) -> None:
    """EOK_HOME must be a directory we can write (created when missing)."""
    if home.exists() and not home.is_dir():
        raise InvalidInput(f"EOK_HOME {home} is not a directory", "set EOK_HOME to a writable directory") from None
    try:
        home.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InvalidInput(
            f"EOK_HOME {home} cannot be created: {e.strerror}", "set EOK_HOME to a writable directory"
        ) from None
    if not os.access(home, os.W_OK | os.X_OK):
        raise InvalidInput(f"EOK_HOME {home} is not writable", "set EOK_HOME to a writable directory") from None


@app.callback()
def _root(ctx: typer.Context) -> None:
    """EoK: experience-driven kernel optimizer for SpacemiT K1/K3 (RISC-V)."""
    if ctx.resilient_parsing or "--help" in sys.argv:
        return
    settings = load_settings()
    if ctx.invoked_subcommand in WRITES_HOME:
        check_home(settings.home)


@app.command()
def version(json_out: bool = JsonOpt) -> None:
    """Print the EoK version."""
    from importlib.metadata import version as pkg_version

    v = pkg_version("eok")
    print_json({"version": v}) if json_out else console.print(f"eok {v}")
