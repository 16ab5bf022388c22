"""A run's owner: a lease on its Run node so that no two processes ever execute the same run.

The lease (Run.lease_owner, Run.lease_until) is taken and renewed in one write transaction that first
locks the node, with the database's clock, so two processes on two machines agree on expiry. The owner
renews it every ttl/3 while the run executes; a process that cannot renew (it lost the lease, the graph
is gone) stops the run. A crashed owner's lease expires after ttl, and only then may another take over,
unless the owner ran on this machine and its process is gone (kill -9 then resume: taken over at once).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import psutil

from core.errors import EokError, Unavailable
from knowledge.store import GraphStore

log = logging.getLogger(__name__)

LEASE_TTL_S = 30.0
PROCESS_OWNER = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"

# Setting a property first takes the node's write lock, so the check below sees the latest committed lease.
_TAKE = """
MATCH (r:Run {id: $id})
SET r.lease_lock = true
WITH r, (r.lease_owner IS NULL OR r.lease_owner = $owner OR r.lease_until IS NULL
         OR r.lease_until < datetime()) AS free
SET r.lease_owner = CASE WHEN free THEN $owner ELSE r.lease_owner END,
    r.lease_until = CASE WHEN free THEN datetime() + duration({milliseconds: $ttl_ms}) ELSE r.lease_until END
REMOVE r.lease_lock
RETURN free
"""
# Take over the lease of an owner known to be dead, only if that owner still holds it (compare and set).
_TAKE_OVER = """
MATCH (r:Run {id: $id})
SET r.lease_lock = true
WITH r, r.lease_owner = $dead AS same
SET r.lease_owner = CASE WHEN same THEN $owner ELSE r.lease_owner END,
    r.lease_until = CASE WHEN same THEN datetime() + duration({milliseconds: $ttl_ms}) ELSE r.lease_until END
REMOVE r.lease_lock
RETURN same AS free
"""
_RELEASE = "MATCH (r:Run {id: $id}) WHERE r.lease_owner = $owner REMOVE r.lease_owner, r.lease_until"


class LeaseHeld(EokError):
    http_status = 409
    code = "run_owned"


def dead_on_this_host(owner: str) -> bool:
    """The owner (host:pid:nonce) ran on this machine and its process is gone. A reused pid looks alive:
    then the lease is simply waited out."""
    host, _, rest = owner.partition(":")
    pid = rest.partition(":")[0]
    return host == socket.gethostname() and pid.isdigit() and not psutil.pid_exists(int(pid))


class RunLease:
    def __init__(self, store: GraphStore, run_id: str, owner: str = PROCESS_OWNER, ttl_s: float = LEASE_TTL_S):
        self.store = store
        self.run_id = run_id
        self.owner = owner
        self.ttl_s = ttl_s
        self.lost = False
        self.graph_gone: Unavailable | None = None  # set when a renewal found the graph refusing connections

    def take(self) -> bool:
        """Take or renew the lease; False when another live owner holds an unexpired one."""
        ttl_ms = int(self.ttl_s * 1000)
        rows = self.store.write(_TAKE, id=self.run_id, owner=self.owner, ttl_ms=ttl_ms)
        if rows and rows[0]["free"]:
            return True
        holder, _ = self.holder()
        if holder and dead_on_this_host(holder):
            # kill -9 of an owner on this machine: no need to wait out its lease (the resume a user runs next)
            rows = self.store.write(_TAKE_OVER, id=self.run_id, owner=self.owner, dead=holder, ttl_ms=ttl_ms)
            return bool(rows and rows[0]["free"])
        return False

    def holder(self) -> tuple[str | None, object]:
        rows = self.store.read("MATCH (r:Run {id: $id}) RETURN r.lease_owner AS o, r.lease_until AS u", id=self.run_id)
        return (rows[0]["o"], rows[0]["u"]) if rows else (None, None)

    def release(self) -> None:
        self.store.write(_RELEASE, id=self.run_id, owner=self.owner)

    @contextmanager
    def held(self, stop: threading.Event) -> Iterator[RunLease]:
        """Hold the lease while the body runs; renewals failing set `stop` so the run ends early."""
        if not self.take():
            owner, until = self.holder()
            raise LeaseHeld(
                f"run {self.run_id} is being executed by another process ({owner}, lease until {until})",
                f"wait for it to finish, or for its lease to expire ({self.ttl_s:.0f} s after it stops renewing)",
            )
        done = threading.Event()
        beat = threading.Thread(target=self._heartbeat, args=(done, stop), name=f"lease-{self.run_id}", daemon=True)
        beat.start()
        try:
            yield self
        finally:
            done.set()
            beat.join(timeout=5.0)
            # With the graph gone a release would wait out the driver's retries; the lease expires instead.
            if not self.graph_gone:
                try:
                    self.release()
                except Exception as e:  # the lease then simply expires
                    log.warning("run %s: could not release its lease: %s", self.run_id, e)

    def _heartbeat(self, done: threading.Event, stop: threading.Event) -> None:
        renewed_at = time.monotonic()
        while not done.wait(self.ttl_s / 3):
            try:
                lost = not self.take()
                renewed_at = time.monotonic()
            except Unavailable as e:  # nobody answers: no result can be recorded, so stop now, not at expiry
                self.graph_gone = e
                log.warning("run %s: the graph is gone (%s); stopping", self.run_id, e.message)
                stop.set()
                return
            except Exception as e:  # the graph hiccuped: retry until the lease would have run out
                log.warning("run %s: lease renewal failed: %s", self.run_id, e)
                lost = time.monotonic() - renewed_at > self.ttl_s * 0.8
            if lost:
                self.lost = True
                log.warning("run %s: lost its lease; stopping after the current evaluation", self.run_id)
                stop.set()
                return
