#!/usr/bin/env python3
"""Does what was learnt on one target or operator shorten the search on another? (issue 22, item 4)

Target transfer, per held-back task and seed, offline generator, the starter ideas as knowledge:
  cold: a graph without experiences: the task on K3 X100 (VLEN 256), then again without experiences on K3 A100
        (VLEN 1024);
  warm: the task on K1 X60 first, then on K3 X100 (warm from K1), then on K3 A100 (warm from K1 and X100).
  warm+: as warm, after a related task of the same kernel family (--related TASK:RELATED) ran the same chain,
        so the graph also holds how that task's best knobs moved from K1 to each K3 target.
A warm run starts from the best decision measured on the similar targets, rescaled for its VLEN, or moved as
the related tasks' best moved between the two targets (agent/transfer.py), and the graph records it as
(Experience)-[:TRANSFERS_TO]->(Experience).
Operator transfer, per pair SOURCE:TASK and seed, on K1: cold runs TASK alone; warm runs SOURCE first.

Per cell: the best speedup (over the competent baseline when there is one) and the evaluations to 90% of the
best any run of that task on that target reached (cold or warm, any seed; a miss counts budget + 1). Per
target: the medians, their spread over seeds, the warm/cold ratio of the median evaluations-to-90% and the
difference of median best, with 95% bootstrap intervals (tasks resampled, each with all its seeds).
Target of issue 22: on K3, warm runs reach 90% in at most half the evaluations of cold runs (median).

One local Neo4j (default port 7696 under <EOK_HOME>/bench-transfer): every Run, Experience and Task is
deleted before each cold run and before each warm chain. --json writes the cells after every run; a rerun
resumes; --report-only prints the report of a results file.

    python scripts/bench_transfer.py [--budget 8] [--directions 2] [--seeds 1,2] [--tasks a,b]
        [--pairs sgemv_t:matmulnbits_q4_gemv,q8_0_q8_0_dot:q4_0_q8_0_dot]
        [--related reduce_max:reduce_sum,layernorm:rmsnorm,sgemm_tall_n16:sgemm_64] [--json out.json] [--report-only]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
from collections.abc import Callable
from pathlib import Path

from bench_ablation import Cell, evals_to, run_one, server, wipe

from core.settings import Settings
from knowledge import local_neo4j
from knowledge.starter import starter_knowledge
from service.bootstrap import Container

K1, K3 = "k1-x60", ("k3-x100", "k3-a100")
TASKS = "sgemm_tall_n16,layernorm,reduce_max"
PAIRS = "sgemv_t:matmulnbits_q4_gemv,q8_0_q8_0_dot:q4_0_q8_0_dot"
RELATED = "reduce_max:reduce_sum,layernorm:rmsnorm,sgemm_tall_n16:sgemm_64"  # the same offline family each
MODES = ("cold", "warm", "warm+")  # warm+: a related task ran the same chain first


def key(mode: str, target: str, task: str, seed: int) -> str:
    return f"{mode}|{target}|{task}|{seed}"


def transfer_note(c: Container, run_id: str) -> str:
    """What the run's transfers were: '<from task>@<from target> -> <outcome> (<rescaled>)', '' when none."""
    rows = c.store.read(
        "MATCH (s:Experience)-[t:TRANSFERS_TO]->(x:Experience {run_id: $r}) "
        "RETURN t.from_task AS task, t.from_target AS target, t.rescaled AS rescaled, t.from_speedup AS a, "
        "t.to_speedup AS b ORDER BY x.step",
        r=run_id,
    )
    return "; ".join(
        f"{r['task']}@{r['target']} {r['a'] or 0:.2f}x -> {r['b'] or 0:.2f}x"
        + (f" ({r['rescaled']})" if r["rescaled"] else "")
        for r in rows
    )


def measure(c: Container, cells: dict[str, Cell], args: argparse.Namespace, k: str, task: str, target: str) -> None:
    seed = int(k.rsplit("|", 1)[1])
    r = run_one(c, task, seed, args, target=target)
    r["transfers"] = transfer_note(c, r["run"])
    cells[k] = r
    if args.json:
        args.json.write_text(json.dumps({"args": {a: str(v) for a, v in vars(args).items()}, "cells": cells}, indent=1))
    print(
        f"  [{k.split('|')[0]:4s}] {target:8s} {task:20s} seed {seed} best {r['best'] or 0:6.2f}x first "
        f"{r['first'] or 0:5.2f}x ({r['seconds']:.0f} s){'  ' + r['transfers'] if r['transfers'] else ''}",
        flush=True,
    )


