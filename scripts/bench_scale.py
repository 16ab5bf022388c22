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

Then the driver's side of scaling out: the graph writer (agent.recorder: each experience, its links, the
EFFECT_ON statistics of its three thoughts and its embedding), into a private Neo4j started for the bench.
First --writes experiences one transaction each, the caller waiting for each (median wall and driver CPU
per record); then --batched-writes through the BatchRecorder, queued as fast as a farm would deliver them
and flushed (records per minute until the last is committed, driver CPU per record with every thread
counted, and the writer thread's own CPU per record: its embedding threads do the model's work), and the
same again with the texts embedded beforehand (the write path alone: what one writer sustains when the
embeddings keep up).
It checks the graph afterwards: every experience once and each EFFECT_ON counting each exactly once.

    python scripts/bench_scale.py [--n 64] [--writes 300] [--batched-writes 3000] [--only-writes] [--embedders K]
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


def graph_writer(home: Path, writes: int, batched_writes: int, embedders: int | None = None) -> dict:
    """The agent's recorder against a private local Neo4j: one transaction per record, then batched."""
    port = free_port()
    settings = Settings(home=home / "graph", local_neo4j_port=port, local_neo4j_data=home / "neo4j", NEO4J_URI=None)
    local_neo4j.start(settings, watch_pid=None)
    try:
        store = GraphStore.connect(settings)
        thoughts = [
            Thought(id=f"bench-t{i}", idea_id="bench-idea", title=f"bench thought {i}", technique=Technique.UNROLL)
            for i in range(3)
        ]
        runs = [
            Run(id=f"bench-{mode}", task_id="bench-task", target_key="k1-x60", budget=n + 100)
            for mode, n in (("single", writes), ("batched", batched_writes), ("vectors", batched_writes))
        ]
        store.upsert_nodes([Task(id="bench-task", name="bench"), Target(key="k1-x60"), *thoughts])
        store.upsert_nodes(runs)
        embedder = build_embedder(settings)
        out = {"single": one_per_record(store, embedder, thoughts, writes)}
        out["batched"] = batched(store, embedder, thoughts, batched_writes, embedders=embedders)
        out["vectors"] = batched(store, embedder, thoughts, batched_writes, mode="vectors", embedders=embedders)
        out["check"] = graph_check(store, writes + 10 + 2 * (batched_writes + 50))
        store.close()
    finally:
        local_neo4j.stop(settings)
    return out


def experience(mode: str, i: int, thoughts: list[Thought]) -> Experience:
    """The i-th record of a mode: distinct text per mode, so no embedding comes from the other's cache."""
    return Experience(
        id=f"bench-{mode}-{i}", task_id="bench-task", target_key="k1-x60", run_id=f"bench-{mode}",
        parent_id=f"bench-{mode}-{i - 1}" if i else None, thought_ids=[t.id for t in thoughts], step=i,
        code=f"/* candidate {i} */", status="ok", speedup=1.0 + i / 1000,
        summary=f"bench {mode} candidate {i}: unrolled by {i % 8 + 1}, {1.0 + i / 1000:.3f}x",
    )  # fmt: skip


def one_per_record(store: GraphStore, embedder, thoughts: list[Thought], writes: int) -> dict:
    """Recorder.record: the caller waits for each record's own transaction (how the agent recorded before)."""
    from agent.recorder import Recorder

    recorder = Recorder(store, embedder)
    walls, cpus = [], []
    for i in range(writes + 10):  # the first 10 warm the model, the driver and Neo4j's plan cache
        t0, c0 = time.perf_counter(), time.process_time()
        recorder.record(experience("single", i, thoughts), success=True, parent_speedup=1.0, improves_run=True)
        if i >= 10:
            walls.append(time.perf_counter() - t0)
            cpus.append(time.process_time() - c0)
    return {"per_min": 60 / statistics.median(walls), "cpu_ms": statistics.median(cpus) * 1e3, "n": writes}


