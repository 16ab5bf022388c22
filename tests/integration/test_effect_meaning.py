"""One meaning of a measured effect (docs/CYPHER.md "Measured effect"), checked on a graph built by a real run:
the store's EFFECT_ON counters, the saved queries, the HTTP API and retrieval all say the same thing, and it
is what the recorded experiences say."""

from __future__ import annotations

import math
from collections import defaultdict

from fastapi.testclient import TestClient

from agent.optimizer import Optimizer
from agent.types import RunRequest
from knowledge.retrieval import SearchFilters
from service.api.app import create_app
from tests.integration.conftest import ANALYST, API_KEYS, READER


def _from_experiences(container) -> dict[str, dict]:
    """EFFECT_ON recomputed from first principles: the experiences that applied each thought on k1-x60."""
    rows = container.store.read(
        "MATCH (x:Experience {target_key: 'k1-x60'})-[:APPLIED]->(t:Thought) "
        "OPTIONAL MATCH (x)-[:DERIVED_FROM]->(p:Experience) "
        "RETURN t.id AS t, x.status AS status, x.speedup AS s, p.speedup AS ps"
    )
    out: dict[str, dict] = defaultdict(lambda: {"trials": 0, "correct": 0, "logs": [], "gains": []})
    for r in rows:
        e = out[r["t"]]
        e["trials"] += 1
        if r["status"] == "ok" and r["s"]:
            e["correct"] += 1
            e["logs"].append(math.log(r["s"]))
            e["gains"].append(math.log(r["s"] / (r["ps"] or 1.0)))
    return out


def test_store_queries_api_and_retrieval_agree_after_a_real_run(container) -> None:
    container.settings = container.settings.model_copy(update={"eval_parallelism": 1, "api_keys": API_KEYS})
    opt = Optimizer(container)
    run = opt.create_run(RunRequest(task="sdot", target="k1-x60", budget=6, directions=2, generator="offline"))
    out = opt.execute(run.id)
    assert out.run.evaluations == 6

    truth = _from_experiences(container)
    assert truth and any(e["correct"] for e in truth.values())
    with TestClient(create_app(container=container), raise_server_exceptions=False) as client:
        best = client.post("/queries/best_thoughts_on_target", json={"params": {}}, headers=ANALYST).json()
        by_thought = {r["thought"]: r for r in best["rows"]}
        assert set(by_thought) == set(truth)
        for tid, e in truth.items():
            api = {x["target"]: x for x in client.get(f"/thoughts/{tid}", headers=READER).json()["effects"]}
            effect = api["k1-x60"]
            row = by_thought[tid]
            assert effect["trials"] == row["trials"] == e["trials"]
            assert effect["correct"] == row["correct"] == e["correct"]
            if e["correct"]:
                speedup = math.exp(sum(e["logs"]) / e["correct"])
                gain = math.exp(sum(e["gains"]) / e["correct"])
                assert math.isclose(effect["mean_speedup"], speedup, rel_tol=1e-9)
                assert math.isclose(row["mean_over_o3"], speedup, abs_tol=5e-4)  # the query rounds to 3 places
                assert math.isclose(effect["mean_gain"], gain, rel_tol=1e-9)
                assert math.isclose(row["mean_gain"], gain, abs_tol=5e-4)
            else:
                assert effect["mean_speedup"] is None and row["mean_over_o3"] is None

        # Ideas pool their thoughts' counters the same way.
        ideas = client.post("/queries/idea_effect_by_target", json={"params": {}}, headers=ANALYST).json()["rows"]
        idea_of = {
            r["t"]: r["i"]
            for r in container.store.read("MATCH (i:Idea)-[:HAS_THOUGHT]->(t) RETURN t.id AS t, i.id AS i")
        }
        for r in ideas:
            mine = [e for t, e in truth.items() if idea_of[t] == r["idea"]]
            logs = [x for e in mine for x in e["logs"]]
            assert r["trials"] == sum(e["trials"] for e in mine)
            if logs:
                assert math.isclose(r["mean_over_o3"], math.exp(sum(logs) / len(logs)), abs_tol=5e-4)

    # Retrieval reports the same summary for a thought it returns with a target filter.
    tid = max(truth, key=lambda t: truth[t]["trials"])
    title = container.store.read("MATCH (t:Thought {id: $id}) RETURN t.title AS t", id=tid)[0]["t"]
    hits = container.retriever.search(title, k=40, filters=SearchFilters(kind="thought", target="k1-x60"))
    hit = next(h for h in hits if h.id == tid)
    assert hit.measured["trials"] == truth[tid]["trials"] and hit.measured["correct"] == truth[tid]["correct"]


def test_migration_moves_old_gain_sums_and_recomputes_speedup(container) -> None:
    """Data written before migration 9 (sum_log_speedup held the gain) is converted exactly."""
    from knowledge.migrations import load_migrations

    opt = Optimizer(container)
    run = opt.create_run(RunRequest(task="sdot", target="k1-x60", budget=3, directions=1, generator="offline"))
    opt.execute(run.id)
    truth = _from_experiences(container)
    # Rewrite the counters as the old recorder left them.
    container.store.write(
        "MATCH (:Thought)-[e:EFFECT_ON]->(:Target) SET e.sum_log_speedup = e.sum_log_gain, e.correct = null "
        "REMOVE e.sum_log_gain"
    )
    step = next(m for m in load_migrations() if m.version == 9)
    for stmt in step.statements:
        container.store.write(stmt)
    rows = container.store.read(
        "MATCH (t:Thought)-[e:EFFECT_ON]->(:Target {key: 'k1-x60'}) RETURN t.id AS t, properties(e) AS e"
    )
    assert rows
    for r in rows:
        e, want = r["e"], truth[r["t"]]
        assert e["correct"] == want["correct"]
        assert math.isclose(e["sum_log_speedup"], sum(want["logs"]), abs_tol=1e-9)
        assert math.isclose(e["sum_log_gain"], sum(want["gains"]), abs_tol=1e-9)
