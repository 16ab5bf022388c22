"""Analysts' Cypher: the saved queries in cypher/queries/*.cypher and ad-hoc read-only queries.

Neo4j judges every query, not a text pattern: `EXPLAIN` gives its plan (nothing runs), and any operator
outside READ_OPERATORS (writes, schema, LOAD CSV, SHOW TRANSACTIONS/SETTINGS, TERMINATE, CALL { } IN
TRANSACTIONS) or a procedure outside READ_PROCEDURES refuses the query, and so does a vector search or a
regular expression whose cost is not provably bounded (service/api/plan_guard.py). Then it runs in a READ access-mode
transaction with a server-side timeout, a row cap and a byte cap, streamed; the service abandons the
connection at timeout + 0.5 s because Neo4j stops a query only between rows. The local server's config
adds a second wall (knowledge/local_neo4j.hardening: no file URLs, every IP blocked for LOAD CSV, a
transaction memory limit, a minimal environment).

A saved query file starts with a header of `//` comment lines:

    // Best thoughts by measured speedup on a target.      <- first line: the summary
    // More lines of description.
    // @param target: string = "k1-x60"  the target key     <- name: type = default  description
    // @param run_id: string                                <- no default: required
    MATCH ...
"""

from __future__ import annotations

import base64
import json
import logging
import math
import re
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import neo4j
from neo4j.exceptions import (
    ClientError,
    CypherSyntaxError,
    DriverError,
    Neo4jError,
    ServiceUnavailable,
    SessionExpired,
)
from neo4j.graph import Node as GraphNode
from neo4j.graph import Path as GraphPath
from neo4j.graph import Relationship as GraphRelationship

from core.errors import EokError, InvalidInput, NotFound, Unavailable
from core.settings import PROJECT_ROOT
from knowledge.store import GraphStore
from service.api.plan_guard import (
    RANGE_MAX_ELEMENTS,
    READ_PROCEDURES,
    calls_vector_search,
    check_range_text,
    check_regex_text,
    plan_problem,
)

log = logging.getLogger(__name__)
QUERIES_DIR = PROJECT_ROOT / "cypher" / "queries"
PARAM_TYPES: dict[str, type] = {"string": str, "int": int, "float": float, "bool": bool}
_PARAM_LINE = re.compile(r"^@param\s+(\w+)\s*:\s*(\w+)\s*(?:=\s*(\"(?:[^\"\\]|\\.)*\"|\S+))?\s*(.*)$")
_PARAM_USE = re.compile(r"\$(\w+)")


# -- errors users see -----------------------------------------------------------------------------------


class CypherError(InvalidInput):
    """Neo4j rejected the query (syntax, semantics, a missing parameter): the message is Neo4j's own."""

    http_status = 400
    code = "cypher_error"


class CypherSyntax(CypherError):
    code = "cypher_syntax"


class WriteRefused(EokError):
    http_status = 403
    code = "write_refused"


class Busy(EokError):
    http_status = 503
    code = "busy"


class AnswerTooLarge(EokError):
    http_status = 400
    code = "answer_too_large"


class AnswerTooDeep(EokError):
    http_status = 400  # the answer's shape, the client's to change
    code = "answer_too_deep"


class QueryMemoryLimit(EokError):
    http_status = 400  # the query needs more memory than one query may have: the client's to change
    code = "query_memory_limit"


class QueryLimit(EokError):
    http_status = 400  # the query asks for more than one query may have: the client's to change
    code = "query_limit"


class QueryTimeout(EokError):
    http_status = 400  # the query is too expensive for the limit: the client's to change, not a server fault
    code = "query_timeout"


# -- saved queries --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class QueryParam:
    name: str
    type: str
    default: Any = None
    required: bool = False
    description: str = ""

    def coerce(self, value: Any, query: str) -> Any:
        """Convert a given value (JSON or a `k=v` string from the CLI) to the declared type."""
        if value is None:
            return None
        want = PARAM_TYPES[self.type]
        if isinstance(value, str) and want is not str:
            value = _parse_text(value, want, self, query)
        if want is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, want) or (want is int and isinstance(value, bool)):
            raise InvalidInput(
                f"query {query!r}: parameter {self.name!r} must be a {self.type}, got {value!r}",
                f"pass {self.name} as a {self.type}",
            )
        if want is int and not -(2**63) <= value < 2**63:
            raise InvalidInput(f"query {query!r}: parameter {self.name!r} does not fit in 64 bits: {value}")
        if want is float and not math.isfinite(value):
            raise InvalidInput(f"query {query!r}: parameter {self.name!r} must be a finite number, got {value!r}")
        return value


def _parse_text(text: str, want: type, param: QueryParam, query: str) -> Any:
    try:
        if want is bool:
            if text.lower() in ("true", "1", "yes"):
                return True
            if text.lower() in ("false", "0", "no"):
                return False
            raise ValueError(text)
        return want(text)
    except ValueError:
        raise InvalidInput(
            f"query {query!r}: parameter {param.name!r} must be a {param.type}, got {text!r}",
            f"pass {param.name} as a {param.type}",
        ) from None


