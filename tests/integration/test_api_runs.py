"""Run endpoints over real HTTP (uvicorn on 127.0.0.1): start, watch by SSE, cancel, pool bound, restarts.

The agent here is tests/integration/conftest.py's StandInOptimizer (it records synthetic experiences in
the real graph and evaluates nothing); what is under test is the service around it.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest

from knowledge.models import Run, RunStatus
from service.api.app import create_app
from service.bootstrap import Container
from tests.integration.conftest import OPERATOR, READER, SEED_RUN, StandInOptimizer, free_port, serve_in_thread


@contextmanager
def serve(container: Container, optimizer: StandInOptimizer | None, **options: Any) -> Iterator[httpx.Client]:
    app = create_app(container=container, optimizer_factory=lambda c: optimizer, warm=False, **options)
    port = free_port()
    server, thread = serve_in_thread(app, port)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as http:
            yield http
    finally:
        server.should_exit = True
        thread.join(timeout=60)
        assert not thread.is_alive(), "the server did not stop"


def sse(http: httpx.Client, run_id: str, headers: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Read the whole event stream of a run (it ends when the run ends)."""
    return read_events(http, f"/runs/{run_id}/events", headers)


def read_events(http: httpx.Client, url: str, headers: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Read a whole server-sent-event stream (it ends with the run or bootstrap it follows)."""
    events, current = [], {}
    with http.stream("GET", url, headers={**READER, **(headers or {})}) as r:
        assert r.status_code == 200, r.read()
        assert r.headers["content-type"].startswith("text/event-stream")
        for line in r.iter_lines():
            if line.startswith(":"):
                continue
            if not line:
                if current:
                    events.append(current)
                current = {}
                continue
            field, _, value = line.partition(": ")
            current[field] = json.loads(value) if field == "data" else value
    return events


def start(http: httpx.Client, **body: Any) -> str:
    r = http.post("/runs", json={"task": "sscal", "budget": 4, **body}, headers=OPERATOR)
    assert r.status_code == 202, r.text
    return r.json()["id"]


def wait_for(check: Callable[[], bool], timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


@pytest.fixture(scope="module")
def graph(api_graph: Container) -> Container:
    return api_graph


def test_start_watch_and_inspect_a_run(graph: Container) -> None:
    with serve(graph, StandInOptimizer(graph)) as http:
        r = http.post("/runs", json={"task": "sscal", "target": "k1-x60", "budget": 4, "seed": 7}, headers=OPERATOR)
        assert r.status_code == 202, r.text
        accepted = r.json()
        assert accepted["status"] == "queued" and accepted["events_url"] == f"/runs/{accepted['id']}/events"
        events = sse(http, accepted["id"])
        kinds = [e["event"] for e in events]
        assert kinds == ["started", "improved", "improved", "improved", "improved", "finished"]
        assert [int(e["id"]) for e in events] == list(range(6))
        assert [e["data"]["best_speedup"] for e in events[1:5]] == pytest.approx([1.0, 1.1, 1.2, 1.3])
        detail = http.get(f"/runs/{accepted['id']}", headers=READER).json()
        assert detail["status"] == "done" and detail["active"] is False
        assert detail["history"] == pytest.approx([1.0, 1.1, 1.2, 1.3])
        assert detail["best"]["speedup"] == pytest.approx(1.3)
        assert [row["experience"] for row in detail["lineage"]] == [detail["best"]["experience_id"]]
        # A late listener gets the whole story again, and Last-Event-ID skips what it has seen.
        assert [e["event"] for e in sse(http, accepted["id"])] == kinds
        tail = sse(http, accepted["id"], headers={"Last-Event-ID": "3"})
        assert [int(e["id"]) for e in tail] == [4, 5]
        listed = http.get("/runs", params={"status": "done"}, headers=READER).json()["items"]
        assert accepted["id"] in {r["id"] for r in listed}


def test_a_run_from_an_earlier_process_replays_from_the_graph(graph: Container) -> None:
    with serve(graph, StandInOptimizer(graph)) as http:
        events = sse(http, SEED_RUN)
        detail = http.get(f"/runs/{SEED_RUN}", headers=READER).json()
    assert [e["event"] for e in events] == ["started", "improved", "evaluation", "improved", "finished"]
    assert [e["data"]["experience_id"] for e in events[1:4]] == ["exp-1", "exp-2", "exp-3"]
    assert events[-1]["data"]["best_speedup"] == 1.8
    assert detail["history"] == [1.0, 1.0, 1.8]
    assert [row["experience"] for row in detail["lineage"]] == ["exp-1", "exp-3"]  # root first
    assert detail["best"] == {
        "experience_id": "exp-3",
        "speedup": 1.8,
        "competent_speedup": 1.2,  # the seeded best (exp-3) carries a competent speedup (tests/integration/conftest.py)
        "status": "ok",
        "summary": "LMUL=4 row sweep: 1.8x",
        "speedup_over_library": None,  # no library was configured for it
        "library_label": None,
    }


def test_cancel_stops_a_running_run(graph: Container) -> None:
    optimizer = StandInOptimizer(graph, step_s=0.3)
    with serve(graph, optimizer) as http:
        run_id = start(http, budget=50)
        wait_for(lambda: http.get(f"/runs/{run_id}", headers=READER).json()["evaluations"] >= 1)
        r = http.delete(f"/runs/{run_id}", headers=OPERATOR)
        assert r.status_code == 202 and "cancelling" in r.json()["message"]
        events = sse(http, run_id)
        assert events[-1]["event"] == "cancelled"
        detail = http.get(f"/runs/{run_id}", headers=READER).json()
        assert detail["status"] == "cancelled" and detail["evaluations"] < 50
        again = http.delete(f"/runs/{run_id}", headers=OPERATOR)
        assert again.status_code == 409 and again.json()["error"]["code"] == "conflict"


def test_bad_run_requests_are_clear(graph: Container) -> None:
    with serve(graph, StandInOptimizer(graph)) as http:
        r = http.post("/runs", json={"task": "no_such_task"}, headers=OPERATOR)
        assert r.status_code == 404 and "no_such_task" in r.json()["error"]["message"]
        r = http.post("/runs", json={"task": "sscal", "target": "k9"}, headers=OPERATOR)
        assert r.status_code == 404 and "'k9'" in r.json()["error"]["message"]
        r = http.post("/runs", json={"task": "sscal", "budget": 0}, headers=OPERATOR)
        assert r.status_code == 422 and "budget" in r.json()["error"]["message"]
        assert http.get("/runs/nope", headers=READER).status_code == 404
        assert http.get("/runs/nope/events", headers=READER).status_code == 404


def test_the_worker_pool_is_bounded(graph: Container) -> None:
    optimizer = StandInOptimizer(graph, step_s=0.1)
    with serve(graph, optimizer) as http:  # api_workers = 2 in the test settings
        ids = [start(http, budget=5) for _ in range(4)]
        time.sleep(0.3)
        statuses = [http.get(f"/runs/{i}", headers=READER).json()["status"] for i in ids]
        assert statuses.count("queued") >= 2  # two wait while two run
        for i in ids:
            assert sse(http, i)[-1]["event"] == "finished"
    assert optimizer.max_running == 2


def test_an_agent_crash_fails_the_run_without_leaking_details(graph: Container) -> None:
    with serve(graph, StandInOptimizer(graph, crash_after=1)) as http:
        run_id = start(http)
        events = sse(http, run_id)
        assert events[-1]["event"] == "failed"
        assert "RuntimeError" in events[-1]["data"]["message"]
        detail = http.get(f"/runs/{run_id}", headers=READER).json()
        assert detail["status"] == "failed" and "crashed" in detail["error"]
        assert http.get("/health").status_code == 200  # the service is fine


def test_without_the_agent_runs_answer_503(graph: Container) -> None:
    with serve(graph, None) as http:
        r = http.post("/runs", json={"task": "sscal"}, headers=OPERATOR)
        assert r.status_code == 503
        assert "agent" in r.json()["error"]["message"]
        assert http.get("/health").json()["agent"] is False


def _left_behind(graph: Container, status: RunStatus) -> str:
    """A run as a crashed process leaves it: stored, unfinished, nobody executing it."""
    run = Run(
        id=f"run-left-{status}-{time.monotonic_ns()}", task_id="sscal", target_key="k1-x60", budget=3, status=status
    )
    graph.store.upsert_nodes([run])
    return run.id


def test_restart_resumes_unfinished_runs(graph: Container) -> None:
    queued, running = _left_behind(graph, RunStatus.QUEUED), _left_behind(graph, RunStatus.RUNNING)
    optimizer = StandInOptimizer(graph)
    with serve(graph, optimizer, resume_runs=True) as http:
        for run_id in (queued, running):
            assert sse(http, run_id)[-1]["event"] == "finished"
            assert http.get(f"/runs/{run_id}", headers=READER).json()["status"] == "done"
    assert {queued, running} <= set(optimizer.executed)


def test_restart_without_resume_marks_interrupted_then_resume_on_request(graph: Container) -> None:
    running = _left_behind(graph, RunStatus.RUNNING)
    optimizer = StandInOptimizer(graph)
    with serve(graph, optimizer, resume_runs=False) as http:
        detail = http.get(f"/runs/{running}", headers=READER).json()
        assert detail["status"] == "interrupted" and "resume" in detail["error"]
        assert running not in optimizer.executed
        r = http.post(f"/runs/{running}/resume", headers=OPERATOR)
        assert r.status_code == 202, r.text
        assert sse(http, running)[-1]["event"] == "finished"
        assert http.post(f"/runs/{running}/resume", headers=OPERATOR).status_code == 409


def test_resume_takes_over_at_once_when_the_owner_process_is_gone(graph: Container) -> None:
    """kill -9 of the process executing a run on this machine, then POST /runs/{id}/resume: 202 at once, not
    409 until its 30 s lease expires. A live owner's lease is still respected (409)."""
    import socket
    import subprocess
    import sys

    dead_run, live_run = _left_behind(graph, RunStatus.INTERRUPTED), _left_behind(graph, RunStatus.INTERRUPTED)
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        for run_id, pid in ((dead_run, int(gone.stdout)), (live_run, live.pid)):
            graph.store.write(
                "MATCH (r:Run {id: $id}) SET r.lease_owner = $o, r.lease_until = datetime() + duration('PT60S')",
                id=run_id,
                o=f"{socket.gethostname()}:{pid}:abcd1234",
            )
        with serve(graph, StandInOptimizer(graph), resume_runs=False) as http:
            held = http.post(f"/runs/{live_run}/resume", headers=OPERATOR)
            assert held.status_code == 409 and str(live.pid) in held.json()["error"]["message"], held.text
            began = time.monotonic()
            r = http.post(f"/runs/{dead_run}/resume", headers=OPERATOR)
            assert r.status_code == 202, r.text
            assert sse(http, dead_run)[-1]["event"] == "finished"
            assert time.monotonic() - began < 20  # well inside the dead owner's 60 s lease
            assert http.get(f"/runs/{dead_run}", headers=READER).json()["status"] == "done"
    finally:
        live.kill()
        live.wait()


def test_stopping_the_service_interrupts_a_run_and_the_next_start_resumes_it(graph: Container) -> None:
    slow = StandInOptimizer(graph, step_s=0.3)
    with serve(graph, slow) as http:
        run_id = start(http, budget=8)
        wait_for(lambda: http.get(f"/runs/{run_id}", headers=READER).json()["evaluations"] >= 1)

        def listen() -> None:
            with contextlib.suppress(httpx.HTTPError):  # the server goes away mid-stream
                sse(http, run_id)

        reader = threading.Thread(target=listen)
        reader.start()
        time.sleep(0.2)
    reader.join(timeout=30)
    assert not reader.is_alive()  # an open event stream does not keep a stopping service alive
    stored = graph.store.get_node(Run, run_id)
    assert stored is not None and stored.status == RunStatus.INTERRUPTED  # not cancelled, not lost
    assert 1 <= stored.evaluations < 8
    with serve(graph, StandInOptimizer(graph)) as http:
        assert sse(http, run_id)[-1]["event"] == "finished"
        detail = http.get(f"/runs/{run_id}", headers=READER).json()
        assert detail["status"] == "done" and detail["evaluations"] == 8


def test_a_real_run_over_http(graph: Container) -> None:
    """The real Optimizer behind the endpoint: offline generator, clang-22 + qemu evaluation on the K1."""
    from knowledge.starter import starter_knowledge
    from service.api.app import default_optimizer

    graph.ingestor.ingest(*starter_knowledge())
    with serve(graph, default_optimizer(graph)) as http:
        run_id = start(http, budget=3, directions=1, generator="offline")
        events = sse(http, run_id)
        assert events[0]["event"] == "started" and events[-1]["event"] == "finished", events[-1]
        evaluated = [e for e in events if e["event"] in ("evaluation", "improved")]
        assert 1 <= len(evaluated) <= 3
        detail = http.get(f"/runs/{run_id}", headers=READER).json()
    assert detail["status"] == "done"
    assert len(detail["history"]) == detail["evaluations"] == len(evaluated)
    assert detail["best"] is not None, detail  # sscal always has a passing offline candidate
    assert detail["lineage"][-1]["experience"] == detail["best"]["experience_id"]  # root first, best last
    assert detail["best"]["speedup"] == pytest.approx(detail["best_speedup"])
    # sscal is an exact task: its competent baseline differs from -O3 only by -fno-math-errno
    assert detail["best"]["competent_speedup"] == pytest.approx(detail["best_competent_speedup"])
    assert detail["best_competent_speedup"] and detail["best_competent_speedup"] > 0
    # the live events carry it too (the page shows both): the finished event's best is the run's best
    assert events[-1]["data"]["best_competent_speedup"] == pytest.approx(detail["best_competent_speedup"])


def test_history_and_event_ids_continue_across_a_resume(graph: Container) -> None:
    slow = StandInOptimizer(graph, step_s=0.3)
    with serve(graph, slow) as http:
        run_id = start(http, budget=6)
        wait_for(lambda: http.get(f"/runs/{run_id}", headers=READER).json()["evaluations"] >= 2)
    interrupted = graph.store.get_node(Run, run_id)
    assert interrupted is not None and interrupted.status == RunStatus.INTERRUPTED and interrupted.error
    with serve(graph, StandInOptimizer(graph)) as http:
        events = sse(http, run_id)
        detail = http.get(f"/runs/{run_id}", headers=READER).json()
    assert [int(e["id"]) for e in events] == list(range(len(events)))  # one sequence, never restarting at 0
    evaluations = [e for e in events if e["event"] in ("evaluation", "improved")]
    assert len(evaluations) == 6 and events[-1]["event"] == "finished"  # before and after the resume
    assert detail["status"] == "done" and len(detail["history"]) == 6
    assert detail["error"] is None  # no stale "service stopped" message on a finished run


def test_cancelling_a_queued_run_is_immediate_and_audited(graph: Container) -> None:
    from service.api.security import key_id
    from tests.integration.conftest import OPERATOR_KEY

    slow = StandInOptimizer(graph, step_s=0.3)
    with serve(graph, slow) as http:  # 2 workers: two run, the third waits
        busy = [start(http, budget=40) for _ in range(2)]
        queued = start(http, budget=40)
        wait_for(lambda: slow.running == 2)
        began = time.monotonic()
        r = http.delete(f"/runs/{queued}", headers=OPERATOR)
        assert r.status_code == 202 and r.json()["status"] == "cancelled", r.text
        assert time.monotonic() - began < 5  # not after a worker frees up
        assert sse(http, queued)[-1]["event"] == "cancelled"
        detail = http.get(f"/runs/{queued}", headers=READER).json()
        assert detail["started_by"] == detail["cancelled_by"] == key_id(OPERATOR_KEY)
        assert OPERATOR_KEY not in json.dumps(detail)  # the key id, never the key
        assert queued not in slow.executed
        for run_id in busy:
            http.delete(f"/runs/{run_id}", headers=OPERATOR)


def test_run_requests_are_validated_up_front(graph: Container) -> None:
    with serve(graph, StandInOptimizer(graph)) as http:
        r = http.post("/runs", json={"task": "sscal", "runner": "bogus"}, headers=OPERATOR)
        assert r.status_code == 422 and "runner" in r.json()["error"]["message"], r.text
        r = http.post("/runs", json={"task": "sscal", "directions": 99}, headers=OPERATOR)
        assert r.status_code == 422 and "directions" in r.json()["error"]["message"]


SERVE_SCRIPT = """
import sys
from pathlib import Path

import uvicorn

from core.settings import Settings
from service.api.app import create_app
from service.bootstrap import Container
from tests.integration.conftest import StandInOptimizer, api_settings_for

settings = api_settings_for(Settings(), Path(sys.argv[2]))
app = create_app(
    container=Container(settings),
    optimizer_factory=lambda c: StandInOptimizer(c, step_s=0.5),
    resume_runs=False,
    warm=False,
)
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="info", timeout_graceful_shutdown=20)
"""


def test_sigterm_stops_runs_tells_watchers_and_exits_cleanly(graph: Container, tmp_path) -> None:
    import os
    import signal
    import subprocess
    import sys

    port = free_port()
    env = {**os.environ, "NEO4J_URI": graph.settings.bolt_uri, "PYTHONPATH": os.getcwd()}
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVE_SCRIPT, str(port), str(tmp_path / "home")],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as http:
            wait_for(lambda: _answers(http), timeout_s=240)
            run_id = start(http, budget=60)
            wait_for(lambda: http.get(f"/runs/{run_id}", headers=READER).json()["evaluations"] >= 1, 60)
            events: list[dict[str, Any]] = []

            def listen() -> None:
                with contextlib.suppress(httpx.HTTPError):
                    events.extend(sse(http, run_id))

            watcher = threading.Thread(target=listen)
            watcher.start()
            time.sleep(0.5)
            began = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            watcher.join(timeout=30)
            assert not watcher.is_alive()
            assert events and events[-1]["event"] == "failed", events[-3:]
            assert events[-1]["data"]["status"] == "interrupted"
        out, _ = proc.communicate(timeout=60)
        assert time.monotonic() - began < 20
    finally:
        if proc.poll() is None:
            proc.kill()
    # uvicorn re-raises the signal once its shutdown is complete: exiting "by SIGTERM" is the clean end.
    assert proc.returncode in (0, -signal.SIGTERM), out[-2000:]
    assert "Application shutdown complete" in out
    assert "Traceback" not in out, out[-3000:]
    stored = graph.store.get_node(Run, run_id)
    assert stored is not None and stored.status == RunStatus.INTERRUPTED and 1 <= stored.evaluations < 60


