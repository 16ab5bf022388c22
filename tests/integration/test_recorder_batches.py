"""The batching graph writer: one transaction per batch, EFFECT_ON summed per (thought, target) within it,
replays changing nothing, and a kill -9 of a writing process leaving only whole records whose counters agree."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np

from agent.recorder import EMBED_TEXTS, BatchRecorder, Record, Recorder
from knowledge.models import Experience, Run, Target, Task, Thought
from knowledge.store import GraphStore, as_vector

ROOT = Path(__file__).resolve().parents[2]
THOUGHTS = ("rb-t0", "rb-t1")


def _graph(store: GraphStore, run_ids: tuple[str, ...] = ("rb-run",)) -> None:
    store.upsert_nodes([Task(id="rb-task", name="rb"), Target(key="k1-x60")])
    store.upsert_nodes([Thought(id=t, idea_id="rb-idea", title=f"thought {t}", technique="unroll") for t in THOUGHTS])
    store.upsert_nodes([Run(id=r, task_id="rb-task", target_key="k1-x60", budget=1000) for r in run_ids])


def _exp(i: int, speedup: float | None, run: str = "rb-run", parent: str | None = None) -> Experience:
    return Experience(
        id=f"{run}-{i:04d}", task_id="rb-task", target_key="k1-x60", run_id=run, parent_id=parent,
        thought_ids=[THOUGHTS[0]], step=i, code=f"/* {i} */", status="ok" if speedup else "wrong",
        speedup=speedup, summary=f"batch test candidate {i} of {run}",
    )  # fmt: skip


def _snapshot(store: GraphStore) -> dict:
    """Everything a record touches: experience and relationship counts, EFFECT_ON and run counters."""
    counts = store.read(
        "MATCH (x:Experience) OPTIONAL MATCH (x)-[r]->() RETURN count(DISTINCT x) AS xs, count(r) AS rels"
    )[0]
    effects = store.read(
        "MATCH (t:Thought)-[e:EFFECT_ON]->(g:Target) RETURN t.id AS t, g.key AS g, properties(e) AS e ORDER BY t"
    )
    runs = store.read(
        "MATCH (r:Run) RETURN r.id AS id, r.evaluations AS n, r.best_experience_id AS best, "
        "r.best_speedup AS s, r.llm_calls AS calls ORDER BY id"
    )
    return {"counts": counts, "effects": effects, "runs": runs}


def test_one_batch_sums_two_trials_of_a_thought_and_a_replay_changes_nothing(store, embedder) -> None:
    _graph(store)
    recorder = Recorder(store, embedder)
    batch = [
        Record(_exp(0, 1.5), success=True, parent_speedup=None, improves_run=True, llm_calls=1),
        # The child of the first, in the same transaction: its gain is over its parent's 1.5x.
        Record(_exp(1, 2.0, parent="rb-run-0000"), success=True, parent_speedup=1.5, improves_run=True, llm_calls=2),
        Record(_exp(2, None, parent="rb-run-0001"), success=False, parent_speedup=2.0, improves_run=False),
    ]
    assert recorder.record_batch(batch) == {"rb-run-0000", "rb-run-0001", "rb-run-0002"}

    before = _snapshot(store)
    (effect,) = before["effects"]
    e = effect["e"]
    assert (effect["t"], effect["g"]) == (THOUGHTS[0], "k1-x60")
    assert (e["trials"], e["successes"], e["correct"]) == (3, 2, 2)
    assert math.isclose(e["sum_log_speedup"], math.log(1.5) + math.log(2.0), rel_tol=1e-12)
    assert math.isclose(e["sum_log_gain"], math.log(1.5) + math.log(2.0 / 1.5), rel_tol=1e-12)
    assert before["runs"] == [{"id": "rb-run", "n": 3, "best": "rb-run-0001", "s": 2.0, "calls": 3}]
    # 3 x (FOR_TASK, ON_TARGET, IN_RUN, APPLIED) + 2 DERIVED_FROM, each once.
    assert before["counts"] == {"xs": 3, "rels": 14}
    links = store.read("MATCH (c:Experience)-[:DERIVED_FROM]->(p) RETURN c.id AS c, p.id AS p ORDER BY c")
    assert links == [{"c": "rb-run-0001", "p": "rb-run-0000"}, {"c": "rb-run-0002", "p": "rb-run-0001"}]

    # The same batch again (a retry after a lost commit reply, a resumed run replaying), and a batch holding
    # one experience twice: nothing moves.
    assert recorder.record_batch(batch) == set()
    assert recorder.record_batch([batch[1], batch[1]]) == set()
    assert _snapshot(store) == before
    stored = store.read("MATCH (x:Experience) RETURN x.embedding_gen AS g, x.embedding IS NOT NULL AS v")
    assert all(r["v"] for r in stored) and len({r["g"] for r in stored}) == 1  # one generation per batch


def test_records_from_many_threads_are_written_in_batches_and_flushed(store, embedder) -> None:
    runs = tuple(f"rb-run{k}" for k in range(4))
    _graph(store, runs)
    # A long wait: batches are cut only when full or flushed, so their number is known.
    recorder = BatchRecorder(store, embedder, batch=25, wait_s=30)
    transactions = store.local_writes

    def direction(run: str) -> None:  # like a run's direction threads: each records as its results arrive
        for i in range(30):
            recorder.record(_exp(i, 1.0 + i / 100, run=run), success=True, parent_speedup=1.0, improves_run=True)

    threads = [threading.Thread(target=direction, args=(r,)) for r in runs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert recorder.flush(runs[0], timeout=60)

    snap = _snapshot(store)
    assert snap["counts"]["xs"] == 120 and snap["effects"][0]["e"]["trials"] == 120
    assert [(r["n"], r["best"]) for r in snap["runs"]] == [(30, f"{r}-0029") for r in runs]
    assert store.local_writes - transactions == 5  # 4 full batches and the flushed rest, not 120 transactions


def test_the_writer_thread_never_embeds_and_each_record_keeps_its_own_vector(store, embedder, monkeypatch) -> None:
    _graph(store)
    n, calls, all_queued = 40, [], threading.Event()
    embed = embedder.embed

    def spy(texts: list[str]) -> np.ndarray:  # which thread calls the model, with how many texts
        calls.append((threading.current_thread().name, len(texts)))
        all_queued.wait(60)  # the embedding threads hold their first claims until every record is queued
        return embed(texts)

    monkeypatch.setattr(embedder, "embed", spy)
    recorder = BatchRecorder(store, embedder, batch=500, wait_s=30, embedders=2)
    for i in range(n):
        recorder.record(_exp(i, 1.0 + i / 100), success=True, parent_speedup=1.0, improves_run=True)
    all_queued.set()
    assert recorder.flush("rb-run", timeout=120)

    # Off the writer ("eok-recorder"), in calls of several texts: two first claims, then EMBED_TEXTS a call.
    assert {name for name, _ in calls} <= {"eok-recorder-embed"}, calls
    assert sum(k for _, k in calls) == n and max(k for _, k in calls) <= EMBED_TEXTS
    assert len(calls) <= 2 + -(-(n - 2) // EMBED_TEXTS), calls
    rows = store.read_values(
        "MATCH (x:Experience) RETURN x.id AS id, x.summary AS s, x.embedding AS v, x.embedding_gen AS g ORDER BY id"
    )
    assert [r["id"] for r in rows] == [f"rb-run-{i:04d}" for i in range(n)]
    expected = embed([r["s"] for r in rows])  # each record's own summary, not a neighbour's
    assert np.allclose(np.stack([as_vector(r["v"]) for r in rows]), expected, atol=1e-6)
    # Stamped by the transaction that wrote them: the index bookkeeping's generation is the newest one.
    assert max(r["g"] for r in rows) == store.embedding_state()[1] and min(r["g"] for r in rows) >= 1
    assert store.get_node(Run, "rb-run").best_experience_id == f"rb-run-{n - 1:04d}"  # written in queue order


def test_records_that_come_with_vectors_are_never_embedded_and_keep_their_place(store, embedder, monkeypatch) -> None:
    """Results of workers that embedded their summaries, between results that did not (an old worker, a local
    evaluation): only the latter reach the model; every record lands, in the order queued."""
    _graph(store)
    texts: list[str] = []
    embed = embedder.embed

    def spy(batch: list[str]) -> np.ndarray:
        texts.extend(batch)
        return embed(batch)

    monkeypatch.setattr(embedder, "embed", spy)
    rng = np.random.default_rng(7)
    sent = {}  # every third record comes with a vector no model made: stored as it came, or the test fails
    recorder = BatchRecorder(store, embedder, batch=500, wait_s=30, embedders=1)
    for i in range(30):
        vector = None
        if i % 3 == 0:
            vector = rng.standard_normal(embedder.dim).astype(np.float32)
            sent[f"rb-run-{i:04d}"] = vector = vector / np.linalg.norm(vector)
        recorder.record(_exp(i, 1.0 + i / 100), success=True, parent_speedup=1.0, improves_run=True, vector=vector)
    assert recorder.flush("rb-run", timeout=60)

    rows = store.read_values("MATCH (x:Experience) RETURN x.id AS id, x.summary AS s, x.embedding AS v ORDER BY id")
    plain = [r for r in rows if r["id"] not in sent]
    assert len(rows) == 30 and sorted(texts) == sorted(r["s"] for r in plain)
    for r in rows:
        if r["id"] in sent:
            assert np.array_equal(as_vector(r["v"]), sent[r["id"]])
    assert np.allclose(np.stack([as_vector(r["v"]) for r in plain]), embed([r["s"] for r in plain]), atol=1e-6)
    assert store.get_node(Run, "rb-run").best_experience_id == "rb-run-0029"  # written in queue order


WRITER = textwrap.dedent(
    """
    import sys, time
    from agent.recorder import BatchRecorder
    from core.settings import Settings
    from knowledge.embeddings import Embedder
    from knowledge.models import Experience
    from knowledge.store import GraphStore

    n = int(sys.argv[1])
    s = Settings()
    recorder = BatchRecorder(GraphStore.connect(s, migrate=False), Embedder.from_settings(s), batch=40, wait_s=0.05)
    for i in range(n):
        exp = Experience(
            id=f"rb-run-{i:04d}", task_id="rb-task", target_key="k1-x60", run_id="rb-run",
            parent_id=f"rb-run-{i - 1:04d}" if i else None, thought_ids=["rb-t0", "rb-t1"], step=i,
            code=f"/* {i} */", status="ok", speedup=1.0 + i / 1000, summary=f"stream candidate {i}")
        recorder.record(exp, success=i % 2 == 0, parent_speedup=1.0 + (i - 1) / 1000 if i else None,
                        improves_run=True)
        time.sleep(0.002)  # results arriving from a farm, not all at once
    recorder.flush("rb-run")
    print("done", flush=True)
    """
)


def _writer(env: dict[str, str], n: int) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", WRITER, str(n)], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )


def _consistent(store: GraphStore) -> int:
    """Every experience whole, and every counter equal to what the experiences present say; returns how many."""
    n = store.read("MATCH (x:Experience) RETURN count(x) AS n")[0]["n"]
    whole = store.read(
        "MATCH (x:Experience) WHERE COUNT { (x)-[:FOR_TASK]->(:Task) } = 1 AND COUNT { (x)-[:ON_TARGET]->() } = 1 "
        "AND COUNT { (x)-[:IN_RUN]->(:Run) } = 1 AND COUNT { (x)-[:APPLIED]->(:Thought) } = 2 "
        "AND x.embedding IS NOT NULL AND (x.step = 0 OR COUNT { (x)-[:DERIVED_FROM]->() } = 1) RETURN count(x) AS n"
    )[0]["n"]
    assert whole == n
    truth = store.read(
        "MATCH (x:Experience) RETURN count(x) AS trials, sum(log(x.speedup)) AS logs, "
        "sum(CASE WHEN x.step % 2 = 0 THEN 1 ELSE 0 END) AS successes"
    )[0]
    for t in THOUGHTS:
        rows = store.read("MATCH (:Thought {id: $t})-[e:EFFECT_ON]->(:Target) RETURN properties(e) AS e", t=t)
        e = rows[0]["e"] if rows else {"trials": 0, "successes": 0, "sum_log_speedup": 0.0}
        assert (e["trials"], e["successes"]) == (truth["trials"], truth["successes"])
        assert math.isclose(e["sum_log_speedup"], truth["logs"] or 0.0, rel_tol=1e-9, abs_tol=1e-12)
    assert (store.get_node(Run, "rb-run").evaluations or 0) == n
    return n


def test_kill_9_of_a_writer_mid_stream_leaves_whole_records_and_a_rerun_counts_each_once(
    store, embedder, neo4j_settings, tmp_path: Path
) -> None:
    _graph(store)
    n = 500
    home = tmp_path / "home"
    (home / "cache").mkdir(parents=True)
    embedder._encoder.dimension()  # the session's model export, lent to the writers: no ~10 s export each
    (home / "cache" / "onnx").symlink_to(embedder._encoder._onnx_dir)
    env = {**os.environ, "EOK_HOME": str(home), "NEO4J_URI": neo4j_settings.bolt_uri}
    proc = _writer(env, n)
    deadline, seen = time.monotonic() + 300, 0
    while seen < 120 and time.monotonic() < deadline:  # kill once several batches are in, many still to come
        time.sleep(0.05)
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        seen = store.read("MATCH (x:Experience) RETURN count(x) AS n")[0]["n"]
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)

    partial = _consistent(store)
    assert 120 <= partial < n, partial

    rerun = _writer(env, n)  # a resumed run replays: what is in must not count again
    _, err = rerun.communicate(timeout=600)
    assert rerun.returncode == 0, err.decode()
    assert _consistent(store) == n
