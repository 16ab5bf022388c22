"""Red team round 4 (REDTEAM4.md): analysts' Cypher, black box first. Each test is one finding and fails
until it is fixed (the lead fixes; these are the reproductions)."""

from __future__ import annotations

import time

from fastapi.testclient import TestClient

from service.bootstrap import Container
from tests.integration.conftest import ANALYST

# 140 branches of UNION ALL: Neo4j plans them as a left-deep tree of Union operators about 140 deep (under
# the 500-operator cap; a chain of 130 `WITH a LIMIT 5` does the same).  The plan's JSON nests deeper than
# the response serialiser allows: 500 internal_error, "Maximum serialization depth exceeded" in the log.
DEEP_PLAN = " UNION ALL ".join(f"RETURN {i} AS x" for i in range(140))


def test_a_deep_plan_is_answered_not_a_500(client: TestClient) -> None:
    """F1: POST /cypher/plan (EXPLAIN and PROFILE) on a plan deeper than ~128 operators is a 500 and a
    traceback in the log, although /cypher runs the same query (200)."""
    for body in ({"query": DEEP_PLAN}, {"query": DEEP_PLAN, "profile": True}):
        r = client.post("/cypher/plan", json=body, headers=ANALYST)
        assert r.status_code in (200, 400), (body.get("profile"), r.status_code, r.text[:300])
        if r.status_code == 200:
            assert r.json()["plan"]["operator"] == "ProduceResults"


# One row, one expression: Neo4j checks its timeout only between rows, so after the service's timeout
# answer the reduce runs on in Neo4j (on the 2-core machine 10^7 to 6*10^7 steps a second: range(1, 10^10)
# ran ~17 min, range(1, 9*10^18) never ends).  Two such requests hold both analyst slots (every later
# analyst query is 503 busy) and two Neo4j cores for as long as the reduce runs.
RUNAWAY = "RETURN reduce(s = 0, x IN range(1, $n) | s + x) AS s"


def test_a_timed_out_expression_does_not_run_on_in_neo4j(client: TestClient, api_graph: Container) -> None:
    """F2: the stated time limit is the timeout; 2 s after the timeout answer the statement must no
    longer be running in Neo4j (it is: listed as terminated and still computing, holding its slot)."""
    # size the reduce to end by itself ~12 s after the timeout at this machine's (warmed) speed: bounded harm
    api_graph.store.read(RUNAWAY, n=10**7)
    t0 = time.monotonic()
    api_graph.store.read(RUNAWAY, n=3 * 10**7)
    rate = 3 * 10**7 / max(time.monotonic() - t0, 0.01)
    n = int(rate * (api_graph.settings.cypher_timeout_s + 12))
    r = client.post("/cypher", json={"query": RUNAWAY, "params": {"n": n}}, headers=ANALYST)
    assert r.status_code == 400 and r.json()["error"]["code"] == "query_timeout", r.text[:300]
    time.sleep(2.0)
    running = api_graph.store.read(
        "SHOW TRANSACTIONS YIELD currentQuery WHERE currentQuery STARTS WITH $q RETURN count(*) AS n",
        q=RUNAWAY[:30],
    )[0]["n"]
    assert running == 0, "the timed-out reduce still runs in Neo4j and holds an analyst slot"


def test_a_list_comprehension_is_held_to_the_transaction_memory_limit(client: TestClient) -> None:
    """F3: Neo4j holds collect() to db.memory.transaction.max (256 MiB: `UNWIND range(1, 4000000) AS x
    RETURN size(collect(toString(x)))` is `400 query_memory_limit`) but not a list comprehension: 4 million
    strings (well over 256 MiB on the heap) come back 200, and 30 million (`RETURN size([x IN range(1,
    30000000) | toString(x)]) AS n`) end the Neo4j JVM with OutOfMemoryError after the service's timeout
    answer (the graph is gone ~45 s for every user)."""
    built = client.post(
        "/cypher",
        json={"query": "RETURN size([x IN range(1, $n) | toString(x)]) AS n", "params": {"n": 4_000_000}},
        headers=ANALYST,
    )
    assert built.status_code == 400 and built.json()["error"]["code"] == "query_memory_limit", built.text[:300]
