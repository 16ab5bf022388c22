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
Each experience has a summary in the agent's own format (agent.optimizer: task, technique, thought, verdict,
the offline generator's knob settings). First --writes experiences one transaction each, the caller waiting
for each (median wall and driver CPU per record); then --batched-writes through the BatchRecorder, queued as
fast as a farm would deliver them and flushed (records per minute until the last is committed, the driver's
CPU per record with every thread counted, and the writer thread's own CPU per record):
  - "the driver embeds": the results arrive without vectors, the recorder's embedding threads embed them
    (16 per model call): the local pool's path, and the farm's before issue 23 item 4;
  - "the workers embedded": each result arrives with its summary's vector, computed beforehand one text per
    model call as a worker does (evaluator.executor.with_summary; that CPU per record is printed: it is spent
    on the workers): the driver only writes.
The CPU per text of one text per call (a worker) against 16 per call (the recorder) is printed too, and
the load average before and after: on a shared machine the CPU figures are what to compare, the wall ones
move with the load. It checks the graph afterwards: every experience once and each EFFECT_ON counting each
exactly once.

    python scripts/bench_scale.py [--n 64] [--writes 300] [--batched-writes 3000] [--only-writes] [--embedders K]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent.offline import OfflineGenerator
from core.settings import Settings
from evaluator.evaluate import Candidate, Evaluator
from evaluator.executor import EvalExecutor, EvalJob, InProcessExecutor, SummarySpec
from evaluator.targets import load_target
from evaluator.tasks import load_task
from knowledge import local_neo4j
from knowledge.embeddings import Embedder
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
            for mode, n in (("single", writes), ("batched", batched_writes), ("workers", batched_writes))
        ]
        store.upsert_nodes([Task(id="bench-task", name="bench"), Target(key="k1-x60"), *thoughts])
        store.upsert_nodes(runs)
        embedder = build_embedder(settings)
        out = {"single": one_per_record(store, embedder, thoughts, writes)}
        out["batched"] = batched(store, embedder, thoughts, batched_writes, embedders=embedders)
        out["workers"] = batched(store, embedder, thoughts, batched_writes, mode="workers", embedders=embedders)
        out["per_call"] = embedding_per_call(embedder)
        out["check"] = graph_check(store, writes + 10 + 2 * (batched_writes + 50))
        store.close()
    finally:
        local_neo4j.stop(settings)
    return out


def summary_spec(mode: str, i: int, model: str) -> SummarySpec:
    """The agent's summary of the i-th candidate (agent.optimizer._summary_spec: task, technique, thought,
    then the offline generator's description of the variant), distinct per mode so no embedding comes from
    another mode's cache."""
    knobs = f"lmul={2 ** (i % 4)}, mr={i % 8 + 1}, nv={i % 3 + 1}, unroll={i % 5 + 1}, pack={i % 2}, kc={i}"
    return SummarySpec(
        head="sgemm_64: unroll (Unroll the k loop of the micro-kernel) -> ",
        tail=f". RVV GEMM NN 4x1xVLMAX(m4) micro-kernel ({mode}): {knobs}",
        model=model,
    )


def experience(mode: str, i: int, thoughts: list[Thought], model: str = "") -> Experience:
    """The i-th record of a mode, its summary in the agent's format."""
    return Experience(
        id=f"bench-{mode}-{i}", task_id="bench-task", target_key="k1-x60", run_id=f"bench-{mode}",
        parent_id=f"bench-{mode}-{i - 1}" if i else None, thought_ids=[t.id for t in thoughts], step=i,
        code=f"/* candidate {i} */", status="ok", speedup=1.0 + i / 1000,
        summary=summary_spec(mode, i, model).text("ok", 1.0 + i / 1000),
    )  # fmt: skip


def uncached(embedder: Embedder) -> Embedder:
    """The same model without the cache: every text costs its model call, as on a fresh worker."""
    return Embedder(embedder.model_name, embedder._encoder, embedder.dim, cache=None)


