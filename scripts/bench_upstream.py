#!/usr/bin/env python3
"""The libraries people ship, built for the target: build, their own tests, their benchmark's modeled cycles.

For each library given a clone of: `build_library` (cached per commit), then for each routine EoK exports
(OpenBLAS: sdot, saxpy, sgemv_t, sgemm; ggml: the q8_0 x q8_0 and q4_0 x q8_0 dots) the library's own
tests for it under qemu-riscv64 and the modeled X60 cycles of one call at the suite task's bench size in
the library's build (docs/UPSTREAM.md). One function per library returns its rows, so the export half
(`eok export`) can add the exported kernel's columns beside them.

    python scripts/bench_upstream.py --openblas /path/to/OpenBLAS --ggml /path/to/ggml [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from core.errors import EokError
from evaluator.upstream.build import build_library
from evaluator.upstream.built import BuiltLibrary
from evaluator.upstream.library_tests import run_library_benchmark, run_library_tests

# routine -> (suite task, size the library's benchmark is given): the suite task's bench size
OPENBLAS_ROUTINES = {
    "sdot": ("sdot", 16384),
    "saxpy": ("saxpy", 16384),
    "sgemv_t": ("sgemv_t", 512),  # n x n
    "sgemm": ("sgemm_64", 64),  # n x n x n
}
GGML_ROUTINES = {
    "ggml_vec_dot_q8_0_q8_0": ("q8_0_q8_0_dot", 4096 * 32),  # 4096 blocks of 32
    "ggml_vec_dot_q4_0_q8_0": ("q4_0_q8_0_dot", 512 * 32),
}


@dataclass
class Row:
    library: str
    routine: str
    task: str
    size: int
    tests_passed: int
    tests_failed: int
    failed_cases: list[str]
    test_command: str
    library_cycles: float | None  # modeled cycles of one call in the library's build (None: its tests failed)
    build_s: float  # the library's build (0 when it came from the cache), once per library
    test_s: float
    bench_s: float


def _progress(line: str) -> None:
    print(f"  {line}", file=sys.stderr, flush=True)


def _build(library: str, clone: Path, target: str) -> tuple[BuiltLibrary, float]:
    began = time.monotonic()
    built = build_library(library, clone, target, progress=_progress)
    return built, time.monotonic() - began


def _rows(built: BuiltLibrary, build_s: float, routines: dict[str, tuple[str, int]]) -> list[Row]:
    rows = []
    for routine, (task, size) in routines.items():
        t0 = time.monotonic()
        result = run_library_tests(built, routine, progress=_progress)
        t1 = time.monotonic()
        cycles = run_library_benchmark(built, routine, size, progress=_progress) if result.ok else None
        t2 = time.monotonic()
        rows.append(
            Row(built.library, routine, task, size, result.passed, result.failed, result.failed_cases,
                result.command, cycles, build_s, t1 - t0, t2 - t1)
        )  # fmt: skip
        build_s = 0.0  # counted on the first row only
    return rows


def bench_openblas(clone: Path, target: str = "k1-x60") -> list[Row]:
    """OpenBLAS built with its own make for the target; ctest's testers and the benchmark per routine."""
    built, seconds = _build("openblas", clone, target)
    return _rows(built, seconds, OPENBLAS_ROUTINES)


def bench_ggml(clone: Path, target: str = "k1-x60") -> list[Row]:
    """ggml built with its own CMake (RVV); test-quantize-fns and the benchmark per dot kernel."""
    built, seconds = _build("ggml", clone, target)
    return _rows(built, seconds, GGML_ROUTINES)


def table(rows: list[Row]) -> str:
    head = "| library | routine (task) | size | own tests | modeled cycles | build s | tests s | bench s |"
    lines = [head, "|---|---|---:|---|---:|---:|---:|---:|"]
    for r in rows:
        tests = f"{r.tests_passed} passed" + (f", {r.tests_failed} FAILED" if r.tests_failed else "")
        cycles = "-" if r.library_cycles is None else f"{r.library_cycles:,.0f}"
        lines.append(
            f"| {r.library} | {r.routine} ({r.task}) | {r.size} | {tests} | {cycles} | {r.build_s:.0f} | "
            f"{r.test_s:.0f} | {r.bench_s:.0f} |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--openblas", type=Path, help="a git clone of OpenBLAS")
    parser.add_argument("--ggml", type=Path, help="a git clone of ggml")
    parser.add_argument("--target", default="k1-x60")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args()
    if not args.openblas and not args.ggml:
        parser.error("give --openblas and/or --ggml (paths of git clones)")
    rows: list[Row] = []
    try:
        if args.openblas:
            rows += bench_openblas(args.openblas, args.target)
        if args.ggml:
            rows += bench_ggml(args.ggml, args.target)
    except EokError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(table(rows))
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in rows], indent=2) + "\n")
    return 0 if all(r.tests_failed == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
