#!/usr/bin/env python3
"""Evaluations per minute of one fixed batch: in this process vs a Ray cluster on this machine (issue 15).

The batch is N fresh candidates (the offline generator's plain kernel of sgemm_64 and of softmax, each made
distinct so nothing comes from the object cache), evaluated on the emulated K1 by:
  - the in-process executor (two at a time: the agent's default on a 2-core machine),
  - Ray with one worker process (a node offering 2 CPUs) and with two (two nodes of 1 CPU each),
    the head offering none, all on 127.0.0.1.
It prints evaluations per minute for each, the median evaluation time inside the worker, and Ray's
overhead per evaluation: the round trip of an empty task, and the median of (wall time seen by the
driver - time spent evaluating) for single jobs sent one at a time. Target: overhead <= 10% of the
median evaluation.

Then the driver's side of scaling out: the single graph writer. It records --writes experiences, one
transaction each, exactly as the agent does (agent.recorder: the experience, its links, the EFFECT_ON
statistics of its three thoughts and its embedding), into a private Neo4j started for the bench, and
prints milliseconds per record (wall and the driver's CPU) and the records per minute one writer sustains.

    python scripts/bench_scale.py [--n 64] [--writes 300] [--only-writes]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent.offline import OfflineGenerator
from core.settings import Settings
from evaluator.evaluate import Candidate, Evaluator
from evaluator.executor import EvalExecutor, EvalJob, InProcessExecutor
from evaluator.targets import load_target
from evaluator.tasks import load_task
from knowledge import local_neo4j
from knowledge.models import Experience, Run, Target, Task, Thought
from knowledge.store import GraphStore
from knowledge.taxonomy import Technique
from service.bootstrap import build_embedder
from tests.support.raycluster import Cluster, free_port

TASKS = ("sgemm_64", "softmax")


def batch(n: int) -> list[EvalJob]:
    target = load_target("k1-x60")
    jobs = []
    for name in TASKS:
        task = load_task(name)
        variant = OfflineGenerator(task, target).default()
        for i in range(n // len(TASKS)):
            code = f"{variant.code}\n/* bench_scale candidate {i} {time.time_ns()} */\n"
            jobs.append(EvalJob(task, target, "qemu", Candidate(code=code, cflags=variant.cflags)))
    return jobs


def run_batch(executor: EvalExecutor, jobs: list[EvalJob]) -> tuple[float, list[float]]:
    t0 = time.perf_counter()
    futures = [executor.submit(j) for j in jobs]
    results = [f.result() for f in futures]
    wall = time.perf_counter() - t0
    bad = [r.feedback for r in results if not r.ok]
    assert not bad, bad[:3]
    return wall, [r.duration_s for r in results]


def ray_overheads(executor, jobs: list[EvalJob]) -> tuple[float, float]:
    """(empty task round trip, median driver wall - evaluation time) in seconds."""
    import ray

    @ray.remote(num_cpus=1)
    def empty() -> int:
        return 0

    ray.get(empty.remote())
    trips = []
    for _ in range(20):
        t0 = time.perf_counter()
        ray.get(empty.remote())
        trips.append(time.perf_counter() - t0)
    gaps = []
    for job in jobs:
        t0 = time.perf_counter()
        r = executor.submit(job).result()
        gaps.append(time.perf_counter() - t0 - r.duration_s)
    return statistics.median(trips), statistics.median(gaps)


def ray_mode(label: str, nodes: list[int], jobs: list[EvalJob], extra: list[EvalJob], home: Path) -> dict:
    from evaluator.cluster import RayExecutor

    c = Cluster(port=free_port(), folder=Path(tempfile.mkdtemp(prefix="eok-bench-ray-")))
    try:
        c.start_head(num_cpus=0)
        c.wait_for({})
        for i, cpus in enumerate(nodes):  # one at a time: two raylets registering at once timed out here
            c.start_worker(f"w{i}", num_cpus=cpus, EOK_HOME=str(home / f"w{i}"))
            c.wait_for({"CPU": sum(nodes[: i + 1])})
        ex = RayExecutor.connect(c.address)
        run_batch(ex, extra[:2])  # warm the workers (imports, baselines) outside the measurement
        wall, evals = run_batch(ex, jobs)
        trip, gap = ray_overheads(ex, extra[2:])
        import ray

        ray.shutdown()
        return {"label": label, "wall": wall, "evals": evals, "trip": trip, "gap": gap}
    finally:
        c.stop()


def graph_writer(home: Path, writes: int) -> dict:
    """Per-record cost of the agent's recorder against a private local Neo4j (wall and driver CPU)."""
    from agent.recorder import Recorder

    port = free_port()
    settings = Settings(home=home / "graph", local_neo4j_port=port, local_neo4j_data=home / "neo4j", NEO4J_URI=None)
    local_neo4j.start(settings, watch_pid=None)
    try:
        store = GraphStore.connect(settings)
        thoughts = [
            Thought(id=f"bench-t{i}", idea_id="bench-idea", title=f"bench thought {i}", technique=Technique.UNROLL)
            for i in range(3)
        ]
        store.upsert_nodes([Task(id="bench-task", name="bench"), Target(key="k1-x60"), *thoughts])
        store.upsert_nodes([Run(id="bench-run", task_id="bench-task", target_key="k1-x60", budget=writes)])
        recorder = Recorder(store, build_embedder(settings))
        walls, cpus = [], []
        for i in range(writes + 10):  # the first 10 warm the model, the driver and Neo4j's plan cache
            exp = Experience(
                id=f"bench-run-{i}", task_id="bench-task", target_key="k1-x60", run_id="bench-run",
                parent_id=f"bench-run-{i - 1}" if i else None, thought_ids=[t.id for t in thoughts], step=i,
                code=f"/* candidate {i} */", status="ok", speedup=1.0 + i / 1000,
                summary=f"bench candidate {i}: unrolled by {i % 8 + 1}, {1.0 + i / 1000:.3f}x",
            )  # fmt: skip
            t0, c0 = time.perf_counter(), time.process_time()
            recorder.record(exp, success=True, parent_speedup=1.0, improves_run=True)
            if i >= 10:
                walls.append(time.perf_counter() - t0)
                cpus.append(time.process_time() - c0)
        store.close()
    finally:
        local_neo4j.stop(settings)
    return {"wall": statistics.median(walls), "cpu": statistics.median(cpus), "n": writes}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=64, help="candidates in the batch (half sgemm_64, half softmax)")
    ap.add_argument("--writes", type=int, default=300, help="experiences the graph-writer measurement records")
    ap.add_argument("--only-writes", action="store_true", help="measure the graph writer only")
    args = ap.parse_args()
    home = Path(tempfile.mkdtemp(prefix="eok-bench-scale-"))
    if not args.only_writes:
        evaluations(args, home)
    w = graph_writer(home, args.writes)
    print(
        f"graph writer: {w['n']} experiences recorded one transaction each: median {w['wall'] * 1e3:.1f} ms wall, "
        f"{w['cpu'] * 1e3:.1f} ms driver CPU per record -> one writer sustains ~{60 / w['wall']:,.0f} records/min"
    )