def batched(
    store: GraphStore, embedder, thoughts: list[Thought], writes: int, mode: str = "batched", embedders=None
) -> dict:
    """BatchRecorder: a farm's results arrive faster than one writer takes them; the time until the last is
    committed gives the records per minute one writer sustains (its batches fill up to BATCH_RECORDS).
    Mode "vectors": the texts are embedded (cached) before the clock starts: the write path alone."""
    from agent.recorder import EMBEDDERS, BatchRecorder

    recorder = BatchRecorder(store, embedder, embedders=embedders or EMBEDDERS)
    write, writer_cpu = recorder._write, [0.0]

    def timed_write(rows):  # runs in the writer thread: its CPU alone (thread_time)
        c0 = time.thread_time()
        try:
            return write(rows)
        finally:
            writer_cpu[0] += time.thread_time() - c0

    recorder._write = timed_write
    for i in range(50):  # a first batch warms the batched plans
        recorder.record(experience(mode, i, thoughts), success=True, parent_speedup=1.0, improves_run=True)
    recorder.flush()
    writer_cpu[0] = 0.0
    todo = [experience(mode, i, thoughts) for i in range(50, 50 + writes)]
    if mode == "vectors":
        embedder.embed([x.embedding_text() for x in todo])
    t0, c0 = time.perf_counter(), time.process_time()
    for exp in todo:
        recorder.record(exp, success=True, parent_speedup=1.0, improves_run=True)
    recorder.flush()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {
        "per_min": writes / wall * 60,
        "cpu_ms": cpu / writes * 1e3,
        "n": writes,
        "writer_ms": writer_cpu[0] / writes * 1e3,
    }


def graph_check(store: GraphStore, expected: int) -> str:
    """What the graph says after both: every record once, and EFFECT_ON counting each exactly once."""
    row = store.read(
        "MATCH (x:Experience) WITH count(x) AS n MATCH (:Thought)-[e:EFFECT_ON]->() "
        "RETURN n, min(e.trials) AS lo, max(e.trials) AS hi"
    )[0]
    ok = row["n"] == expected == row["lo"] == row["hi"]
    return f"{row['n']} experiences, EFFECT_ON trials {row['lo']}-{row['hi']} per thought ({'ok' if ok else 'WRONG'})"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=64, help="candidates in the batch (half sgemm_64, half softmax)")
    ap.add_argument("--writes", type=int, default=300, help="experiences recorded one transaction each")
    ap.add_argument("--batched-writes", type=int, default=3000, help="experiences recorded by the batching writer")
    ap.add_argument("--only-writes", action="store_true", help="measure the graph writer only")
    ap.add_argument("--embedders", type=int, default=None, help="the BatchRecorder's embedding threads")
    args = ap.parse_args()
    home = Path(tempfile.mkdtemp(prefix="eok-bench-scale-"))
    if not args.only_writes:
        evaluations(args, home)
    w = graph_writer(home, args.writes, args.batched_writes, args.embedders)
    print(f"{'graph writer, same Neo4j':38} {'records':>7} {'records/min':>11} {'driver CPU/record':>17} {'writer':>9}")
    for label, key in (
        ("one transaction per record", "single"),
        ("batched (BatchRecorder)", "batched"),
        ("batched, texts embedded beforehand", "vectors"),
    ):
        r = w[key]
        writer = f"{r['writer_ms']:6.2f} ms" if "writer_ms" in r else "-"
        print(f"{label:38} {r['n']:7} {r['per_min']:11,.0f} {r['cpu_ms']:14.2f} ms {writer:>9}")
    ratio = w["batched"]["per_min"] / w["single"]["per_min"]
    write_only = w["vectors"]["per_min"] / w["single"]["per_min"]
    print(f"batched / one per record: {ratio:.1f}x ({write_only:.1f}x with the embeddings ready); {w['check']}")
    print("writer = CPU of the writer thread per record (the embedding threads do the model's work); target 20x")


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
