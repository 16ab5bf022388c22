#!/usr/bin/env python3
"""How close the cost model is to published silicon: every calibration figure, modeled vs published.

    python scripts/bench_fidelity.py                        X60 figures, fit and test sets, a table
    python scripts/bench_fidelity.py --core all --set all   every core (X60, X100, A100, the earlier X60 run)
    python scripts/bench_fidelity.py --kernels memcpy,LUT4 --json

Figures: evaluator/costmodel/calibration (rvv-bench-results, with their source); implementations:
calibration/tasks/rb_*/candidates. Each (implementation, n, target) is checked once against the reference
and priced with the current cost model (model_kernel_cycles); results are cached per binary hash and model
fingerprint, so a re-run without a model change takes seconds. Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from core.errors import EokError  # noqa: E402
from evaluator.costmodel.calibration import SETS, Figure, catalog, reproduced  # noqa: E402
from evaluator.costmodel.calibration.fidelity import (  # noqa: E402
    Results,
    default_cache,
    error_bars,
    model_figure,
    report,
)
from evaluator.costmodel.confidence import SUMMARY  # noqa: E402

CORES = {"x60": ["x60"], "x100": ["x100"], "a100": ["a100"], "x60-2025": ["x60-2025"]}


def chosen(core: str, kernels: list[str] | None, which: str) -> list[Figure]:
    cores = [*CORES] if core == "all" else CORES[core]
    sets = SETS if which == "all" else (which, "test2") if which == "test" else (which,)
    return [f for f in reproduced() if f.core in cores and f.set in sets and (not kernels or f.kernel in kernels)]


def model_all(figures: list[Figure], cache: Path) -> list[tuple[Figure, float]]:
    results = Results(cache)
    pairs, start = [], time.monotonic()
    for i, fig in enumerate(figures, 1):
        t = time.monotonic()
        pairs.append((fig, model_figure(fig, cache, results)))
        spent = time.monotonic() - t
        if spent > 0.5 or i == len(figures):
            print(f"[{i}/{len(figures)}] {fig.key}: {spent:.1f} s (total {time.monotonic() - start:.0f} s)",
                  file=sys.stderr, flush=True)  # fmt: skip
    return pairs


def fmt_summary(name: str, s: dict) -> str:
    if not s.get("count"):
        return f"  {name:16} -"
    g = lambda k: f"{s[k]:.2f}" if s.get(k) is not None else "-"  # noqa: E731
    return (f"  {name:16}{s['count']:5d}{s['median_error']:9.2f}x{s['worst_error']:8.2f}x"
            f"{s['within_1.5x']:6d}{s['within_2x']:5d}{g('geomean_scalar'):>9}{g('geomean_vector'):>9}")  # fmt: skip


def print_report(rep: dict, pairs: list[tuple[Figure, float]]) -> None:
    names = {"fit": "FIT", "test": "TEST", "test2": "SECOND TEST SET (earlier X60 run, never fitted)"}
    for name, part in rep["sets"].items():
        print(f"\n== {names[name]}: {', '.join(sorted(part['kernels']))}")
        print(
            f"  {'kernel':16}{'pairs':>5}{'median':>10}{'worst':>9}{'<=1.5x':>6}{'<=2x':>5}{'gm scal':>9}{'gm vec':>9}"
        )
        for kernel, s in part["kernels"].items():
            print(fmt_summary(kernel, s))
        print(fmt_summary("overall", part["overall"]))
        worst = part["overall"].get("worst")
        if worst:
            print(f"  worst: {worst['figure']} modeled/published {worst['modeled_over_published']:.2f}")
        same = sum(w["same"] for w in part["winners"])
        print(f"  same winner: {same} of {len(part['winners'])} (core, kernel, n)")
        for w in part["winners"]:
            if not w["same"]:
                print(f"    {w['core']} {w['kernel']} n={w['n']}: published {w['published']}, modeled {w['modeled']}")
        print("  best vector over scalar (geometric mean over sizes): published / modeled / ratio")
        for s in part["speedups"]:
            print(f"    {s['core']:8} {s['kernel']:16}{s['published']:8.2f}x{s['modeled']:8.2f}x{s['ratio']:7.2f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--core", default="x60", choices=[*CORES, "all"], help="published core (default x60)")
    ap.add_argument("--kernels", help="comma-separated kernel names (default: all)")
    ap.add_argument("--set", dest="which", default="all", choices=["fit", "test", "all"],
                    help="fit, test (with the second test set) or all (default)")  # fmt: skip
    ap.add_argument("--json", action="store_true", help="print the report as JSON")
    ap.add_argument("--cache", type=Path, default=None, help="result cache (default: $EOK_HOME/cache/fidelity)")
    ap.add_argument(
        "--write-summary",
        action="store_true",
        help="write the error bars users see (calibration/fidelity_summary.json)",
    )
    args = ap.parse_args()
    known = catalog()["kernels"]
    kernels = [k.strip() for k in args.kernels.split(",")] if args.kernels else None
    for k in kernels or []:
        if k not in known:
            print(f"--kernels: unknown kernel {k!r} (known: {', '.join(known)})", file=sys.stderr)
            return 2
    figures = chosen(args.core, kernels, args.which)
    if not figures:
        print(f"no figures for --core {args.core} --set {args.which}; try --core all", file=sys.stderr)
        return 2
    try:
        pairs = model_all(figures, args.cache or default_cache())
    except EokError as e:
        print(f"bench_fidelity: {e.message}", file=sys.stderr)
        return 1
    rep = report(pairs)
    if args.write_summary:
        SUMMARY.write_text(json.dumps(error_bars(pairs), indent=1) + "\n")
        print(f"error bars written to {SUMMARY}", file=sys.stderr)
    if args.json:
        rep["figures"] = [{"key": f.key, "set": f.set, "kind": f.kind, "published_cycles": f.cycles,
                           "modeled_cycles": m, "source": f.source} for f, m in pairs]  # fmt: skip
        print(json.dumps(rep, indent=1))
    else:
        print_report(rep, pairs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
