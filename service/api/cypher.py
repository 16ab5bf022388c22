"""Analysts' Cypher: the saved queries in cypher/queries/*.cypher and ad-hoc read-only queries.

Both run in a READ access-mode session with a transaction timeout and a row cap. Neo4j refuses writes in
read mode; a few read-mode clauses that reach outside the graph (LOAD CSV reads server files and URLs,
TERMINATE kills other people's transactions, dbms.* exposes server settings) are refused here first.

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
import math
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import neo4j
from neo4j.exceptions import ClientError, CypherSyntaxError, Neo4jError, ServiceUnavailable, SessionExpired
from neo4j.graph import Node as GraphNode
from neo4j.graph import Path as GraphPath
from neo4j.graph import Relationship as GraphRelationship

from core.errors import EokError, InvalidInput, NotFound, Unavailable
from core.settings import PROJECT_ROOT
from knowledge.store import GraphStore

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

# Read-mode statements that still reach outside the graph or into other sessions.
_FORBIDDEN = (
    (re.compile(r"\bLOAD\s+CSV\b", re.I), "LOAD CSV (it reads files and URLs on the database server)"),
    (re.compile(r"\bTERMINATE\s+TRANSACTIONS?\b", re.I), "TERMINATE TRANSACTION (it stops other sessions' work)"),
    (
        re.compile(
            r"\bSHOW\s+(?!(?:ALL\s+|RANGE\s+|FULLTEXT\s+|VECTOR\s+|LOOKUP\s+|POINT\s+|TEXT\s+)*"
            r"(?:INDEX|INDEXES|CONSTRAINTS?|PROCEDURES?|FUNCTIONS?)\b)",
            re.I,
        ),
        "SHOW other than SHOW INDEXES/CONSTRAINTS/PROCEDURES/FUNCTIONS (it exposes other sessions or settings)",
    ),
    (re.compile(r"\bdbms\s*\.", re.I), "dbms.* procedures (they expose server configuration)"),
    (re.compile(r"(?:^|[^.\w`])USE\s+[`\w]", re.I), "USE (queries run on the EoK database only)"),
)


@dataclass
class QueryResult:
    columns: list[str]
    rows: list[dict[str, Any]]
    truncated: bool
    elapsed_ms: float
    row_cap: int
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "columns": self.columns,
            "rows": self.rows,
            "row_count": len(self.rows),
            "truncated": self.truncated,
            "row_cap": self.row_cap,
            "elapsed_ms": round(self.elapsed_ms, 2),
        }


class ReadOnlyCypher:
    """Runs analyst Cypher in READ access mode with a transaction timeout and a row cap."""

    def __init__(self, store: GraphStore, timeout_s: float, row_cap: int) -> None:
        self.store = store
        self.timeout_s = timeout_s
        self.row_cap = row_cap

    def run(self, query: str, params: Mapping[str, Any] | None = None) -> QueryResult:
        query = query.strip()
        if not query:
            raise InvalidInput("the query is empty", "send a Cypher statement in the `query` field")
        check_read_only_text(query)
        cap = self.row_cap

        @neo4j.unit_of_work(timeout=self.timeout_s)
        def work(tx: neo4j.ManagedTransaction) -> tuple[list[str], list[dict[str, Any]], bool]:
            result = tx.run(query, dict(params or {}))
            rows: list[dict[str, Any]] = []
            for record in result:
                if len(rows) == cap:
                    return list(result.keys()), rows, True  # stop reading: the rest is discarded
                rows.append({k: to_json(v) for k, v in record.items()})
            return list(result.keys()), rows, False

        began = time.perf_counter()
        try:
            with self.store.session(read_only=True) as session:
                columns, rows, truncated = session.execute_read(work)
        except Neo4jError as e:
            raise translate_neo4j_error(e, self.timeout_s) from None
        except (ServiceUnavailable, SessionExpired) as e:
            raise Unavailable(f"Neo4j at {self.store.uri} went away during the query: {type(e).__name__}") from e
        except (OverflowError, TypeError, ValueError) as e:  # the driver could not encode a parameter
            raise InvalidInput(
                f"a query parameter cannot be sent to Neo4j: {e}",
                "integers must fit in 64 bits; values must be strings, numbers, booleans, lists or maps",
            ) from None
        return QueryResult(columns, rows, truncated, (time.perf_counter() - began) * 1000, cap)


def check_read_only_text(query: str) -> None:
    """Refuse the read-mode clauses that reach outside the graph; strings and comments are ignored."""
    code = _strip_strings_and_comments(query)
    for pattern, what in _FORBIDDEN:
        if pattern.search(code):
            raise WriteRefused(
                f"the query uses {what}, which analysts' Cypher does not allow",
                "query the graph with MATCH/RETURN (and db.* procedures); nothing was run",
            )


def _strip_strings_and_comments(text: str) -> str:
    """Blank out string literals, quoted names and comments so keyword checks see only code."""
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
    if isinstance(e, CypherSyntaxError) or code == "Neo.ClientError.Statement.SyntaxError":
        return CypherSyntax(f"Cypher syntax error: {message}", "fix the query text at the position shown")
    if isinstance(e, ClientError):
        kind = code.rsplit(".", 1)[-1] or "ClientError"
        return CypherError(f"Neo4j refused the query ({kind}): {message}", "fix the query or its parameters")
    return Unavailable(f"Neo4j could not run the query ({code or type(e).__name__}): {message}", "retry later")


def _first_lines(text: str, n: int = 4) -> str:
    return "\n".join(text.strip().splitlines()[:n])[:600]


def to_json(value: Any) -> Any:
    """Driver values to JSON: nodes/relationships become maps (embeddings left out), temporals ISO text."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, GraphNode):
        return {"_labels": sorted(value.labels), **_props(value)}
    if isinstance(value, GraphRelationship):
        start = value.start_node.element_id if value.start_node is not None else None
        end = value.end_node.element_id if value.end_node is not None else None
        return {"_type": value.type, "_start": start, "_end": end, **_props(value)}
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
