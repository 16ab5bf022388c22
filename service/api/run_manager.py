"""Agent runs as a service: a bounded worker pool, per-run event channels, cancel, restart recovery.

The agent's Optimizer owns the run's state in the graph; this module schedules its `execute` calls, fans
its progress events out to any number of server-sent-event listeners (replaying past events first), and
makes sure no run is silently lost when the service stops or restarts: unfinished runs are resumed at
startup or marked interrupted.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Protocol

from agent.lease import LeaseHeld, dead_on_this_host
from agent.types import ProgressEvent, RunOutcome, RunRequest
from core.errors import EokError, NotFound
from knowledge.models import Experience, Run, RunStatus
from knowledge.store import GraphStore
from service.api.errors import Conflict, TooBusy

log = logging.getLogger("eok.api.runs")

TERMINAL_EVENTS = {"finished", "failed", "cancelled"}
EVALUATION_EVENTS = {"evaluation", "improved"}  # one per evaluated candidate; "improved" when it beat the best
FINISHED = {RunStatus.DONE, RunStatus.FAILED, RunStatus.CANCELLED}
KEEP_FINISHED_CHANNELS = 200  # finished runs whose events stay in memory; older ones replay from the graph
QUEUE_PER_WORKER = 8  # runs that may wait per worker before POST /runs answers 429


class RunExecutor(Protocol):
    """What the service needs from agent.optimizer.Optimizer."""

    def create_run(self, req: RunRequest) -> Run: ...

    def execute(
        self,
        run_id: str,
        on_event: Callable[[ProgressEvent], None] | None = None,
        cancel: threading.Event | None = None,
    ) -> RunOutcome: ...

    def unfinished_runs(self) -> list[Run]: ...

    def get_run(self, run_id: str) -> Run: ...

    def outcome(self, run_id: str) -> RunOutcome: ...


class RunChannel:
    """Events of one run, kept in order; listeners in any event loop are woken as events arrive."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.events: list[ProgressEvent] = []
        self.done = False
        self.cancel = threading.Event()
        self.stopping_service = False  # cancelled because the service stops: the run becomes interrupted
        self.user_cancelled = False  # cancelled by DELETE /runs/{id}: stays cancelled even during a shutdown
        self._lock = threading.Lock()
        self._waiters: set[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = set()

    def publish(self, event: ProgressEvent) -> None:
        with self._lock:
            if self.done:
                return
            self.events.append(event)
            if event.kind in TERMINAL_EVENTS:
                self.done = True
            self._wake()

    def close(self) -> None:
        with self._lock:
            self.done = True
            self._wake()

    def _wake(self) -> None:
        for loop, waiter in list(self._waiters):
            loop.call_soon_threadsafe(waiter.set)

    def history(self) -> list[float | None]:
        return [e.best_speedup for e in self.events if e.kind in EVALUATION_EVENTS]

    async def stream(self, start: int = 0, heartbeat_s: float = 15.0) -> AsyncIterator[ProgressEvent | None]:
        """Past events from `start`, then live ones until the run ends; None means "send a keep-alive"."""
        loop = asyncio.get_running_loop()
        index = start
        while True:
            waiter = asyncio.Event()
            entry = (loop, waiter)
            with self._lock:
                self._waiters.add(entry)  # registered before the snapshot: no event can slip between
                new, done = self.events[index:], self.done
            try:
                for event in new:
                    yield event
                index += len(new)
                if done:
                    return
                try:
                    await asyncio.wait_for(waiter.wait(), heartbeat_s)
                except TimeoutError:
                    yield None
            finally:
                with self._lock:
                    self._waiters.discard(entry)


class RunManager:
    def __init__(self, optimizer: RunExecutor | None, store: GraphStore, workers: int) -> None:
        self.optimizer = optimizer
        self.store = store
        self.workers = max(1, workers)
        self._pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="eok-run")
        self._channels: OrderedDict[str, RunChannel] = OrderedDict()
        self._futures: dict[str, Future[None]] = {}
        self._lock = threading.Lock()
        self._stopping = False

    # -- the agent --------------------------------------------------------------------------------------

    @property
    def available(self) -> bool:
        return self.optimizer is not None

    def _agent(self) -> RunExecutor:
        if self.optimizer is None:
            from core.errors import Unavailable

            raise Unavailable(
                "the agent is not installed in this service, so runs cannot start",
                "install EoK with its agent package (agent/optimizer.py) and restart `eok serve`",
            )
        return self.optimizer

    # -- start, cancel, resume --------------------------------------------------------------------------

    def submit(self, req: RunRequest, by: str | None = None) -> Run:
        agent = self._agent()
        self._check_capacity()
        run = agent.create_run(req)  # validates task and target, stores the run as queued
        self._audit(run.id, "started_by", by)
        self._schedule(run.id)
        return run

    def resume(self, run_id: str, by: str | None = None) -> Run:
        run = self.get_run(run_id)
        if self.is_active(run_id):
            raise Conflict(f"run {run_id} is already executing in this service")
        if run.status in FINISHED:
            raise Conflict(f"run {run_id} has finished ({run.status}); only unfinished runs resume")
        owner = self._live_owner(run_id)
        if owner is not None:
            raise Conflict(f"run {run_id} is being executed by another process ({owner})", "wait for it to finish")
        self._check_capacity()
        self._audit(run_id, "resumed_by", by)
        self._schedule(run_id, resumed=True)
        return run

    def cancel(self, run_id: str, by: str | None = None) -> Run:
        run = self.get_run(run_id)
        with self._lock:
            channel = self._channels.get(run_id)
            future = self._futures.get(run_id)
        if channel is not None and not channel.done:
            self._audit(run_id, "cancelled_by", by)
            channel.user_cancelled = True
            channel.cancel.set()  # a run executing stops after its current evaluation
            if future is not None and future.cancel():  # still queued: it never starts, cancelled now
                self._finish_unstarted(channel)
            return self.get_run(run_id)
        if run.status in FINISHED:
            raise Conflict(f"run {run_id} has already finished ({run.status})", "nothing to cancel")
        owner = self._live_owner(run_id)
        if owner is not None:
            raise Conflict(
                f"run {run_id} is being executed by another process ({owner}); cancel it there",
                "stop that process (Ctrl-C or SIGTERM); its run is then resumable here",
            )
        # Queued or interrupted with no worker on it (e.g. left by an earlier process): cancel in the graph.
        self._audit(run_id, "cancelled_by", by)
        self._set_status(run_id, RunStatus.CANCELLED, "cancelled while not executing")
        return self.get_run(run_id)

    def _audit(self, run_id: str, field: str, key_id: str | None) -> None:
        """Who did it: the key id (a hash prefix, never the key) on the Run node."""
        if key_id is not None:
            self.store.write(f"MATCH (r:Run {{id: $id}}) SET r.{field} = $k", id=run_id, k=key_id)

    def _live_owner(self, run_id: str) -> str | None:
        """The process holding an unexpired lease on the run, if any (agent/lease.py). An owner that ran on
        this machine and whose process is gone holds nothing: its run is taken over at once (kill -9, then
        resume), as RunLease.take does, rather than after its lease runs out."""
        rows = self.store.read(
            "MATCH (r:Run {id: $id}) WHERE r.lease_until >= datetime() RETURN r.lease_owner AS o", id=run_id
        )
        owner = rows[0]["o"] if rows else None
        return None if owner is None or dead_on_this_host(owner) else owner

    def _check_capacity(self) -> None:
        with self._lock:
            pending = sum(1 for c in self._channels.values() if not c.done)
        if self._stopping:
            raise TooBusy("the service is shutting down", "retry once it is back")
        if pending >= self.workers * (1 + QUEUE_PER_WORKER):
            raise TooBusy(
                f"{pending} runs are already executing or queued ({self.workers} workers)",
                "wait for some to finish, or cancel one with DELETE /runs/{id}",
            )

    def _schedule(self, run_id: str, resumed: bool = False) -> None:
        channel = RunChannel(run_id)
        if resumed:  # the events so far, so history and SSE ids continue instead of restarting at 0
            channel.events = [e for e in self.replay_from_graph(self.get_run(run_id)) if e.kind not in TERMINAL_EVENTS]
            self._set_status(run_id, RunStatus.QUEUED, None, clear_error=True)
        with self._lock:
            self._channels[run_id] = channel
            self._channels.move_to_end(run_id)
            self._trim()
            self._futures[run_id] = self._pool.submit(self._execute, channel)

    def _trim(self) -> None:
        finished = [rid for rid, c in self._channels.items() if c.done]
        for rid in finished[: max(0, len(finished) - KEEP_FINISHED_CHANNELS)]:
            del self._channels[rid]
            self._futures.pop(rid, None)

    def _execute(self, channel: RunChannel) -> None:
        run_id = channel.run_id
        if channel.cancel.is_set():
            self._finish_unstarted(channel)
            return

        def on_event(event: ProgressEvent) -> None:
            if channel.stopping_service and not channel.user_cancelled and event.kind == "cancelled":
                return  # not a user's cancel: reported as interrupted below
            channel.publish(event)

        try:
            self._agent().execute(run_id, on_event=on_event, cancel=channel.cancel)
        except LeaseHeld as e:  # another process executes it: not ours to fail or interrupt
            log.warning("run %s: %s", run_id, e)
            channel.publish(ProgressEvent(run_id=run_id, kind="failed", status="owned_elsewhere", message=str(e)))
            channel.stopping_service = False
        except EokError as e:
            log.warning("run %s failed: %s", run_id, e)
            self._fail(channel, str(e))
        except Exception as e:  # the worker must survive any agent bug; the traceback goes to the log
            log.exception("run %s crashed", run_id)
            self._fail(channel, f"the agent crashed: {type(e).__name__}: {e}")
        finally:
            if channel.stopping_service and not channel.user_cancelled:
                self._interrupt(channel)
            channel.close()

    def _finish_unstarted(self, channel: RunChannel) -> None:
        if channel.stopping_service and not channel.user_cancelled:
            self._interrupt(channel)
        else:
            self._set_status(channel.run_id, RunStatus.CANCELLED, "cancelled before it started")
            channel.publish(
                ProgressEvent(run_id=channel.run_id, kind="cancelled", message="cancelled before it started")
            )
        channel.close()

    def _fail(self, channel: RunChannel, message: str) -> None:
        try:
            status = self.get_run(channel.run_id).status
        except EokError:
            status = None
        if status not in FINISHED:
            self._set_status(channel.run_id, RunStatus.FAILED, message[:2000])
        channel.publish(ProgressEvent(run_id=channel.run_id, kind="failed", status="failed", message=message[:2000]))

    def _interrupt(self, channel: RunChannel) -> None:
        message = (
            "the service stopped while the run was going; it resumes at the next start (or POST /runs/{id}/resume)"
        )
        # The agent recorded our stop request as "cancelled"; a run it finished or failed stays as it is.
        self._set_status(channel.run_id, RunStatus.INTERRUPTED, message, unless=("done", "failed"))
        channel.publish(ProgressEvent(run_id=channel.run_id, kind="failed", status="interrupted", message=message))

    def _set_status(
        self,
        run_id: str,
        status: RunStatus,
        error: str | None,
        unless: tuple[str, ...] = (),
        clear_error: bool = False,
    ) -> None:
        self.store.write(
            "MATCH (r:Run {id: $id}) WHERE NOT r.status IN $unless "
            "SET r.status = $status, r.error = CASE WHEN $clear THEN null ELSE coalesce($error, r.error) END, "
            "r.finished_at = CASE WHEN $status IN ['done', 'failed', 'cancelled'] THEN datetime() END",
            id=run_id,
            status=str(status),
            error=error,
            unless=list(unless),
            clear=clear_error,
        )

    # -- startup and shutdown ---------------------------------------------------------------------------

    def recover(self, resume: bool) -> dict[str, list[str]]:
        """Unfinished runs left by an earlier process: resume them, or mark them interrupted."""
        found: list[Run] = []
        if self.optimizer is not None:
            found = list(self.optimizer.unfinished_runs())
        known = {r.id for r in found}
        for row in self.store.read(
            "MATCH (r:Run) WHERE r.status IN ['queued', 'running', 'interrupted'] RETURN r.id AS id"
        ):
            if row["id"] not in known:
                found.append(self.get_run(row["id"]))
        report: dict[str, list[str]] = {"resumed": [], "interrupted": [], "owned_elsewhere": []}
        for run in found:
            if self._live_owner(run.id) is not None:  # a live `eok optimize` (or another service) has it
                report["owned_elsewhere"].append(run.id)
            elif resume and self.optimizer is not None:
                self._schedule(run.id, resumed=True)
                report["resumed"].append(run.id)
            elif run.status != RunStatus.INTERRUPTED:
                why = "the service restarted before the run finished; POST /runs/{id}/resume continues it"
                self._set_status(run.id, RunStatus.INTERRUPTED, why)
                report["interrupted"].append(run.id)
        if found:
            log.info("unfinished runs at startup: %s", report)
        return report

    def begin_shutdown(self) -> None:
        """Stop accepting runs and ask running ones to stop (returns at once). Each then checkpoints after
        its current evaluation, is recorded as interrupted (resumable) and ends its event stream, so SSE
        listeners get a terminal event and disconnect before the server waits for open connections."""
        self._stopping = True
        with self._lock:
            channels = [c for c in self._channels.values() if not c.done]
        for channel in channels:
            channel.stopping_service = True
            channel.cancel.set()

    def shutdown(self) -> None:
        """begin_shutdown, then wait for the workers to finish their current evaluations."""
        self.begin_shutdown()
        self._pool.shutdown(wait=True, cancel_futures=False)

    # -- reading ----------------------------------------------------------------------------------------

    def get_run(self, run_id: str) -> Run:
        if self.optimizer is not None:
            return self.optimizer.get_run(run_id)
        run = self.store.get_node(Run, run_id)
        if run is None:
            raise NotFound(f"no run with id {run_id!r}", "list runs with GET /runs")
        return run

    def is_active(self, run_id: str) -> bool:
        with self._lock:
            channel = self._channels.get(run_id)
        return channel is not None and not channel.done

    def active_count(self) -> int:
        with self._lock:
            return sum(1 for c in self._channels.values() if not c.done)

    def channel(self, run_id: str) -> RunChannel | None:
        with self._lock:
            return self._channels.get(run_id)

    def best_and_lineage(self, run: Run) -> tuple[Experience | None, list[dict[str, Any]]]:
        """The best kernel and the chain that led to it, read from the graph (no side effects)."""
        if not run.best_experience_id:
            return None, []
        best = self.store.get_node(Experience, run.best_experience_id)
        if best is None:
            return None, []
        from agent.report import lineage

        return best, lineage(self.store, best.id)

    def history(self, run: Run) -> list[float | None]:
        """Best speedup after each evaluation: from the live channel, else from the graph."""
        channel = self.channel(run.id)
        if channel is not None:
            return channel.history()
        return [e.best_speedup for e in self.replay_from_graph(run) if e.kind in EVALUATION_EVENTS]

    def replay_from_graph(self, run: Run) -> list[ProgressEvent]:
        """Events rebuilt from what the graph holds, for a run no channel remembers."""
        rows = self.store.read(
            "MATCH (x:Experience)-[:IN_RUN]->(:Run {id: $id}) "
            "RETURN x.id AS id, x.status AS status, x.speedup AS speedup, x.competent_speedup AS competent, "
            "x.direction AS direction "
            "ORDER BY x.step, x.created_at",
            id=run.id,
        )
        events = [ProgressEvent(run_id=run.id, kind="started", budget=run.budget, message="replayed from the graph")]
        best: float | None = None
        best_competent: float | None = None  # the competent speedup of the best (by plain speedup) kernel
        for n, r in enumerate(rows, 1):
            improved = r["status"] == "ok" and r["speedup"] is not None and r["speedup"] > (best or 0)
            if improved:
                best, best_competent = r["speedup"], r["competent"]
            events.append(
                ProgressEvent(
                    run_id=run.id,
                    kind="improved" if improved else "evaluation",
                    direction=r["direction"],
                    evaluations=n,
                    budget=run.budget,
                    best_speedup=best,
                    best_competent_speedup=best_competent,
                    status=r["status"],
                    speedup=r["speedup"],
                    competent_speedup=r["competent"],
                    experience_id=r["id"],
                )
            )
        terminal = _terminal_event(run, len(rows), best)
        if terminal is not None:
            events.append(terminal)
        return events


def _terminal_event(run: Run, evaluations: int, best: float | None) -> ProgressEvent | None:
    common = {
        "run_id": run.id,
        "evaluations": evaluations,
        "budget": run.budget,
        "best_speedup": run.best_speedup or best,
        "best_competent_speedup": run.best_competent_speedup,
    }
    if run.status == RunStatus.DONE:
        return ProgressEvent(kind="finished", status="done", **common)
    if run.status == RunStatus.CANCELLED:
        return ProgressEvent(kind="cancelled", status="cancelled", message=run.error or "", **common)
    if run.status in (RunStatus.FAILED, RunStatus.INTERRUPTED):
        return ProgressEvent(kind="failed", status=str(run.status), message=run.error or "", **common)
    return None
