"""`eok mine REPO`: mine a git history into optimization ideas and thoughts in the graph."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

from miners import LIBRARIES
from service.cli.app import JsonOpt, app, console, err_console, print_json

if TYPE_CHECKING:
    from miners import MineReport
    from miners.gitwalk import EarlyWalk


class _RichProgress:
    """Progress bar with commits/s; drawn on stderr so --json output stays clean."""

    def __init__(self, bar: Progress) -> None:
        self.bar = bar
        self.tasks: dict[str, TaskID] = {}
        self.started: dict[str, float] = {}
        self.first: dict[str, int] = {}

    def update(self, phase: str, done: int, total: int | None) -> None:
        if phase not in self.tasks:
            self.tasks[phase] = self.bar.add_task(phase, total=total, rate="")
            self.started[phase] = time.monotonic()
            self.first[phase] = done
        elapsed = time.monotonic() - self.started[phase]
        # A rate from the items done since the phase's first report, once there is time to divide by
        # (the first report of 200 commits after 4 microseconds read as 49,188,392/s).
        moved = done - self.first[phase]
        rate = f"{moved / elapsed:,.0f}/s" if elapsed >= 0.5 and moved > 0 else ""
        self.bar.update(self.tasks[phase], completed=done, total=total, rate=rate)


@app.command()
def mine(
    repo: str = typer.Argument(..., help="A git work tree, a bare repository, or a URL to clone."),
    library: str = typer.Option("auto", "--library", help=f"Kernel path profile: {', '.join(LIBRARIES)}."),
    since: str | None = typer.Option(None, "--since", help="Mine only commits after this revision."),
    full: bool = typer.Option(False, "--full", help="Walk the whole history again, whatever was mined before."),
    limit: int | None = typer.Option(None, "--limit", min=1, help="Mine at most N commits (newest first)."),
    llm: bool = typer.Option(False, "--llm", help="Have the configured LLM write the lessons."),
    name: str | None = typer.Option(None, "--name", help="Repository name in the graph (default: derived)."),
    json_out: bool = JsonOpt,
) -> None:
    """Mine a repository's history for optimization commits; incremental and idempotent."""
    from core.errors import InvalidInput
    from miners import check_library
    from miners.gitwalk import EarlyWalk

    check_library(library.lower())  # a bad option first: the user's to fix whatever the folder is
    if not repo.startswith(("http://", "https://", "git@", "ssh://", "file://")) and not Path(repo).is_dir():
        what = "is not a directory" if Path(repo).exists() else "does not exist"
        raise InvalidInput(f"repository {repo} {what}", "give a git work tree, a bare repository or a URL")
    if Path(repo).is_dir():
        _check_git(repo)

    # git starts on the whole history now and works while the graph driver is imported and connected;
    # the miner stops it if the run turns out to be incremental.
    early = EarlyWalk.start(repo) if since is None and limit is None else None
    try:
        report = _run(repo, library, since, full, limit, llm, name, json_out, early)
    finally:
        if early is not None:
            early.cancel()
    if json_out:
        print_json(report.as_dict())
        return
    _print_report(report)


def _check_git(repo: str) -> None:
    """A folder git does not take as a repository is said at once, before the graph and the models load."""
    import subprocess

    from core.errors import InvalidInput

    done = subprocess.run(["git", "-C", repo, "rev-parse", "--git-dir"], capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        why = next((ln for ln in done.stderr.splitlines() if ln.strip()), "git does not take it as a repository")
        raise InvalidInput(
            f"repository {repo} is not a git repository ({why.removeprefix('fatal: ').strip()})",
            "give a git work tree, a bare repository or a URL (or run `git init` there)",
        )


def _run(
    repo: str,
    library: str,
    since: str | None,
    full: bool,
    limit: int | None,
    llm: bool,
    name: str | None,
    json_out: bool,
    early: EarlyWalk | None,
) -> MineReport:
    from core.errors import InvalidInput
    from core.settings import get_settings
    from miners import MineOptions, Miner
    from service.bootstrap import Container

    options = MineOptions(library=library.lower(), since=since, full=full, limit=limit, llm=llm, name=name)
    options.validate()
    if llm and not get_settings().llm_configured:
        raise InvalidInput("--llm: no LLM endpoint configured", "set OPENAI_BASE_URL / OPENAI_API_KEY or drop --llm")
    container = Container()
    try:
        bar = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[rate]}"),
            TimeElapsedColumn(),
            console=err_console,
            transient=False,  # each stage's count stays on screen
            disable=json_out,
        )
        with bar:
            miner = Miner(container.store, lambda: container.embedder, container.settings, _RichProgress(bar))
            return miner.mine(repo, options, early)
    finally:
        container.close()


def _print_report(r: MineReport) -> None:
    if r.no_kernel_code:
        console.print(
            f"{r.repository}: found no kernel code (no C, C++, assembly, Fortran, GPU or Rust source at HEAD); "
            "nothing was mined",
            highlight=False,
        )
        return
    if r.up_to_date:
        console.print(
            f"{r.repository}: already mined up to {(r.head or 'an empty history')[:12]}; nothing to do",
            highlight=False,
        )
        return
    t = Table(title=f"mined {r.repository} ({r.library})", show_header=False)
    rows = [
        ("commits read", f"{r.commits_read:,} ({r.new_commits:,} new)"),
        ("candidates (patches read)", f"{r.candidates:,}"),
        ("optimization commits", f"{r.optimization_commits:,}"),
        ("by ISA", ", ".join(f"{k} {v}" for k, v in r.optimization_by_isa.items()) or "-"),
        ("thoughts created / updated", f"{r.thoughts_created} / {r.thoughts_updated}"),
        ("commits of mirrored PRs", f"{r.mirrored_commits}"),
        ("ideas created / updated", f"{r.ideas_created} / {r.ideas_updated}"),
        ("head", (r.head or "")[:12]),
        ("--since ranges kept", ", ".join(x[:9] + ".." + x.split("^")[1][:9] for x in r.mined_ranges) or "-"),
        ("time", f"{r.seconds:.1f} s ({r.commits_read / max(r.seconds, 1e-6):,.0f} commits/s)"),
    ]
    if r.llm_calls or r.llm_failures:
        rows.append(("LLM calls / failures", f"{r.llm_calls} / {len(r.llm_failures)}"))
    for k, v in rows:
        t.add_row(k, v)
    console.print(t)
    for w in r.warnings[:20]:
        err_console.print(f"[yellow]warning:[/] {w}", highlight=False)
    if len(r.warnings) > 20:
        err_console.print(f"[yellow]... {len(r.warnings) - 20} more warnings (use --json)[/]")
