"""`eok tasks list|show|targets` and `eok eval`: the kernel task suite and single evaluations."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.markup import escape
from rich.table import Table

from core.errors import InvalidInput
from core.settings import get_settings
from service.cli.app import (
    JsonOpt,
    LibraryOpt,
    RunnerName,
    app,
    console,
    err_console,
    print_json,
    print_plain_table,
    with_libraries,
)

tasks_app = typer.Typer(help="List and inspect kernel tasks (bundled suite + EOK_TASK_DIRS).", no_args_is_help=True)
app.add_typer(tasks_app, name="tasks")


@tasks_app.command("list")
def list_cmd(json_out: bool = JsonOpt) -> None:
    """Every task: name, category, operator, dtype and bench size; broken task directories with why."""
    from evaluator.tasks import scan_task_summaries

    tasks, broken = scan_task_summaries(get_settings())
    if json_out:
        print_json(tasks + [{"directory": str(d), "broken": reason} for d, reason in broken])
        return
    rows = [
        [t["name"], t["category"], t["operator"], t["dtype"], ", ".join(f"{k}={v}" for k, v in t["bench_size"].items())]
        for t in tasks
    ]
    title = f"{len(tasks)} kernel tasks" + (f", {len(broken)} broken" if broken else "")
    # The name is never broken (it is typed into `eok eval` / `eok optimize`); the bench sizes wrap to fit.
    print_plain_table(title, ["name", "category", "operator", "dtype", "bench size"], rows, wrap=4)
    for directory, reason in broken:  # one bad task directory does not hide the others
        err_console.print(f"broken task {directory}: {reason}", highlight=False, markup=False)


@tasks_app.command("show")
def show(
    name: str = typer.Argument(..., help="Task name or path to a task directory."), json_out: bool = JsonOpt
) -> None:
    """One task in full: spec, sizes, arguments and the reference code."""
    from evaluator.tasks import load_task, task_summary

    task = load_task(name, get_settings())
    if json_out:
        print_json(
            {
                **task_summary(task),
                "description": task.description,
                "tolerance": task.tolerance.model_dump(),
                "flops": task.flops,
                "sizes": task.sizes,
                "bench_index": task.bench_index,
                "args": {k: v.model_dump(exclude_none=True) for k, v in task.args.items()},
                "library": [lib.model_dump() for lib in task.library],
                "reference_code": task.reference_code,
            }
        )
        return
    console.print(f"[bold]{escape(task.name)}[/]  ({task.category.value} / {task.operator.value}, {task.dtype})")
    console.print(task.description, highlight=False, markup=False)  # `[lo, hi]`, `x[i]` are text, not markup
    console.print(f"signature: {task.signature}", highlight=False, markup=False)
    tol = task.tolerance
    console.print(f"tolerance: rtol {tol.rtol:g}, atol {tol.atol:g}, norm {tol.norm_bound:g}", highlight=False)
    for i, size in enumerate(task.sizes):
        mark = "  <- bench" if i == task.bench_index else ""
        console.print("  size " + ", ".join(f"{k}={v}" for k, v in size.items()) + mark, highlight=False)
    for lib in task.library:  # the library routines it is timed against where one is configured (--library)
        console.print(f"library: {lib.name} {lib.routine}", highlight=False, markup=False)
    console.print(f"directory: {task.directory}", highlight=False, markup=False)
    console.rule("reference.c")
    console.print(task.reference_code, highlight=False, markup=False)


@tasks_app.command("targets")
def targets(json_out: bool = JsonOpt) -> None:
    """The target cores EoK knows, with the numbers the reports use."""
    from evaluator.targets import list_targets

    profiles = list_targets()
    if json_out:
        print_json([p.model_dump() for p in profiles])
        return
    table = Table(title="targets")
    for col in ("key", "name", "VLEN/DLEN", "issue", "clock GHz", "L1D/L2 KB", "cost model"):
        table.add_column(col)
    for p in profiles:
        table.add_row(
            p.key,
            p.name,
            f"{p.vlen}/{p.dlen}" if p.vlen else "-",
            f"{p.issue}{' OoO' if p.out_of_order else ''}" if p.issue else "-",
            f"{p.clock_ghz:g}" if p.clock_ghz else "-",
            f"{p.l1d_kb}/{p.l2_kb}" if p.l1d_kb else "-",
            (p.cost_model + ("" if p.modeled_exact else " (proxy)")) if p.cost_model else "-",
        )
    console.print(table)


@app.command("eval")
def eval_cmd(
    task: str = typer.Argument(..., help="Task name or path to a task directory."),
    target: str = typer.Option(None, "--target", "-t", help="Target key (default: EOK_DEFAULT_TARGET)."),
    candidate: Path = typer.Option(
        None,
        "--candidate",
        "-c",
        exists=True,
        dir_okay=False,
        readable=True,
        help="Candidate C file (default: the reference).",
    ),
    cflags: str = typer.Option("", "--cflags", help='Extra compiler flags, e.g. "-O2 -funroll-loops".'),
    runner: RunnerName = typer.Option(None, "--runner", "-r", help="Default: EOK_DEFAULT_RUNNER (qemu)."),
    library: list[Path] = LibraryOpt,
    json_out: bool = JsonOpt,
) -> None:
    """Evaluate a candidate (or the reference itself) on a target: correctness, then timing."""
    from evaluator.evaluate import Candidate, Evaluator
    from evaluator.targets import load_target
    from evaluator.tasks import load_task
    from evaluator.toolchain import split_cflags

    settings = with_libraries(get_settings(), library)
    spec = load_task(task, settings)
    profile = load_target(target or settings.default_target)
    if candidate is not None:
        code, label = _read_candidate(candidate), candidate.name
    else:
        code, label = spec.reference_code, "reference"
    try:
        flags = split_cflags(cflags)
    except ValueError as e:
        raise InvalidInput(f"--cflags: {e}", "quote the flags as one shell-style string") from None
    evaluator = Evaluator(settings)
    with err_console.status(f"evaluating {label} on {spec.name} / {profile.key} ..."):
        cand = Candidate(code=code, cflags=flags, label=label)
        result = evaluator.evaluate(spec, profile, cand, runner.value if runner else None)
    if json_out:
        print_json(result.model_dump(mode="json"))
    else:
        _print_result(result)
    if not result.ok:
        raise typer.Exit(1)


def _read_candidate(path: Path) -> str:
    """The candidate's text, refused by its size before a byte is read (a 300 MB file took 940 MB to reject)."""
    from evaluator.safety import MAX_SOURCE_BYTES
    from evaluator.tasks import read_text_file

    size = path.stat().st_size
    if size > MAX_SOURCE_BYTES:
        raise InvalidInput(
            f"--candidate {path}: {size:,} bytes, more than the {MAX_SOURCE_BYTES >> 10} KB a candidate may have",
            "give the kernel's C source file",
        )
    return read_text_file(path)


