"""Runs have owners: a lease on the Run node, taken by exactly one real process at a time."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
import uuid

import pytest

from agent.lease import LeaseHeld, RunLease
from core.settings import Settings
from knowledge.models import Run, RunStatus, Target, Task
from knowledge.store import GraphStore
from service.api.errors import Conflict
from service.api.run_manager import RunManager

HOLDER = textwrap.dedent(
    """
    import os, sys, threading, time
    from core.settings import Settings
    from knowledge.store import GraphStore
    from agent.lease import LeaseHeld, RunLease

    run_id, hold_s, ttl_s = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
    store = GraphStore.connect(Settings())
    print("ready", flush=True)
    sys.stdin.readline()  # both processes start together
    try:
        with RunLease(store, run_id, owner=f"proc-{os.getpid()}", ttl_s=ttl_s).held(threading.Event()):
            store.write("MERGE (p:LeaseProbe {run: $id}) SET p.executions = coalesce(p.executions, 0) + 1", id=run_id)
            print("executing", flush=True)
            time.sleep(hold_s)
        print("done", flush=True)
    except LeaseHeld as e:
        print("refused", e, flush=True)
    """
)


def new_run(store: GraphStore, status: RunStatus = RunStatus.QUEUED) -> str:
    run = Run(id=f"run-lease-{uuid.uuid4().hex[:8]}", task_id="sscal", target_key="k1-x60", budget=2, status=status)
    store.upsert_nodes([run, Task(id="sscal", name="sscal"), Target(key="k1-x60")])
    return run.id


def holder(settings: Settings, run_id: str, hold_s: float, ttl_s: float = 3.0) -> subprocess.Popen[str]:
    env = {**os.environ, "NEO4J_URI": settings.bolt_uri, "PYTHONPATH": os.getcwd()}
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, run_id, str(hold_s), str(ttl_s)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready", proc.stderr.read()
    return proc


def go(*procs: subprocess.Popen[str]) -> None:
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()


def test_two_processes_on_one_run_exactly_one_executes(neo4j_settings: Settings, store: GraphStore) -> None:
    run_id = new_run(store)
    a, b = holder(neo4j_settings, run_id, 2.0), holder(neo4j_settings, run_id, 2.0)
    go(a, b)
    outs = [p.communicate(timeout=120)[0] for p in (a, b)]
    assert sorted(o.split()[0] for o in outs) == ["executing", "refused"], outs
    assert store.read("MATCH (p:LeaseProbe {run: $id}) RETURN p.executions AS n", id=run_id)[0]["n"] == 1
    # The winner released its lease on the way out: the run is free again.
    assert RunLease(store, run_id, owner="next").take()


def test_a_crashed_owner_is_taken_over_only_after_expiry(neo4j_settings: Settings, store: GraphStore) -> None:
    run_id = new_run(store)
    proc = holder(neo4j_settings, run_id, 60.0, ttl_s=3.0)
    go(proc)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "executing"
    proc.kill()  # kill -9: no release, the lease must expire by itself
    proc.wait(timeout=30)
    mine = RunLease(store, run_id, owner="successor", ttl_s=3.0)
    assert not mine.take()  # still within the dead owner's ttl
    deadline = time.monotonic() + 15
    while not mine.take():
        assert time.monotonic() < deadline, "the dead owner's lease never expired"
        time.sleep(0.5)


def test_live_owner_keeps_the_run_from_resume_recover_and_execute(neo4j_settings: Settings, store: GraphStore) -> None:
    """A service restarting while `eok optimize` executes the run must leave it alone."""
    run_id = new_run(store, RunStatus.RUNNING)
    proc = holder(neo4j_settings, run_id, 30.0, ttl_s=3.0)
    go(proc)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "executing"
        manager = RunManager(optimizer=None, store=store, workers=1)
        report = manager.recover(resume=True)
        assert run_id in report["owned_elsewhere"] and run_id not in report["interrupted"]
        assert store.get_node(Run, run_id).status == RunStatus.RUNNING  # not marked interrupted
        with pytest.raises(LeaseHeld), RunLease(store, run_id, owner="service").held(threading.Event()):
            pass
        with pytest.raises(Conflict):
            manager.cancel(run_id, by="key-test")
        manager.shutdown()
    finally:
        proc.kill()
        proc.wait(timeout=30)


def test_a_killed_owner_on_this_machine_is_taken_over_at_once(store: GraphStore) -> None:
    """kill -9 of `eok optimize`, then `eok optimize --resume`: the dead owner ran here, no need to wait."""
    import socket

    run_id = new_run(store)
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(gone.stdout)
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        for pid, expected in ((live.pid, False), (dead_pid, True)):
            store.write(
                "MATCH (r:Run {id: $id}) SET r.lease_owner = $o, r.lease_until = datetime() + duration('PT60S')",
                id=run_id,
                o=f"{socket.gethostname()}:{pid}:abcd1234",
            )
            assert RunLease(store, run_id, owner="successor").take() is expected, pid
    finally:
        live.kill()
        live.wait()