def evaluations(args: argparse.Namespace, home: Path) -> None:
    jobs, extra = batch(args.n), batch(12)

    settings = Settings(home=home / "local", eval_parallelism=2)
    local = InProcessExecutor(settings, Evaluator(settings))
    run_batch(local, extra[:2])
    wall, evals = run_batch(local, jobs)
    local.close()
    print(f"batch: {args.n} fresh candidates ({', '.join(TASKS)}) on the emulated K1, this 2-core machine")
    print(f"{'executor':38} {'evals/min':>9} {'median eval':>11} {'Ray trip':>9} {'overhead':>9}", flush=True)
    show({"label": "in-process, 2 at a time", "wall": wall, "evals": evals, "trip": None, "gap": None})
    show(ray_mode("Ray, 1 worker process (2 CPUs)", [2], batch(args.n), extra, home))
    show(ray_mode("Ray, 2 worker processes (1 CPU each)", [1, 1], batch(args.n), extra, home))
    print("overhead = median (driver wall - worker evaluation time) of single jobs / median evaluation; target <= 10%")


def show(r: dict) -> None:
    med = statistics.median(r["evals"])
    trip = f"{r['trip'] * 1e3:.1f} ms" if r["trip"] is not None else "-"
    gap = f"{r['gap'] / med:.1%}" if r["gap"] is not None else "-"
    print(f"{r['label']:38} {len(r['evals']) / r['wall'] * 60:9.1f} {med:10.2f}s {trip:>9} {gap:>9}", flush=True)


if __name__ == "__main__":
    main()