def _answers(http: httpx.Client) -> bool:
    try:
        return http.get("/whoami", headers=READER).status_code == 200
    except httpx.HTTPError:
        return False


def test_serve_restarts_at_once_after_kill_9_with_a_client_connected(graph: Container, tmp_path) -> None:
    """The dead server's connection to a client lingers on the port (FIN_WAIT2): `eok serve` must start
    again at once, as uvicorn itself would (SO_REUSEADDR), and a port with a live listener is still refused."""
    import os
    import signal
    import socket
    import subprocess
    import sys

    port = free_port()
    env = {
        **os.environ,
        "NEO4J_URI": graph.settings.bolt_uri,
        "EOK_HOME": str(tmp_path / "home"),
        "PYTHONPATH": os.getcwd(),
    }
    command = [sys.executable, "-m", "service.cli", "serve", "--port", str(port), "--no-start-db", "--no-resume"]

    def serve_cli() -> subprocess.Popen[str]:
        return subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def health(http: httpx.Client) -> bool:
        with contextlib.suppress(httpx.HTTPError):
            return http.get("/health").status_code in (200, 503)
        return False

    first = serve_cli()
    second: subprocess.Popen[str] | None = None
    client: socket.socket | None = None
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
            wait_for(lambda: health(http), timeout_s=240)
            client = socket.create_connection(("127.0.0.1", port), timeout=5)  # a client that stays connected
            client.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            assert client.recv(12).startswith(b"HTTP/1.1")
            os.kill(first.pid, signal.SIGKILL)
            first.wait(timeout=30)
            second = serve_cli()
            began = time.monotonic()
            wait_for(lambda: health(http) or second.poll() is not None, timeout_s=240)
            assert second.poll() is None, second.communicate(timeout=30)[0][-2000:]
            assert time.monotonic() - began < 120
            taken = subprocess.run(command, env=env, capture_output=True, text=True, timeout=240)
            assert taken.returncode != 0 and f"cannot listen on 127.0.0.1:{port}" in taken.stdout + taken.stderr
            assert "Traceback" not in taken.stdout + taken.stderr
    finally:
        if client is not None:
            client.close()
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)
