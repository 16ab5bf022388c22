"""Analysts' Cypher cannot escape the graph: an escape corpus judged by Neo4j's own plan, the database's
own hardening, and the timeout / byte cap on expressions Neo4j does not stop between rows."""

from __future__ import annotations

import hashlib
import http.server
import json
import threading
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import psutil
import pytest
from fastapi.testclient import TestClient

from core.settings import Settings
from knowledge import local_neo4j
from knowledge.store import GraphStore
from service.api.cypher import DEFAULT_BYTE_CAP, SLOT_WAIT_S
from service.bootstrap import Container
from tests.integration.conftest import ANALYST

SECRET = "eok-secret-body-7f3a9c"  # what the local web server answers: must never appear in an answer


@pytest.fixture(scope="module")
def secret_url() -> Iterator[str]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.end_headers()
            self.wfile.write(f"a,b\n{SECRET},1\n".encode())

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/data.csv"
    server.shutdown()


def fingerprint(store: GraphStore) -> tuple:
    """Counts, indexes, constraints and a hash of every label, type and property in the graph (except what
    the service's own vector-sync loop rewrites in the background: IndexState and embedding_vector*)."""
    nodes = store.read(
        "MATCH (n) WHERE NOT n:IndexState RETURN elementId(n) AS id, labels(n) AS l, "
        "[k IN keys(n) WHERE NOT k STARTS WITH 'embedding_vector' | [k, n[k]]] AS p ORDER BY id"
    )
    labels = sorted(str(n["l"]) for n in nodes)
    rels = store.read(
        "MATCH (a)-[r]->(b) RETURN elementId(r) AS id, type(r) AS t, properties(r) AS p, elementId(a) AS a, "
        "elementId(b) AS b ORDER BY id"
    )
    indexes = store.read("SHOW INDEXES YIELD name, state RETURN name, state ORDER BY name")
    constraints = store.read("SHOW CONSTRAINTS YIELD name RETURN name ORDER BY name")
    digest = hashlib.sha256(json.dumps([nodes, rels], sort_keys=True, default=str).encode()).hexdigest()
    return labels, len(rels), json.dumps(indexes), json.dumps(constraints), digest


