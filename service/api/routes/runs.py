"""Agent runs: start (operator), watch (server-sent events), inspect, cancel, resume."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path as FilePath
from typing import Annotated, Any

from fastapi import APIRouter, Header, Path, Query, Request
from fastapi.responses import FileResponse, StreamingResponse

from agent.types import ProgressEvent, RunRequest
from core.errors import NotFound
from knowledge.models import Run, RunStatus
from service.api import views
from service.api.cypher import to_json
from service.api.deps import OperatorKey, ReaderKey, RunsDep, StateDep, StoreDep
from service.api.errors import Forbidden
from service.api.run_manager import RunManager
from service.api.schemas import (
    Artefact,
    ArtefactList,
    CancelAccepted,
    ErrorResponse,
    RunAccepted,
    RunBest,
    RunDetail,
    RunList,
)

router = APIRouter(tags=["runs"], responses={401: {"model": ErrorResponse}, 403: {"model": ErrorResponse}})
RunId = Annotated[str, Path(min_length=1, max_length=200)]
_NOT_FOUND = {404: {"model": ErrorResponse}}


@router.post(
    "/runs",
    status_code=202,
    response_model=RunAccepted,
    responses={
        404: {"model": ErrorResponse},
        422: {"model": ErrorResponse},
        429: {"model": ErrorResponse},
        503: {"model": ErrorResponse},
    },
)
def start_run(caller: OperatorKey, runs: RunsDep, req: RunRequest) -> RunAccepted:
    """Queue an optimization run of `task` on `target`; it executes in the bounded worker pool. The
    caller's key id is recorded as the run's `started_by`."""
    run = runs.submit(req, by=caller.key_id)
    return _accepted(run)


@router.get("/runs", response_model=RunList)
def list_runs(
    _: ReaderKey,
    runs: RunsDep,
    store: StoreDep,
    status: Annotated[RunStatus | None, Query()] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 20,
) -> RunList:
    """Runs, newest first."""
    items = views.list_runs(store, str(status) if status else None, limit)
    return RunList(items=[_detail(runs, r, with_outcome=False) for r in items])


@router.get("/runs/{run_id}", response_model=RunDetail, responses=_NOT_FOUND)
def get_run(_: ReaderKey, runs: RunsDep, run_id: RunId) -> RunDetail:
    """Status, progress and, once finished, the best kernel and its lineage."""
    return _detail(runs, runs.get_run(run_id), with_outcome=True)


@router.delete(
    "/runs/{run_id}",
    status_code=202,
    response_model=CancelAccepted,
    responses={**_NOT_FOUND, 409: {"model": ErrorResponse}},
)
def cancel_run(caller: OperatorKey, runs: RunsDep, run_id: RunId) -> CancelAccepted:
    """Ask a run to stop after its current evaluation (a queued or idle run is cancelled at once); the
    caller's key id is recorded as `cancelled_by`."""
    run = runs.cancel(run_id, by=caller.key_id)
    active = runs.is_active(run_id)
    return CancelAccepted(
        id=run.id,
        status=run.status,
        message="cancelling: the run stops after its current evaluation" if active else f"run is {run.status}",
    )


@router.post(
    "/runs/{run_id}/resume",
    status_code=202,
    response_model=RunAccepted,
    responses={**_NOT_FOUND, 409: {"model": ErrorResponse}, 429: {"model": ErrorResponse}},
)
def resume_run(caller: OperatorKey, runs: RunsDep, run_id: RunId) -> RunAccepted:
    """Continue an interrupted run from what the graph holds (409 while another process holds its lease);
    the caller's key id is recorded as `resumed_by`."""
    return _accepted(runs.resume(run_id, by=caller.key_id))


@router.get(
    "/runs/{run_id}/events",
    response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {}}, "description": "ProgressEvent stream"}, **_NOT_FOUND},
)
async def run_events(
    _: ReaderKey,
    runs: RunsDep,
    request: Request,
    run_id: RunId,
    last_event_id: Annotated[str | None, Header(max_length=20)] = None,
) -> StreamingResponse:
    """Server-sent events: every past event of the run first, then live ones; the stream ends with the run.

    Each event has `id` (its index, for Last-Event-ID), `event` (the kind) and `data` (a ProgressEvent).
    """
    from starlette.concurrency import run_in_threadpool

    run = await run_in_threadpool(runs.get_run, run_id)  # 404 before the stream starts
    start = int(last_event_id) + 1 if last_event_id and last_event_id.isdigit() else 0
    stream = _stream(runs, run, start, request)
    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    return StreamingResponse(stream, media_type="text/event-stream", headers=headers)


async def _stream(runs: RunManager, run: Run, start: int, request: Request) -> AsyncIterator[str]:
    from starlette.concurrency import run_in_threadpool

    channel = runs.channel(run.id)
    if channel is not None:
        async for event in channel.stream(start):
            if await request.is_disconnected():
                return
            yield ": keep-alive\n\n" if event is None else _sse(start, event)
            start += event is not None
        return
    events = await run_in_threadpool(runs.replay_from_graph, run)
    for i, event in enumerate(events[start:], start):
        yield _sse(i, event)


