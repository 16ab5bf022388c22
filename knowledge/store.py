"""The Neo4j store: idempotent batched upserts (UNWIND + MERGE), the reads the rest of EoK needs, migrations."""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, TypeVar

import neo4j
import numpy as np
from neo4j import GraphDatabase
from neo4j.exceptions import AuthError, ClientError, Neo4jError, ServiceUnavailable, SessionExpired, TransientError

from core.errors import InvalidInput, Unavailable
from core.settings import Settings
from knowledge.migrations import load_migrations
from knowledge.models import (
    ALLOWED_RELATIONSHIPS,
    NODE_TYPES,
    SIMILAR_LABELS,
    Node,
    Relationship,
    RelType,
)

log = logging.getLogger(__name__)
N = TypeVar("N", bound=Node)
T = TypeVar("T")
EMBEDDED_LABELS = ("Idea", "Thought", "Task", "Experience")
WRITERS = 2  # concurrent write transactions of a bulk upsert
VECTOR_INDEXED_LABELS = ("Idea", "Thought", "Experience")  # the labels with a Neo4j vector index (migration 6)
_RETRYABLE = (ServiceUnavailable, SessionExpired)


def _unreachable(uri: str, err: Exception) -> Unavailable:
    return Unavailable(
        f"Neo4j is not reachable at {uri}: {type(err).__name__}",
        "start the local server with `eok db start`, or set NEO4J_URI/NEO4J_USER/NEO4J_PASSWORD for another one",
    )


