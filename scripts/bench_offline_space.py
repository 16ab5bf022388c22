#!/usr/bin/env python3
"""Measure the offline generator's search space: each family default and its single-knob moves.

For every task one of the chosen families applies to, evaluates on qemu (modeled X60 cycles):
the family default, then every value of every knob with the other knobs at their defaults
(a one-at-a-time sweep around the default), and prints per task the best knob change, its speedup
over the baseline (clang -O3 auto-vectorized reference for the target) and how many variants ran.
Use it to choose defaults and knob orders: the agent's budget (~32 evaluations) depends on them.

    python scripts/bench_offline_space.py                       # the BLAS-like families
    python scripts/bench_offline_space.py --tasks sdot,sgemm_nt --jobs 2 --json out.json
    python scripts/bench_offline_space.py --families generic --tasks relu
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from agent.offline.base import KnobValue
from agent.offline.generator import OfflineGenerator
from evaluator.evaluate import Candidate, Evaluator
from evaluator.targets import load_target
from evaluator.tasks import KernelTask, list_tasks, load_task

BLAS_FAMILIES = ("rvv_reduction", "rvv_elementwise", "rvv_gemv", "rvv_gemm")


@dataclass
class Point:
    knobs: dict[str, KnobValue]
    change: str  # "default" or "knob=value"
    status: str
    speedup: float | None
    cycles: float | None
    feedback: str = ""


@dataclass
class TaskReport:
    task: str
    family: str
    default_speedup: float | None = None
    best_speedup: float | None = None
    best_change: str = ""
    best_knobs: dict[str, KnobValue] = field(default_factory=dict)
    tried: int = 0
    failures: list[str] = field(default_factory=list)
    points: list[Point] = field(default_factory=list)


def sweep_settings(gen: OfflineGenerator, family: str) -> list[tuple[str, dict[str, KnobValue]]]:
    """The default, then each knob through each of its values with the others at default."""
    knobs = gen.knobs(family)
    default = {k.name: k.default for k in knobs}
    out = [("default", dict(default))]
    valid = next(s for s in gen.spaces if s.name == family).valid
    for k in knobs:
        for v in k.values:
            if v != k.default:
                setting = {**default, k.name: v}
                if valid(setting):
                    out.append((f"{k.name}={v}", setting))
    return out


def run_task(task: KernelTask, family: str, evaluator: Evaluator, target_key: str, jobs: int) -> TaskReport:
    target = load_target(target_key)
    gen = OfflineGenerator(task, target)
    report = TaskReport(task=task.name, family=family)

    def one(item: tuple[str, dict[str, KnobValue]]) -> Point:
        change, knobs = item
        v = gen.render(family, knobs)
        r = evaluator.evaluate(task, target, Candidate(code=v.code, cflags=v.cflags, label=change), runner="qemu")
        return Point(v.knobs, change, r.status.value, r.speedup, r.candidate_cycles, r.feedback[:200])

    with ThreadPoolExecutor(jobs) as pool:
        report.points = list(pool.map(one, sweep_settings(gen, family)))
    report.tried = len(report.points)
    report.default_speedup = report.points[0].speedup
    ok = [p for p in report.points if p.status == "ok" and p.speedup]
    report.failures = [f"{p.change}: {p.feedback}" for p in report.points if p.status != "ok"]
    if ok:
        best = max(ok, key=lambda p: p.speedup or 0.0)
        report.best_speedup, report.best_change, report.best_knobs = best.speedup, best.change, best.knobs
    return report


def fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", default="", help="comma-separated task names (default: every task a family covers)")
    ap.add_argument("--families", default=",".join(BLAS_FAMILIES), help="comma-separated family names")
    ap.add_argument("--target", default="k1-x60")
    ap.add_argument("--jobs", type=int, default=2, help="parallel evaluations (the machine has 2 cores)")
    ap.add_argument("--json", type=Path, help="write every evaluated point here")
    ap.add_argument("--details", action="store_true", help="print every point, not only the summary")
    args = ap.parse_args()

    target = load_target(args.target)
    wanted = {f for f in args.families.split(",") if f}
    tasks = [load_task(t) for t in args.tasks.split(",") if t] if args.tasks else list_tasks()
    jobs: list[tuple[KernelTask, str]] = []
    for task in tasks:
        fams = [f for f in OfflineGenerator(task, target).families() if f in wanted]
        if fams:
            jobs.append((task, fams[0]))
    evaluator = Evaluator()
    reports: list[TaskReport] = []
    t0 = time.monotonic()
    for task, family in jobs:
        rep = run_task(task, family, evaluator, args.target, args.jobs)
        reports.append(rep)
        print(
            f"{rep.task:18s} {rep.family:16s} default {fmt(rep.default_speedup):>6s}  best {fmt(rep.best_speedup):>6s}"
            f"  ({rep.best_change}, {rep.tried} variants, {len(rep.failures)} failed)",
            flush=True,
        )
        if args.details:
            for p in rep.points:
                print(f"    {p.change:24s} {p.status:13s} {fmt(p.speedup):>7s} {p.cycles or 0:>10.0f}")
        for f in rep.failures:
            print(f"    FAILED {f}", flush=True)
    print()
    print("| task | family | default speedup | best speedup | best change | best knobs | variants |")
    print("|---|---|---|---|---|---|---|")
    for r in reports:
        knobs = ", ".join(f"{k}={v}" for k, v in r.best_knobs.items())
        print(
            f"| {r.task} | {r.family} | {fmt(r.default_speedup)} | {fmt(r.best_speedup)} | {r.best_change} | "
            f"{knobs} | {r.tried} |"
        )
    bests = [r.best_speedup for r in reports if r.best_speedup]
    defaults = [r.default_speedup for r in reports if r.default_speedup]
    if bests:
        print(
            f"\nmedian over {len(reports)} tasks: default {statistics.median(defaults):.2f}x, "
            f"best single-knob move {statistics.median(bests):.2f}x; {sum(r.tried for r in reports)} variants "
            f"in {time.monotonic() - t0:.0f} s"
        )
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in reports], indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
