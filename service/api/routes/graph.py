"""What the page's graph view and schema sidebar read (analyst keys): the relationships among nodes an answer
returned, a node's neighbours, the graph's labels, relationship types and property keys, and a query's plan.

Every query here is the service's own (fixed text, values as parameters), run in a READ transaction with the
analysts' timeout (settings.cypher_timeout_s) and a bounded answer, so none can write or hold the database.
"""

from __future__ import annotations

from contextlib import suppress
from typing import Annotated, Any

import neo4j
from fastapi import APIRouter, Query
from neo4j.exceptions import DriverError, Neo4jError, ServiceUnavailable, SessionExpired

from core.errors import NotFound, Unavailable
from service.api.cypher import to_json, translate_neo4j_error
from service.api.deps import AnalystKey, CypherDep, StateDep
from service.api.routes.queries import audit
from service.api.schemas import EdgesRequest, ErrorResponse, GraphSchema, PlanOut, PlanRequest, Subgraph

router = APIRouter(tags=["cypher"], responses={401: {"model": ErrorResponse}, 403: {"model": ErrorResponse}})
_ERRORS = {400: {"model": ErrorResponse}, 422: {"model": ErrorResponse}, 503: {"model": ErrorResponse}}

EDGES_MAX = 2000  # relationships /graph/edges answers at most
NEIGHBOURS_MAX = 100

_EDGES = "MATCH (a) WHERE elementId(a) IN $ids MATCH (a)-[r]->(b) WHERE elementId(b) IN $ids RETURN r LIMIT $limit"
_NEIGHBOURS = "MATCH (a) WHERE elementId(a) = $id OPTIONAL MATCH (a)-[r]-(b) RETURN a, r, b LIMIT $limit"


def _read(state: StateDep, cypher: str, **params: Any) -> list[neo4j.Record]:
    """The service's own read, under the analysts' timeout (Neo4j stops it: no expression here is costly)."""
    timeout = state.settings.cypher_timeout_s
    try:
        with state.container.store.session(read_only=True) as session:
            tx = session.begin_transaction(timeout=timeout)
            try:
                return list(tx.run(cypher, params))
            finally:
                with suppress(Neo4jError, DriverError, OSError):
                    tx.close()
    except (ServiceUnavailable, SessionExpired) as e:
        raise Unavailable(f"Neo4j went away during the read: {type(e).__name__}") from e
    except Neo4jError as e:
        raise translate_neo4j_error(e, timeout) from None


@router.post("/graph/edges", response_model=Subgraph, responses=_ERRORS)
def edges_among(_: AnalystKey, state: StateDep, body: EdgesRequest) -> Subgraph:
    """The relationships whose both ends are among `ids` (element ids from an answer's nodes, at most 300),
    at most `limit` (<= 2000): the page connects the nodes a query returned, as Neo4j Browser does."""
    ids = list(dict.fromkeys(body.ids))
    rows = _read(state, _EDGES, ids=ids, limit=body.limit + 1) if ids else []
    rels = [to_json(r["r"]) for r in rows[: body.limit]]
    return Subgraph(nodes=[], relationships=rels, truncated=len(rows) > body.limit)


@router.get("/graph/neighbours", response_model=Subgraph, responses={**_ERRORS, 404: {"model": ErrorResponse}})
def neighbours(
    _: AnalystKey,
    state: StateDep,
    id: Annotated[str, Query(min_length=1, max_length=200, description="a node's element id (`_id`)")],
    limit: Annotated[int, Query(ge=1, le=NEIGHBOURS_MAX)] = 25,
) -> Subgraph:
    """A node and up to `limit` of its relationships with the nodes at their other ends (the graph view's
    "expand")."""
    rows = _read(state, _NEIGHBOURS, id=id, limit=limit + 1)
    if not rows:
        raise NotFound(f"no node with element id {id!r}", "take `_id` from a node of a /cypher answer")
    nodes = {rows[0]["a"].element_id: to_json(rows[0]["a"])}
    rels = []
    for r in rows[:limit]:
        if r["r"] is None:
            continue
        nodes.setdefault(r["b"].element_id, to_json(r["b"]))
        rels.append(to_json(r["r"]))
    return Subgraph(nodes=list(nodes.values()), relationships=rels, truncated=len(rows) > limit)


@router.get("/graph/schema", response_model=GraphSchema, responses=_ERRORS)
def schema(_: AnalystKey, state: StateDep) -> GraphSchema:
    """Labels and relationship types with their counts (Neo4j's count store: O(1) each) and the property keys:
    the console's sidebar."""
    stats = state.container.store.stats()
    keys = [r["propertyKey"] for r in _read(state, "CALL db.propertyKeys() YIELD propertyKey RETURN propertyKey")]
    hidden = ("Migration", "IndexState")
    return GraphSchema(
        labels={k: v for k, v in stats["labels"].items() if k not in hidden},
        relationship_types=stats["relationships"],
        property_keys=sorted(k for k in keys if not k.startswith("embedding"))[:1000],
    )


@router.post("/cypher/plan", response_model=PlanOut, responses={**_ERRORS, 404: {"model": ErrorResponse}})
def plan(caller: AnalystKey, cypher: CypherDep, body: PlanRequest) -> PlanOut:
    """Neo4j's EXPLAIN plan of one statement (nothing runs), after the same guard as POST /cypher (a query it
    refuses is refused here, 403): the operator tree with Details and estimated rows, at most 500 operators.

    With `"profile": true` the statement runs under PROFILE on POST /cypher's own path (the same guard, slots,
    timeout, memory limit, row and byte caps and nesting bound; refused and stopped exactly as there) and
    the tree adds what Neo4j measured per operator; an answer cut at a cap is a 400 (nothing measured)."""
    if not body.profile:
        return PlanOut(plan=cypher.explain(body.query, body.params))
    audit(caller, body.query, "profile")
    return PlanOut(profiled=True, **cypher.profile(body.query, body.params))