@dataclass(frozen=True)
class SavedQuery:
    name: str
    summary: str
    description: str
    params: tuple[QueryParam, ...]
    text: str
    path: Path

    def bind(self, given: Mapping[str, Any]) -> dict[str, Any]:
        """Declared parameters with defaults filled in; unknown or missing ones are errors naming them."""
        known = {p.name: p for p in self.params}
        unknown = sorted(set(given) - set(known))
        if unknown:
            raise InvalidInput(
                f"query {self.name!r} has no parameter {unknown[0]!r}",
                f"its parameters are: {', '.join(known) or 'none'}",
            )
        out: dict[str, Any] = {}
        for p in self.params:
            if p.name in given:
                out[p.name] = p.coerce(given[p.name], self.name)
            elif p.required:
                raise InvalidInput(
                    f"query {self.name!r} needs parameter {p.name!r} ({p.type})",
                    f'pass it, e.g. --param {p.name}=... or {{"params": {{"{p.name}": ...}}}}',
                )
            else:
                out[p.name] = p.default
        return out

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "summary": self.summary,
            "description": self.description,
            "params": [
                {
                    "name": p.name,
                    "type": p.type,
                    "default": p.default,
                    "required": p.required,
                    "description": p.description,
                }
                for p in self.params
            ],
            "cypher": self.text,
        }


def parse_saved_query(path: Path) -> SavedQuery:
    """Read one .cypher file; a malformed header is an InvalidInput naming the file and line."""
    header: list[str] = []
    body: list[str] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        stripped = line.strip()
        if not body and stripped.startswith("//"):
            header.append(stripped[2:].strip())
        elif body or stripped:
            body.append(line)
    text = "\n".join(body).strip().rstrip(";").strip()
    if not header or not text:
        raise InvalidInput(f"{path}: a saved query needs a `//` header (summary first) and a Cypher body")
    params, prose = _parse_header(header, path)
    declared, used = {p.name for p in params}, set(_PARAM_USE.findall(_strip_strings_and_comments(text)))
    if used - declared:
        raise InvalidInput(f"{path}: parameter(s) {sorted(used - declared)} used but not declared with @param")
    return SavedQuery(
        name=path.stem,
        summary=prose[0] if prose else path.stem,
        description=" ".join(prose[1:]).strip(),
        params=tuple(params),
        text=text,
        path=path,
    )


def _parse_header(lines: list[str], path: Path) -> tuple[list[QueryParam], list[str]]:
    params: list[QueryParam] = []
    prose: list[str] = []
    for line in lines:
        if not line.startswith("@param"):
            prose.append(line)
            continue
        m = _PARAM_LINE.match(line)
        if not m or m.group(2) not in PARAM_TYPES:
            raise InvalidInput(
                f"{path}: bad parameter line {line!r}",
                f"write `// @param name: type = default  description` with type in {sorted(PARAM_TYPES)}",
            )
        name, ptype, raw_default, desc = m.groups()
        if raw_default is None:
            params.append(QueryParam(name, ptype, None, True, desc.strip()))
            continue
        try:
            default = json.loads(raw_default)
        except json.JSONDecodeError:
            raise InvalidInput(f"{path}: default of {name!r} is not a JSON literal: {raw_default}") from None
        param = QueryParam(name, ptype, None, False, desc.strip())
        params.append(QueryParam(name, ptype, param.coerce(default, path.stem), False, desc.strip()))
    return params, prose


def load_saved_queries(directory: Path = QUERIES_DIR) -> dict[str, SavedQuery]:
    if not directory.is_dir():
        raise Unavailable(f"the saved queries folder {directory} does not exist", "reinstall EoK from its repository")
    return {q.name: q for q in (parse_saved_query(p) for p in sorted(directory.glob("*.cypher")))}


def get_saved_query(queries: Mapping[str, SavedQuery], name: str) -> SavedQuery:
    if name not in queries:
        raise NotFound(f"no saved query named {name!r}", "list them with `eok cypher --list` or GET /queries")
    return queries[name]


# -- guarded execution ----------------------------------------------------------------------------------