def run_all(
    args: argparse.Namespace,
    tasks: list[str],
    pairs: list[tuple[str, str]],
    seeds: list[int],
    related: dict[str, str] | None = None,
) -> dict:
    cells: dict[str, Cell] = json.loads(args.json.read_text())["cells"] if args.json and args.json.exists() else {}
    base = Settings()
    c = server(base, base.home / "bench-transfer", args.port)
    try:
        wipe(c, only_measured=False)
        c.ingestor.ingest(*starter_knowledge())
        for seed in seeds:
            for task in tasks:
                for target in K3:  # cold: each K3 target on an empty experience graph
                    if key("cold", target, task, seed) not in cells:
                        wipe(c, only_measured=True)
                        measure(c, cells, args, key("cold", target, task, seed), task, target)
                chain = [key("k1", K1, task, seed), *(key("warm", t, task, seed) for t in K3)]
                if any(k not in cells for k in chain):  # warm: K1, then X100, then A100, one graph
                    wipe(c, only_measured=True)
                    for k, target in zip(chain, (K1, *K3), strict=True):
                        measure(c, cells, args, k, task, target)
                rel = (related or {}).get(task)
                plus = [key("k1+", K1, task, seed), *(key("warm+", t, task, seed) for t in K3)]
                if rel and any(k not in cells for k in plus):  # warm+: the related task's chain first
                    wipe(c, only_measured=True)
                    for target in (K1, *K3):
                        measure(c, cells, args, key("rel", target, f"{rel}>{task}", seed), rel, target)
                    for k, target in zip(plus, (K1, *K3), strict=True):
                        measure(c, cells, args, k, task, target)
            for source, task in pairs:
                if key("cold", K1, task, seed) not in cells:
                    wipe(c, only_measured=True)
                    measure(c, cells, args, key("cold", K1, task, seed), task, K1)
                if key("warm", K1, task, seed) not in cells:
                    wipe(c, only_measured=True)
                    measure(c, cells, args, key("src", K1, source, seed), source, K1)
                    measure(c, cells, args, key("warm", K1, task, seed), task, K1)
    finally:
        c.close()
        local_neo4j.stop(c.settings)
    return cells


# ------------------------------------------------------------------------------------------------ report


class Figures:
    """One target's cells: best speedup and evaluations to 90% of the task's best over cold and warm runs."""

    def __init__(self, cells: dict[str, Cell], target: str, pairs: list[tuple[str, int]], miss: int) -> None:
        self.cells, self.target, self.pairs, self.miss = cells, target, pairs, miss
        self.top: dict[str, float] = {}
        for t, s in pairs:
            for m in MODES:
                if key(m, target, t, s) in cells:
                    self.top[t] = max(self.top.get(t, 0.0), self.best(m, t, s))

    def best(self, mode: str, t: str, s: int) -> float:
        return self.cells[key(mode, self.target, t, s)]["best"] or 0.0

    def to90(self, mode: str, t: str, s: int) -> int:
        hit = evals_to(self.cells[key(mode, self.target, t, s)]["history"], 0.9 * self.top[t]) if self.top[t] else None
        return hit or self.miss

    def median(self, metric: Callable[[str, str, int], float], mode: str, pairs: list[tuple[str, int]]) -> float:
        return statistics.median(metric(mode, t, s) for t, s in pairs)


def report(cells: dict[str, Cell], groups: dict[str, list[str]], seeds: list[int], budget: int, resamples: int) -> None:
    rng = random.Random(20261202)
    for target, tasks in groups.items():
        pairs = [(t, s) for t in tasks for s in seeds if all(key(m, target, t, s) in cells for m in ("cold", "warm"))]
        if pairs:
            _report_target(Figures(cells, target, pairs, budget + 1), seeds, resamples, rng)
        plus = [(t, s) for t, s in pairs if key("warm+", target, t, s) in cells]
        if plus:
            _report_target(Figures(cells, target, plus, budget + 1), seeds, resamples, rng, warm="warm+")


