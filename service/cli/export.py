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


def _print(r, verify: bool) -> None:
    console.print(f"{r.library}: branch {r.branch} at {r.commit[:10]} (from {r.base[:10]})", highlight=False)
    for f in r.files:
        console.print(f"  {f}", highlight=False)
    if not verify:
        console.print("not built or tested (--no-verify)", highlight=False)
        return
    console.print(_table(r), highlight=False)
    for note in r.notes:
        console.print(f"note: {note}", highlight=False)
    if r.good:
        console.print(f"good: every library test of {r.routine} passes with the exported kernel", highlight=False)
    else:
        console.print(f"NOT good: {r.problem}", highlight=False, style="bold red")
        console.print(f"the branch is left for inspection; delete it with: {r.delete_hint}", highlight=False)


def _table(r) -> str:
    """A small table that fits 80 columns: the library's benchmark before and after, and its tests."""
    t = r.tests or {}
    before, after = r.cycles_before, r.cycles_after
    speed = f"{before / after:.2f}x" if before and after else "-"
    rows = [
        ("", "HEAD (library)", "branch (EoK)"),
        (f"{r.routine} bench, n={r.bench_size}", _cycles(before), _cycles(after)),
        ("modeled speedup", "1.00x", speed),
        ("library tests", "-", f"{t.get('passed', 0)} passed, {t.get('failed', 0)} failed"),
    ]
    return "\n".join(f"{a:<30}{b:>20}{c:>28}" for a, b, c in rows)


def _cycles(c: float | None) -> str:
    return f"{c:,.0f} cycles" if c else "-"
