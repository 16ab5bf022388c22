#!/usr/bin/env python3
"""Does the graph make EoK learn? Cold graph vs warm graph on the emulated K1 (issue 5).

Suite tasks are split into two halves that share operator families: a warm-up half A and an evaluation
half B. Both passes start from the same mined knowledge (the starter set, or repositories given with
--mine):
  cold: a fresh graph, run B;
  warm: a fresh graph, run A first (the graph accumulates experiences and per-target thought statistics),
        then run B.
For every task of B it prints the best speedup over both baselines (docs/TASKS.md, "Two baselines"):
the competent one (the reference with the FP flags its tolerance allows, clang -O3 autovectorized for
spacemit-x60) and the plain one (clang -O3, strict FP), in modeled cycles, and the evaluations needed to
reach 90% of that run's final best, then the medians. The headline median is over the competent baseline.
Targets: median best speedup >= 1.5x; warm reaches 90% in <= 60% of the evaluations cold needs.

The bench owns a throwaway local Neo4j (default port 7696, data under <EOK_HOME>/bench-learning): it
WIPES that database between passes.

    python scripts/bench_learning.py [--budget 32] [--directions 4] [--tasks sdot,snrm2,...] [--mine PATH]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections import defaultdict
from pathlib import Path

from agent.optimizer import Optimizer
from agent.types import RunRequest
from core.settings import Settings
from evaluator.tasks import list_tasks
from knowledge import local_neo4j
from knowledge.starter import starter_knowledge
from service.bootstrap import Container


def split_tasks(names: list[str] | None) -> tuple[list[str], list[str]]:
    """Alternate tasks within each operator family so A and B hold relatives of each other."""
    tasks = [t for t in list_tasks() if names is None or t.name in names]
    by_op: dict[str, list[str]] = defaultdict(list)
    for t in sorted(tasks, key=lambda t: t.name):
        by_op[str(t.operator)].append(t.name)
    a, b = [], []
    for members in by_op.values():
        for i, name in enumerate(members):
            (b if i % 2 == 0 else a).append(name)  # singletons go to B: measured cold and warm alike
    return a, b


def fresh_graph(c: Container, mine: list[str]) -> None:
    with c.store.session() as s:  # CALL IN TRANSACTIONS needs an auto-commit transaction
        s.run("MATCH (n) WHERE NOT n:Migration CALL (n) { DETACH DELETE n } IN TRANSACTIONS OF 10000 ROWS").consume()
    c.store.bump_embedding_generation()
    if mine:
        from miners.pipeline import MineOptions, Miner

        for repo in mine:
            Miner(c.store, lambda: c.embedder, c.settings).mine(repo, MineOptions())
    nodes, rels = starter_knowledge()
    c.ingestor.ingest(nodes, rels)


def evals_to_90(history: list[float | None]) -> int | None:
    final = max((h for h in history if h), default=None)
    if not final:
        return None
    return next(i + 1 for i, h in enumerate(history) if h and h >= 0.9 * final)


def run_tasks(opt: Optimizer, names: list[str], args: argparse.Namespace, label: str) -> dict[str, dict]:
    out = {}
    for name in names:
        t0 = time.monotonic()
        run = opt.create_run(
            RunRequest(
                task=name,
                target="k1-x60",
                budget=args.budget,
                directions=args.directions,
                generator="offline",
                seed=args.seed,
            )
        )
        o = opt.execute(run.id)
        out[name] = {
            "best": o.run.best_speedup,  # over the plain baseline
            "competent": o.run.best_competent_speedup,  # the same kernel over the competent baseline
            "evals": o.run.evaluations,
            "to90": evals_to_90(o.history),
            "seconds": time.monotonic() - t0,
        }
        r = out[name]
        print(
            f"  [{label}] {name:22s} best {r['competent'] or 0:6.2f}x (plain {r['best'] or 0:6.2f}x)  "
            f"evaluations {r['evals']:3d}  "
            f"90% after {r['to90'] or '-':>3}  ({r['seconds']:.0f} s)",
            flush=True,
        )
    return out


def median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--budget", type=int, default=32)
    ap.add_argument("--directions", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tasks", help="comma-separated task names (default: the whole suite)")
    ap.add_argument("--mine", action="append", default=[], help="repository to mine into both graphs")
    ap.add_argument("--port", type=int, default=7696)
    ap.add_argument("--json", type=Path, help="also write the raw results here")
    args = ap.parse_args()

    base = Settings()
    home = base.home / "bench-learning"
    settings = base.model_copy(
        update={"home": home, "local_neo4j_port": args.port, "local_neo4j_data": home / "neo4j", "neo4j_uri": None}
    )
    local_neo4j.start(settings)
    c = Container(settings)
    opt = Optimizer(c)
    a, b = split_tasks(args.tasks.split(",") if args.tasks else None)
    print(f"warm-up half A ({len(a)}): {', '.join(a)}\nevaluation half B ({len(b)}): {', '.join(b)}\n")

    print("cold graph: B only")
    fresh_graph(c, args.mine)
    cold = run_tasks(opt, b, args, "cold")
    print("\nwarm graph: A, then B")
    fresh_graph(c, args.mine)
    warm_a = run_tasks(opt, a, args, "warm-up")
    warm = run_tasks(opt, b, args, "warm")

    print(
        f"\n{'task':22s} {'cold best':>9s} {'(plain)':>9s} {'warm best':>9s} {'(plain)':>9s} "
        f"{'cold 90%':>8s} {'warm 90%':>8s}"
    )
    for name in b:
        cb, wb = cold[name], warm[name]
        print(
            f"{name:22s} {cb['competent'] or 0:8.2f}x {cb['best'] or 0:8.2f}x {wb['competent'] or 0:8.2f}x "
            f"{wb['best'] or 0:8.2f}x {cb['to90'] or '-':>8} {wb['to90'] or '-':>8}"
        )
    once = (*cold.values(), *warm_a.values())
    all_best = [r["competent"] or 0.0 for r in once]
    all_plain = [r["best"] or 0.0 for r in once]
    cold_to90 = [r["to90"] for r in cold.values() if r["to90"]]
    warm_to90 = [r["to90"] for r in warm.values() if r["to90"]]
    ratios = [warm[n]["to90"] / cold[n]["to90"] for n in b if warm[n]["to90"] and cold[n]["to90"]]
    print(
        f"\nmedian best speedup, every task once with the graph it had (cold B + warm-up A, {len(all_best)} tasks): "
        f"{median(all_best):.2f}x over the competent baseline (target >= 1.5x); {median(all_plain):.2f}x over plain -O3"
    )
    print(
        f"median best speedup on B over the competent baseline: cold "
        f"{median([r['competent'] or 0 for r in cold.values()]):.2f}x, "
        f"warm {median([r['competent'] or 0 for r in warm.values()]):.2f}x"
    )
    print(
        f"median evaluations to 90% of the final best on B: cold {median(cold_to90):.1f}, warm {median(warm_to90):.1f} "
        f"-> warm/cold {median(warm_to90) / median(cold_to90):.2f} (target <= 0.60); "
        f"median of per-task ratios {median(ratios):.2f}"
    )
    if args.json:
        args.json.write_text(json.dumps({"A": a, "B": b, "cold": cold, "warm_a": warm_a, "warm": warm}, indent=1))
    c.close()
    local_neo4j.stop(settings)


if __name__ == "__main__":
    main()
