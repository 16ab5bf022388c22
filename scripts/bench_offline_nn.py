#!/usr/bin/env python3
"""Modeled-X60 speedups of the NN / LLM operator families of the offline generator.

For every suite task one of the NN families covers (activation, softmax, norm, quant, conv, attention)
this evaluates on qemu with the X60 cost model the family's default variant and every single-knob move
from it (each other value of each knob, the rest at default, register-budget-invalid settings skipped),
then prints per task the default's speedup, the best variant, its knobs and how many variants ran,
and the medians over tasks. Speedup = baseline cycles / candidate cycles, the baseline being the
reference built by clang-22 -O3 for the target (auto-vectorized).

    python scripts/bench_offline_nn.py                        # every covered task, 2 evaluations at a time
    python scripts/bench_offline_nn.py --tasks softmax,rope --details
    python scripts/bench_offline_nn.py --json /tmp/nn.json --jobs 1
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from agent.offline.base import REGISTRY, KnobValue
from agent.offline.generator import OfflineGenerator
from evaluator.evaluate import Candidate, Evaluator
from evaluator.targets import TargetProfile, load_target
from evaluator.tasks import KernelTask, list_tasks, load_task

NN_FAMILIES = ("activation", "softmax", "norm", "quant", "conv", "attention")


@dataclass
class Result:
    move: str  # "default" or "knob=value"
    knobs: dict[str, KnobValue]
    status: str
    speedup: float | None
    feedback: str = ""


@dataclass
class Row:
    task: str
    family: str
    results: list[Result] = field(default_factory=list)

    @property
    def default(self) -> Result:
        return self.results[0]

    @property
    def best(self) -> Result | None:
        ok = [r for r in self.results if r.status == "ok" and r.speedup]
        return max(ok, key=lambda r: r.speedup or 0.0) if ok else None

    @property
    def failed(self) -> list[Result]:
        return [r for r in self.results if r.status != "ok"]


def moves(task: KernelTask, target: TargetProfile, gen: OfflineGenerator, family: str) -> list[tuple[str, dict]]:
    """The family default, then every other value of every knob with the rest at their defaults."""
    knobs = gen.knobs(family)
    base = {k.name: k.default for k in knobs}
    fam = next((f() for f in REGISTRY if f().name == family), None)
    valid = getattr(fam, "valid", None)
    out: list[tuple[str, dict]] = [("default", base)]
    for k in knobs:
        for value in k.values:
            setting = {**base, k.name: value}
            if value != k.default and (valid is None or valid(task, target, setting)):
                out.append((f"{k.name}={value}", setting))
    return out


def bench_task(task: KernelTask, family: str, target: TargetProfile, evaluator: Evaluator, jobs: int) -> Row:
    gen = OfflineGenerator(task, target)

    def evaluate(item: tuple[str, dict]) -> Result:
        move, knobs = item
        variant = gen.render(family, knobs)
        res = evaluator.evaluate(task, target, Candidate(code=variant.code, cflags=variant.cflags, label=move), "qemu")
        return Result(move, variant.knobs, res.status.value, res.speedup, res.feedback[:240])

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return Row(task.name, family, list(pool.map(evaluate, moves(task, target, gen, family))))


def speed(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def table(rows: list[Row]) -> list[str]:
    out = [
        "| task | family | default | best | best knobs (change from default) | variants | failed |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        best = r.best
        knobs = ", ".join(f"{k}={v}" for k, v in best.knobs.items()) if best else "-"
        change = f" ({best.move})" if best and best.move != "default" else ""
        out.append(
            f"| {r.task} | {r.family} | {speed(r.default.speedup)} | {speed(best.speedup if best else None)} | "
            f"{knobs}{change} | {len(r.results)} | {len(r.failed)} |"
        )
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", default="", help="comma-separated task names (default: every task an NN family covers)")
    ap.add_argument("--target", default="k1-x60")
    ap.add_argument("--jobs", type=int, default=2, help="evaluations in parallel (2 cores here)")
    ap.add_argument("--details", action="store_true", help="print every variant's result")
    ap.add_argument("--json", type=Path, help="write all results here")
    args = ap.parse_args()

    target = load_target(args.target)
    tasks = [load_task(t) for t in args.tasks.split(",") if t] if args.tasks else list_tasks()
    evaluator = Evaluator()
    rows: list[Row] = []
    t0 = time.monotonic()
    for task in tasks:
        family = next((f for f in OfflineGenerator(task, target).families() if f in NN_FAMILIES), None)
        if family is None:
            continue
        row = bench_task(task, family, target, evaluator, args.jobs)
        rows.append(row)
        best = row.best
        print(
            f"{row.task:20s} {family:11s} default {speed(row.default.speedup):>6s}  "
            f"best {speed(best.speedup if best else None):>6s}"
            f"  [{best.move if best else '-'}]  {len(row.results)} variants, {len(row.failed)} failed",
            flush=True,
        )
        for r in row.results if args.details else row.failed:
            print(f"    {r.move:22s} {r.status:14s} {speed(r.speedup):>7s}  {'' if r.status == 'ok' else r.feedback}")
    print()
    print("\n".join(table(rows)))
    defaults = [r.default.speedup for r in rows if r.default.speedup]
    bests = [b.speedup for r in rows if (b := r.best) and b.speedup]
    if bests:
        print(
            f"\n{len(rows)} tasks, {sum(len(r.results) for r in rows)} variants in {time.monotonic() - t0:.0f} s; "
            f"median speedup: default {statistics.median(defaults):.2f}x, best single-knob move "
            f"{statistics.median(bests):.2f}x; failed variants: {sum(len(r.failed) for r in rows)}"
        )
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in rows], indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