class GraphStore:
    """All graph I/O goes through here; callers see typed records and plain dicts, never driver objects."""

    def __init__(self, driver: neo4j.Driver, database: str, uri: str) -> None:
        self._driver = driver
        self.database = database
        self.uri = uri
        self.local_embedding_writes = 0  # a cached index freshness check is void after one
        self.local_writes = 0  # every write of this process: a cached graph generation is void after one
        self._synced_target: tuple[str, int] = ("", -1)
        self._graph_gen = (-1.0, -1, -1)  # (checked at, local_writes then, generation)

    @classmethod
    def connect(cls, settings: Settings, migrate: bool = True) -> GraphStore:
        uri = settings.bolt_uri
        auth = (settings.neo4j_user, settings.neo4j_password.get_secret_value())
        try:
            driver = GraphDatabase.driver(
                uri,
                auth=auth,
                connection_timeout=5.0,
                # A stopped server must be noticed in seconds: the driver's default retries a refused
                # connection for 30 s per transaction, and a run in progress then kept evaluating for minutes
                # with nowhere to record (issue 24). Deadlock retries finish well within this.
                max_transaction_retry_time=5.0,
                max_connection_pool_size=50,
                notifications_min_severity="OFF",  # schema-less reads warn about absent labels: expected
            )
            driver.verify_connectivity()
        except AuthError as e:
            raise Unavailable(
                f"Neo4j at {uri} refused the credentials of user {settings.neo4j_user!r}",
                "set NEO4J_USER and NEO4J_PASSWORD",
            ) from e
        except (ServiceUnavailable, OSError, ValueError) as e:
            raise _unreachable(uri, e) from e
        store = cls(driver, settings.neo4j_database, uri)
        if migrate:
            store.migrate()
        return store

    def close(self) -> None:
        self._driver.close()

    def __enter__(self) -> GraphStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- raw access -----------------------------------------------------------------------------------

    def _run(self, cypher: str, params: dict[str, Any], write: bool, timeout: float | None = None) -> list[dict]:
        @neo4j.unit_of_work(timeout=timeout)
        def work(tx: neo4j.ManagedTransaction) -> list[dict]:
            rows = [r.data() for r in tx.run(cypher, params)]
            if write:  # in the same transaction: a reader never sees new data under an old generation
                tx.run(_BUMP_GRAPH_GENERATION).consume()
            return rows

        try:
            with self._driver.session(database=self.database) as s:
                return s.execute_write(work) if write else s.execute_read(work)
        except _RETRYABLE as e:
            raise _unreachable(self.uri, e) from e
        finally:
            if write:
                self.local_writes += 1

    def read(self, cypher: str, **params: Any) -> list[dict]:
        """One read in an auto-commit transaction: a single round trip (a managed one costs three)."""
        return self._auto_read(cypher, params, neo4j.Record.data)

    def read_values(self, cypher: str, **params: Any) -> list[dict]:
        """Like `read`, for rows of plain values (no nodes): skips the driver's per-element `data()` walk,
        which costs ~1 ms per 384-float or 1,536-byte embedding (measured: 6 s per 5,000 rows vs 0.1 s)."""
        return self._auto_read(cypher, params, lambda r: dict(r.items()))

    def _auto_read(self, cypher: str, params: dict[str, Any], row: Callable[[neo4j.Record], dict]) -> list[dict]:
        try:
            with self._driver.session(database=self.database, default_access_mode=neo4j.READ_ACCESS) as s:
                return [row(r) for r in s.run(cypher, params)]
        except _RETRYABLE as e:
            raise _unreachable(self.uri, e) from e

    def write(self, cypher: str, **params: Any) -> list[dict]:
        return self._run(cypher, params, write=True)

    def _write_rows(self, cypher: str, rows: Sequence[dict[str, Any]]) -> list[dict]:
        return self._run(cypher, {"rows": rows}, write=True)

    def write_many(self, work: Callable[[Callable[..., list[dict]]], T]) -> T:
        """Run several dependent writes in ONE transaction: `work(q)` calls `q(cypher, **params)`; all of them
        commit together or none does (a batch of records). The driver may run `work` again after a lost
        connection, so it must read what it needs through `q`, not from an earlier attempt."""

        def tx_work(tx: neo4j.ManagedTransaction) -> T:
            out = work(lambda cypher, **params: [r.data() for r in tx.run(cypher, params)])
            tx.run(_BUMP_GRAPH_GENERATION).consume()
            return out

        try:
            with self._driver.session(database=self.database) as s:
                return s.execute_write(tx_work)
        except _RETRYABLE as e:
            raise _unreachable(self.uri, e) from e
        finally:
            self.local_writes += 1

    def read_many(self, work: Callable[[Callable[..., list[dict]]], T]) -> T:
        """Run several dependent reads in ONE transaction: `work(q)` calls `q(cypher, **params)`.

        Saves the begin/commit round trips of separate transactions on latency-sensitive paths.
        """

        def tx_work(tx: neo4j.ManagedTransaction) -> T:
            return work(lambda cypher, **params: [r.data() for r in tx.run(cypher, params)])

        try:
            with self._driver.session(database=self.database) as s:
                return s.execute_read(tx_work)
        except _RETRYABLE as e:
            raise _unreachable(self.uri, e) from e

    def session(self, read_only: bool = False) -> neo4j.Session:
        mode = neo4j.READ_ACCESS if read_only else neo4j.WRITE_ACCESS
        return self._driver.session(database=self.database, default_access_mode=mode)

    # -- schema ---------------------------------------------------------------------------------------

    def migrate(self) -> list[int]:
        """Apply the schema steps not yet recorded; return the versions applied now."""
        done = {r["v"] for r in self.read("MATCH (m:Migration) RETURN m.version AS v")}
        applied = []
        for step in load_migrations():
            if step.version in done:
                continue
            for stmt in step.statements:
                self._schema_command(stmt)
            self.write(
                "MERGE (m:Migration {version: $v}) SET m.title = $t, m.applied_at = datetime()",
                v=step.version,
                t=step.title,
            )
            applied.append(step.version)
        if applied:
            log.info("applied schema migrations %s", applied)
            self._await_indexes()
        return applied

    def _schema_command(self, stmt: str, attempts: int = 5) -> None:
        """Run one idempotent schema statement; retried because on a brand-new database background index
        population can deadlock with constraint creation (a transient error)."""
        for attempt in range(attempts):
            try:
                with self._driver.session(database=self.database) as s:
                    s.run(stmt).consume()  # schema commands need auto-commit transactions
                return
            except TransientError:
                if attempt == attempts - 1:
                    raise
                time.sleep(0.5 * (attempt + 1))
            except ClientError as e:
                # A retried or concurrent creation already made the rule (seen under load on a new database):
                # the goal of an idempotent statement is reached.
                if e.code == "Neo.ClientError.Schema.EquivalentSchemaRuleAlreadyExists":
                    return
                raise

    def _await_indexes(self, timeout_s: float = 120.0) -> None:
        with self._driver.session(database=self.database) as s:
            s.run(f"CALL db.awaitIndexes({int(timeout_s)})").consume()

    def schema_version(self) -> int:
        rows = self.read("MATCH (m:Migration) RETURN max(m.version) AS v")
        return rows[0]["v"] or 0

    # -- writes ---------------------------------------------------------------------------------------

    def upsert_nodes(
        self, nodes: Sequence[Node], batch_size: int = 2000, extra: dict[str, dict[str, Any]] | None = None
    ) -> int:
        """MERGE nodes on their key and set their properties; embeddings already stored are kept.

        `extra` maps a node key to storage-only properties written in the same pass (the embedding).
        """
        by_label: dict[str, list[dict[str, Any]]] = defaultdict(list)
        keys: dict[str, str] = {}
        for node in nodes:
            row = node.properties()
            if extra and (more := extra.get(node.key_value())):
                row.update(more)
            by_label[node.label].append(row)
            keys[node.label] = node.key_field
        total = 0
        for label, rows in by_label.items():
            cypher = f"UNWIND $rows AS row MERGE (n:{label} {{{keys[label]}: row.{keys[label]}}}) SET n += row"
            batches = list(_batches(rows, batch_size))
            if len(batches) == 1:
                self.write(cypher, rows=batches[0])
            else:
                # Two transactions in flight keep both cores busy (Neo4j is the bottleneck of a bulk load:
                # 100k thoughts went from 12.7k to 15.3k nodes/s). Keys are unique per batch and MERGE on a
                # uniqueness constraint is atomic, so the batches cannot collide.
                with ThreadPoolExecutor(WRITERS, thread_name_prefix="eok-upsert") as pool:
                    list(pool.map(partial(self._write_rows, cypher), batches))
            total += len(rows)
        if extra:
            self.bump_embedding_generation()  # the vectors are in: readers that looked meanwhile look again
        return total

    def upsert_relationships(self, rels: Sequence[Relationship], batch_size: int = 2000) -> int:
        groups: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
        for rel in rels:
            _check_relationship(rel)
            groups[(rel.type, rel.start_label, rel.end_label)].append(
                {"s": rel.start_key, "e": rel.end_key, "p": rel.props}
            )
        total = 0
        for (rtype, slabel, elabel), rows in groups.items():
            skey, ekey = NODE_TYPES[slabel].key_field, NODE_TYPES[elabel].key_field
            cypher = (
                f"UNWIND $rows AS row MATCH (a:{slabel} {{{skey}: row.s}}) MATCH (b:{elabel} {{{ekey}: row.e}}) "
                f"MERGE (a)-[r:{rtype}]->(b) SET r += row.p RETURN count(r) AS n"
            )
            for batch in _batches(rows, batch_size):
                total += self.write(cypher, rows=batch)[0]["n"]
        return total

    @property
    def wrote_embeddings(self) -> bool:
        """Whether this process wrote embeddings (then its close syncs the Neo4j vector indexes)."""
        return self.local_embedding_writes > 0

    def bump_embedding_generation(self) -> int:
        self.local_embedding_writes += 1
        return self.write(_BUMP_EMBEDDING_GENERATION)[0]["g"]

    def take_embedding_generation(self, q: Callable[..., list[dict]]) -> int:
        """The next embedding generation, taken inside a `write_many` transaction: the nodes stamped with it
        commit together with it, so no reader sees the counter before the vectors (no second bump needed)."""
        self.local_embedding_writes += 1
        return q(_BUMP_EMBEDDING_GENERATION)[0]["g"]

    # -- the Neo4j vector indexes -----------------------------------------------------------------------

    def sync_vector_index(self, page: int = 2000) -> int:
        """Copy embeddings written since the last sync into `embedding_vector`, the float list the Neo4j
        vector indexes read; returns how many nodes were copied.

        Why deferred: a float list costs Neo4j ~15x a byte array to receive and store, and the HNSW
        insert (~300 us per node) is synchronous; keeping both out of the ingest path took a 100k bulk
        ingest from 1.4k to 7-10k nodes/s (docs/ARCHITECTURE.md). EoK's own retrieval reads the bytes
        through FAISS and never waits for this; analysts' `db.index.vector.queryNodes` sees a node once it
        is synced.
        """
        epoch, target = self.embedding_state()
        if (epoch, target) == self._synced_target:
            return 0
        # Nodes of the newest generation may still be arriving (a writer reserves its generation before it
        # writes): look at that generation again next time; the per-node stamp makes the second look cheap.
        since = max(0, self._state_generation("neo4j_vectors"))
        copied = 0
        for label in VECTOR_INDEXED_LABELS:
            copied += self._sync_label(label, since, target, page)
        self.write("MERGE (s:IndexState {name: 'neo4j_vectors'}) SET s.generation = $g", g=max(since, target - 1))
        self._synced_target = (epoch, target)
        return copied

    def vector_index_pending(self) -> int:
        """Embedded nodes whose vector is not (yet) in the Neo4j vector indexes."""
        rows = self.read(
            "MATCH (n) WHERE n.embedding IS NOT NULL AND any(l IN labels(n) WHERE l IN $labels) "
            "AND coalesce(n.embedding_vector_gen, -1) <> n.embedding_gen RETURN count(n) AS n",
            labels=list(VECTOR_INDEXED_LABELS),
        )
        return rows[0]["n"]

    def _sync_label(self, label: str, since: int, target: int, page: int) -> int:
        key = NODE_TYPES[label].key_field
        read = (
            f"MATCH (n:{label}) WHERE n.embedding_gen > $since AND n.embedding_gen <= $target "
            "AND coalesce(n.embedding_vector_gen, -1) <> n.embedding_gen "
            f"RETURN n.{key} AS k, n.embedding AS v, n.embedding_gen AS g"
        )
        # The stamp check in the write skips a node re-embedded since it was read.
        write = (
            f"UNWIND $rows AS row MATCH (n:{label} {{{key}: row.k}}) WHERE n.embedding_gen = row.g "
            "SET n.embedding_vector = row.v, n.embedding_vector_gen = row.g"
        )
        copied = 0
        with self.session(read_only=True) as s:  # one streamed read; the writes go in their own transactions
            batch: list[dict[str, Any]] = []
            for rec in s.run(read, since=since, target=target):
                batch.append({"k": rec["k"], "v": as_vector(rec["v"]).tolist(), "g": rec["g"]})
                if len(batch) == page:
                    self.write(write, rows=batch)
                    copied, batch = copied + len(batch), []
            if batch:
                self.write(write, rows=batch)
                copied += len(batch)
        return copied

    def _state_generation(self, name: str) -> int:
        rows = self.read("MATCH (s:IndexState {name: $name}) RETURN s.generation AS g", name=name)
        return rows[0]["g"] if rows and rows[0]["g"] is not None else 0

    # -- reads ----------------------------------------------------------------------------------------

    def embedding_state(self) -> tuple[str, int]:
        """(epoch, generation): the epoch is new whenever the counter is (a wiped or replaced graph), so an
        index built for another graph whose counter happens to match is not taken for fresh."""
        rows = self.read("MATCH (s:IndexState {name: 'embeddings'}) RETURN s.epoch AS e, s.generation AS g")
        return (rows[0]["e"] or "", rows[0]["g"] or 0) if rows else ("", 0)

    def graph_generation(self, max_age_s: float = 0.0) -> int:
        """A counter every EoK write bumps in its own transaction: equal values mean an unchanged graph.

        With `max_age_s`, a value read that recently is reused unless this process has written since (a
        cache of search results then sees other processes' writes within that time, its own at once).
        """
        checked_at, local, gen = self._graph_gen
        now = time.monotonic()
        if now - checked_at < max_age_s and local == self.local_writes:
            return gen
        local = self.local_writes
        gen = self._state_generation("graph")
        self._graph_gen = (now, local, gen)
        return gen

    def embedding_hashes(self, label: str, keys: Iterable[str], model: str) -> dict[str, str]:
        key = NODE_TYPES[label].key_field
        rows = self.read(
            f"UNWIND $keys AS k MATCH (n:{label} {{{key}: k}}) WHERE n.embedding_model = $model "
            "RETURN k, n.embedding_hash AS h",
            keys=list(keys),
            model=model,
        )
        return {r["k"]: r["h"] for r in rows}

    def embedded_count(self, model: str) -> int:
        rows = self.read(
            "MATCH (n) WHERE n.embedding_model = $model AND any(l IN labels(n) WHERE l IN $labels) "
            "RETURN count(n) AS n",
            model=model,
            labels=list(EMBEDDED_LABELS),
        )
        return rows[0]["n"]

    def iter_embeddings(
        self, model: str, since_generation: int = 0, page: int = 5000
    ) -> Iterator[list[dict[str, Any]]]:
        """Pages of {label, key, vector, attrs} for nodes embedded with `model` at or after `since_generation`.

        Inclusive on purpose: a reader that caught up while a writer was still storing nodes of that
        generation sees the rest next time (writers bump the counter again once their nodes are in).

        attrs carry the filterable properties (isa, operator, technique, target) so filtered vector search
        can run on the index alone, and a thought's idea for graph expansion.
        """
        for label in EMBEDDED_LABELS:
            key = NODE_TYPES[label].key_field
            last = ""
            while True:
                rows = self.read_values(
                    f"MATCH (n:{label}) WHERE n.embedding_model = $model AND n.embedding_gen >= $gen "
                    f"AND n.{key} > $last RETURN n.{key} AS k, n.embedding AS v, "
                    "n.isa AS isa, n.operator AS operator, n.technique AS technique, "
                    f"n.target_key AS target, n.idea_id AS idea ORDER BY n.{key} LIMIT $page",
                    model=model,
                    gen=since_generation,
                    last=last,
                    page=page,
                )
                if rows:
                    for r in rows:
                        r["label"] = label
                    yield rows
                    last = rows[-1]["k"]
                if len(rows) < page:
                    break

    def get_node(self, model: type[N], key: str) -> N | None:
        rows = self.read(f"MATCH (n:{model.label} {{{model.key_field}: $k}}) RETURN properties(n) AS p", k=key)
        return model.model_validate(_strip_internal(rows[0]["p"])) if rows else None

    def get_nodes(self, model: type[N], keys: Iterable[str]) -> dict[str, N]:
        rows = self.read(
            f"UNWIND $keys AS k MATCH (n:{model.label} {{{model.key_field}: k}}) RETURN k, properties(n) AS p",
            keys=list(keys),
        )
        return {r["k"]: model.model_validate(_strip_internal(r["p"])) for r in rows}

    def existing_keys(self, label: str, keys: Iterable[str]) -> set[str]:
        key = NODE_TYPES[label].key_field
        rows = self.read(f"UNWIND $keys AS k MATCH (n:{label} {{{key}: k}}) RETURN k", keys=list(keys))
        return {r["k"] for r in rows}

    def stats(self) -> dict[str, Any]:
        comp = self.read("CALL dbms.components() YIELD name, versions, edition RETURN * LIMIT 1")[0]
        # Per-label and per-type counts come from Neo4j's count store: O(1) each, whatever the graph size.
        labels = {}
        for (label,) in (tuple(r.values()) for r in self.read("CALL db.labels() YIELD label RETURN label")):
            labels[label] = self.read(f"MATCH (n:`{label}`) RETURN count(n) AS n")[0]["n"]
        rels = {}
        for (rtype,) in (
            tuple(r.values()) for r in self.read("CALL db.relationshipTypes() YIELD relationshipType RETURN *")
        ):
            rels[rtype] = self.read(f"MATCH ()-[r:`{rtype}`]->() RETURN count(r) AS n")[0]["n"]
        return {
            "uri": self.uri,
            "version": comp["versions"][0],
            "edition": comp["edition"],
            "schema_version": self.schema_version(),
            "labels": {k: v for k, v in sorted(labels.items()) if v},
            "relationships": {k: v for k, v in sorted(rels.items()) if v},
        }