ESCAPES = [
    # LOAD CSV, with every hiding place the old regex guard had
    "LOAD CSV FROM 'file:///etc/passwd' AS line RETURN line",
    "WITH '/*' AS a LOAD CSV FROM 'file:///etc/passwd' AS r WITH a, r, '*/' AS b RETURN r",
    "WITH 1 AS `'` LOAD CSV FROM 'file:///proc/self/environ' AS r RETURN r, `'` // '",
    "WITH \"//\" AS a LOAD CSV FROM 'file:///proc/self/environ' AS r RETURN r",
    "load csv from 'fil\\u0065:///etc/passwd' as l return l",
    "LOAD /* c */ CSV FROM 'file:///etc/passwd' AS l RETURN l",
    "LOAD CSV WITH HEADERS FROM '{url}' AS l RETURN l",
    "LOAD CSV FROM '{url}' AS l RETURN l",
    "LOAD CSV FROM 'https://127.0.0.1:1/x.csv' AS l RETURN l",
    "CALL () {{ LOAD CSV FROM '{url}' AS r RETURN r }} RETURN r",
    "MATCH (t:Thought) WITH t LIMIT 1 LOAD CSV FROM '{url}' AS r RETURN r",
    "USING PERIODIC COMMIT LOAD CSV FROM 'file:///etc/passwd' AS r CREATE (:Intruder {{r: r}})",
    "EXPLAIN LOAD CSV FROM 'file:///etc/passwd' AS l RETURN l",
    "CYPHER runtime=slotted LOAD CSV FROM 'file:///etc/passwd' AS l RETURN l",
    # procedures by every spelling
    "CALL dbms.listConfig()",
    "CALL `dbms`.listConfig()",
    "CALL `dbms`.`listConfig`() YIELD name RETURN name",
    "CALL `dbms.listConfig`()",
    "CALL dbms . listConfig ( )",
    "CALL\tdbms.listConfig()",
    "call DBMS.LISTCONFIG()",
    "CALL dbms.listConnections()",
    "CALL dbms.queryJmx('*:*')",
    "CALL dbms.killConnections(['bolt-1', 'bolt-2'])",
    "CALL dbms.components() YIELD name RETURN name",
    "CALL db.stats.collect('QUERIES')",
    "CALL db.stats.retrieve('QUERIES')",
    "CALL db.stats.clear('QUERIES')",
    "CALL db.clearQueryCaches()",
    "CALL db.createLabel('Intruder')",
    "CALL db.createProperty('intruder')",
    "CALL db.createRelationshipType('INTRUDED')",
    "CALL db.info()",
    "CALL db.labels() YIELD label CALL dbms.listConfig() YIELD name RETURN label, name",
    "CALL apoc.load.json('file:///etc/passwd')",
    "RETURN apoc.version()",
    "CALL db.index.fulltext.createNodeIndex('x', ['Thought'], ['title'])",
    # writes, schema, subqueries, multiple statements
    "CREATE (n:Intruder {name: 'x'}) RETURN n",
    "MATCH (t:Thought) SET t.title = 'defaced' RETURN count(t)",
    "MATCH (t:Thought) CALL (t) { SET t.title = 'defaced' } RETURN t",
    "CALL () { CREATE (:Intruder) } IN TRANSACTIONS",
    "UNWIND [1] AS x CALL (x) { CREATE (:Intruder) } IN TRANSACTIONS OF 1 ROW",
    "FOREACH (x IN [1] | CREATE (:Intruder))",
    "MATCH (x:Experience) DETACH DELETE x",
    "RETURN 1; CREATE (n:Intruder)",
    "RETURN 1 AS a; RETURN 2 AS b",
    "CREATE INDEX intruder_idx IF NOT EXISTS FOR (n:Intruder) ON (n.name)",
    "DROP INDEX knowledge_text",
    "CREATE CONSTRAINT intr FOR (n:Intruder) REQUIRE n.id IS UNIQUE",
    "EXPLAIN CREATE (n:Intruder)",
    "PROFILE CREATE (n:Intruder)",
    "PROFILE MATCH (n) SET n.x = 1",
    # admin and session commands
    "SHOW TRANSACTIONS",
    "SHOW SETTINGS",
    "SHOW USERS",
    "SHOW DATABASES",
    "SHOW CURRENT USER",
    "TERMINATE TRANSACTION 'neo4j-transaction-1'",
    "CREATE DATABASE intruder",
    "ALTER USER neo4j SET PASSWORD 'intruder-pass'",
    "USE system SHOW USERS",
    "USE system MATCH (n) RETURN n",
    "STOP DATABASE neo4j",
]


def test_escape_attempts_are_refused_and_change_nothing(
    client: TestClient, api_graph: Container, secret_url: str
) -> None:
    before = fingerprint(api_graph.store)
    answered, leaks = [], []
    for template in ESCAPES:
        query = (
            template.format(url=secret_url) if "{url}" in template else template.replace("{{", "{").replace("}}", "}")
        )
        r = client.post("/cypher", json={"query": query}, headers=ANALYST)
        if r.status_code not in (400, 403) or not r.json()["error"]["message"]:
            answered.append((query, r.status_code, r.text[:200]))
        leaks += [(query, s) for s in ("root:x:0", SECRET, "EOK_API_KEYS", "PATH=", "bolt-") if s in r.text]
    assert answered == [] and leaks == []
    assert fingerprint(api_graph.store) == before


def test_parameters_are_values_never_code(client: TestClient, api_graph: Container) -> None:
    before = fingerprint(api_graph.store)
    injected = "x'}) DETACH DELETE n //"
    for query, params in [
        ("MATCH (n:Thought) WHERE n.id = $x RETURN n.id AS id", {"x": injected}),
        ("RETURN $q AS q", {"q": "LOAD CSV FROM 'file:///etc/passwd' AS l RETURN l"}),
        ("MATCH (n:Thought {id: $x}) RETURN n.id AS id", {"x": {"$ne": None}}),
    ]:
        r = client.post("/cypher", json={"query": query, "params": params}, headers=ANALYST)
        assert r.status_code in (200, 400), r.text
        assert "root:x:0" not in r.text
    assert fingerprint(api_graph.store) == before


