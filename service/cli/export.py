"""`eok export RUN --to openblas|ggml CLONE`: the run's best kernel as a commit in the library's source,
built, tested by the library's own tests and benchmarked before and after (docs/UPSTREAM.md, "Export")."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from core.settings import get_settings
from service.cli.app import JsonOpt, app, console, err_console, print_json


class ExportTo(StrEnum):
    openblas = "openblas"
    ggml = "ggml"


@app.command("export")
def export_command(
    run: Annotated[str, typer.Argument(help="run id (under EOK_HOME/runs) or run folder")],
    clone: Annotated[Path, typer.Argument(help="git clone of the library; gets one new branch, nothing else")],
    to: Annotated[ExportTo, typer.Option("--to", help="the library the clone is")],
    verify: Annotated[
        bool, typer.Option("--verify/--no-verify", help="build, run the library's tests and its benchmark")
    ] = True,
    json_out: bool = JsonOpt,
) -> None:
    """Write the run's best kernel into the library in its own conventions, as one commit on a new branch
    eok/<task>-<run>; build it, run the library's own tests for the routine under qemu and its benchmark
    under the cost model at HEAD and on the branch. Exits non-zero when a library test fails."""
    from agent.export import export_run

    def progress(line: str) -> None:
        err_console.print(line, highlight=False, markup=False)

    result = export_run(run, to.value, clone, home=get_settings().home, progress=progress, verify=verify)
    if json_out:
        print_json({**result.__dict__, "good": result.good, "delete": result.delete_hint})
    else:
        _print(result, verify)
    if verify and not result.good:
        raise typer.Exit(1)


def _say(text: str, **style: str) -> None:
    console.print(text, highlight=False, soft_wrap=True, **style)  # a path or command is never wrapped


def _print(r, verify: bool) -> None:
    _say(f"{r.library}: branch {r.branch} at {r.commit[:10]} (from {r.base[:10]})")
    for f in r.files:
        _say(f"  {f}")
    if not verify:
        _say("not built or tested (--no-verify)")
        return
    _say(f"{r.routine}: the library's benchmark at n={r.bench_size} (modeled cycles), its tests under qemu")
    _say(_table(r))
    for note in r.notes:
        _say(f"note: {note}")
    if r.good:
        _say(f"good: every library test of {r.routine} passes with the exported kernel")
    else:
        _say(f"NOT good: {r.problem}", style="bold red")
        _say(f"the branch is left for inspection; delete it with: {r.delete_hint}")


def _table(r) -> str:
    """Rows of at most 72 columns: the library's benchmark at HEAD and on the branch, and its tests."""
    t = r.tests or {}
    before, after = r.cycles_before, r.cycles_after
    rows = [
        ("", "HEAD (library)", "branch (EoK)"),
        ("cycles", _cycles(before), _cycles(after)),
        ("speedup", "1.00x" if before else "-", f"{before / after:.2f}x" if before and after else "-"),
        ("library tests", "-", f"{t.get('passed', 0)} passed, {t.get('failed', 0)} failed" if t else "not run"),
    ]
    return "\n".join(f"  {a:<16}{b:>24}{c:>28}".rstrip() for a, b, c in rows)


def _cycles(c: float | None) -> str:
    return f"{c:,.0f}" if c else "-"