# Neo4j's own plan decides what a query does: every operator must be one of these read operators (the
# part before any "(...)" variant such as Expand(All)). Anything else (writes, schema, LOAD CSV, SHOW
# TRANSACTIONS/SETTINGS, TERMINATE, CALL { } IN TRANSACTIONS, an operator a newer Neo4j adds) is refused.
READ_OPERATORS = frozenset(
    """
    ProduceResults EmptyResult EmptyRow Argument ArgumentTracker Projection Filter Limit ExhaustiveLimit Skip
    Sort PartialSort Top Top1WithTies PartialTop Distinct OrderedDistinct Aggregation EagerAggregation
    OrderedAggregation Unwind PartitionedUnwind Union OrderedUnion Optional Eager CacheProperties
    AllNodesScan PartitionedAllNodesScan NodeByLabelScan PartitionedNodeByLabelScan NodeByIdSeek
    NodeByElementIdSeek NodeIndexSeek PartitionedNodeIndexSeek NodeUniqueIndexSeek NodeIndexSeekByRange
    NodeUniqueIndexSeekByRange NodeIndexScan PartitionedNodeIndexScan NodeIndexContainsScan
    NodeIndexEndsWithScan MultiNodeIndexSeek IntersectionNodeByLabelsScan UnionNodeByLabelsScan
    SubtractionNodeByLabelsScan NodeCountFromCountStore RelationshipCountFromCountStore
    DirectedRelationshipIndexSeek UndirectedRelationshipIndexSeek DirectedRelationshipIndexScan
    UndirectedRelationshipIndexScan DirectedRelationshipIndexSeekByRange UndirectedRelationshipIndexSeekByRange
    DirectedRelationshipIndexContainsScan UndirectedRelationshipIndexContainsScan
    DirectedRelationshipIndexEndsWithScan UndirectedRelationshipIndexEndsWithScan
    DirectedRelationshipUniqueIndexSeek UndirectedRelationshipUniqueIndexSeek
    DirectedRelationshipTypeScan UndirectedRelationshipTypeScan DirectedUnionRelationshipTypesScan
    UndirectedUnionRelationshipTypesScan DirectedAllRelationshipsScan UndirectedAllRelationshipsScan
    DirectedRelationshipByIdSeek UndirectedRelationshipByIdSeek DirectedRelationshipByElementIdSeek
    UndirectedRelationshipByElementIdSeek Expand OptionalExpand VarLengthExpand BFSPruningVarLengthExpand
    ShortestPath StatefulShortestPath Repeat Trail NullifyMetadata ProjectEndpoints
    Apply SemiApply AntiSemiApply LetSemiApply LetAntiSemiApply SelectOrSemiApply SelectOrAntiSemiApply
    LetSelectOrSemiApply LetSelectOrAntiSemiApply RollUpApply ConditionalApply AntiConditionalApply
    CartesianProduct NodeHashJoin ValueHashJoin NodeLeftOuterHashJoin NodeRightOuterHashJoin
    TriadicSelection TriadicBuild TriadicFilter AssertSameNode AssertSameRelationship Anti
    ShowIndexes ShowConstraints ShowProcedures ShowFunctions ProcedureCall
    """.split()
)

# Answers larger than this are cut (like the row cap); a single record larger than it is refused.
DEFAULT_BYTE_CAP = 4 * 1024 * 1024
# The service never waits longer than timeout + this for Neo4j: Neo4j stops a query only between rows,
# so one huge expression could otherwise hold the request (and its connection) for minutes.
_ABANDON_AFTER_S = 0.5
_EXPLAIN_TIMEOUT_S = 10.0
# LIMIT or SKIP followed by anything but one integer or one parameter: an expression Neo4j evaluates while
# it plans. Only these can make planning slow on purpose; without them a slow plan is a cold planner.
_LIMIT_SKIP_ARG = re.compile(r"\b(?:LIMIT|SKIP)\s+(\$?\w+)?\s*(.?)", re.IGNORECASE)


def limit_skip_expressions(query: str) -> bool:
    """Whether some LIMIT or SKIP of `query` takes an expression rather than a number or a parameter."""
    for match in _LIMIT_SKIP_ARG.finditer(query):
        arg, after = match.group(1), match.group(2)
        plain = arg is not None and (arg.isdigit() or arg.startswith("$"))
        if not plain or after in set("+-*/%^(.["):
            return True
    return False


# An abandoned statement Neo4j still runs this long after it was abandoned is ended by restarting the
# database (when the service manages it): terminated transactions normally leave within a moment.
STUCK_AFTER_S = 5.0
SLOT_WAIT_S = 0.5  # how long a request waits for one of the analysts' slots before "busy"
_EXPLAIN_PREFIX = "EXPLAIN "
_MODE_PREFIX = re.compile(r"^\s*(?:EXPLAIN|PROFILE)\b\s*", re.I)
# Values nested deeper than this are refused: to_json and json.dumps recurse once per level.
ANSWER_MAX_DEPTH = 100
_VERDICT_CACHE_CHARS = 2 * 2**20  # plan verdicts kept for this many characters of query text


@dataclass
class QueryResult:
    columns: list[str]
    rows: list[dict[str, Any]]
    truncated: bool
    elapsed_ms: float
    row_cap: int
    byte_cap: int = DEFAULT_BYTE_CAP
    bytes: int = 0
    notes: list[str] = field(default_factory=list)
    profile: dict[str, Any] | None = None  # Neo4j's measured plan, when run under PROFILE

    def as_dict(self) -> dict[str, Any]:
        return {
            "columns": self.columns,
            "rows": self.rows,
            "row_count": len(self.rows),
            "truncated": self.truncated,
            "row_cap": self.row_cap,
            "byte_cap": self.byte_cap,
            "elapsed_ms": round(self.elapsed_ms, 2),
        }