def _error_bar(r: Any) -> str:
    """How far the modeled speedup can be trusted: the model's measured error on published silicon for this
    core (docs/COSTMODEL.md "Error bars") and the assumed figures the result rests on."""
    if r.speedup_error is not None:
        lo, hi = r.competent_speedup or r.speedup, r.speedup_error
        line = (
            f"model error on published kernels: x/{hi:.2f} typical (speedup {lo / hi:.2f}x-{lo * hi:.2f}x), "
            f"x/{r.speedup_error_worst:.2f} worst"
        )
    else:
        line = "model error: not measured on published kernels for this core"
    if r.rests_on:
        line += f"; {r.bound or 'compute'}-bound: rests on assumed {', '.join(r.rests_on)}"
    return line


def _print_result(r: Any) -> None:
    color = "green" if r.ok else "red"
    console.print(f"[bold {color}]{r.status.value}[/]  {r.task} on {r.target} via {r.runner}", highlight=False)
    console.print(r.feedback, highlight=False, markup=False)
    if r.max_error is not None:
        # A wrong answer may have no normalized error (e.g. NaN or a size mismatch): never print it as 0.
        norm = f", normalized error {r.norm_error:.3g}" if r.norm_error is not None else ""
        console.print(f"max error {r.max_error:.3g}{norm}", highlight=False)
    if r.measurement == "modeled":
        approx = " (approximate: proxy model)" if r.approximate else ""
        comp = f", competent {r.competent_cycles:.0f}" if r.competent_cycles else ""
        comp += f", {r.library_label} {r.library_cycles:.0f}" if r.library_cycles else ""
        console.print(
            f"modeled cycles: baseline {r.baseline_cycles:.0f}{comp}, candidate {r.candidate_cycles:.0f}{approx}",
            highlight=False,
        )
        if r.bound:
            console.print(
                f"candidate {r.bound}-bound: {r.flops_per_cycle or 0:.2f} of {r.peak_flops_per_cycle or 0:.0f} "
                f"FLOP/cycle, {r.dram_bytes_per_cycle or 0:.2f} of {r.peak_dram_bytes_per_cycle or 0:.2f} DRAM "
                f"B/cycle, {r.bytes_per_cycle or 0:.2f} B/cycle loaded+stored",
                highlight=False,
            )
    elif r.measurement in ("measured", "native"):
        comp = f", competent {r.competent_seconds:.3e}" if r.competent_seconds else ""
        comp += f", {r.library_label} {r.library_seconds:.3e}" if r.library_seconds else ""
        console.print(
            f"{r.measurement} seconds per call: baseline {r.baseline_seconds:.3e}{comp}, "
            f"candidate {r.candidate_seconds:.3e}",
            highlight=False,
        )
    if r.speedup is not None:
        comp = f"{r.competent_speedup:.2f}x" if r.competent_speedup is not None else "-"
        console.print(
            f"speedup {comp} over the competent baseline, {r.speedup:.2f}x over plain -O3 ({r.measurement})",
            highlight=False,
        )
        if r.speedup_over_library is not None:
            over = f"{r.speedup_over_library:.2f}x over {r.library_label} ({r.library_routine})"
            console.print(over, highlight=False, markup=False)
        if r.measurement == "modeled":
            console.print(_error_bar(r), highlight=False, markup=False)
    if r.library_problem:  # a finding about the library, beside the candidate's own verdict
        console.print(
            f"no time for {r.library_label}'s {r.library_routine}: {r.library_problem}", highlight=False, markup=False
        )
    if r.competent_cflags:
        console.print(f"competent baseline: -O3 {' '.join(r.competent_cflags)}", style="dim", highlight=False)
    console.print(f"{r.duration_s:.2f} s", style="dim", highlight=False)
