#!/usr/bin/env python3
"""How much of a speedup is the baseline's? Plain vs competent baseline per suite task (docs/TASKS.md).

For every task, on qemu k1-x60 (modeled X60 cycles): the plain baseline (reference at clang -O3, strict
FP), the competent baseline (plus the FP flags the task's tolerance allows), and the offline generator's
best family default (each applicable family rendered with its default knobs) over both. Prints a table
and the medians; the headline is the median over the competent baseline.

    python scripts/bench_baselines.py [--tasks sdot,sgemm_64,path/to/task_dir] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from agent.offline.generator import OfflineGenerator
from evaluator.evaluate import Candidate, EvalResult, Evaluator
from evaluator.targets import load_target
from evaluator.tasks import KernelTask, list_tasks, load_task


def best_offline(task: KernelTask, evaluator: Evaluator, target_key: str) -> tuple[str, EvalResult | None]:
    """The fastest correct family default among the families that apply to the task."""
    target = load_target(target_key)
    gen = OfflineGenerator(task, target)
    best: tuple[str, EvalResult | None] = ("-", None)
    for family in gen.families():
        v = gen.render(family, {k.name: k.default for k in gen.knobs(family)})
        r = evaluator.evaluate(task, target, Candidate(code=v.code, cflags=v.cflags, label=family), runner="qemu")
        if r.ok and r.speedup and (best[1] is None or r.speedup > (best[1].speedup or 0)):
            best = (family, r)
    return best


def row(task: KernelTask, evaluator: Evaluator, target_key: str) -> dict:
    base = evaluator.baseline(task, load_target(target_key), "qemu")
    family, r = best_offline(task, evaluator, target_key)
    return {
        "task": task.name,
        "plain_cycles": base.baseline_cycles,
        "competent_cycles": base.competent_cycles,
        "flags_gain": (base.baseline_cycles / base.competent_cycles)
        if base.baseline_cycles and base.competent_cycles
        else None,
        "family": family,
        "speedup": r.speedup if r else None,
        "competent_speedup": r.competent_speedup if r else None,
    }


def fmt(x: float | None, spec: str = ".2f") -> str:
    return "-" if x is None else format(x, spec)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", default="", help="comma-separated task names or task directories (default: suite)")
    ap.add_argument("--target", default="k1-x60")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    tasks = [load_task(t) for t in args.tasks.split(",") if t] if args.tasks else list_tasks()
    evaluator = Evaluator()
    t0 = time.monotonic()
    with ThreadPoolExecutor(args.jobs) as pool:
        rows = list(pool.map(lambda t: row(t, evaluator, args.target), tasks))
    print("| task | plain cycles | competent cycles | flags alone | best family | over plain | over competent |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['task']} | {fmt(r['plain_cycles'], '.0f')} | {fmt(r['competent_cycles'], '.0f')} | "
            f"{fmt(r['flags_gain'])}x | {r['family']} | {fmt(r['speedup'])}x | {fmt(r['competent_speedup'])}x |"
        )
    plain = [r["speedup"] or 0.0 for r in rows]
    comp = [r["competent_speedup"] or 0.0 for r in rows]
    print(
        f"\nmedian best family default over {len(rows)} tasks: {statistics.median(comp):.2f}x over the competent "
        f"baseline, {statistics.median(plain):.2f}x over plain -O3 ({time.monotonic() - t0:.0f} s)"
    )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
