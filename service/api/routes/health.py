"""GET /health: is the graph reachable, which schema, how big is the retrieval index."""

from __future__ import annotations

from fastapi import APIRouter

from service.api.deps import StateDep
from service.api.schemas import ErrorResponse, Health

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
