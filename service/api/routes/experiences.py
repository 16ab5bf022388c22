"""Experiences: every evaluated candidate, filtered and paged with an opaque cursor."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query

from knowledge.models import ExperienceStatus
from service.api import views
from service.api.deps import ReaderKey, StoreDep
from service.api.schemas import ErrorResponse, ExperienceDetail, ExperiencePage

router = APIRouter(tags=["knowledge"], responses={401: {"model": ErrorResponse}, 403: {"model": ErrorResponse}})


@router.get("/experiences", response_model=ExperiencePage, responses={422: {"model": ErrorResponse}})
def list_experiences(
    _: ReaderKey,
    store: StoreDep,
    task: Annotated[str | None, Query(max_length=200, description="task name")] = None,
    target: Annotated[str | None, Query(max_length=100, description="target key")] = None,
    status: Annotated[ExperienceStatus | None, Query(description="outcome of the evaluation")] = None,
    min_speedup: Annotated[float | None, Query(ge=0, le=1e6, description="only speedups at least this")] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: Annotated[str | None, Query(max_length=1000, description="next_cursor of the previous page")] = None,
) -> ExperiencePage:
    """Newest first. Pages are stable while new experiences arrive (keyset pagination)."""
    page = views.experiences_page(
        store, task or None, target or None, status.value if status else None, min_speedup, limit, cursor or None
    )
    return ExperiencePage.model_validate(page)


@router.get("/experiences/{experience_id}", response_model=ExperienceDetail, responses={404: {"model": ErrorResponse}})
def get_experience(
    _: ReaderKey, store: StoreDep, experience_id: Annotated[str, Path(min_length=1, max_length=200)]
) -> ExperienceDetail:
    """One experience with its code, compiler flags, feedback and the thoughts it applied."""
    return ExperienceDetail.model_validate(views.experience_detail(store, experience_id))
