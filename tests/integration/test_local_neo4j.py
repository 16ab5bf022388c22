"""The local Neo4j lifecycle against real servers: start, idempotence, kill -9 recovery, clean stop, CLI.

Lifecycle tests start a private server (own port, own temp data dir) so that killing it never disturbs the
session server the other tests share.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from neo4j import GraphDatabase

from core.errors import InvalidInput, Unavailable
from core.settings import PROJECT_ROOT, Settings
from knowledge import local_neo4j
from tests.conftest import free_port, local_test_settings

pytestmark = pytest.mark.neo4j


@pytest.fixture
def own(tmp_path: Path) -> Iterator[Settings]:
    """Settings for a private local server; whatever the test leaves running is stopped afterwards."""
    settings = local_test_settings(tmp_path, free_port())
    try:
        yield settings
    finally:
        if local_neo4j.pid(settings) is not None:
            local_neo4j.stop(settings)


def run_eok(settings: Settings, *args: str, extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """The real `eok` entry point in a fresh interpreter, configured only through the environment."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EOK_", "NEO4J_"))}
    env |= {"EOK_HOME": str(settings.home), "PYTHONPATH": str(PROJECT_ROOT)}
    if settings.uses_local_neo4j:
        env |= {
            "EOK_LOCAL_NEO4J_PORT": str(settings.local_neo4j_port),
            "EOK_LOCAL_NEO4J_DATA": str(settings.neo4j_data_dir),
        }
    else:
        env["NEO4J_URI"] = settings.bolt_uri
    env |= extra_env or {}
    code = "import sys; sys.argv[0] = 'eok'; from service.cli import main; main()"
    return subprocess.run(
        [sys.executable, "-c", code, *args], env=env, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300
    )


def query(settings: Settings, cypher: str, **params: object) -> list[dict]:
    with GraphDatabase.driver(settings.bolt_uri, auth=("neo4j", "unused")) as driver:
        records, _, _ = driver.execute_query(cypher, params)
        return [r.data() for r in records]


def last_start_recovered(settings: Settings) -> bool:
    """Whether Neo4j replayed its transaction log when it last started (Neo4j's debug.log says so)."""
    text = (local_neo4j.data_dir(settings) / "logs" / "debug.log").read_text()
    last_start = text.rsplit("Starting 'DatabaseId{00000000[system]}'", 1)[-1]
    return "Recovery required from position" in last_start


def kill_9(pid: int) -> None:
    os.kill(pid, signal.SIGKILL)
    proc = psutil.Process(pid)
    proc.wait(timeout=30)  # reaps it too when this process is its parent


# -- start, idempotence, stop ---------------------------------------------------------------------------


def test_start_is_idempotent_and_stop_is_clean(own: Settings) -> None:
    first = run_eok(own, "db", "start")
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == own.bolt_uri
    pid = local_neo4j.pid(own)
    assert pid is not None and local_neo4j.is_running(own)
    assert local_neo4j.pid_file(own).read_text().strip() == str(pid)
    assert (local_neo4j.data_dir(own) / "eok-neo4j.ready").read_text().startswith(f"pid={pid}\n")

    again = run_eok(own, "db", "start", "--json")
    assert again.returncode == 0, again.stderr
    info = json.loads(again.stdout)
    assert info["uri"] == own.bolt_uri and info["pid"] == pid and info["managed"] == "local"
    assert local_neo4j.start(own) == own.bolt_uri and local_neo4j.pid(own) == pid
    local_neo4j.pid_file(own).unlink()  # lost by hand: the server is still found by its command line
    assert local_neo4j.pid(own) == pid and local_neo4j.start(own) == own.bolt_uri
    assert local_neo4j.pid_file(own).read_text().strip() == str(pid)

    query(own, "CREATE (:Probe {n: 1})")
    stopped = run_eok(own, "db", "stop", "--json")
    assert stopped.returncode == 0, stopped.stderr
    assert json.loads(stopped.stdout) == {"uri": own.bolt_uri, "stopped": True, "clean": True}
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert not local_neo4j.pid_file(own).exists()
    assert not (local_neo4j.data_dir(own) / "eok-neo4j.ready").exists()
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", own.local_neo4j_port)) != 0, "Bolt port still open after stop"
    assert local_neo4j.stop(own) is False
    assert run_eok(own, "db", "stop").stdout.strip().endswith("was not running")

    # A clean stop loses nothing and needs no recovery on the next start.
    local_neo4j.start(own)
    assert query(own, "MATCH (p:Probe) RETURN count(p) AS n") == [{"n": 1}]
    assert not last_start_recovered(own)


# -- kill -9 and recovery -------------------------------------------------------------------------------


