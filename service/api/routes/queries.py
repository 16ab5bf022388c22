"""Analysts' Cypher: saved queries (GET /queries, POST /queries/{name}) and ad-hoc POST /cypher."""

from __future__ import annotations

import hashlib
import logging
from typing import Annotated

from fastapi import APIRouter, Path

from service.api.cypher import get_saved_query
from service.api.deps import AnalystKey, CypherDep, StateDep
from service.api.schemas import CypherRequest, ErrorResponse, QueryInfo, QueryList, QueryResultOut, QueryRunRequest
from service.api.security import Caller

log = logging.getLogger("eok.api.audit")
router = APIRouter(tags=["cypher"], responses={401: {"model": ErrorResponse}, 403: {"model": ErrorResponse}})
_ERRORS = {
    400: {"model": ErrorResponse},
    404: {"model": ErrorResponse},
    422: {"model": ErrorResponse},
    503: {"model": ErrorResponse},
}


@router.get("/queries", response_model=QueryList)
def list_queries(_: AnalystKey, state: StateDep) -> QueryList:
    """The saved queries of cypher/queries/, with their documented parameters and Cypher text."""
    return QueryList(items=[QueryInfo.model_validate(q.describe()) for q in state.queries.values()])


@router.post("/queries/{name}", response_model=QueryResultOut, responses=_ERRORS)
def run_query(
    _: AnalystKey,
    state: StateDep,
    cypher: CypherDep,
    name: Annotated[str, Path(min_length=1, max_length=100)],
    body: QueryRunRequest | None = None,
) -> QueryResultOut:
    """Run a saved query with parameters (defaults fill the rest); read-only, time- and row-capped."""
    query = get_saved_query(state.queries, name)
    params = query.bind((body or QueryRunRequest()).params)
    result = cypher.run(query.text, params)
    return QueryResultOut.model_validate(result.as_dict())


@router.post("/cypher", response_model=QueryResultOut, responses=_ERRORS)
def run_cypher(caller: AnalystKey, cypher: CypherDep, body: CypherRequest) -> QueryResultOut:
    """Run one ad-hoc Cypher statement that Neo4j's own EXPLAIN plan shows to be a read of the graph (writes,
    schema, LOAD CSV, SHOW TRANSACTIONS/SETTINGS and non-allow-listed procedures are refused, 403, nothing
    run), in a READ transaction that times out after settings.cypher_timeout_s; rows stop at
    settings.cypher_row_cap or before settings.cypher_byte_cap bytes. 503 when earlier runaway queries
    still hold every slot."""
    audit(caller, body.query)
    result = cypher.run(body.query, body.params)
    return QueryResultOut.model_validate(result.as_dict())


def audit(caller: Caller, query: str, mode: str = "cypher") -> None:
    """Which key sent what (key id, never the key; the query's hash and its start), before it runs: a query
    that takes the database down is still on record."""
    digest = hashlib.sha256(query.encode()).hexdigest()[:12]
    log.info("%s by %s: %s %r", mode, caller.key_id, digest, query[:200])