def embedding_per_call(embedder: Embedder, n: int = 256) -> dict:
    """CPU per text of this machine's model: one text per call (a worker) and 16 per call (the recorder)."""
    out = {}
    model = uncached(embedder)
    for k in (1, 16):
        texts = [summary_spec(f"per-call-{k}", i, "").text("ok", 1.0 + i / 1000).strip() for i in range(n)]
        c0 = time.thread_time()  # the one-core session computes in the calling thread
        for i in range(0, n, k):
            model.embed(texts[i : i + k])
        out[k] = (time.thread_time() - c0) / n * 1e3
    return out


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
    Mode "workers": each record comes with its summary's vector, computed before the clock starts one text
    per call as the workers do (their CPU per record is returned as worker_ms): the driver only writes."""
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
    todo = [experience(mode, i, thoughts) for i in range(50 + writes)]
    vectors: list = [None] * len(todo)
    worker_cpu = 0.0
    if mode == "workers":  # what the workers did, each for its own result: one text per model call
        worker = uncached(embedder)
        c0 = time.thread_time()
        vectors = [worker.embed([x.embedding_text()])[0] for x in todo]
        worker_cpu = time.thread_time() - c0
    for exp, vector in zip(todo[:50], vectors[:50], strict=True):  # a first batch warms the batched plans
        recorder.record(exp, success=True, parent_speedup=1.0, improves_run=True, vector=vector)
    recorder.flush()
    writer_cpu[0] = 0.0
    t0, c0 = time.perf_counter(), time.process_time()
    for exp, vector in zip(todo[50:], vectors[50:], strict=True):
        recorder.record(exp, success=True, parent_speedup=1.0, improves_run=True, vector=vector)
    recorder.flush()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {
        "per_min": writes / wall * 60,
        "cpu_ms": cpu / writes * 1e3,
        "n": writes,
        "writer_ms": writer_cpu[0] / writes * 1e3,
        "worker_ms": worker_cpu / len(todo) * 1e3,
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
    load0 = os.getloadavg()
    w = graph_writer(home, args.writes, args.batched_writes, args.embedders)
    load1 = os.getloadavg()
    single = w["single"]
    print(
        f"{'graph writer, same Neo4j, same run':40} {'records':>7} {'records/min':>11} {'vs one/record':>13} "
        f"{'driver CPU/rec':>14} {'writer':>9} {'workers':>9}"
    )
    for label, key in (
        ("one transaction per record", "single"),
        ("batched, the driver embeds", "batched"),
        ("batched, the workers embedded", "workers"),
    ):
        r = w[key]
        writer = f"{r['writer_ms']:6.2f} ms" if "writer_ms" in r else "-"
        worker = f"{r['worker_ms']:6.2f} ms" if r.get("worker_ms") else "-"
        ratio = f"{r['per_min'] / single['per_min']:.1f}x"
        print(f"{label:40} {r['n']:7} {r['per_min']:11,.0f} {ratio:>13} {r['cpu_ms']:11.2f} ms {writer:>9} {worker:>9}")
    # CPU time, which load distorts far less than wall time: records per minute one core of the driver takes.
    per_core = {k: 60e3 / w[k]["cpu_ms"] for k in ("single", "batched", "workers")}
    print(
        "per core of the driver (60 s / its CPU per record): "
        + ", ".join(f"{k} {v:,.0f}/min ({v / per_core['single']:.1f}x)" for k, v in per_core.items())
    )
    per_call = w["per_call"]
    print(f"embedding CPU per text: {per_call[1]:.2f} ms one per call (a worker), {per_call[16]:.2f} ms 16 per call")
    print(f"target: 20x one transaction per record, end to end; {w['check']}")
    print(f"load average (1, 5, 15 min): before {fmt_load(load0)}, after {fmt_load(load1)} on {os.cpu_count()} cores")
    print("writer = CPU of the writer thread per record; workers = CPU per record the workers spent embedding")


def fmt_load(load: tuple[float, float, float]) -> str:
    return "/".join(f"{x:.1f}" for x in load)


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