class ReadOnlyCypher:
    """Runs analyst Cypher that Neo4j's own plan shows to be a read, in a READ transaction with a
    server-side timeout, a row cap and a byte cap; the service gives up on Neo4j at timeout + 0.5 s."""

    def __init__(
        self,
        store: GraphStore,
        timeout_s: float,
        row_cap: int,
        byte_cap: int = DEFAULT_BYTE_CAP,
        parallel: int = 2,
        plan_timeout_s: float = _EXPLAIN_TIMEOUT_S,
        on_stuck: Callable[[], None] | None = None,
        stuck_after_s: float = STUCK_AFTER_S,
    ) -> None:
        """`on_stuck` ends every transaction of the database (the service restarts its local Neo4j): called
        when an abandoned statement still runs `stuck_after_s` after it was abandoned. None (a Neo4j the
        service does not manage): the statement keeps its slot until Neo4j lets it go."""
        self.store = store
        self.on_stuck = on_stuck
        self.stuck_after_s = stuck_after_s
        self.timeout_s = timeout_s
        self.plan_timeout_s = max(timeout_s, plan_timeout_s)
        self.row_cap = row_cap
        self.byte_cap = byte_cap
        self._slots = threading.BoundedSemaphore(parallel)  # bounds abandoned-but-still-running queries
        self._verdicts: OrderedDict[str, str] = OrderedDict()  # query text -> "" (a read) or why not
        self._verdict_chars = 0
        self._verdict_lock = threading.Lock()

    def run(self, query: str, params: Mapping[str, Any] | None = None, profile: bool = False) -> QueryResult:
        """The guarded run: the plan check, then the query in a READ transaction under the timeout, the row
        cap and the byte cap. `profile` runs it under PROFILE on exactly this path (nothing is checked or
        bounded differently) and keeps Neo4j's measured plan in `QueryResult.profile`."""
        query, params = _checked_text(query), dict(params or {})
        hint = "retry in a few seconds; make long queries cheaper with a LIMIT or an indexed filter"
        with self._slot(hint) as (tag, abandoned):
            began = time.monotonic()
            with self._translated():
                self._check_plan(query, params, tag, abandoned)
                columns, rows, truncated, size, measured = self._execute(query, params, tag, abandoned, profile)
            return QueryResult(
                columns,
                rows,
                truncated,
                (time.monotonic() - began) * 1000,
                self.row_cap,
                self.byte_cap,
                size,
                profile=measured,
            )

    def profile(self, query: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Run the query under PROFILE through `run` (the same guard, slot, timeout, memory limit, caps and
        nesting bound) and answer the measured operator tree. Neo4j reports the measures only of a query
        that ran to its end, so an answer cut at the row or byte cap is a 400 rather than a partial plan."""
        result = self.run(query, params, profile=True)
        if result.truncated:
            raise AnswerTooLarge(
                f"the answer passed the row cap ({self.row_cap} rows) or the byte cap ({self.byte_cap // 1024} KiB) "
                "and was cut, so Neo4j measured nothing of it",
                f"profile it with a LIMIT of at most {self.row_cap}, or return less",
            )
        if result.profile is None:
            raise CypherError("Neo4j answered no profile for the query", "send one MATCH ... RETURN statement")
        return {
            "plan": plan_tree(result.profile, measured=True),
            "row_count": len(result.rows),
            "elapsed_ms": round(result.elapsed_ms, 2),
        }

    @contextmanager
    def _slot(self, hint: str) -> Iterator[tuple[str, threading.Event]]:
        """One of the analysts' slots for a query's (tag, abandoned flag); "busy" after a short wait."""
        # A short wait: a flood of analyst requests must not hold the service's worker threads
        # (shared with every other route) while earlier queries still run in Neo4j.
        if not self._slots.acquire(timeout=SLOT_WAIT_S):
            raise Busy("the analysts' Cypher slots are all busy with earlier queries still running in Neo4j", hint)
        tag = uuid.uuid4().hex
        abandoned = threading.Event()
        try:
            yield tag, abandoned
        finally:
            if abandoned.is_set():  # Neo4j may still be computing it: the slot frees when it is gone
                threading.Thread(target=self._release_when_gone, args=(tag,), daemon=True).start()
            else:
                self._slots.release()

    def _release_when_gone(self, tag: str) -> None:
        """Hold an abandoned query's slot for as long as Neo4j still runs its transaction.

        Neo4j stops a query only between rows, so one expression can run on after its transaction was
        terminated; until it is gone it keeps its slot, so no more than `parallel` analyst queries ever
        run in Neo4j at once (later ones get "busy"). Neo4j going away (a restart) ends them all.
        """
        failures, pause = 0, 0.05  # a cut answer's transaction ends within a moment: look again soon, then less often
        stuck_at = time.monotonic() + self.stuck_after_s
        try:
            while True:
                try:
                    rows = self.store.read(
                        "SHOW TRANSACTIONS YIELD transactionId, metaData WHERE metaData.eok_query = $tag "
                        "RETURN transactionId AS id",
                        tag=tag,
                    )
                except (Neo4jError, DriverError, OSError):
                    failures += 1
                    if failures >= 5:  # Neo4j is gone or restarting: so are its transactions
                        return
                    time.sleep(1.0)
                    continue
                if not rows:
                    return
                failures = 0
                if self.on_stuck is not None and time.monotonic() > stuck_at:
                    # One expression Neo4j does not stop (it checks its timeout between rows only): the timeout
                    # is only true if the database lets the statement go, so it is made to.
                    log.warning(
                        "an analyst statement still runs in Neo4j %.0f s after its timeout: restarting Neo4j to end it",
                        self.stuck_after_s,
                    )
                    self.on_stuck()
                    return
                with suppress(Neo4jError, DriverError, OSError):  # ask it to stop at its next check
                    self.store.read("TERMINATE TRANSACTIONS $ids", ids=[r["id"] for r in rows])
                time.sleep(pause)
                pause = min(1.0, 2 * pause)
        finally:
            self._slots.release()

    def _check_plan(self, query: str, params: dict[str, Any], tag: str, abandoned: threading.Event) -> None:
        """EXPLAIN (nothing runs) and refuse any operator that is not a read; verdicts are kept per text.
        Regular expressions are judged from the text and the parameters first, on every request: Neo4j
        evaluates LIMIT and SKIP expressions while planning, where nothing would stop a runaway match."""
        if problem := check_range_text(query, params):
            raise QueryLimit(
                f"the query {problem}; nothing was run",
                f'iterate at most {RANGE_MAX_ELEMENTS:,} elements per query, with range(1, $n) and n in "params"',
            )
        if problem := check_regex_text(query, params):
            raise WriteRefused(
                f"the query {problem}; nothing was run",
                "use CONTAINS, STARTS WITH or ENDS WITH, or a pattern of the shape docs/CYPHER.md describes",
            )
        with self._verdict_lock:
            known = self._verdicts.get(query)
            if known is not None:
                self._verdicts.move_to_end(query)
        if known is None:
            known, cacheable = self._plan_verdict(query, params, tag, abandoned)
            if cacheable:
                self._keep_verdict(query, known)
        if known:
            raise WriteRefused(
                f"the query {known}; analysts' Cypher is read-only within the graph and nothing was run",
                "query the graph with MATCH/RETURN and the db.* read procedures "
                f"({', '.join(sorted(READ_PROCEDURES))})",
            )

    def explain(self, query: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The operator tree Neo4j would run (`EXPLAIN`: nothing runs), after the same checks as `run`, in one
        of the same slots: a query `run` would refuse is refused here too (403, with the same reason)."""
        query, params = _checked_text(query), dict(params or {})
        with self._slot("retry in a few seconds") as (tag, abandoned):
            with self._translated():
                self._check_plan(query, params, tag, abandoned)  # the verdict is kept per text: after a run, cached
                plan = self._explain(query, params, tag, abandoned)
            if plan is None:
                raise WriteRefused("the query has no plan Neo4j would show", "send one MATCH ... RETURN statement")
            return plan_tree(plan)

    def _plan_verdict(
        self, query: str, params: dict[str, Any], tag: str, abandoned: threading.Event
    ) -> tuple[str, bool]:
        """('' for a read, else why not; whether the verdict holds for any parameter values: not when a vector
        search's k is among them)."""
        plan = self._explain(query, params, tag, abandoned)
        if plan is None:
            return "has no plan Neo4j would show, so it cannot be shown to be a read", True
        return plan_problem(plan, READ_OPERATORS, params) or "", not calls_vector_search(plan)

    def _explain(
        self, query: str, params: dict[str, Any], tag: str, abandoned: threading.Event
    ) -> dict[str, Any] | None:
        """Neo4j's plan of `query` (nothing runs). Planning only, under its own (longer) timeout, because a
        cold JVM on a loaded machine can take seconds to plan a large query, and under the same watchdog as
        a run: Neo4j evaluates LIMIT and SKIP expressions while planning, and an expression there can run
        for as long as its author likes."""
        limit_s = self.plan_timeout_s
        with self.store.session(read_only=True) as session:
            tx = session.begin_transaction(timeout=limit_s, metadata={"eok_query": tag})
            watchdog = threading.Timer(limit_s + _ABANDON_AFTER_S, _abandon, (tx, abandoned))
            watchdog.start()
            try:
                summary = tx.run(explain_text(query), params).consume()
            except (Neo4jError, DriverError, OSError):
                if abandoned.is_set():
                    raise self._timeout(planning=True, query=query) from None
                raise
            finally:
                watchdog.cancel()
                if not abandoned.is_set():
                    with suppress(Neo4jError, DriverError, OSError):
                        tx.close()
        return summary.plan

    def _keep_verdict(self, query: str, verdict: str) -> None:
        """The same text always plans to the same kinds of operators (values change nothing a procedure
        name or a clause could depend on), so a verdict is reused; bounded by the texts' total size."""
        with self._verdict_lock:
            self._verdicts[query] = verdict
            self._verdict_chars += len(query)
            while self._verdict_chars > _VERDICT_CACHE_CHARS:
                old, _ = self._verdicts.popitem(last=False)
                self._verdict_chars -= len(old)

    def _execute(
        self, query: str, params: dict[str, Any], tag: str, abandoned: threading.Event, profile: bool = False
    ) -> tuple[list[str], list[dict[str, Any]], bool, int, dict[str, Any] | None]:
        """Rows as JSON within the caps, whether cut, their bytes, and (`profile`: run under PROFILE) the
        measured plan Neo4j sends once the answer is read to its end (None when cut)."""
        rows: list[dict[str, Any]] = []
        size = 0
        with self.store.session(read_only=True) as session:
            # The execution gets the whole timeout (planning is bounded separately: a cold JVM on a loaded
            # machine may take seconds to plan a legitimate query); the service gives up 0.5 s after it.
            tx = session.begin_transaction(timeout=self.timeout_s, metadata={"eok_query": tag})
            watchdog = threading.Timer(self.timeout_s + _ABANDON_AFTER_S, _abandon, (tx, abandoned))
            watchdog.start()
            complete = False
            try:
                result = tx.run(profile_text(query) if profile else query, params)
                columns = list(result.keys())
                for record in result:
                    raw = dict(record.items())
                    # The floor first: a row far over the cap (a 15-million-element list) is refused without
                    # converting and serialising it, which alone took seconds past the timeout.
                    if len(rows) == self.row_cap or size + json_size_floor(raw, self.byte_cap) > self.byte_cap:
                        return (*self._cut(columns, rows, size), None)
                    row = {k: to_json(v) for k, v in raw.items()}
                    row_bytes = len(json.dumps(row, default=str))
                    if size + row_bytes > self.byte_cap:
                        return (*self._cut(columns, rows, size), None)
                    rows.append(row)
                    size += row_bytes
                measured = result.consume().profile if profile else None
                complete = True
                return columns, rows, False, size, measured
            except (Neo4jError, DriverError, OSError):
                if abandoned.is_set():
                    raise self._timeout() from None
                raise
            except RecursionError:  # a shape json_size_floor let through: still the answer's, not a fault
                raise AnswerTooDeep(
                    "a value of the answer is nested too deeply to convert", "return a flatter value"
                ) from None
            finally:
                watchdog.cancel()
                if not complete and not abandoned.is_set():
                    # A cut or failed answer: the driver's rollback would first read every row still
                    # pending (each one an expression of any cost), so drop the connection instead; the
                    # slot then frees when Neo4j no longer runs the transaction.
                    _abandon(tx, abandoned)
                elif not abandoned.is_set():
                    with suppress(Neo4jError, DriverError, OSError):
                        tx.close()

    def _cut(
        self, columns: list[str], rows: list[dict[str, Any]], size: int
    ) -> tuple[list[str], list[dict[str, Any]], bool, int]:
        """The answer so far, marked truncated; a first row over the cap is an error instead."""
        if not rows:
            raise AnswerTooLarge(
                f"one row of the answer is larger than the {self.byte_cap // 1024} KiB byte cap",
                "return fewer or smaller values (e.g. size(list) instead of the list)",
            )
        return columns, rows, True, size

    def _timeout(self, planning: bool = False, query: str = "") -> QueryTimeout:
        if planning and limit_skip_expressions(query):
            return QueryTimeout(
                f"planning the query took longer than {self.plan_timeout_s:g} s and was "
                "stopped (Neo4j evaluates LIMIT and SKIP expressions while planning)",
                "use a number or a parameter for LIMIT and SKIP; simplify the query",
            )
        if planning:  # nothing of the query's own runs while planning: the planner itself was slow
            return QueryTimeout(
                f"planning the query took longer than {self.plan_timeout_s:g} s and was stopped",
                "Neo4j plans slowly for a minute after it starts (its first queries warm it up): "
                "run it again; if it still fails, simplify the query",
            )
        return QueryTimeout(
            f"the query ran longer than the {self.timeout_s:g} s limit and was stopped",
            "narrow the MATCH, add a LIMIT, or use an index-backed property filter",
        )

    @contextmanager
    def _translated(self) -> Iterator[None]:
        try:
            yield
        except Neo4jError as e:
            raise translate_neo4j_error(e, self.timeout_s) from None
        except (ServiceUnavailable, SessionExpired) as e:
            raise Unavailable(f"Neo4j at {self.store.uri} went away during the query: {type(e).__name__}") from e
        except (OverflowError, TypeError, ValueError) as e:  # the driver could not encode a parameter
            raise InvalidInput(
                f"a query parameter cannot be sent to Neo4j: {e}",
                "integers must fit in 64 bits; values must be strings, numbers, booleans, lists or maps",
            ) from None


# A plan deeper than this is cut too: the answer's JSON nests once per level (140 UNION ALL branches plan
# ~140 deep, past what the response serialiser allows: red team round 4).
PLAN_MAX_DEPTH = 100
PLAN_MAX_OPERATORS = 500  # a plan tree larger than this is cut (marked `cut`): the page draws it as a list


# Per operator, what PROFILE measured: (answer key, Bolt's key on the operator, its key among the arguments).
_MEASURES = (
    ("rows", "rows", "Rows"),
    ("db_hits", "dbHits", "DbHits"),
    ("page_cache_hits", "pageCacheHits", "PageCacheHits"),
    ("page_cache_misses", "pageCacheMisses", "PageCacheMisses"),
    ("memory_bytes", None, "Memory"),
)


def plan_tree(plan: Mapping[str, Any], measured: bool = False) -> dict[str, Any]:
    """Neo4j's raw plan as the API answers it: per operator its name, Details text, estimated rows, the
    variables it binds and its children; at most PLAN_MAX_OPERATORS operators (iterative: no recursion).
    A `measured` (PROFILE) plan adds per operator rows, db hits, page cache hits and misses, memory and
    time in ms where Neo4j reports them (null where not: the Community server's runtime reports no time),
    and marks the operator with the most db hits `slowest`."""

    def node(op: Mapping[str, Any]) -> dict[str, Any]:
        args = op.get("args") or op.get("arguments") or {}  # Bolt sends `args`
        rows = args.get("EstimatedRows")
        out: dict[str, Any] = {
            "operator": str(op.get("operatorType", "")).split("@", 1)[0],
            "details": str(args.get("Details", ""))[:1000],
            "estimated_rows": round(float(rows), 1) if isinstance(rows, int | float) else None,
            "identifiers": [str(i) for i in (op.get("identifiers") or [])][:50],
            "children": [],
        }
        if measured:
            for key, bolt, arg in _MEASURES:
                value = op.get(bolt) if bolt else None
                value = args.get(arg) if value is None else value
                out[key] = int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
            nanos = op.get("time", args.get("Time"))
            out["time_ms"] = round(nanos / 1e6, 3) if isinstance(nanos, int | float) and nanos > 0 else None
        return out

    root = node(plan)
    stack, count, slowest = [(plan, root, 1)], 1, root
    while stack:
        raw, out, depth = stack.pop()
        if measured and (out["db_hits"] or 0) > (slowest["db_hits"] or 0):
            slowest = out
        for child in raw.get("children") or []:
            if count >= PLAN_MAX_OPERATORS or depth >= PLAN_MAX_DEPTH:
                out["cut"] = True
                break
            made = node(child)
            out["children"].append(made)
            stack.append((child, made, depth + 1))
            count += 1
    if measured and (slowest["db_hits"] or 0) > 0:
        slowest["slowest"] = True
    return root


def _checked_text(query: str) -> str:
    """The query without surrounding blanks; an empty one is the client's error."""
    query = query.strip()
    if not query:
        raise InvalidInput("the query is empty", "send a Cypher statement in the `query` field")
    return query


def explain_text(query: str) -> str:
    """The query as planned for the check: EXPLAIN in front of it (an EXPLAIN or PROFILE it had is replaced)."""
    return _EXPLAIN_PREFIX + _MODE_PREFIX.sub("", query, count=1)


def profile_text(query: str) -> str:
    """The query as run to be measured: PROFILE in front of it (an EXPLAIN or PROFILE it had is replaced)."""
    return "PROFILE " + _MODE_PREFIX.sub("", query, count=1)


def _abandon(tx: neo4j.Transaction, abandoned: threading.Event) -> None:
    """Close the connection under a query Neo4j did not stop in time: our side stops reading at once."""
    abandoned.set()
    connection = getattr(tx, "_connection", None)
    if connection is not None:
        with suppress(Exception):  # a connection closing under us is exactly what we want here
            connection.kill()


def _strip_strings_and_comments(text: str) -> str:
    """Saved-query files only: blank strings and comments so `$name` uses can be listed (not a guard)."""
    out = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    out = re.sub(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"", "''", out)
    return re.sub(r"//[^\n]*", " ", out)


def translate_neo4j_error(e: Neo4jError, timeout_s: float) -> EokError:
    code = e.code or ""
    message = _first_lines(e.message or str(e))
    if code == "Neo.ClientError.Statement.AccessMode" or "Writing in read access mode" in message:
        return WriteRefused(
            "the query tries to write to the graph; analysts' Cypher is read-only and nothing was changed",
            "use MATCH/RETURN only; writes go through EoK's own commands",
        )
    if code.startswith("Neo.ClientError.Transaction.TransactionTimedOut") or code.endswith("Terminated"):
        return QueryTimeout(
            f"the query ran longer than the {timeout_s:g} s limit and was stopped",
            "narrow the MATCH, add a LIMIT, or use an index-backed property filter",
        )
    if code.endswith(("MemoryPoolOutOfMemoryError", "TransactionMemoryLimit")):
        return _memory_limit(message)
    if isinstance(e, CypherSyntaxError) or code == "Neo.ClientError.Statement.SyntaxError":
        return CypherSyntax(f"Cypher syntax error: {_unprefixed(message)}", "fix the query text at the position shown")
    if isinstance(e, ClientError):
        kind = code.rsplit(".", 1)[-1] or "ClientError"
        return CypherError(f"Neo4j refused the query ({kind}): {message}", "fix the query or its parameters")
    return Unavailable(f"Neo4j could not run the query ({code or type(e).__name__}): {message}", "retry later")


_MEMORY_LIMIT = re.compile(r"limit ([\d.]+ [KMGT]i?B)")


def _memory_limit(message: str) -> EokError:
    """Neo4j's memory limits: one transaction's (db.memory.transaction.max) is the query's own limit, a 400
    naming it; all transactions' together (dbms.memory.transaction.total.max) is shared, so 503 busy."""
    limit = m.group(1) if (m := _MEMORY_LIMIT.search(message)) else "the configured"
    if "dbms.memory.transaction.total.max" in message:
        return Busy(
            f"Neo4j's transactions together reached their {limit} memory limit "
            "(dbms.memory.transaction.total.max); the query was stopped",
            "retry in a few seconds",
        )
    return QueryMemoryLimit(
        f"the query needed more than the {limit} of memory one query may use (db.memory.transaction.max) "
        "and was stopped",
        "return less: aggregate (count, size) instead of collecting, add a LIMIT, or narrow the MATCH",
    )


_LINE1_POSITION = re.compile(r"\(line 1, column (\d+) \(offset: (\d+)\)\)")


def _unprefixed(message: str) -> str:
    """Neo4j's message about the planned text (EXPLAIN + query) as it reads for the query the analyst sent."""
    if _EXPLAIN_PREFIX not in message:
        return message
    n = len(_EXPLAIN_PREFIX)

    def shift(m: re.Match[str]) -> str:
        col, off = int(m.group(1)), int(m.group(2))
        return f"(line 1, column {max(col - n, 1)} (offset: {max(off - n, 0)}))"

    fixed = _LINE1_POSITION.sub(shift, message)
    fixed = fixed.replace('"' + _EXPLAIN_PREFIX, '"').replace("'" + _EXPLAIN_PREFIX, "'")
    # the caret line under the quoted text moves left with it
    return re.sub(r"^( *)\^", lambda m: " " * max(len(m.group(1)) - n, 0) + "^", fixed, flags=re.M)


def _first_lines(text: str, n: int = 4) -> str:
    return "\n".join(text.strip().splitlines()[:n])[:600]


def json_size_floor(value: Any, limit: int, max_depth: int = ANSWER_MAX_DEPTH) -> int:
    """A lower bound of len(json.dumps(to_json(value))), counted only until it passes `limit`: a list's
    separators are counted from its length before its elements are visited, so a huge list costs one len().
    A value nested deeper than `max_depth` is AnswerTooDeep: converting and serialising it recurses once per
    level (3,000 nested lists ended in RecursionError and a 500)."""
    total, stack = 0, [(value, 0)]
    while stack and total <= limit:
        v, depth = stack.pop()
        if depth > max_depth:
            raise AnswerTooDeep(
                f"a value of the answer is nested deeper than {max_depth} levels (lists or maps within each other)",
                "return a flatter value, e.g. size(list) or a list of scalars",
            )
        below = depth + 1
        if isinstance(v, str):
            total += len(v) + 2
        elif isinstance(v, bytes | bytearray):
            total += 4 * (len(v) // 3) + 2  # base64 in quotes
        elif isinstance(v, list | tuple):
            total += 2 + 2 * max(len(v) - 1, 0)  # brackets and ", " separators
            if total <= limit:
                stack.extend((x, below) for x in v)
        elif isinstance(v, dict):
            total += 2 + 2 * max(len(v) - 1, 0) + 2 * len(v)  # braces, separators, ": " after each key
            if total <= limit:
                stack.extend((str(k), below) for k in v)
                stack.extend((x, below) for x in v.values())
        elif isinstance(v, GraphNode | GraphRelationship):  # its map: id, labels/type and properties
            total += 24 + 2 * len(v)
            if total <= limit:
                stack.extend((str(k), below) for k in v)
                stack.extend((val, below) for k, val in v.items() if not str(k).startswith("embedding"))
        elif isinstance(v, GraphPath):
            total += 30
            if total <= limit:
                stack.extend((n, below) for n in v.nodes)
                stack.extend((r, below) for r in v.relationships)
        else:  # numbers, booleans, null, temporals: at least one character
            total += 1
    return total


def to_json(value: Any) -> Any:
    """Driver values to JSON: nodes/relationships become maps (embeddings left out), temporals ISO text."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, GraphNode):  # _id: so the page can draw relationships between returned nodes
        return {"_id": value.element_id, "_labels": sorted(value.labels), **_props(value)}
    if isinstance(value, GraphRelationship):
        start = value.start_node.element_id if value.start_node is not None else None
        end = value.end_node.element_id if value.end_node is not None else None
        return {"_id": value.element_id, "_type": value.type, "_start": start, "_end": end, **_props(value)}
    if isinstance(value, GraphPath):
        return {"nodes": [to_json(n) for n in value.nodes], "relationships": [to_json(r) for r in value]}
    if isinstance(value, list | tuple):
        return [to_json(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(bytes(value)).decode("ascii")
    if hasattr(value, "iso_format"):
        return value.iso_format()
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return str(value)


def _props(entity: GraphNode | GraphRelationship) -> dict[str, Any]:
    return {k: to_json(v) for k, v in entity.items() if not k.startswith("embedding")}