def _report_target(f: Figures, seeds: list[int], resamples: int, rng: random.Random, warm: str = "warm") -> None:
    head = f"{'task':20s} {'seed':>4s} {'cold best':>10s} {'to90%':>6s} {warm + ' best':>10s} {'to90%':>6s}"
    print(f"\n{f.target}: {head}")
    for t, s in f.pairs:
        note = f.cells[key(warm, f.target, t, s)]["transfers"]
        print(
            f"{'':{len(f.target) + 2}s}{t:20s} {s:>4d} {f.best('cold', t, s):9.2f}x {f.to90('cold', t, s):>6d} "
            f"{f.best(warm, t, s):9.2f}x {f.to90(warm, t, s):>6d}   {note}"
        )
    med = {m: f.median(f.to90, m, f.pairs) for m in ("cold", warm)}
    ran = [s for s in seeds if any(p[1] == s for p in f.pairs)]
    per_seed = {m: [f.median(f.to90, m, [p for p in f.pairs if p[1] == s]) for s in ran] for m in ("cold", warm)}
    ratio = _interval(f.pairs, lambda ps: f.median(f.to90, warm, ps) / f.median(f.to90, "cold", ps), resamples, rng)
    gain = _interval(f.pairs, lambda ps: f.median(f.best, warm, ps) - f.median(f.best, "cold", ps), resamples, rng)
    print(
        f"  median evaluations to 90%: cold {med['cold']:g}, {warm} {med[warm]:g} "
        f"(per seed: cold {per_seed['cold']}, {warm} {per_seed[warm]}; a miss counts {f.miss})"
    )
    print(f"  {warm}/cold median evaluations to 90%: {ratio[0]:.2f} [{ratio[1]:.2f}, {ratio[2]:.2f}] (target <= 0.5)")
    print(f"  {warm} - cold median best speedup: {gain[0]:+.2f} [{gain[1]:+.2f}, {gain[2]:+.2f}]")


def _interval(
    pairs: list[tuple[str, int]], stat: Callable[[list[tuple[str, int]]], float], resamples: int, rng: random.Random
) -> tuple[float, float, float]:
    """Point estimate and 95% percentile interval, resampling tasks (each with all its seeds)."""
    tasks = sorted({t for t, _ in pairs})
    by_task = {t: [p for p in pairs if p[0] == t] for t in tasks}
    draws = sorted(stat([p for t in rng.choices(tasks, k=len(tasks)) for p in by_task[t]]) for _ in range(resamples))
    return stat(pairs), draws[int(0.025 * resamples)], draws[int(0.975 * resamples) - 1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--budget", type=int, default=8)
    ap.add_argument("--directions", type=int, default=2)
    ap.add_argument("--seeds", default="1,2")
    ap.add_argument("--tasks", default=TASKS, help="held-back tasks for K1 -> K3 (comma-separated)")
    ap.add_argument("--pairs", default=PAIRS, help="operator transfers SOURCE:TASK on K1 (comma-separated)")
    ap.add_argument(
        "--related", default=RELATED, help="TASK:RELATED pairs: warm+ runs RELATED's chain first ('' for none)"
    )
    ap.add_argument("--port", type=int, default=7696)
    ap.add_argument("--json", type=Path, help="cells, written after every run; an existing file is resumed")
    ap.add_argument("--resamples", type=int, default=10000)
    ap.add_argument("--report-only", action="store_true")
    args = ap.parse_args()
    tasks = [t for t in args.tasks.split(",") if t]
    pairs = [tuple(p.split(":", 1)) for p in args.pairs.split(",") if p]
    if any(len(p) != 2 for p in pairs):
        raise SystemExit(f"--pairs {args.pairs!r}: write SOURCE:TASK pairs separated by commas")
    related_pairs = [p.split(":", 1) for p in args.related.split(",") if p]
    if any(len(p) != 2 or not all(p) for p in related_pairs):
        raise SystemExit(f"--related {args.related!r}: write TASK:RELATED pairs separated by commas")
    related = dict(related_pairs)
    seeds = [int(s) for s in args.seeds.split(",") if s]
    if args.report_only:
        if not args.json or not args.json.exists():
            raise SystemExit("--report-only needs --json FILE of an earlier run: pass the results file")
        cells = json.loads(args.json.read_text())["cells"]
    else:
        cells = run_all(args, tasks, pairs, seeds, related)  # type: ignore[arg-type]
    groups = {t: tasks for t in K3} | {K1: [task for _, task in pairs]}
    report(cells, groups, seeds, args.budget, args.resamples)


if __name__ == "__main__":
    main()