@pytest.mark.parametrize(
    ("query", "rows"),
    [
        ("WITH 1 AS use RETURN use", [{"use": 1}]),
        ("WITH 2 AS show RETURN show", [{"show": 2}]),
        ("WITH 3 AS load RETURN load", [{"load": 3}]),
        ("WITH 4 AS terminate, 5 AS `call` RETURN terminate, `call`", [{"terminate": 4, "call": 5}]),
        ("WITH 'x' AS `it's` RETURN `it's`", [{"it's": "x"}]),
        (
            "RETURN 'LOAD CSV FROM file:///etc/passwd' AS s // dbms.listConfig()",
            [{"s": "LOAD CSV FROM file:///etc/passwd"}],
        ),
        ("MATCH (t:Thought {id: 't-lmul-gemv'}) WITH t.id AS use RETURN use", [{"use": "t-lmul-gemv"}]),
        ("MATCH (t:Thought {id: 't-lmul-gemv'}) RETURN t.id AS `load csv`", [{"load csv": "t-lmul-gemv"}]),
    ],
)
def test_reads_using_keywords_as_names_are_answered(client: TestClient, query: str, rows: list) -> None:
    r = client.post("/cypher", json={"query": query}, headers=ANALYST)
    assert r.status_code == 200, r.text
    assert r.json()["rows"] == rows


@pytest.mark.parametrize(
    "query",
    [
        "CALL db.labels() YIELD label RETURN label",
        "CALL db.relationshipTypes()",
        "CALL db.propertyKeys()",
        "CALL db.index.fulltext.queryNodes('knowledge_text', 'lmul') YIELD node RETURN node.id AS id",
        "SHOW INDEXES YIELD name RETURN name",
        "SHOW CONSTRAINTS",
        "MATCH p = shortestPath((a:Thought)-[*..4]-(b:Target)) RETURN length(p) AS n LIMIT 1",
        "MATCH (t:Thought) WHERE EXISTS { (t)-->() } RETURN count(t) AS n, COUNT { (t)-->() } AS d",
        "MATCH (t:Thought) OPTIONAL MATCH (t)-->(x) RETURN t.id, collect(x) ORDER BY t.id SKIP 1 LIMIT 2",
        "UNWIND [1, 2] AS x RETURN DISTINCT x UNION RETURN 3 AS x",
        "CALL () { MATCH (t:Thought) RETURN t } RETURN count(t) AS n",
        "PROFILE MATCH (n) RETURN count(n) AS n",  # a profiled read is a read
        "EXPLAIN MATCH (n) RETURN n",
        "CALL db.ping()",
        "CALL db.index.fulltext.listAvailableAnalyzers() YIELD analyzer RETURN analyzer",
    ],
)
def test_read_procedures_and_common_reads_pass_the_plan_check(client: TestClient, query: str) -> None:
    r = client.post("/cypher", json={"query": query}, headers=ANALYST)
    assert r.status_code == 200, r.text


def _server_process(settings: Settings) -> psutil.Process:
    """The Neo4j process behind the tests' server: the one they started, or the one listening on the
    loopback port that EOK_TEST_NEO4J_URI names (CI's scratch server, started by `eok db start`)."""
    if settings.uses_local_neo4j:
        pid = local_neo4j.pid(settings)
        assert pid is not None
        return psutil.Process(pid)
    url = urlsplit(settings.bolt_uri)
    if url.hostname not in ("127.0.0.1", "localhost"):
        pytest.skip(f"{settings.bolt_uri} is not on this machine: its process cannot be inspected")
    for conn in psutil.net_connections(kind="tcp"):
        if conn.status == psutil.CONN_LISTEN and conn.laddr.port == url.port and conn.pid:
            return psutil.Process(conn.pid)
    pytest.skip(f"no process of this user listens on {settings.bolt_uri}")


