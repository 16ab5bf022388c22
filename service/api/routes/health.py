"""GET /health (is the graph reachable), GET /whoami (the key's role) and GET /overview (the first screen)."""

from __future__ import annotations

from fastapi import APIRouter

from service.api import views
from service.api.deps import ReaderKey, StateDep
from service.api.schemas import ErrorResponse, Health, Overview, WhoAmI

router = APIRouter(tags=["health"])


@router.get("/health", response_model=Health, responses={503: {"model": ErrorResponse}})
def health(state: StateDep) -> Health:
    """Public (no key): Neo4j answers, the schema version, the FAISS index size, the agent's presence."""
    store = state.container.store
    stats = store.stats()  # raises Unavailable (503) when Neo4j does not answer
    index = state.container.index
    return Health(
        status="ok",
        neo4j_uri=stats["uri"],
        neo4j_version=stats["version"],
        schema_version=stats["schema_version"],
        index_size=index.size,
        index_generation=index.generation,
        nodes={k: v for k, v in stats["labels"].items() if k not in ("Migration", "IndexState")},
        agent=state.runs.available,
        active_runs=state.runs.active_count(),
    )


@router.get("/whoami", response_model=WhoAmI, responses={401: {"model": ErrorResponse}})
def whoami(caller: ReaderKey) -> WhoAmI:
    """The presented key's role and id (a hash prefix, never the key): the page shows controls per role."""
    return WhoAmI(role=caller.role.name.lower(), key_id=caller.key_id)


@router.get("/overview", response_model=Overview, responses={401: {"model": ErrorResponse}})
def overview(_: ReaderKey, state: StateDep) -> Overview:
    """The first screen: what is in the graph, the recent runs, and per target the techniques whose
    thoughts measured best (geometric-mean speedup over their trials; claims are not counted)."""
    store = state.container.store
    return Overview(
        nodes=views.node_counts(store),
        recent_runs=[
            r.model_dump(mode="json", include=views.RUN_SUMMARY_FIELDS) for r in views.list_runs(store, None, 8)
        ],
        top_techniques=views.top_techniques(store),
    )