def test_kill_9_then_start_recovers_all_committed_data(own: Settings) -> None:
    local_neo4j.start(own)
    pid = local_neo4j.pid(own)
    assert pid is not None
    # 20 separate committed transactions of 500 nodes each, then an update: all must survive the kill.
    for batch in range(20):
        query(own, "UNWIND range($lo, $lo + 499) AS i CREATE (:Item {i: i})", lo=batch * 500)
    query(own, "MATCH (x:Item) WHERE x.i % 1000 = 0 SET x.marked = true")

    kill_9(pid)
    assert local_neo4j.pid_file(own).exists()  # stale: the process is gone
    assert (local_neo4j.data_dir(own) / "eok-neo4j.ready").exists()  # left behind by the kill
    assert not local_neo4j.is_running(own)
    assert not local_neo4j.pid_file(own).exists()  # pid() cleared the stale file

    local_neo4j.pid_file(own).write_text(f"{pid}\n")  # as a crash leaves it: start must cope
    assert local_neo4j.start(own) == own.bolt_uri
    new_pid = local_neo4j.pid(own)
    assert new_pid is not None and new_pid != pid
    rows = query(
        own,
        "MATCH (x:Item) RETURN count(x) AS n, count(DISTINCT x.i) AS distinct_i, sum(x.i) AS total, "
        "count(x.marked) AS marked",
    )
    assert rows == [{"n": 10_000, "distinct_i": 10_000, "total": sum(range(10_000)), "marked": 10}]
    assert last_start_recovered(own)  # Neo4j replayed its transaction log: the kill really was unclean


def test_pid_file_naming_an_unrelated_live_process_is_stale(own: Settings) -> None:
    local_neo4j.data_dir(own).mkdir(parents=True)
    local_neo4j.pid_file(own).write_text(f"{os.getpid()}\n")  # pid reused by something that is not Neo4j
    assert local_neo4j.pid(own) is None
    assert not local_neo4j.pid_file(own).exists()
    assert local_neo4j.stop(own) is False  # and nothing was signalled: this test process is still here


def test_server_stops_itself_when_the_watched_process_ends(own: Settings) -> None:
    watched = subprocess.Popen(["sleep", "600"])
    try:
        local_neo4j.start(own, watch_pid=watched.pid)
        pid = local_neo4j.pid(own)
        assert pid is not None
    finally:
        watched.kill()
        watched.wait()
    psutil.Process(pid).wait(timeout=60)
    assert local_neo4j.pid(own) is None
    assert local_neo4j.stopped_cleanly(own)


# -- errors a user sees ---------------------------------------------------------------------------------


def test_closed_port_gives_one_line_error_and_exit_3(tmp_path: Path) -> None:
    closed = free_port()
    remote = Settings(home=tmp_path, NEO4J_URI=f"bolt://127.0.0.1:{closed}")
    for command in (["db", "status"], ["db", "status", "--json"], ["db", "start"]):
        done = run_eok(remote, *command)
        assert done.returncode == 3, (command, done.stdout, done.stderr)
        text = " ".join(done.stderr.split())  # the console may wrap a long line at the terminal width
        if "--json" in command:  # machine output stays on stdout, even when the server is down
            payload = json.loads(done.stdout)
            assert payload["reachable"] is False and payload["fix"], done.stdout
        else:
            assert done.stdout == ""
            assert "fix:" in text
        assert "Traceback" not in done.stderr
        assert text.startswith("error: ") and f"bolt://127.0.0.1:{closed}" in text
    assert "eok db start" in " ".join(run_eok(remote, "db", "status").stderr.split())
    stop = run_eok(remote, "db", "stop")
    assert stop.returncode == 2 and "does not manage" in stop.stderr
    assert not (tmp_path / "neo4j").exists()  # nothing local was created for a remote server


def test_port_taken_by_another_program_is_refused(own: Settings) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", own.local_neo4j_port))
        squatter.listen()
        with pytest.raises(Unavailable, match=f"port {own.local_neo4j_port} .* already used"):
            local_neo4j.start(own)
    assert local_neo4j.pid(own) is None


def test_bad_memory_setting_names_the_field(own: Settings) -> None:
    bad = own.model_copy(update={"local_neo4j_heap": "lots"})
    with pytest.raises(InvalidInput, match="local_neo4j_heap") as err:
        local_neo4j.start(bad)
    assert "EOK_LOCAL_NEO4J_HEAP" in (err.value.hint or "")


# -- status against the shared session server -----------------------------------------------------------