def test_local_server_is_hardened(api_graph: Container, neo4j_settings: Settings) -> None:
    """Defense in depth, checked in the running server: no file URLs, no network, a memory cap, and no
    EoK secrets in the server's environment."""
    rows = api_graph.store.read("SHOW SETTINGS YIELD name, value RETURN name, value")
    config = {r["name"]: r["value"] for r in rows}
    assert config["dbms.security.allow_csv_import_from_file_urls"] == "false"
    assert config["db.memory.transaction.max"] not in ("0", "0B", "")
    assert "0.0.0.0/0" in config.get("internal.dbms.cypher_ip_blocklist", "0.0.0.0/0")
    environ = _server_process(neo4j_settings).environ()
    assert not any(k.startswith(("EOK_", "OPENAI", "NEO4J_PASSWORD")) for k in environ), sorted(environ)


def test_runaway_expressions_end_at_the_timeout_and_memory_returns(
    client: TestClient, api_graph: Container, api_settings: Settings, neo4j_settings: Settings
) -> None:
    """Neo4j stops a query only between rows: a single-row 10^9-step expression or a 15-million-element
    answer used to hold the request for a minute and the server's memory for good."""
    server = _server_process(neo4j_settings)
    # A server started minutes ago still grows as its first queries load classes and compile code: small
    # versions of the same queries take that growth before the baseline, so what stays is what they held.
    for warm in ("RETURN reduce(s = 0, x IN range(1, 100000) | s + x) AS s", "RETURN range(1, 10000) AS r"):
        assert client.post("/cypher", json={"query": warm}, headers=ANALYST).status_code == 200
    before = server.memory_info().rss
    for query in (
        "RETURN reduce(s = 0, x IN range(1, 1000000000) | s + x) AS s",
        "RETURN range(1, 15000000) AS r",
    ):
        began = time.monotonic()
        r = client.post("/cypher", json={"query": query}, headers=ANALYST)
        took = time.monotonic() - began
        # Neo4j cannot stop an expression over a range it has begun: a range past the stated limit is refused
        # before anything runs (red team round 4; runaways without range() meet the restart backstop there).
        assert r.status_code == 400, r.text
        assert r.json()["error"]["code"] == "query_limit" and "1,000,000" in r.json()["error"]["message"]
        assert took < SLOT_WAIT_S + 2.0, (query, took)
    # The slots free once Neo4j has finished the abandoned work; then the heap shrinks back. Waiting for
    # every abandoned transaction also keeps their CPU from slowing the tests that follow.
    deadline = time.monotonic() + 240
    abandoned = "SHOW TRANSACTIONS YIELD metaData WHERE metaData.eok_query IS NOT NULL RETURN count(*) AS n"
    while api_graph.store.read(abandoned)[0]["n"]:
        assert time.monotonic() < deadline, "abandoned queries never left Neo4j"
        time.sleep(2)
    assert client.post("/cypher", json={"query": "RETURN 1 AS one"}, headers=ANALYST).status_code == 200
    # A 15-million-element list held for good is hundreds of MiB; the margin is the heap's normal play.
    while server.memory_info().rss > before + 100 * 2**20:
        assert time.monotonic() < deadline, (before >> 20, server.memory_info().rss >> 20)
        time.sleep(2)


