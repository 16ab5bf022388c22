"""Ideas and thoughts: hybrid search, an idea with its thoughts, a thought with its evidence and results."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query

from knowledge.retrieval import Kind, SearchFilters
from knowledge.taxonomy import Isa, Operator, Technique
from service.api import views
from service.api.deps import ReaderKey, RetrieverDep, StoreDep
from service.api.schemas import ErrorResponse, IdeaDetail, SearchResponse, ThoughtDetail

router = APIRouter(tags=["knowledge"], responses={401: {"model": ErrorResponse}, 403: {"model": ErrorResponse}})
IdPath = Path(min_length=1, max_length=200)


@router.get("/ideas/search", response_model=SearchResponse, responses={422: {"model": ErrorResponse}})
def search(
    _: ReaderKey,
    retriever: RetrieverDep,
    q: Annotated[str, Query(min_length=1, max_length=500, description="what to optimize, in words or code")],
    target: Annotated[str | None, Query(max_length=100, description="target key, e.g. k1-x60")] = None,
    operator: Annotated[Operator | None, Query(description="operator family")] = None,
    isa: Annotated[Isa | None, Query(description="ISA of the thought's code")] = None,
    technique: Annotated[Technique | None, Query(description="optimization technique")] = None,
    kind: Annotated[Kind | None, Query(description="only thoughts, ideas or experiences")] = None,
    k: Annotated[int, Query(ge=1, le=100, description="how many hits")] = 10,
) -> SearchResponse:
    """Hybrid retrieval (vectors + full text + graph expansion, weighted by measured outcomes)."""
    filters = SearchFilters(
        kind=kind,
        target=target or None,
        operator=operator.value if operator else None,
        isa=isa.value if isa else None,
        technique=technique.value if technique else None,
    )
    hits = retriever.search(q, k=k, filters=filters)
    used = {key: str(v) for key, v in filters.model_dump().items() if v}
    return SearchResponse(query=q, k=k, filters=used, hits=hits)


@router.get("/ideas/{idea_id}", response_model=IdeaDetail, responses={404: {"model": ErrorResponse}})
def get_idea(_: ReaderKey, store: StoreDep, idea_id: Annotated[str, IdPath]) -> IdeaDetail:
    """An idea (a general principle) with its thoughts and how often each was tried."""
    return IdeaDetail.model_validate(views.idea_detail(store, idea_id))


@router.get("/thoughts/{thought_id}", response_model=ThoughtDetail, responses={404: {"model": ErrorResponse}})
def get_thought(_: ReaderKey, store: StoreDep, thought_id: Annotated[str, IdPath]) -> ThoughtDetail:
    """A thought with the commits that evidence it, its measured effect per target and the experiences
    that applied it (best first)."""
    return ThoughtDetail.model_validate(views.thought_detail(store, thought_id))
