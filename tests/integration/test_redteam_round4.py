"""Red team round 4 (REDTEAM4.md): analysts' Cypher, black box first. Each test is one finding and fails
until it is fixed (the lead fixes; these are the reproductions)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from core.errors import EokError
from core.settings import Settings
from knowledge import local_neo4j
from knowledge.store import GraphStore
from service.bootstrap import Container
from tests.conftest import free_port, local_test_settings
from tests.integration.conftest import ANALYST, api_settings_for, build_container, seed_api_graph

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
# answer the reduce ran on in Neo4j (on the 2-core machine 10^7 to 6*10^7 steps a second: range(1, 10^10)
# ran ~17 min, range(1, 9*10^18) never ends), and two such requests held both analyst slots. range() past
# 10^6 elements is now refused before it runs; the same runaway without range() (three nested reduces over a
# parameter list: n^3 steps from a small body) meets the backstop: the service restarts its local Neo4j,
# which ends the statement.
RANGED = "RETURN reduce(s = 0, x IN range(1, $n) | s + x) AS s"
NESTED = "RETURN reduce(s = 0, a IN $l | s + reduce(t = 0, b IN $l | t + reduce(u = 0, c IN $l | u + 1))) AS s"


@pytest.fixture(scope="module")
def on_local_neo4j(
    client: TestClient,
    api_graph: Container,
    neo4j_settings: Settings,
    embedder: Any,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[TestClient, Container, Settings]]:
    """The service on a local Neo4j it may restart: the session's, or, when the session's server is one
    NEO4J_URI names (CI's scratch server, for the first xdist worker), a private one started here. The
    backstop exists only for a local server: the service restarts no server it did not start."""
    if neo4j_settings.uses_local_neo4j:
        yield client, api_graph, neo4j_settings
        return
    from service.api.app import create_app

    root = tmp_path_factory.mktemp("neo4j-local")
    settings = local_test_settings(root, free_port())
    local_neo4j.start(settings, watch_pid=os.getpid())
    try:
        with GraphStore.connect(settings) as store:
            container = build_container(api_settings_for(settings, root / "api-home"), store, embedder)
            seed_api_graph(container)
            with TestClient(create_app(container=container), raise_server_exceptions=False) as local_client:
                yield local_client, container, settings
    finally:
        local_neo4j.stop(settings)


def test_a_timed_out_expression_does_not_run_on_in_neo4j(
    on_local_neo4j: tuple[TestClient, Container, Settings],
) -> None:
    """F2: the stated time limit is the timeout; soon after the timeout answer the statement no longer runs
    in Neo4j, and the console answers again."""
    client, api_graph, neo4j_settings = on_local_neo4j
    ranged = client.post("/cypher", json={"query": RANGED, "params": {"n": 10**10}}, headers=ANALYST)
    assert ranged.status_code == 400 and ranged.json()["error"]["code"] == "query_limit", ranged.text[:300]
    # size the nested runaway to end by itself ~90 s after the timeout at this machine's (warmed) speed
    api_graph.store.read(NESTED, l=list(range(100)))
    t0 = time.monotonic()
    api_graph.store.read(NESTED, l=list(range(300)))
    rate = 300**3 / max(time.monotonic() - t0, 0.01)
    n = int((rate * (api_graph.settings.cypher_timeout_s + 90)) ** (1 / 3))
    before = local_neo4j.pid(neo4j_settings)
    assert before is not None, "the service's Neo4j is not a local server: the backstop cannot restart it"
    r = client.post("/cypher", json={"query": NESTED, "params": {"l": list(range(n))}}, headers=ANALYST)
    answered = time.monotonic()
    assert r.status_code == 400 and r.json()["error"]["code"] == "query_timeout", r.text[:300]
    deadline = answered + 150  # the restart itself: a minute at most on a loaded machine
    running = "SHOW TRANSACTIONS YIELD currentQuery WHERE currentQuery STARTS WITH $q RETURN count(*) AS n"
    while True:  # Neo4j is away while it restarts: ask again until it answers that the statement is gone
        try:
            if api_graph.store.read(running, q=NESTED[:30])[0]["n"] == 0:
                break
        except EokError:
            pass
        assert time.monotonic() < deadline, "the timed-out reduce still runs in Neo4j"
        time.sleep(1.0)
    gone = time.monotonic()
    while (
        ok := client.post("/cypher", json={"query": "MATCH (n) RETURN count(n) AS n"}, headers=ANALYST)
    ).status_code != 200:
        assert time.monotonic() < deadline, ok.text[:300]
        time.sleep(1.0)
    assert local_neo4j.pid(neo4j_settings) != before  # ended by the restart, not run to its end
    assert gone - answered < 90  # sooner than it would have ended by itself


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
    # Neo4j does not count an expression's memory: range() past 10^6 elements is refused before it runs
    assert built.status_code == 400 and built.json()["error"]["code"] == "query_limit", built.text[:300]
