#!/usr/bin/env python3
"""Does the knowledge earn its keep? The same agent, budget and seeds with four kinds of knowledge (issue 12).

On held-back suite tasks, emulated K1 (qemu + the X60 cost model), offline generator:
  (a) none:      a blank graph: four ideas that each list every technique with no text, evidence or example
                 (the search still runs, it just knows nothing: technique choice is uninformed);
  (b) starter:   only the hand-written starter ideas (knowledge/starter.py);
  (c) mined:     the graph mined from real histories (`eok mine` of OpenBLAS, ggml, ...), nothing measured;
  (d) mined+exp: the mined graph after runs on other tasks (warm-up tasks, relatives of the held-back ones),
                 so it also holds their experiences and per-target thought statistics.
Per task and condition it prints the best speedup (over the competent baseline when the evaluator reports
one, else over the plain clang -O3 baseline) and the evaluations needed to reach 90% of the best any
condition found for that task ("-": never), then the medians.

Two local Neo4j servers: a throwaway one for (a)/(b) (WIPED per pass; default port 7697 under
<EOK_HOME>/bench-ablation/plain) and the mined one (default port 7698 under <EOK_HOME>/bench-ablation/mined;
--mine REPO fills it once). On the mined one every Run, Experience and Task and every EFFECT_ON is deleted
before (c) and before (d): the mined knowledge stays.

    python scripts/bench_ablation.py [--budget 8] [--directions 2] [--tasks snrm2,sgemv_t,silu]
        [--warmup sasum,sgemv_n,sigmoid] [--mine /path/to/OpenBLAS --mine /path/to/ggml]
        [--mined-home DIR --mined-port N] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
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

    have = {r["n"] for r in c.store.read("MATCH (r:Repository) RETURN r.name AS n")}
    for repo in repos:
        if Path(repo).name in have:
            continue
        print(f"mining {repo} into the mined graph (once) ...", flush=True)
        Miner(c.store, lambda: c.embedder, c.settings).mine(repo, MineOptions())


def run_one(c: Container, task: str, args: argparse.Namespace) -> dict:
    opt = Optimizer(c)
    t0 = time.monotonic()
    run = opt.create_run(
        RunRequest(
            task=task,
            target="k1-x60",
            budget=args.budget,
            directions=args.directions,
            generator="offline",
            seed=args.seed,
        )
    )
    o = opt.execute(run.id)
    rows = c.store.read(
        "MATCH (x:Experience {run_id: $r}) RETURN x.status AS st, x.speedup AS s, x.competent_speedup AS cs "
        "ORDER BY x.step",
        r=run.id,
    )
    competent = any(r["cs"] for r in rows)
    best, history = None, []
    for r in rows:
        s = (r["cs"] if competent else r["s"]) if r["st"] == "ok" else None
        if s and s > (best or 0):
            best = s
        history.append(best)
    return {
        "best": best,
        "over": "competent" if competent else "plain",
        "evaluations": o.run.evaluations,
        "history": history,
        "seconds": round(time.monotonic() - t0, 1),
    }


def evals_to(history: list[float | None], level: float) -> int | None:
    return next((i + 1 for i, h in enumerate(history) if h and h >= level), None)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--budget", type=int, default=8)
    ap.add_argument("--directions", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tasks", default="snrm2,sgemv_t,silu", help="held-back tasks (comma-separated)")
    ap.add_argument("--warmup", default="sasum,sgemv_n,sigmoid", help="other tasks run first for (d)")
    ap.add_argument("--mine", action="append", default=[], help="repository to mine into the mined graph")
    ap.add_argument("--plain-port", type=int, default=7697)
    ap.add_argument("--mined-port", type=int, default=7698)
    ap.add_argument("--mined-home", type=Path, help="EOK home whose local Neo4j holds the mined graph")
    ap.add_argument("--json", type=Path, help="also write the raw results here")
    args = ap.parse_args()
    tasks, warmup = args.tasks.split(","), [t for t in args.warmup.split(",") if t]

    base = Settings()
    plain = server(base, base.home / "bench-ablation" / "plain", args.plain_port)
    mined = server(base, args.mined_home or base.home / "bench-ablation" / "mined", args.mined_port)
    mine_missing(mined, args.mine)
    thoughts = mined.store.read("MATCH (t:Thought) WHERE t.source <> 'starter' RETURN count(t) AS n")[0]["n"]
    if not thoughts:
        raise SystemExit("the mined graph holds no mined thoughts: pass --mine REPO (or --mined-home of a mined graph)")
    print(
        f"tasks {', '.join(tasks)}; warm-up for (d) {', '.join(warmup)}; budget {args.budget}, "
        f"directions {args.directions}, seed {args.seed}; mined graph: {thoughts} thoughts\n",
        flush=True,
    )

    results: dict[str, dict[str, dict]] = {name: {} for name in CONDITIONS}
    for cond in CONDITIONS:
        c = mined if cond.startswith("mined") else plain
        wipe(c, only_measured=c is mined)
        if cond == "none":
            c.ingestor.ingest(*blank_knowledge())
        elif cond == "starter":
            c.ingestor.ingest(*starter_knowledge())
        if cond == "mined+exp":
            for name in warmup:
                r = run_one(c, name, args)
                print(f"  [warm-up] {name:18s} best {r['best'] or 0:5.2f}x ({r['seconds']:.0f} s)", flush=True)
        for name in tasks:
            r = results[cond][name] = run_one(c, name, args)
            print(
                f"  [{cond:9s}] {name:18s} best {r['best'] or 0:5.2f}x over {r['over']}  ({r['seconds']:.0f} s)",
                flush=True,
            )

    print(f"\n{'task':16s}" + "".join(f"{c:>18s}" for c in CONDITIONS))
    print(f"{'':16s}" + "".join(f"{'best  to90%':>18s}" for _ in CONDITIONS))
    to90: dict[str, list[int | None]] = {c: [] for c in CONDITIONS}
    for name in tasks:
        top = max((results[c][name]["best"] or 0) for c in CONDITIONS)
        cells = []
        for cond in CONDITIONS:
            r = results[cond][name]
            n = evals_to(r["history"], 0.9 * top) if top else None
            to90[cond].append(n)
            cells.append(f"{r['best'] or 0:9.2f}x {n or '-':>6}")
        print(f"{name:16s}" + "".join(f"{x:>18s}" for x in cells))
    budget_miss = args.budget + 1  # "never reached" ranks behind every reach for the median
    med_best = {c: statistics.median(results[c][n]["best"] or 0 for n in tasks) for c in CONDITIONS}
    med_to90 = {c: statistics.median(x or budget_miss for x in to90[c]) for c in CONDITIONS}
    print(f"{'median':16s}" + "".join(f"{med_best[c]:9.2f}x {med_to90[c]:>6g}" for c in CONDITIONS))
    print(f"(to90%: evaluations to 90% of the best any condition reached on the task; a miss counts {budget_miss})")
    for cond in ("mined", "mined+exp"):
        verdict = "beats" if med_best[cond] > med_best["none"] else "does NOT beat"
        print(f"({cond}) {verdict} (none) on the median best speedup: {med_best[cond]:.2f}x vs {med_best['none']:.2f}x")
    if args.json:
        args.json.write_text(
            json.dumps(
                {"args": vars(args) | {"mined_home": str(args.mined_home), "json": str(args.json)}, "results": results},
                indent=1,
                default=str,
            )
        )
    for c in (plain, mined):
        c.close()
    local_neo4j.stop(plain.settings)
    if not args.mined_home:
        local_neo4j.stop(mined.settings)


if __name__ == "__main__":
    main()