_BUMP_GRAPH_GENERATION = "MERGE (s:IndexState {name: 'graph'}) SET s.generation = coalesce(s.generation, 0) + 1"
_BUMP_EMBEDDING_GENERATION = (
    "MERGE (s:IndexState {name: 'embeddings'}) ON CREATE SET s.epoch = randomUUID() "
    "SET s.generation = coalesce(s.generation, 0) + 1 RETURN s.generation AS g"
)


def embedding_properties(vector: np.ndarray, text_hash: str, model: str, generation: int) -> dict[str, Any]:
    """The storage-only properties that carry a node's embedding.

    Each write stamps the node with the generation it was written in, so an index knows what changed
    since it was built and can catch up incrementally. The vector is stored as little-endian float32
    bytes: half the size of a float list and ~15x cheaper for Neo4j to receive and store.
    """
    return {
        "embedding": np.asarray(vector, dtype="<f4").tobytes(),
        "embedding_hash": text_hash,
        "embedding_model": model,
        "embedding_dim": len(vector),
        "embedding_gen": generation,
    }


def as_vector(stored: bytes | list[float]) -> np.ndarray:
    """A stored embedding as float32: bytes since schema 6, a float list in graphs written before."""
    if isinstance(stored, bytes | bytearray):
        return np.frombuffer(stored, dtype="<f4")
    return np.asarray(stored, dtype=np.float32)


def _batches(rows: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for i in range(0, len(rows), size):
        yield rows[i : i + size]


def _strip_internal(props: dict[str, Any]) -> dict[str, Any]:
    """Drop storage-only properties (embeddings) and convert driver temporal types for pydantic."""
    out = {}
    for k, v in props.items():
        if k.startswith("embedding"):
            continue
        out[k] = v.to_native() if hasattr(v, "to_native") else v
    return out


def _check_relationship(rel: Relationship) -> None:
    rtype = RelType(rel.type)
    if rtype == RelType.SIMILAR_TO:
        if rel.start_label != rel.end_label or rel.start_label not in SIMILAR_LABELS:
            raise InvalidInput(f"SIMILAR_TO joins two Targets or two Tasks, not {rel.start_label}->{rel.end_label}")
        return
    expected = ALLOWED_RELATIONSHIPS[rtype]
    if (rel.start_label, rel.end_label) != expected:
        raise InvalidInput(
            f"relationship {rtype}: expected {expected[0]}->{expected[1]}, got {rel.start_label}->{rel.end_label}"
        )


__all__ = ["ClientError", "GraphStore", "Neo4jError"]