# What a run folder (agent/report.py write_artifacts) holds that the page links to; nothing else is served.
ARTEFACTS = {
    "report.md": "text/markdown; charset=utf-8",
    "best.c": "text/plain; charset=utf-8",
    "speedup.png": "image/png",
    "run.json": "application/json",
}
_CANDIDATE = re.compile(r"candidates/[0-9]{3,6}\.c")
ARTEFACT_MAX_BYTES = 8 * 2**20


@router.get("/runs/{run_id}/artefacts", response_model=ArtefactList, responses=_NOT_FOUND)
def list_artefacts(_: ReaderKey, runs: RunsDep, state: StateDep, run_id: RunId) -> ArtefactList:
    """The files of the run's folder the page links to (report.md, best.c, speedup.png, run.json: those that
    exist) and how many candidate files it keeps; an unknown run is 404."""
    folder = _run_folder(state.settings.home, runs.get_run(run_id).id)
    items = []
    for name in ARTEFACTS:
        path = folder / name
        if path.is_file() and not path.is_symlink():
            items.append(Artefact(name=name, bytes=path.stat().st_size, url=f"/runs/{run_id}/artefacts/{name}"))
    candidates = folder / "candidates"
    count = (
        sum(1 for p in candidates.iterdir() if _CANDIDATE.fullmatch(f"candidates/{p.name}"))
        if candidates.is_dir()
        else 0
    )
    return ArtefactList(run_id=run_id, items=items, candidates=count)


@router.get(
    "/runs/{run_id}/artefacts/{name:path}",
    response_class=FileResponse,
    responses={**_NOT_FOUND, 200: {"description": "the file, with its media type"}},
)
def get_artefact(_: ReaderKey, runs: RunsDep, state: StateDep, run_id: RunId, name: str) -> FileResponse:
    """One file of the run's folder, read-only: `name` is report.md, best.c, speedup.png, run.json or
    candidates/NNN.c and nothing else (403 for any other name, so no path leaves the folder); at most 8 MiB."""
    if name not in ARTEFACTS and not _CANDIDATE.fullmatch(name):
        raise Forbidden(
            f"{name!r} is not a run artefact this API serves",
            "ask for report.md, best.c, speedup.png, run.json or candidates/NNN.c",
        )
    folder = _run_folder(state.settings.home, runs.get_run(run_id).id)
    path = folder / name
    # The names above cannot climb out; a symlink planted in the folder could: refuse anything that resolves
    # outside the run's own folder.
    if not path.is_file() or not path.resolve().is_relative_to(folder.resolve()):
        raise NotFound(f"run {run_id!r} has no {name}", f"list what it has with GET /runs/{run_id}/artefacts")
    if path.stat().st_size > ARTEFACT_MAX_BYTES:
        raise Forbidden(f"{name} of run {run_id!r} is larger than 8 MiB", "read it on the server's disk")
    media = ARTEFACTS.get(name, "text/plain; charset=utf-8")
    return FileResponse(
        path, media_type=media, headers={"X-Content-Type-Options": "nosniff", "Cache-Control": "no-cache"}
    )


def _run_folder(home: FilePath, run_id: str) -> FilePath:
    """settings.home/runs/RUN (agent/optimizer.py writes it); a run id with a path separator has none."""
    if "/" in run_id or "\\" in run_id or run_id in (".", ".."):
        raise NotFound(f"run {run_id!r} has no folder", "list runs with GET /runs")
    return home / "runs" / run_id


def _settings(run: Run) -> dict[str, Any]:
    try:
        out = json.loads(run.settings or "{}")
    except ValueError:
        return {}
    return out if isinstance(out, dict) else {}


def _sse(index: int, event: ProgressEvent) -> str:
    data = json.dumps(event.model_dump(mode="json"), separators=(",", ":"))
    return f"id: {index}\nevent: {event.kind}\ndata: {data}\n\n"


def _accepted(run: Run) -> RunAccepted:
    return RunAccepted(id=run.id, status=run.status, url=f"/runs/{run.id}", events_url=f"/runs/{run.id}/events")


def _detail(runs: RunManager, run: Run, with_outcome: bool) -> RunDetail:
    data = run.model_dump(mode="json", exclude={"settings", "llm_tokens", "lease_until"})
    data["runner"] = _settings(run).get("runner")
    best, lineage, history = None, [], []
    if with_outcome:
        history = runs.history(run)
        best_exp, lineage = runs.best_and_lineage(run)
        if best_exp is not None:
            best = RunBest(
                experience_id=best_exp.id,
                speedup=best_exp.speedup,
                competent_speedup=best_exp.competent_speedup,
                speedup_over_library=best_exp.speedup_over_library,
                library_label=best_exp.library_label,
                status=str(best_exp.status),
                summary=best_exp.summary,
            )
    lineage = views.link_lineage_commits(runs.store, to_json(lineage))
    return RunDetail(**data, active=runs.is_active(run.id), history=history, best=best, lineage=lineage)
