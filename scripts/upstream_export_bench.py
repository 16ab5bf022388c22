"""The export half of scripts/bench_upstream.py: export runs' best kernels into real clones and tabulate.

    python scripts/upstream_export_bench.py --openblas CLONE --ggml CLONE RUN [RUN ...]

Each RUN (id or folder) is exported into the clone of its library (`eok export`'s code path): the library is
built at HEAD and on the new branch, its own tests for the routine run under qemu, and its benchmark of the
routine is modeled on both builds. A run exported before into the same clone has its old branch replaced
(the clones given here are scratch clones: never the user's). Prints one table row per run; --json writes
the rows. `export_rows` is what bench_upstream.py calls.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent.export import ExportRefused, export_run
from agent.export.routines import GGML
from agent.export.runfolder import read_run, resolve


def library_of(task: str) -> str:
    return "ggml" if task in GGML else "openblas"  # a task of neither is refused by the OpenBLAS mapping


def export_rows(runs: list[str], clones: dict[str, Path], home: Path, progress=print) -> list[dict]:
    """One row per run: library, routine, tests, modeled cycles of the library's benchmark before/after."""
    rows = []
    for run in runs:
        record = read_run(resolve(run, home))
        library = library_of(record.task)
        clone = clones.get(library)
        row = {"run": record.run, "task": record.task, "library": library}
        if clone is None:
            rows.append({**row, "verdict": f"no --{library} clone given"})
            continue
        _drop_branch(clone, f"eok/{record.task}-{record.run}")
        t0 = time.monotonic()
        try:
            r = export_run(run, library, clone, home=home, progress=progress)
        except ExportRefused as e:
            rows.append({**row, "verdict": f"refused: {e.message}"})
            continue
        rows.append(
            {
                **row,
                "routine": r.routine,
                "branch": r.branch,
                "commit": r.commit,
                "tests": r.tests,
                "bench_size": r.bench_size,
                "cycles_library": r.cycles_before,
                "cycles_exported": r.cycles_after,
                "verdict": "good" if r.good else f"NOT good: {r.problem}",
                "notes": r.notes,
                "seconds": round(time.monotonic() - t0),
            }
        )
    return rows


def _drop_branch(clone: Path, branch: str) -> None:
    subprocess.run(["git", "-C", str(clone), "branch", "-D", branch], capture_output=True)


def table(rows: list[dict]) -> str:
    head = "| task | library routine | library tests | library's kernel | exported | speedup | verdict |"
    lines = [head, "|---|---|---|---|---|---|---|"]
    for r in rows:
        t = r.get("tests") or {}
        tests = f"{t['passed']} passed, {t['failed']} failed" if t else "-"
        before, after = r.get("cycles_library"), r.get("cycles_exported")
        speed = f"{before / after:.2f}x" if before and after else "-"
        size = f" (n={r['bench_size']})" if r.get("bench_size") else ""
        lines.append(
            f"| {r['task']} | {r.get('routine', '-')}{size} | {tests} | {_c(before)} | {_c(after)} | {speed} | "
            f"{r['verdict']} |"
        )
    return "\n".join(lines)


def _c(cycles: float | None) -> str:
    return f"{cycles:,.0f}" if cycles else "-"


def main() -> int:
    from core.settings import get_settings

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", help="run ids or run folders")
    ap.add_argument("--openblas", type=Path, help="a scratch clone of OpenBLAS")
    ap.add_argument("--ggml", type=Path, help="a scratch clone of ggml")
    ap.add_argument("--json", type=Path, help="write the rows here")
    a = ap.parse_args()
    clones = {k: v.resolve() for k, v in (("openblas", a.openblas), ("ggml", a.ggml)) if v}
    rows = export_rows(a.runs, clones, get_settings().home, progress=lambda s: print(s, file=sys.stderr))
    print(table(rows))
    if a.json:
        a.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 0 if all(r["verdict"] == "good" or r["verdict"].startswith("refused") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
