#!/usr/bin/env python3
"""Does the knowledge earn its keep? The same agent, budget and seeds with four kinds of knowledge (issues 12, 22).

On held-back suite tasks, emulated K1 (qemu + the X60 cost model), offline generator:
  (a) none:      a blank graph: four ideas that each list every technique with no text, evidence or example
                 (the search still runs, it just knows nothing: technique choice is uninformed);
  (b) starter:   only the hand-written starter ideas (knowledge/starter.py);
  (c) mined:     the graph mined from real histories (`eok mine` of OpenBLAS, ggml, ...), nothing measured;
  (d) mined+exp: the mined graph after runs on other tasks (warm-up tasks, relatives of the held-back ones),
                 so it also holds their experiences and per-target thought statistics.
Every (condition, task) runs once per seed. Per cell it records the best speedup (over the competent baseline
when the evaluator reports one, else over plain clang -O3), the first candidate's speedup, and the evaluations
needed to reach 90% of the best any condition and seed found for that task (a miss counts budget + 1).

Signal or noise: paired bootstrap over tasks (a resample draws tasks with replacement and keeps each drawn
task's seeds, so every condition is compared on the same task and seed) gives 95% intervals on the
difference of medians (best speedup, evaluations to 90%, first candidate) of each condition against (a),
and on the paired geometric-mean ratio of best speedups. An interval that excludes 0 (1 for a ratio) is a
difference this many tasks and seeds can tell from noise.

Why these held-back tasks (the default of --tasks): each has an offline family, and none is a task the
families' defaults were tuned on. The defaults come from sweeps named in agent/offline and its benches
(scripts/bench_offline_space.py: sdot, sgemm_nt, relu, prefix_scan; scripts/bench_offline_nn.py: the
activation functions, rope, softmax; the gemv family's m2 x 8 lines; the reduction family's sasum/snrm2
accumulators; elementwise hardswish), and the warm-up tasks of (d) are also kept out.

Two local Neo4j servers: a throwaway one for (a)/(b) (WIPED per pass; default port 7697 under
<EOK_HOME>/bench-ablation/plain) and the mined one (default port 7698 under <EOK_HOME>/bench-ablation/mined;
--mine REPO fills it once). On the mined one every Run, Experience and Task and every EFFECT_ON is deleted
before every task of (c), and before the warm-up of (d): the mined knowledge stays. On the throwaway one the
same happens before every task of (a) and (b). So (a)-(c) run each task on their knowledge alone, while (d)
also sees the held-back tasks run before it in the pass (and the run's transfers from them).
With --json the raw results are written after every
run and a rerun with the same file resumes (cells already in it are not run again); --report-only prints
the tables and intervals of a results file without running anything.

    python scripts/bench_ablation.py [--budget 16] [--directions 2] [--seeds 1,2,3] [--tasks a,b,...]
        [--warmup sasum,...] [--mine /path/to/OpenBLAS --mine /path/to/ggml]
        [--mined-home DIR --mined-port N] [--json out.json] [--report-only] [--conditions none,mined]
        [--also other-results.json]

Two processes may share the work: `--conditions none,starter --json a.json` and `--conditions mined,mined+exp
--json b.json` (each owns its server); `--report-only --json a.json --also b.json` reports both.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from agent.optimizer import Optimizer
from agent.types import RunRequest
from core.settings import Settings
from knowledge import local_neo4j
from knowledge.models import Idea, Relationship, RelType, Thought
from knowledge.starter import starter_knowledge
from knowledge.taxonomy import Technique
from service.bootstrap import Container

CONDITIONS = ("none", "starter", "mined", "mined+exp")
# What runs first: the comparison the verdict rests on (mined vs none) over every seed, then the others.
RUN_ORDER = (("none", "mined"), ("starter", "mined+exp"))
HELD_BACK = (
    "layernorm,rmsnorm,batchnorm,log_softmax,q4_0_q8_0_dot,q8_0_dequantize,quantize_row_q8_0,"
    "reduce_max,sgemm_skinny_m4,sgemm_tall_n16,global_avgpool,conv1x1"
)
# Relatives of the held-back tasks (same families), run before (d) only.
WARMUP = "sasum,sgemm_64,q8_0_q8_0_dot,softmax,avgpool2x2"
Cell = dict  # one run's record: best, first, history, over, evaluations, seconds


def server(base: Settings, home: Path, port: int) -> Container:
    settings = base.model_copy(
        update={"home": home, "local_neo4j_port": port, "local_neo4j_data": home / "neo4j", "neo4j_uri": None}
    )
    local_neo4j.start(settings)
    return Container(settings)


def wipe(c: Container, only_measured: bool) -> None:
    """Everything (a fresh graph), or only what runs wrote (runs, experiences, tasks, EFFECT_ON)."""
    query = (
        "MATCH (n) WHERE n:Run OR n:Experience OR n:Task CALL (n) { DETACH DELETE n } IN TRANSACTIONS OF 10000 ROWS"
        if only_measured
        else "MATCH (n) WHERE NOT n:Migration CALL (n) { DETACH DELETE n } IN TRANSACTIONS OF 10000 ROWS"
    )
    with c.store.session() as s:  # CALL IN TRANSACTIONS needs an auto-commit transaction
        s.run(query).consume()
        if only_measured:
            s.run("MATCH ()-[e:EFFECT_ON]->() CALL (e) { DELETE e } IN TRANSACTIONS OF 10000 ROWS").consume()
    c.store.bump_embedding_generation()


def blank_knowledge() -> tuple[list[Idea | Thought], list[Relationship]]:
    nodes: list[Idea | Thought] = []
    rels: list[Relationship] = []
    for i in range(4):
        nodes.append(Idea(id=f"blank-{i}", title=f"direction {i}", techniques=list(Technique), source="blank"))
        for t in Technique:
            tid = f"blank-{i}-{t.value}"
            nodes.append(Thought(id=tid, idea_id=f"blank-{i}", title=t.value, technique=t, source="blank"))
            rels.append(
                Relationship(
                    type=RelType.HAS_THOUGHT,
                    start_label="Idea",
                    start_key=f"blank-{i}",
                    end_label="Thought",
                    end_key=tid,
                )
            )
    return nodes, rels


def mine_missing(c: Container, repos: list[str]) -> None:
    from miners.pipeline import MineOptions, Miner

    # A repository whose mine was cut short has no head yet: mined again (cached embeddings make it cheap).
    have = {r["n"] for r in c.store.read("MATCH (r:Repository) WHERE r.last_mined_head IS NOT NULL RETURN r.name AS n")}
    for repo in repos:
        if Path(repo).name in have:
            continue
        print(f"mining {repo} into the mined graph (once) ...", flush=True)
        Miner(c.store, lambda: c.embedder, c.settings).mine(repo, MineOptions())


def run_one(c: Container, task: str, seed: int, args: argparse.Namespace, target: str = "k1-x60") -> Cell:
    opt = Optimizer(c)
    t0 = time.monotonic()
    run = opt.create_run(
        RunRequest(
            task=task, target=target, budget=args.budget, directions=args.directions, generator="offline", seed=seed
        )
    )
    o = opt.execute(run.id)
    rows = c.store.read(
        "MATCH (x:Experience {run_id: $r}) RETURN x.status AS st, x.speedup AS s, x.competent_speedup AS cs "
        "ORDER BY x.step",
        r=run.id,
    )
    competent = any(r["cs"] for r in rows)
    best, history, evaluated = None, [], []
    for r in rows:
        s = (r["cs"] if competent else r["s"]) if r["st"] == "ok" else None
        evaluated.append(s)
        if s and s > (best or 0):
            best = s
        history.append(best)
    return {
        "run": run.id,
        "best": best,
        "first": evaluated[0] if evaluated else None,
        "over": "competent" if competent else "plain",
        "evaluations": o.run.evaluations,
        "history": history,
        "seconds": round(time.monotonic() - t0, 1),
    }


def evals_to(history: list[float | None], level: float) -> int | None:
    return next((i + 1 for i, h in enumerate(history) if h and h >= level), None)


# -------------------------------------------------------------------------------------------- results


def cell_key(cond: str, task: str, seed: int) -> str:
    return f"{cond}|{task}|{seed}"


def load_results(path: Path | None) -> dict[str, Cell]:
    if path and path.exists():
        return json.loads(path.read_text()).get("cells", {})
    return {}


def save_results(path: Path | None, args: argparse.Namespace, cells: dict[str, Cell]) -> None:
    if path is None:
        return
    meta = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"args": meta, "cells": cells}, indent=1))
    tmp.replace(path)  # a kill mid-write never leaves a truncated results file


# ------------------------------------------------------------------------------------------- analysis


class Table:
    """The cells of complete (task, seed) pairs, with the per-task 90% bar and the derived figures."""

    def __init__(self, cells: dict[str, Cell], tasks: list[str], seeds: list[int], budget: int) -> None:
        self.miss = budget + 1  # "never reached" ranks behind every reach
        # Pairs where the comparison of the verdict ran; the other conditions join once they cover them all.
        self.pairs = [(t, s) for t in tasks for s in seeds if all(cell_key(c, t, s) in cells for c in RUN_ORDER[0])]
        self.conditions = [c for c in CONDITIONS if all(cell_key(c, t, s) in cells for t, s in self.pairs)]
        self.tasks = [t for t in tasks if any(p[0] == t for p in self.pairs)]
        self.cells = cells
        # One bar per task: 90% of the best any condition reached under any seed.
        self.top = {
            t: max(
                (cells[cell_key(c, t, s)]["best"] or 0) for c in self.conditions for s in seeds if (t, s) in self.pairs
            )
            for t in self.tasks
        }

    def best(self, cond: str, task: str, seed: int) -> float:
        return self.cells[cell_key(cond, task, seed)]["best"] or 0.0

    def first(self, cond: str, task: str, seed: int) -> float:
        return self.cells[cell_key(cond, task, seed)].get("first") or 0.0

    def to90(self, cond: str, task: str, seed: int) -> int:
        top = self.top[task]
        hit = evals_to(self.cells[cell_key(cond, task, seed)]["history"], 0.9 * top) if top else None
        return hit or self.miss


Metric = Callable[[Table, str, str, int], float]
METRICS: dict[str, Metric] = {
    "best speedup": Table.best,
    "evaluations to 90%": Table.to90,
    "first candidate": Table.first,
}


def median_over(table: Table, metric: Metric, cond: str, pairs: list[tuple[str, int]]) -> float:
    return statistics.median(metric(table, cond, t, s) for t, s in pairs)


def geo_ratio(table: Table, cond: str, pairs: list[tuple[str, int]]) -> float:
    """Geometric mean over (task, seed) of best(cond) / best(none): the paired, scale-free comparison."""
    logs = [
        math.log(table.best(cond, t, s)) - math.log(table.best("none", t, s))
        for t, s in pairs
        if table.best(cond, t, s) and table.best("none", t, s)
    ]
    return math.exp(statistics.fmean(logs)) if logs else float("nan")


def bootstrap(
    table: Table, stat: Callable[[list[tuple[str, int]]], float], resamples: int, rng: random.Random
) -> tuple[float, float, float]:
    """Point estimate and 95% percentile interval of `stat`, resampling tasks (each with all its seeds)."""
    by_task = {t: [p for p in table.pairs if p[0] == t] for t in table.tasks}
    point = stat(table.pairs)
    draws = []
    for _ in range(resamples):
        pairs = [p for t in rng.choices(table.tasks, k=len(table.tasks)) for p in by_task[t]]
        draws.append(stat(pairs))
    draws.sort()
    return point, draws[int(0.025 * resamples)], draws[int(0.975 * resamples) - 1]


def report(cells: dict[str, Cell], tasks: list[str], seeds: list[int], budget: int, resamples: int) -> None:
    table = Table(cells, tasks, seeds, budget)
    if not table.pairs:
        print("no complete (task, seed) pair yet: nothing to report")
        return
    print(f"\n{'task':18s}{'seed':>5s}" + "".join(f"{c:>22s}" for c in table.conditions))
    print(f"{'':23s}" + "".join(f"{'best  first  to90%':>22s}" for _ in table.conditions))
    for t, s in table.pairs:
        row = [
            f"{table.best(c, t, s):8.2f}x {table.first(c, t, s):5.2f}x {_miss(table.to90(c, t, s), table.miss):>5}"
            for c in table.conditions
        ]
        print(f"{t:18s}{s:>5d}" + "".join(f"{x:>22s}" for x in row))
    print(
        f"\n{len(table.pairs)} (task, seed) pairs over {len(table.tasks)} tasks; to90% = evaluations to 90% of the "
        f"best any condition and seed reached on the task ('-': never, counted {table.miss})"
    )
    print(f"{'median':23s}" + "".join(f"{_medians(table, c):>22s}" for c in table.conditions))

    rng = random.Random(20261202)
    print(f"\npaired bootstrap over tasks ({resamples} resamples, seeds kept together), 95% intervals:")
    for cond in table.conditions[1:]:
        for name, metric in METRICS.items():
            point, lo, hi = bootstrap(
                table,
                lambda ps, m=metric, c=cond: median_over(table, m, c, ps) - median_over(table, m, "none", ps),
                resamples,
                rng,
            )
            print(f"  {cond:9s} - none  median {name:19s} {point:+7.2f}  [{lo:+7.2f}, {hi:+7.2f}]{_excl(lo, hi, 0)}")
        point, lo, hi = bootstrap(table, lambda ps, c=cond: geo_ratio(table, c, ps), resamples, rng)
        print(f"  {cond:9s} / none  geo-mean best ratio    {point:7.3f}  [{lo:7.3f}, {hi:7.3f}]{_excl(lo, hi, 1)}")
    gaps = {
        t: statistics.fmean(table.best("mined", t, s) - table.best("none", t, s) for tt, s in table.pairs if tt == t)
        for t in table.tasks
    }
    print(
        "mined - none best speedup per task (mean over seeds): " + ", ".join(f"{t} {g:+.2f}" for t, g in gaps.items())
    )


def _miss(n: int, miss: int) -> str:
    return "-" if n >= miss else str(n)


def _medians(table: Table, cond: str) -> str:
    b = median_over(table, Table.best, cond, table.pairs)
    f = median_over(table, Table.first, cond, table.pairs)
    n = median_over(table, Table.to90, cond, table.pairs)
    return f"{b:8.2f}x {f:5.2f}x {n:>5g}"


def _excl(lo: float, hi: float, null: float) -> str:
    return f"  excludes {null:g}" if lo > null or hi < null else ""


# ----------------------------------------------------------------------------------------------- main


def run_all(args: argparse.Namespace, tasks: list[str], seeds: list[int], warmup: list[str]) -> dict[str, Cell]:
    cells = load_results(args.json)
    base = Settings()
    plain = server(base, base.home / "bench-ablation" / "plain", args.plain_port)
    mined = server(base, args.mined_home or base.home / "bench-ablation" / "mined", args.mined_port)
    try:
        mine_missing(mined, args.mine)
        thoughts = mined.store.read("MATCH (t:Thought) WHERE t.source <> 'starter' RETURN count(t) AS n")[0]["n"]
        if not thoughts:
            raise SystemExit(
                "the mined graph holds no mined thoughts: pass --mine REPO (or --mined-home of a mined graph)"
            )
        print(
            f"tasks {', '.join(tasks)}; warm-up for (d) {', '.join(warmup)}; budget {args.budget}, "
            f"directions {args.directions}, seeds {seeds}; mined graph: {thoughts} thoughts\n",
            flush=True,
        )
        for cond, seed in ((cond, s) for group in RUN_ORDER for s in seeds for cond in group):
            if cond not in args.conditions:
                continue
            todo = [t for t in tasks if cell_key(cond, t, seed) not in cells]
            if not todo:
                continue
            c = mined if cond.startswith("mined") else plain
            wipe(c, only_measured=c is mined)
            if cond == "none":
                c.ingestor.ingest(*blank_knowledge())
            elif cond == "starter":
                c.ingestor.ingest(*starter_knowledge())
            if cond == "mined+exp":
                for name in warmup:
                    r = run_one(c, name, seed, args)
                    print(f"  [warm-up  ] {name:18s} seed {seed} best {r['best'] or 0:6.2f}x ({r['seconds']:.0f} s)")
            for name in todo:
                if cond != "mined+exp":  # each task on the condition's knowledge alone, not on the pass's runs
                    wipe(c, only_measured=True)
                r = cells[cell_key(cond, name, seed)] = run_one(c, name, seed, args)
                save_results(args.json, args, cells)
                print(
                    f"  [{cond:9s}] {name:18s} seed {seed} best {r['best'] or 0:6.2f}x first "
                    f"{r['first'] or 0:5.2f}x over {r['over']} ({r['seconds']:.0f} s)",
                    flush=True,
                )
    finally:
        for c in (plain, mined):
            c.close()
        # Only the servers this process's conditions used: a process beside it may still be using the other.
        if {"none", "starter"} & set(args.conditions):
            local_neo4j.stop(plain.settings)
        if {"mined", "mined+exp"} & set(args.conditions) and not args.mined_home:
            local_neo4j.stop(mined.settings)
    return cells


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--budget", type=int, default=16)
    ap.add_argument("--directions", type=int, default=2)
    ap.add_argument("--seeds", default="1,2,3", help="comma-separated seeds; every cell runs once per seed")
    ap.add_argument("--tasks", default=HELD_BACK, help="held-back tasks (comma-separated)")
    ap.add_argument("--warmup", default=WARMUP, help="other tasks run first for (d), once per seed")
    ap.add_argument("--mine", action="append", default=[], help="repository to mine into the mined graph")
    ap.add_argument("--plain-port", type=int, default=7697)
    ap.add_argument("--mined-port", type=int, default=7698)
    ap.add_argument("--mined-home", type=Path, help="EOK home whose local Neo4j holds the mined graph")
    ap.add_argument("--json", type=Path, help="raw results, written after every run; an existing file is resumed")
    ap.add_argument("--resamples", type=int, default=10000, help="bootstrap resamples")
    ap.add_argument("--report-only", action="store_true", help="print the report of --json without running")
    ap.add_argument(
        "--conditions",
        default=",".join(CONDITIONS),
        help="which conditions this process runs (two processes may run none and mined side by side: each owns "
        "its server)",
    )
    ap.add_argument("--also", type=Path, action="append", default=[], help="more results files for the report")
    args = ap.parse_args()
    args.conditions = [c for c in args.conditions.split(",") if c]
    if unknown := set(args.conditions) - set(CONDITIONS):
        raise SystemExit(f"--conditions: unknown {sorted(unknown)}; use some of {', '.join(CONDITIONS)}")
    tasks = [t for t in args.tasks.split(",") if t]
    seeds = [int(s) for s in args.seeds.split(",") if s]
    warmup = [t for t in args.warmup.split(",") if t]
    if args.report_only:
        if not args.json or not args.json.exists():
            raise SystemExit("--report-only needs --json FILE of an earlier run: pass the results file")
        cells = load_results(args.json)
    else:
        cells = run_all(args, tasks, seeds, warmup)
    for extra in args.also:
        cells = load_results(extra) | cells
    report(cells, tasks, seeds, args.budget, args.resamples)


if __name__ == "__main__":
    main()
