"""Analysts' Cypher: saved queries (API and CLI) and ad-hoc read-only queries with timeout and row cap."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from fastapi.testclient import TestClient

from core.settings import Settings
from knowledge.store import GraphStore
from service.api.cypher import QUERIES_DIR, load_saved_queries
from service.bootstrap import Container
from tests.integration.conftest import ANALYST, READER, SEED_RUN, node_count

REQUIRED = {
    "run_lineage": {"run_id": SEED_RUN},
    "run_directions": {"run_id": SEED_RUN},
    "similar_tasks": {"task": "sgemv_n"},
}


def run_saved(client: TestClient, name: str, **params: object) -> dict:
    r = client.post(f"/queries/{name}", json={"params": params}, headers=ANALYST)
    assert r.status_code == 200, r.text
    return r.json()


def test_at_least_twelve_documented_saved_queries(client: TestClient) -> None:
    r = client.get("/queries", headers=ANALYST)
    assert r.status_code == 200
    items = r.json()["items"]
    assert len(items) >= 12
    for q in items:
        assert q["summary"] and q["summary"] != q["name"], q["name"]
        assert q["description"], q["name"]
        for p in q["params"]:
            assert p["description"] or p["required"], (q["name"], p["name"])
    assert len(items) == len(list(QUERIES_DIR.glob("*.cypher")))


@pytest.mark.parametrize("name", sorted(load_saved_queries()))
def test_every_saved_query_runs_on_the_seed_graph(client: TestClient, name: str) -> None:
    body = run_saved(client, name, **REQUIRED.get(name, {}))
    assert body["columns"], name
    assert body["row_count"] == len(body["rows"])


def test_best_thoughts_on_target_orders_by_measured_speedup(client: TestClient) -> None:
    rows = run_saved(client, "best_thoughts_on_target", target="k1-x60")["rows"]
    assert [r["thought"] for r in rows] == ["t-lmul-gemv", "t-multi-acc-dot", "t-blocking-gemm"]
    assert rows[0]["mean_over_o3"] == 1.6 and rows[0]["success_rate"] == 1.0


def test_rvv_ideas_in_openblas(client: TestClient) -> None:
    rows = run_saved(client, "ideas_from_rvv_openblas")["rows"]
    assert {r["idea"] for r in rows} == {"idea-lmul", "idea-accumulators"}  # the AVX2 one is left out
    assert all(r["repositories"] == ["OpenBLAS"] for r in rows)


def test_lineage_of_the_seed_run_is_root_first(client: TestClient) -> None:
    rows = run_saved(client, "run_lineage", run_id=SEED_RUN)["rows"]
    assert [r["experience"] for r in rows] == ["exp-1", "exp-3"]
    assert rows[1]["thoughts"] == ["LMUL=4 row sweep for gemv"]
    assert rows[1]["evidence"] == ["OpenBLAS@" + "a1" * 5]
    assert (rows[1]["over_competent"], rows[1]["over_o3"]) == (1.2, 1.8)


def test_run_figures_lead_with_the_competent_baseline(client: TestClient) -> None:
    """One yardstick: every saved query with a run's or a kernel's speedup shows the competent one first."""
    result = run_saved(client, "recent_runs")
    run, cols = result["rows"][0], result["columns"]
    assert cols.index("best_over_competent") + 1 == cols.index("best_over_o3")
    assert (run["best_over_competent"], run["best_over_o3"]) == (1.2, 1.8)
    best = {r["task"]: r for r in run_saved(client, "tasks_best_speedup", target="k1-x60")["rows"]}["sgemv_n"]
    assert (best["best_over_competent"], best["best_over_o3"], best["best_experience"]) == (1.2, 1.8, "exp-3")
    for name, params in [("run_directions", {"run_id": SEED_RUN}), ("similar_tasks", {"task": "sgemv_n"})]:
        cols = run_saved(client, name, **params)["columns"]
        assert cols.index("best_over_competent") < cols.index("best_over_o3")


def test_worked_on_k1_not_k3(client: TestClient) -> None:
    rows = run_saved(client, "worked_on_k1_not_k3")["rows"]
    assert [(r["thought"], r["o3_good"], r["o3_bad"]) for r in rows] == [("t-lmul-gemv", 1.6, 0.9)]


def test_prior_vs_measured_flags_the_overpromise(client: TestClient) -> None:
    rows = {r["thought"]: r for r in run_saved(client, "prior_vs_measured")["rows"]}
    assert rows["t-blocking-gemm"]["verdict"] == "overpromised"  # claimed 2.0x, measured 0.95x


def test_failures_by_error_kind(client: TestClient) -> None:
    rows = run_saved(client, "failures_by_error_kind", task="sgemv_n")["rows"]
    assert rows == [
        {
            "status": "compile_error",
            "reason": "use of undeclared identifier 'vfmacc'",
            "attempts": 1,
            "tasks": ["sgemv_n"],
            "examples": ["exp-2"],
        }
    ]


def test_untried_thoughts_and_commit_timeline(client: TestClient) -> None:
    rows = run_saved(client, "untried_thoughts", operator="gemv")["rows"]
    assert {r["thought"] for r in rows} == {"t-tail-vl"}  # unroll was applied (exp-2), lmul measured
    timeline = run_saved(client, "commits_per_isa_over_time", repo="OpenBLAS")["rows"]
    assert {"repository": "OpenBLAS", "isa": "rvv", "year": 2023, "commits": 1} in timeline
    assert {"repository": "OpenBLAS", "isa": "avx2", "year": 2016, "commits": 1} in timeline


def test_run_directions_and_similarity(client: TestClient) -> None:
    rows = run_saved(client, "run_directions", run_id=SEED_RUN)["rows"]
    assert rows[0]["direction"] == "idea-lmul"
    assert (rows[0]["best_over_competent"], rows[0]["best_over_o3"]) == (1.2, 1.8)
    assert run_saved(client, "similar_targets")["rows"][0]["target"] == "k3-x100"
    assert run_saved(client, "similar_tasks", task="sgemv_n")["rows"][0]["task"] == "sgemv_t"


def test_saved_query_parameter_errors_are_clear(client: TestClient) -> None:
    r = client.post("/queries/run_lineage", json={"params": {}}, headers=ANALYST)
    assert r.status_code == 422 and "run_id" in r.json()["error"]["message"]
    r = client.post("/queries/best_thoughts_on_target", json={"params": {"limt": 3}}, headers=ANALYST)
    assert r.status_code == 422 and "'limt'" in r.json()["error"]["message"]
    r = client.post("/queries/best_thoughts_on_target", json={"params": {"limit": "many"}}, headers=ANALYST)
    assert r.status_code == 422 and "int" in r.json()["error"]["message"]
    r = client.post("/queries/best_thoughts_on_target", json={"params": {"limit": 2**70}}, headers=ANALYST)
    assert r.status_code == 422
    r = client.post("/queries/no_such_query", json={}, headers=ANALYST)
    assert r.status_code == 404 and "no_such_query" in r.json()["error"]["message"]


# -- ad-hoc Cypher --------------------------------------------------------------------------------------

WRITES = [
    "CREATE (n:Intruder {name: 'x'}) RETURN n",
    "MERGE (t:Thought {id: 'injected'}) RETURN t",
    "MATCH (t:Thought) SET t.title = 'defaced' RETURN count(t)",
    "MATCH (x:Experience) DETACH DELETE x",
    "MATCH (t:Thought {id: 't-lmul-gemv'}) REMOVE t.title RETURN t",
    "CREATE INDEX intruder_idx IF NOT EXISTS FOR (n:Intruder) ON (n.name)",
    "CALL db.createLabel('Intruder')",
    "MATCH (a:Thought), (b:Target) CREATE (a)-[:HACKED]->(b)",
]


def graph_counts(store: GraphStore) -> tuple[int, int, str]:
    rels = store.read("MATCH ()-[r]->() RETURN count(r) AS n")[0]["n"]
    title = store.read("MATCH (t:Thought {id: 't-lmul-gemv'}) RETURN t.title AS t")[0]["t"]
    return node_count(store), rels, title


@pytest.mark.parametrize("query", WRITES)
def test_writes_are_refused_and_change_nothing(client: TestClient, api_graph: Container, query: str) -> None:
    before = graph_counts(api_graph.store)
    r = client.post("/cypher", json={"query": query}, headers=ANALYST)
    assert r.status_code == 403, r.text
    err = r.json()["error"]
    assert err["code"] == "write_refused"
    assert "read-only" in err["message"] and "nothing was" in err["message"]
    assert graph_counts(api_graph.store) == before
    labels = {r["label"] for r in api_graph.store.read("CALL db.labels() YIELD label RETURN label")}
    assert "Intruder" not in labels


def test_show_indexes_is_allowed(client: TestClient) -> None:
    r = client.post("/cypher", json={"query": "SHOW INDEXES YIELD name RETURN name"}, headers=ANALYST)
    assert r.status_code == 200, r.text
    assert "knowledge_text" in {row["name"] for row in r.json()["rows"]}


def test_slow_query_is_stopped_at_the_timeout(client: TestClient, api_settings: Settings) -> None:
    # 8 * 10^9 rows (Neo4j stops a query between rows); range() past 10^6 elements is refused before it runs
    slow = "UNWIND $l AS a UNWIND $l AS b UNWIND $l AS c WITH a + b + c AS x WHERE x % 7 = 3 RETURN count(x) AS n"
    began = time.monotonic()
    r = client.post("/cypher", json={"query": slow, "params": {"l": list(range(2000))}}, headers=ANALYST)
    took = time.monotonic() - began
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["code"] == "query_timeout"
    assert f"{api_settings.cypher_timeout_s:g} s" in err["message"]
    assert took < api_settings.cypher_timeout_s + 8  # stopped, not run to completion (minutes)
    assert client.post("/cypher", json={"query": "RETURN 1 AS one"}, headers=ANALYST).status_code == 200


def test_row_cap_truncates(client: TestClient, api_settings: Settings) -> None:
    r = client.post("/cypher", json={"query": "UNWIND range(1, 500) AS i RETURN i"}, headers=ANALYST)
    body = r.json()
    assert body["row_count"] == api_settings.cypher_row_cap == len(body["rows"])
    assert body["truncated"] is True
    r = client.post("/cypher", json={"query": "UNWIND range(1, 5) AS i RETURN i"}, headers=ANALYST)
    assert r.json()["truncated"] is False and r.json()["row_count"] == 5


def test_bad_cypher_is_400_naming_the_problem(client: TestClient) -> None:
    r = client.post("/cypher", json={"query": "MATCH (n RETURN n"}, headers=ANALYST)
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["code"] == "cypher_syntax" and "Invalid input" in err["message"] and "column" in err["message"]
    r = client.post("/cypher", json={"query": "RETURN $missing AS m"}, headers=ANALYST)
    assert r.status_code == 400 and "missing" in r.json()["error"]["message"]
    r = client.post("/cypher", json={"query": "RETURN $big AS b", "params": {"big": 2**70}}, headers=ANALYST)
    assert r.status_code == 422 and "64 bits" in r.json()["error"]["hint"]


def test_nodes_paths_and_temporals_serialise(client: TestClient) -> None:
    q = "MATCH p = (t:Thought {id: 't-lmul-gemv'})-[:EVIDENCED_BY]->(c:Commit) RETURN t, c.authored_at AS at, p"
    r = client.post("/cypher", json={"query": q, "params": {}}, headers=ANALYST)
    assert r.status_code == 200, r.text
    row = r.json()["rows"][0]
    assert row["t"]["_labels"] == ["Thought"] and row["t"]["id"] == "t-lmul-gemv"
    assert "embedding" not in row["t"]  # 384 floats nobody asked for
    assert row["at"].startswith("2023-05-02T")
    assert row["p"]["relationships"][0]["_type"] == "EVIDENCED_BY"


def test_cli_runs_and_lists_saved_queries(api_graph: Container, api_settings: Settings) -> None:
    env = {
        **os.environ,
        "NEO4J_URI": api_settings.bolt_uri,
        "NEO4J_PASSWORD": api_settings.neo4j_password.get_secret_value(),
        "NEO4J_USER": api_settings.neo4j_user,
    }
    cmd = [sys.executable, "-c", "from service.cli import main; main()", "cypher"]
    done = subprocess.run([*cmd, "--list", "--json"], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert len(json.loads(done.stdout)) >= 12
    done = subprocess.run(
        [*cmd, "best_thoughts_on_target", "--param", "target=k1-x60", "--param", "limit=1", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["params"] == {"target": "k1-x60", "min_trials": 1, "limit": 1}
    assert [r["thought"] for r in out["rows"]] == ["t-lmul-gemv"]
    done = subprocess.run([*cmd, "run_lineage"], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 2
    assert "needs parameter 'run_id'" in done.stderr and "Traceback" not in done.stderr
    done = subprocess.run(
        [*cmd, "recent_runs", "--param", "limit"], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 2 and "key=value" in done.stderr


# -- the saved-query file format ------------------------------------------------------------------------


def test_saved_query_header_is_parsed(tmp_path) -> None:
    from service.api.cypher import parse_saved_query

    path = tmp_path / "demo.cypher"
    path.write_text(
        "// Demo summary.\n// More words.\n"
        '// @param target: string = "k1-x60"  the target\n'
        "// @param limit: int = 5  rows\n// @param run_id: string  required one\n"
        "MATCH (r:Run {id: $run_id}) WHERE r.target_key = $target RETURN r LIMIT $limit;\n"
    )
    q = parse_saved_query(path)
    assert (q.name, q.summary, q.description) == ("demo", "Demo summary.", "More words.")
    assert [(p.name, p.type, p.default, p.required) for p in q.params] == [
        ("target", "string", "k1-x60", False),
        ("limit", "int", 5, False),
        ("run_id", "string", None, True),
    ]
    assert q.bind({"run_id": "r1", "limit": "7"}) == {"target": "k1-x60", "limit": 7, "run_id": "r1"}
    assert not q.text.endswith(";")


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("// S.\n// @param x: decimal = 1\nRETURN $x", "bad parameter line"),
        ("// S.\n// @param x: int = 1\nRETURN $x, $y", "['y'] used but not declared"),
        ("// S.\n// @param x: int = one\nRETURN $x", "not a JSON literal"),
        ("RETURN 1", "needs a `//` header"),
    ],
)
def test_malformed_saved_queries_name_the_problem(tmp_path, text: str, problem: str) -> None:
    from core.errors import InvalidInput
    from service.api.cypher import parse_saved_query

    path = tmp_path / "bad.cypher"
    path.write_text(text)
    with pytest.raises(InvalidInput) as err:
        parse_saved_query(path)
    assert problem in str(err.value) and "bad.cypher" in str(err.value)


def test_graph_edges_connect_the_nodes_an_answer_returned(client: TestClient) -> None:
    # Only nodes come back; the page then asks for the relationships among them.
    q = "MATCH (t:Thought {id: 't-lmul-gemv'}), (c:Commit {sha: $sha}), (i:Idea) RETURN t, c, i"
    rows = client.post("/cypher", json={"query": q, "params": {"sha": "a1" * 20}}, headers=ANALYST).json()["rows"]
    ids = list({row[k]["_id"] for row in rows for k in ("t", "c", "i")})
    r = client.post("/graph/edges", json={"ids": ids}, headers=ANALYST)
    assert r.status_code == 200, r.text
    rels = r.json()["relationships"]
    types = {x["_type"] for x in rels}
    assert "EVIDENCED_BY" in types and "HAS_THOUGHT" in types
    assert all(x["_start"] in ids and x["_end"] in ids and x["_id"] for x in rels)
    # Bounded: at most `limit` relationships, marked truncated; at most 300 ids; an analyst's role.
    r = client.post("/graph/edges", json={"ids": ids, "limit": 1}, headers=ANALYST)
    assert len(r.json()["relationships"]) == 1 and r.json()["truncated"] is True
    assert client.post("/graph/edges", json={"ids": ["x"] * 301}, headers=ANALYST).status_code == 422
    assert client.post("/graph/edges", json={"ids": ids}, headers=READER).status_code == 403
    # Expanding a node: its neighbours, bounded by `limit`.
    t_id = rows[0]["t"]["_id"]
    r = client.get("/graph/neighbours", params={"id": t_id, "limit": 2}, headers=ANALYST)
    assert r.status_code == 200 and len(r.json()["relationships"]) == 2 and r.json()["truncated"] is True
    assert t_id in {n["_id"] for n in r.json()["nodes"]}
    assert client.get("/graph/neighbours", params={"id": "no-such"}, headers=ANALYST).status_code == 404


def test_graph_schema_and_plan(client: TestClient) -> None:
    r = client.get("/graph/schema", headers=ANALYST)
    assert r.status_code == 200, r.text
    s = r.json()
    assert s["labels"]["Thought"] == 5 and "EVIDENCED_BY" in s["relationship_types"]
    assert "title" in s["property_keys"] and not any(k.startswith("embedding") for k in s["property_keys"])
    assert "Migration" not in s["labels"]
    assert client.get("/graph/schema", headers=READER).status_code == 403
    q = "MATCH (t:Thought)-[:EVIDENCED_BY]->(c:Commit) WHERE t.id = $id RETURN c.sha"
    r = client.post("/cypher/plan", json={"query": q, "params": {"id": "t-lmul-gemv"}}, headers=ANALYST)
    assert r.status_code == 200, r.text
    ops, stack = [], [r.json()["plan"]]
    while stack:
        op = stack.pop()
        ops.append(op["operator"])
        stack.extend(op["children"])
    assert ops[0] == "ProduceResults" and any("Expand" in o for o in ops)
    # The same guard as /cypher: a write is refused, and nothing ran.
    before = node_count(client.app.state.eok.container.store)
    r = client.post("/cypher/plan", json={"query": "CREATE (n:Intruder) RETURN n"}, headers=ANALYST)
    assert r.status_code == 403 and r.json()["error"]["code"] == "write_refused"
    assert node_count(client.app.state.eok.container.store) == before
    assert client.post("/cypher/plan", json={"query": q}, headers=READER).status_code == 403


def test_profile_runs_the_query_and_measures_each_operator(client: TestClient) -> None:
    q = "MATCH (t:Thought)-[:EVIDENCED_BY]->(c:Commit) WHERE t.id = $id RETURN c.sha"
    body = {"query": q, "params": {"id": "t-lmul-gemv"}, "profile": True}
    r = client.post("/cypher/plan", json=body, headers=ANALYST)
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["profiled"] is True and out["row_count"] == 1 and out["elapsed_ms"] > 0
    ops, stack = [], [out["plan"]]
    while stack:
        op = stack.pop()
        ops.append(op)
        stack.extend(op["children"])
    assert ops[0]["operator"] == "ProduceResults" and ops[0]["rows"] == 1
    assert all(isinstance(op["db_hits"], int) and isinstance(op["page_cache_hits"], int) for op in ops)
    expand = next(op for op in ops if op["operator"].startswith("Expand"))
    assert expand["rows"] == 1 and expand["db_hits"] > 0 and expand["estimated_rows"] is not None
    assert expand["details"].startswith("(t)-[")
    slowest = [op for op in ops if op.get("slowest")]
    assert len(slowest) == 1 and slowest[0]["db_hits"] == max(op["db_hits"] for op in ops)
    # Without `profile`: EXPLAIN, estimates only; a reader's key may do neither.
    explained = client.post("/cypher/plan", json={**body, "profile": False}, headers=ANALYST).json()
    assert explained["profiled"] is False and "db_hits" not in explained["plan"]
    assert client.post("/cypher/plan", json=body, headers=READER).status_code == 403
