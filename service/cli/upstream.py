"""`eok upstream build|test`: build a library people ship for a target, and run its own tests for a routine
(docs/UPSTREAM.md)."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

import typer

from service.cli.app import JsonOpt, app, console, err_console, print_json

upstream_app = typer.Typer(
    help="Build OpenBLAS, ggml or ONNX Runtime's MLAS for a target; run their own tests.", no_args_is_help=True
)
app.add_typer(upstream_app, name="upstream")


class LibraryName(StrEnum):
    openblas = "openblas"
    ggml = "ggml"
    mlas = "onnxruntime-mlas"


LibraryArg = typer.Argument(..., help="The library: openblas, ggml or onnxruntime-mlas.")
CloneArg = typer.Argument(..., help="A git clone of the library (never written to).")
TargetOpt = typer.Option("k1-x60", "--target", "-t", help="The target to build for (a key, or a target TOML).")


def _progress(line: str) -> None:
    # Progress goes to stderr: with --json, stdout holds only the result.
    err_console.print(line, highlight=False, markup=False)


@upstream_app.command("build")
def build_command(
    library: LibraryName = LibraryArg,
    clone: Path = CloneArg,
    target: str = TargetOpt,
    jobs: int = typer.Option(2, "--jobs", "-j", min=1, max=64, help="Parallel compile jobs."),
    json_out: bool = JsonOpt,
) -> None:
    """Cross-build the library with clang-22 for the target (cached per commit and uncommitted changes)."""
    from evaluator.upstream.build import build_library

    built = build_library(library.value, clone, target, progress=_progress, jobs=jobs)
    if json_out:
        print_json(built.model_dump())
        return
    console.print(f"{built.label} for {built.target}:", highlight=False)
    for archive in built.archives:
        console.print(f"  {archive}", highlight=False, soft_wrap=True)


@upstream_app.command("test")
def test_command(
    library: LibraryName = LibraryArg,
    clone: Path = CloneArg,
    routine: str = typer.Argument(..., help="The library's routine: sdot, saxpy, sgemv_t, ggml_vec_dot_q8_0_q8_0, ..."),
    target: str = TargetOpt,
    bench: int = typer.Option(0, "--bench", help="Also model one call at this size (n) in the library's build."),
    json_out: bool = JsonOpt,
) -> None:
    """Build the library (or use its cached build), run its own tests for the routine under qemu, and with
    --bench N model the routine's cycles at size N. Exits 1 when a test of the library fails."""
    from evaluator.upstream.build import build_library
    from evaluator.upstream.library_tests import run_library_benchmark, run_library_tests

    progress = _progress
    built = build_library(library.value, clone, target, progress=progress)
    result = run_library_tests(built, routine, progress=progress)
    cycles = run_library_benchmark(built, routine, bench, progress=progress) if bench and result.ok else None
    if json_out:
        print_json({**result.model_dump(), "ok": result.ok, "bench_size": bench or None, "modeled_cycles": cycles})
    else:
        verdict = "passed" if result.ok else "FAILED"
        console.print(
            f"{built.label} {routine}: the library's tests {verdict} ({result.passed} passed, {result.failed} failed)",
            highlight=False,
        )
        for case in result.failed_cases:
            console.print(f"  failed: {case}", highlight=False)
        console.print(f"  ran: {result.command}", highlight=False, soft_wrap=True)
        if cycles is not None:
            console.print(f"  modeled cycles at n={bench}: {cycles:,.0f}", highlight=False)
        if not result.ok:
            console.print(result.output_tail, highlight=False, markup=False)
    if not result.ok:
        raise typer.Exit(1)
