"""Bootstraps (the suite-wide first pass) as a service: start (operator), watch (SSE), inspect, resume.

One bootstrap executes at a time per service process, on the service's executor (a Ray cluster when
EOK_RAY_ADDRESS is set, this process otherwise). Its progress events are kept in memory for the SSE
stream; its state lives in the graph, so a bootstrap interrupted by a restart resumes with POST .../resume.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Header, Path, Query, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool

from agent.bootstrap import BootstrapEvent, Bootstrapper, BootstrapRequest, PairRow, Yardsticks
from knowledge.models import RunStatus
from service.api import views
from service.api.deps import OperatorKey, ReaderKey, StoreDep, get_state
from service.api.errors import Conflict
from service.api.schemas import ErrorResponse

router = APIRouter(tags=["bootstraps"], responses={401: {"model": ErrorResponse}, 403: {"model": ErrorResponse}})
BootstrapId = Annotated[str, Path(min_length=1, max_length=200)]
TERMINAL = {"finished", "interrupted"}


class BootstrapAccepted(BaseModel):
    id: str
    status: RunStatus
    url: str
    events_url: str


class BootstrapDetail(BaseModel):
    id: str
    status: RunStatus
    tasks: list[str]
    targets: list[str]
    budget: int
    executor: str = Field(description="where its evaluations run now (the latest execution)")
    executors: list[str] = Field(description="where each execution ran: the first, then each resume")
    active: bool
    rows: list[PairRow]
    yardsticks: Yardsticks = Field(
        description="medians over the competent baseline and, where a library was configured, over the library"
    )


class BootstrapSummary(BaseModel):
    id: str
    status: RunStatus
    created_at: datetime = Field(description="when it was planned")
    updated_at: datetime = Field(description="the latest time it or one of its runs started or ended")
    tasks: int = Field(description="tasks in its plan")
    targets: int = Field(description="targets in its plan")
    runs_total: int = Field(description="its runs: one per (task, target)")
    runs_done: int = Field(description="its runs that are done")
    executor: str = Field(description="where its evaluations run now (the latest execution)")
    executors: list[str] = Field(description="where each execution ran: the first, then each resume")
    active: bool = Field(description="executing in this service now")
    url: str


class BootstrapPage(BaseModel):
    items: list[BootstrapSummary]
    next_cursor: str | None = Field(None, description="pass as `cursor` for the next page; null at the end")


class _Channel:
    """The events of one bootstrap, in order, with waiters woken from the worker thread."""

    def __init__(self) -> None:
        self.events: list[BootstrapEvent] = []
        self.done = False
        self.cancel = threading.Event()
        self.lock = threading.Lock()
        self.waiters: set[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = set()

    def publish(self, event: BootstrapEvent) -> None:
        with self.lock:
            self.events.append(event)
            self.done = self.done or event.kind in TERMINAL
            for loop, waiter in list(self.waiters):
                loop.call_soon_threadsafe(waiter.set)

    def close(self) -> None:
        with self.lock:
            self.done = True
            for loop, waiter in list(self.waiters):
                loop.call_soon_threadsafe(waiter.set)

    async def stream(self, start: int) -> AsyncIterator[tuple[int, BootstrapEvent] | None]:
        loop = asyncio.get_running_loop()
        index = start
        while True:
            waiter = asyncio.Event()
            entry = (loop, waiter)
            with self.lock:
                self.waiters.add(entry)
                new, done = self.events[index:], self.done
            try:
                for event in new:
                    yield index, event
                    index += 1
                if done:
                    return
                try:
                    await asyncio.wait_for(waiter.wait(), 15.0)
                except TimeoutError:
                    yield None
            finally:
                with self.lock:
                    self.waiters.discard(entry)


class BootstrapService:
    """Runs bootstraps on a thread of the service, one at a time."""

    def __init__(self, bootstrapper: Bootstrapper) -> None:
        self.bootstrapper = bootstrapper
        self.channels: dict[str, _Channel] = {}
        self.active: str | None = None
        self.thread: threading.Thread | None = None
        self.lock = threading.Lock()

    def is_active(self, bootstrap_id: str) -> bool:
        """Executing here and not yet past its terminal event."""
        channel = self.channels.get(bootstrap_id)
        return self.active == bootstrap_id and channel is not None and not channel.done

    def start(self, req: BootstrapRequest) -> str:
        self._refuse_if_executing()
        boot = self.bootstrapper.plan(req)
        self._launch(boot.id)
        return boot.id

    def resume(self, bootstrap_id: str) -> str:
        boot = self.bootstrapper.get(bootstrap_id)
        if boot.status == RunStatus.DONE:
            raise Conflict(f"bootstrap {bootstrap_id} is done", "start a new one with POST /bootstraps")
        self._launch(boot.id)
        return boot.id

    def _refuse_if_executing(self) -> None:
        """Conflict while a bootstrap executes. One already past its terminal event is only tidying up (a
        listener may act on "finished" before the thread clears `active`), so it is waited for, not refused."""
        with self.lock:
            active, thread = self.active, self.thread
        if active and not self.is_active(active) and thread is not None:
            thread.join(30.0)
        with self.lock:
            if self.active:
                raise Conflict(f"bootstrap {self.active} is executing", "wait for it or watch its events")

    def _launch(self, bootstrap_id: str) -> None:
        self._refuse_if_executing()
        with self.lock:
            if self.active:
                raise Conflict(f"bootstrap {self.active} is executing", "wait for it or watch its events")
            self.active = bootstrap_id
            channel = self.channels[bootstrap_id] = _Channel()
            self.thread = threading.Thread(
                target=self._run, args=(bootstrap_id, channel), name="eok-bootstrap", daemon=True
            )
            self.thread.start()

    def shutdown(self, timeout_s: float = 60.0) -> None:
        """Stop the executing bootstrap (its runs stop after their current evaluation; resume goes on)."""
        with self.lock:
            active = self.active
            thread = self.thread
        if active and (channel := self.channels.get(active)) is not None:
            channel.cancel.set()
        if thread is not None:
            thread.join(timeout_s)

    def _run(self, bootstrap_id: str, channel: _Channel) -> None:
        try:
            self.bootstrapper.execute(bootstrap_id, on_event=channel.publish, cancel=channel.cancel)
        except Exception as e:  # the bootstrap's own state is in the graph; listeners get a terminal event
            channel.publish(BootstrapEvent(bootstrap_id=bootstrap_id, kind="interrupted", message=str(e)[:300]))
        finally:
            channel.close()
            with self.lock:
                self.active = None


_SERVICE_LOCK = threading.Lock()


def get_bootstraps(request: Request) -> BootstrapService:
    """The service's BootstrapService, built on first use from the composition root's parts."""
    with _SERVICE_LOCK:
        svc = getattr(request.app.state, "eok_bootstraps", None)
        if svc is None:
            from agent.optimizer import Optimizer
            from evaluator.executor import build_executor

            state = get_state(request)
            executor = build_executor(state.settings)
            svc = BootstrapService(Bootstrapper(Optimizer(state.container, executor=executor)))
            request.app.state.eok_bootstraps = svc
        return svc


def _detail(svc: BootstrapService, bootstrap_id: str) -> BootstrapDetail:
    # A read: the summary.json and plot the bootstrap wrote when it ended stay as they are (writing them
    # here redrew the plot on every GET and replaced the recorded seconds with 0).
    out = svc.bootstrapper.outcome(bootstrap_id, write=False)
    b = out.bootstrap
    return BootstrapDetail(
        id=b.id,
        status=b.status,
        tasks=json.loads(b.tasks),
        targets=json.loads(b.targets),
        budget=b.budget,
        executor=b.executor,
        executors=b.executors,
        active=svc.is_active(b.id),
        rows=out.rows,
        yardsticks=out.yardsticks,
    )


def _accepted(bootstrap_id: str) -> BootstrapAccepted:
    return BootstrapAccepted(
        id=bootstrap_id,
        status=RunStatus.RUNNING,
        url=f"/bootstraps/{bootstrap_id}",
        events_url=f"/bootstraps/{bootstrap_id}/events",
    )


_ERRORS: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorResponse},
    409: {"model": ErrorResponse},
    422: {"model": ErrorResponse},
    503: {"model": ErrorResponse},
}


@router.post("/bootstraps", status_code=202, response_model=BootstrapAccepted, responses=_ERRORS)
async def start_bootstrap(_: OperatorKey, request: Request, req: BootstrapRequest) -> BootstrapAccepted:
    """Plan one run per (task, target) pair and execute them all; progress at `events_url`."""
    svc = await run_in_threadpool(get_bootstraps, request)
    return _accepted(await run_in_threadpool(svc.start, req))


@router.post("/bootstraps/{bootstrap_id}/resume", status_code=202, response_model=BootstrapAccepted, responses=_ERRORS)
async def resume_bootstrap(_: OperatorKey, request: Request, bootstrap_id: BootstrapId) -> BootstrapAccepted:
    """Go on with the pairs not done yet (failed and interrupted runs keep their experiences)."""
    svc = await run_in_threadpool(get_bootstraps, request)
    return _accepted(await run_in_threadpool(svc.resume, bootstrap_id))


@router.get("/bootstraps", response_model=BootstrapPage, responses={422: {"model": ErrorResponse}})
def list_bootstraps(
    _: ReaderKey,
    request: Request,
    store: StoreDep,
    limit: Annotated[int, Query(ge=1, le=200)] = 20,
    cursor: Annotated[str | None, Query(max_length=1000, description="next_cursor of the previous page")] = None,
) -> BootstrapPage:
    """Bootstraps, newest first, each with its runs counted and its own URL; paged with `next_cursor`."""
    page = views.bootstraps_page(store, limit, cursor or None)
    svc: BootstrapService | None = getattr(request.app.state, "eok_bootstraps", None)  # none executed here yet
    for item in page["items"]:
        item["active"] = svc is not None and svc.is_active(item["id"])
    return BootstrapPage.model_validate(page)


@router.get("/bootstraps/{bootstrap_id}", response_model=BootstrapDetail, responses={404: {"model": ErrorResponse}})
async def get_bootstrap(_: ReaderKey, request: Request, bootstrap_id: BootstrapId) -> BootstrapDetail:
    """Status and one row per (task, target): run, evaluations, best speedup."""
    svc = await run_in_threadpool(get_bootstraps, request)
    return await run_in_threadpool(_detail, svc, bootstrap_id)


@router.get(
    "/bootstraps/{bootstrap_id}/events",
    response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {}}, "description": "BootstrapEvent stream"}, 404: {}},
)
async def bootstrap_events(
    _: ReaderKey,
    request: Request,
    bootstrap_id: BootstrapId,
    last_event_id: Annotated[str | None, Header(max_length=20)] = None,
) -> StreamingResponse:
    """Server-sent events of this service's execution of the bootstrap (a summary event otherwise)."""
    svc = await run_in_threadpool(get_bootstraps, request)
    detail = await run_in_threadpool(_detail, svc, bootstrap_id)  # 404 before the stream starts
    start = int(last_event_id) + 1 if last_event_id and last_event_id.isdigit() else 0
    channel = svc.channels.get(bootstrap_id)

    async def stream() -> AsyncIterator[str]:
        if channel is None:
            done = sum(1 for r in detail.rows if r.status == RunStatus.DONE)
            event = BootstrapEvent(
                bootstrap_id=bootstrap_id,
                kind="finished" if detail.status == RunStatus.DONE else "interrupted",
                runs_done=done,
                runs_total=len(detail.rows),
                message=f"status {detail.status} (not executing in this service)",
            )
            yield _sse(0, event)
            return
        async for item in channel.stream(start):
            if await request.is_disconnected():
                return
            yield ": keep-alive\n\n" if item is None else _sse(*item)

    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    return StreamingResponse(stream(), media_type="text/event-stream", headers=headers)


def _sse(index: int, event: BootstrapEvent) -> str:
    data = json.dumps(event.model_dump(mode="json"), separators=(",", ":"))
    return f"id: {index}\nevent: {event.kind}\ndata: {data}\n\n"