def test_planning_is_bounded_and_a_runaway_keeps_its_slot_until_neo4j_lets_it_go(
    api_graph: Container, api_settings: Settings
) -> None:
    """Neo4j evaluates LIMIT expressions while planning and does not stop one when its transaction times
    out: the guard's EXPLAIN runs under the watchdog too, and the slot stays taken while Neo4j computes."""
    from service.api.cypher import Busy, QueryTimeout, ReadOnlyCypher

    guard = ReadOnlyCypher(api_graph.store, timeout_s=1.0, row_cap=10, parallel=1, plan_timeout_s=1.0)
    # 2 * 10^8 steps in one expression Neo4j folds while planning (literal lists: a parameter would wait for
    # the run), without range(), which the guard bounds before planning
    lst = str(list(range(600)))
    runaway = (
        f"RETURN 1 AS x LIMIT reduce(s = 0, a IN {lst} | s + reduce(t = 0, b IN {lst} | "
        f"t + reduce(u = 0, c IN {lst} | u + 1)))"
    )
    began = time.monotonic()
    with pytest.raises(QueryTimeout, match="planning the query"):
        guard.run(runaway)
    assert time.monotonic() - began < 2.5
    with pytest.raises(Busy):  # the one slot is still held by the computation Neo4j could not stop
        guard.run("RETURN 1 AS one")
    deadline = time.monotonic() + 240
    while True:  # ...and is given back once Neo4j no longer runs it
        try:
            assert guard.run("RETURN 1 AS one").rows == [{"one": 1}]
            break
        except Busy:
            assert time.monotonic() < deadline, "the slot never came back"
            time.sleep(1)


def test_a_vector_search_takes_its_k_as_a_bounded_parameter(client: TestClient) -> None:
    query = "CALL db.index.vector.queryNodes('thought_embedding_vector', {k}, $v) YIELD node RETURN count(node) AS c"
    v = [0.05] * 384
    for k, params in (("2000000000", {"v": v}), ("10", {"v": v}), ("$k", {"k": 2_000_000_000, "v": v})):
        r = client.post("/cypher", json={"query": query.format(k=k), "params": params}, headers=ANALYST)
        assert r.status_code == 403 and "request parameter from 1 to 1000" in r.json()["error"]["message"], r.text
    ok = client.post("/cypher", json={"query": query.format(k="$k"), "params": {"k": 5, "v": v}}, headers=ANALYST)
    assert ok.status_code == 200, ok.text


def test_syntax_errors_point_at_the_analysts_text(client: TestClient) -> None:
    r = client.post("/cypher", json={"query": "MATCH (n RETURN n"}, headers=ANALYST)
    assert r.status_code == 400
    message = r.json()["error"]["message"]
    assert "column 10" in message and "EXPLAIN" not in message, message


def test_a_row_of_many_nodes_is_measured_by_their_properties(client: TestClient) -> None:
    one = client.post("/cypher", json={"query": "MATCH (t:Thought) RETURN t ORDER BY t.id LIMIT 1"}, headers=ANALYST)
    assert one.status_code == 200, one.text
    # Copies of one node whose properties together are just over the byte cap, though the list itself
    # has few elements: only measuring each node's properties finds the row too large. (Not many more:
    # Neo4j sends every copy in full, which on a loaded machine alone can take the query past its timeout.)
    copies = DEFAULT_BYTE_CAP // len(json.dumps(one.json()["rows"][0])) + 1
    began = time.monotonic()
    r = client.post(
        "/cypher",
        json={"query": f"MATCH (t:Thought) WITH t ORDER BY t.id LIMIT 1 RETURN [i IN range(1, {copies}) | t] AS l"},
        headers=ANALYST,
    )
    assert r.status_code == 400 and r.json()["error"]["code"] == "answer_too_large", r.text
    assert time.monotonic() - began < 5.0  # refused by the size floor, not after converting every copy


def _answers_as_usual(client: TestClient) -> None:
    """The next legitimate query answers within its normal time (a few hundred ms on this machine)."""
    began = time.monotonic()
    r = client.post("/cypher", json={"query": "MATCH (t:Thought) RETURN count(t) AS n"}, headers=ANALYST)
    assert r.status_code == 200 and r.json()["rows"][0]["n"] > 0, r.text
    assert time.monotonic() - began < 2.0


def _eok_transactions(api_graph: Container) -> int:
    """How many analyst queries are still running in Neo4j."""
    rows = api_graph.store.read(
        "SHOW TRANSACTIONS YIELD metaData WHERE metaData.eok_query IS NOT NULL RETURN count(*) AS n"
    )
    return rows[0]["n"]