def test_status_counts_labels_and_relationship_types(neo4j_settings: Settings, store: object) -> None:
    query(
        neo4j_settings,
        "CREATE (a:ZzProbeA {k: 1}), (b:ZzProbeA {k: 2}), (c:ZzProbeA {k: 3}), (d:ZzProbeB {k: 4}) "
        "CREATE (a)-[:ZZ_LINKS]->(d), (b)-[:ZZ_LINKS]->(d), (c)-[:ZZ_OTHER]->(a)",
    )
    done = run_eok(neo4j_settings, "db", "status", "--json")
    assert done.returncode == 0, done.stderr
    info = json.loads(done.stdout)
    assert info["uri"] == neo4j_settings.bolt_uri
    assert info["version"].startswith("5.26.") and info["edition"] == "community"
    assert info["labels"]["ZzProbeA"] == 3 and info["labels"]["ZzProbeB"] == 1
    assert info["relationships"]["ZZ_LINKS"] == 2 and info["relationships"]["ZZ_OTHER"] == 1

    table = run_eok(neo4j_settings, "db", "status")
    assert table.returncode == 0, table.stderr
    assert "5.26." in table.stdout and "ZzProbeA" in table.stdout and "ZZ_LINKS" in table.stdout


def test_missing_java_says_what_to_install(own: Settings) -> None:
    local_neo4j.ensure_built(own)  # built already: only the missing `java` for the spawn can fail
    done = run_eok(own, "db", "start", extra_env={"PATH": "/nonexistent", "GIT_PYTHON_REFRESH": "quiet"})
    assert done.returncode == 3, done.stderr
    text = " ".join(done.stderr.split())
    assert "`java` is not on PATH" in text and "openjdk-17-jdk-headless" in text
    assert "Traceback" not in done.stderr and local_neo4j.pid(own) is None


def test_sync_copies_pending_embeddings_into_the_vector_index(neo4j_settings: Settings, store: object) -> None:
    import numpy as np

    from knowledge.store import embedding_properties

    gen = store.bump_embedding_generation()  # type: ignore[attr-defined]
    vec = np.ones(384, dtype=np.float32) / np.sqrt(384)
    store.write(  # type: ignore[attr-defined]
        "CREATE (t:Thought {id: 'zz-sync'}) SET t += $p", p=embedding_properties(vec, "h", "m", gen)
    )
    before = json.loads(run_eok(neo4j_settings, "db", "status", "--json").stdout)
    assert before["vector_index_pending"] >= 1

    done = run_eok(neo4j_settings, "db", "sync", "--json")
    assert done.returncode == 0, done.stderr
    info = json.loads(done.stdout)
    assert info["synced"] >= 1 and info["pending"] == 0
    rows = store.read("MATCH (t:Thought {id: 'zz-sync'}) RETURN size(t.embedding_vector) AS n")  # type: ignore[attr-defined]
    assert rows == [{"n": 384}]


def test_the_service_starts_its_local_server_again_after_a_crash_but_not_after_a_stop(
    own: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An analyst expression building a gigabyte string ends the server's JVM (ExitOnOutOfMemoryError): the
    service brings it back within seconds; `eok db stop` means stop."""
    import time

    from service.api import app as service_app

    local_neo4j.start(own)
    first = local_neo4j.pid(own)
    assert first is not None and not local_neo4j.stopped_on_purpose(own)
    monkeypatch.setattr(service_app, "NEO4J_WATCH_INTERVAL_S", 0.2)
    stop = service_app._supervise_local_neo4j(own)
    try:
        os.kill(first, signal.SIGKILL)
        psutil.Process(first).wait(timeout=30)
        deadline = time.monotonic() + 120
        while (again := local_neo4j.pid(own)) in (None, first) or query(own, "RETURN 1 AS one") != [{"one": 1}]:
            assert time.monotonic() < deadline, "the crashed server was not started again"
            time.sleep(0.5)
        assert again != first
        local_neo4j.stop(own)  # a deliberate stop: marked so, and left stopped
        assert local_neo4j.stopped_on_purpose(own)
        time.sleep(1.0)
        assert local_neo4j.pid(own) is None
    finally:
        stop.set()


def test_a_server_that_took_the_port_first_is_not_taken_for_ours(neo4j_settings: Settings, tmp_path: Path) -> None:
    """Two sessions that both found a port free: the one whose server lost the bind must not use (and wipe)
    the winner's. Here the session's server plays the winner and a process that never listens plays ours."""
    from urllib.parse import urlsplit

    port = urlsplit(neo4j_settings.bolt_uri).port
    settings = local_test_settings(tmp_path, port).model_copy(update={"local_neo4j_start_timeout_s": 30.0})
    ours = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3)"])
    try:
        with pytest.raises(Unavailable, match="exited while starting"):
            local_neo4j._await_bolt(settings, ours.pid)
    finally:
        ours.kill()
        ours.wait()