def _drained(api_graph: Container) -> None:
    """Runaways earlier tests abandoned on purpose have left Neo4j (they hold its CPU and the slots)."""
    deadline = time.monotonic() + 240
    while _eok_transactions(api_graph):
        assert time.monotonic() < deadline, "abandoned queries never left Neo4j"
        time.sleep(2)


def test_a_vector_search_k_is_read_as_structure_however_it_is_written(
    client: TestClient, api_graph: Container, neo4j_settings: Settings
) -> None:
    """Red team round 3: a first argument holding a comma shifted the comma-split k onto `$k` (= 1) while the
    real k was 2e9, and Neo4j died of OutOfMemoryError. k is now the plan's second argument as a token list."""
    _drained(api_graph)
    server = _server_process(neo4j_settings)
    v = [0.05] * 384
    for query, params in (
        (
            "CALL db.index.vector.queryNodes(substring('Xthought_embedding_vector', $k, 100), 2000000000, $v) "
            "YIELD node RETURN node",
            {"k": 1, "v": v},
        ),
        ("CALL db.index.vector.queryNodes('thought_embedding_vector', $k + 0, $v) YIELD node RETURN node", {"k": 5}),
        (
            "CALL db.index.vector.queryNodes('thought_embedding_vector', toInteger($k), $v) YIELD node RETURN node",
            {"k": 5},
        ),
        ("CALL db.index.vector.queryNodes('thought_embedding_vector', $p.k, $v) YIELD node RETURN node", {"k": 5}),
        ("CALL db.index.vector.queryNodes('a,b', [$k, 2000000000][1], $v) YIELD node RETURN node", {"k": 1}),
    ):
        began = time.monotonic()
        r = client.post("/cypher", json={"query": query, "params": {"p": {"k": 3}, "v": v, **params}}, headers=ANALYST)
        assert r.status_code == 403 and "request parameter from 1 to 1000" in r.json()["error"]["message"], r.text
        assert time.monotonic() - began < 5.0
    assert server.is_running()  # the same JVM, alive (pid and start time unchanged)
    _answers_as_usual(client)


REDOS = [
    ("(.*a){8}", "a" * 60 + "!"),  # polynomial: n^8 on 61 characters
    ("(x+x+)+y", "x" * 3000),  # exponential
]


def test_regular_expressions_past_the_bound_are_refused_before_anything_runs(
    client: TestClient, api_graph: Container
) -> None:
    """Red team round 3: java.util.regex never checks for termination, so these two answered "timeout" and
    then ran on in Neo4j, and every analyst query got 503 "busy" until it was restarted by hand."""
    _drained(api_graph)
    for pattern, subject in REDOS:
        for query, params in (
            ("RETURN $s =~ $re AS m", {"s": subject, "re": pattern}),
            (f"RETURN $s =~ '{pattern}' AS m", {"s": subject}),
            ("RETURN $s =~ ($re + '') AS m", {"s": subject, "re": pattern}),
            ("WITH $re AS re RETURN $s =~ re AS m", {"s": subject, "re": pattern}),
            # planned (and so evaluated) before anything runs: refused from the text
            ("RETURN 1 AS one LIMIT size([x IN [1] WHERE $s =~ $re])", {"s": subject, "re": pattern}),
        ):
            began = time.monotonic()
            r = client.post("/cypher", json={"query": query, "params": params}, headers=ANALYST)
            assert r.status_code == 403 and "regular expression" in r.json()["error"]["message"], (query, r.text)
            assert time.monotonic() - began < 2.0, query
        _answers_as_usual(client)
    assert _eok_transactions(api_graph) == 0  # nothing they sent runs on


def test_regular_expressions_of_the_linear_shape_answer(client: TestClient) -> None:
    for query, params, expected in (
        ("RETURN $s =~ $re AS m", {"s": "x" * 3000, "re": "x+y"}, False),  # one quantifier: linear
        ("RETURN $s =~ $re AS m", {"s": "sgemv_n", "re": "(?i)SGEMV_[nt]"}, True),
        ("RETURN 'RISC-V: vfmacc' =~ 'RISC-V: .*' AS m", {}, True),
        ("RETURN 'colour' =~ \"colou?r\" AND 'color' =~ $re AS m", {"re": "colou?r"}, True),
    ):
        r = client.post("/cypher", json={"query": query, "params": params}, headers=ANALYST)
        assert r.status_code == 200 and r.json()["rows"] == [{"m": expected}], (query, r.text)


def test_a_deeply_nested_answer_is_a_400_and_the_connection_stays_usable(
    client: TestClient, api_graph: Container, caplog: pytest.LogCaptureFixture
) -> None:
    """Red team round 3: 3,000 nested lists gave a 500, ~278 KB of traceback in the log for a 60-byte
    request, and broke the next request on that connection."""
    _drained(api_graph)
    with caplog.at_level("INFO"):
        r = client.post(
            "/cypher", json={"query": "RETURN reduce(a = [], i IN range(1, 3000) | [a]) AS deep"}, headers=ANALYST
        )
        assert r.status_code == 400 and r.json()["error"]["code"] == "answer_too_deep", r.text
        assert "100 levels" in r.json()["error"]["message"]
        _answers_as_usual(client)  # the same client connection
    logged = "\n".join(f"{rec.getMessage()}\n{rec.exc_text or ''}" for rec in caplog.records)
    assert "Traceback" not in logged and len(logged) < 2000, logged[:2000]


def test_the_memory_limit_of_one_query_is_a_400_naming_it(client: TestClient, api_graph: Container) -> None:
    """Neo4j stops a transaction past db.memory.transaction.max (256 MiB): that is the query's own limit, not
    the service being unavailable (it was a 503)."""
    _drained(api_graph)
    query = (
        "UNWIND range(1, 60) AS i WITH collect(reduce(s = toString(i), j IN range(1, 22) | s + s)) AS l "
        "RETURN size(l) AS n"
    )
    r = client.post("/cypher", json={"query": query}, headers=ANALYST)
    assert r.status_code == 400 and r.json()["error"]["code"] == "query_memory_limit", r.text
    assert "256" in r.json()["error"]["message"] and "db.memory.transaction.max" in r.json()["error"]["message"]
    _answers_as_usual(client)


def test_profile_is_refused_and_bounded_exactly_as_cypher_is(client: TestClient, api_graph: Container) -> None:
    """PROFILE runs the statement, so it goes POST /cypher's own way: what /cypher refuses or stops at a limit,
    the profile refuses or stops with the same status and message, and nothing of it ran on or changed."""
    _drained(api_graph)
    before = fingerprint(api_graph.store)
    pattern, subject = REDOS[0]
    for query, params in (
        ("CREATE (n:Intruder {name: 'x'}) RETURN n", {}),  # a write: 403
        ("PROFILE MATCH (n) SET n.x = 1", {}),
        ("RETURN $s =~ $re AS m", {"s": subject, "re": pattern}),  # a regular expression past the bound: 403
        ("RETURN reduce(a = [], i IN range(1, 3000) | [a]) AS deep", {}),  # nested past the bound: 400
    ):
        ran = client.post("/cypher", json={"query": query, "params": params}, headers=ANALYST)
        body = {"query": query, "params": params, "profile": True}
        profiled = client.post("/cypher/plan", json=body, headers=ANALYST)
        assert ran.status_code in (400, 403), (query, ran.text)
        assert (profiled.status_code, profiled.json()["error"]) == (ran.status_code, ran.json()["error"]), query
    assert fingerprint(api_graph.store) == before
    # /cypher cuts an answer at the row cap; a profile of a cut answer would measure nothing: a 400 naming it.
    r = client.post(
        "/cypher/plan", json={"query": "UNWIND range(1, 500) AS i RETURN i", "profile": True}, headers=ANALYST
    )
    assert r.status_code == 400 and "row cap (20 rows)" in r.json()["error"]["message"], r.text
    _answers_as_usual(client)
