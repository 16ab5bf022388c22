"""The local Neo4j (5.26 LTS Community, embedded behind a tiny launcher): build, start, stop, find.

Everything lives under `settings.neo4j_data_dir`: the store (data/), Neo4j's logs (logs/debug.log), the
launcher's own log (logs/eok-neo4j.log), a pid file and a lock file that serialises start and stop.
When NEO4J_URI names another server this module never spawns or signals anything.
"""

from __future__ import annotations

import fcntl
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import psutil
from neo4j import GraphDatabase
from neo4j.exceptions import AuthError, DriverError, Neo4jError

from core.errors import InvalidInput, Unavailable
from core.settings import PROJECT_ROOT, Settings

log = logging.getLogger(__name__)

LAUNCHER_DIR = PROJECT_ROOT / "scripts" / "neo4j"
POM = LAUNCHER_DIR / "pom.xml"
JAR = LAUNCHER_DIR / "target" / "eok-neo4j.jar"
LIB = LAUNCHER_DIR / "target" / "lib"
_BUILD_STAMP = LAUNCHER_DIR / "target" / ".eok-built"
_BUILD_TIMEOUT_S = 900.0  # the first build downloads ~125 MB of jars from Maven Central
STOP_TIMEOUT_S = 180.0  # a checkpoint of a large store can take a while; SIGKILL only after this
_SIZE = re.compile(r"^\d+[kmgKMG]?$")
_RUN_MARK = "=== eok: starting"  # the line we write before each spawn; log tails start after the last one
_INSTALL_HINT = "install a JDK 17 and Maven, e.g. `apt-get install openjdk-17-jdk-headless maven`"


# -- paths ----------------------------------------------------------------------------------------------


def data_dir(settings: Settings) -> Path:
    """Absolute, because the launcher's command line names it and we match on that."""
    return settings.neo4j_data_dir.expanduser().resolve()


def pid_file(settings: Settings) -> Path:
    return data_dir(settings) / "eok-neo4j.pid"


def log_file(settings: Settings) -> Path:
    """The launcher's stdout/stderr; Neo4j's own log is logs/debug.log beside it."""
    return data_dir(settings) / "logs" / "eok-neo4j.log"


def _lock_file(settings: Settings) -> Path:
    return data_dir(settings) / "eok-neo4j.lock"


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive advisory lock, so two `eok db start` (or a CLI and a test session) never race."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


# -- build ----------------------------------------------------------------------------------------------


def _sources() -> list[Path]:
    return [POM, *sorted((LAUNCHER_DIR / "src").rglob("*.java"))]


def _is_built() -> bool:
    if not (JAR.is_file() and LIB.is_dir() and _BUILD_STAMP.is_file()):
        return False
    if not any(LIB.glob("neo4j-*.jar")):
        return False
    newest_source = max(p.stat().st_mtime for p in _sources())
    return _BUILD_STAMP.stat().st_mtime >= newest_source


def ensure_built(settings: Settings) -> Path:
    """Build the launcher jar and copy Neo4j's jars into target/lib once; return the jar's path."""
    if _is_built():
        return JAR
    _require_tool("java")
    mvn = _require_tool("mvn")
    _BUILD_STAMP.parent.mkdir(parents=True, exist_ok=True)
    with _locked(LAUNCHER_DIR / "target" / ".eok-build.lock"):
        if _is_built():  # another process built it while we waited for the lock
            return JAR
        log.info("building the local Neo4j launcher (%s); the first build downloads ~125 MB", POM)
        cmd = [mvn, "-q", "-B", "-f", str(POM), "package"]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=_BUILD_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired as e:
            raise Unavailable(
                f"building the local Neo4j took longer than {_BUILD_TIMEOUT_S:.0f} s: {' '.join(cmd)}",
                "check that Maven Central is reachable, then run `eok db start` again",
            ) from e
        if done.returncode != 0 or not JAR.is_file():
            tail = _last_lines(done.stdout + done.stderr, 15)
            raise Unavailable(
                f"building the local Neo4j failed ({' '.join(cmd)}, exit {done.returncode}):\n{tail}",
                f"check that Maven Central is reachable and that java is 17 or newer; {_INSTALL_HINT}",
            )
        _BUILD_STAMP.touch()
    return JAR


def _require_tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise Unavailable(f"`{name}` is not on PATH; the local Neo4j needs it", _INSTALL_HINT)
    return path


# -- process bookkeeping --------------------------------------------------------------------------------


def _alive(pid: int) -> bool:
    try:
        proc = psutil.Process(pid)
        if proc.status() != psutil.STATUS_ZOMBIE:
            return True
    except psutil.NoSuchProcess:
        return False
    # A zombie is our own exited child (a test session that started the server): reap it.
    with suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
    return False


def _is_our_server(pid: int, settings: Settings) -> bool:
    """True when pid is a live launcher serving this data dir (pid numbers get reused after a crash)."""
    if not _alive(pid):
        return False
    try:
        cmd = psutil.Process(pid).cmdline()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False
    return any(a.endswith(JAR.name) for a in cmd) and _arg(cmd, "--home") == str(data_dir(settings))


def _arg(cmd: list[str], flag: str) -> str | None:
    return cmd[cmd.index(flag) + 1] if flag in cmd and cmd.index(flag) + 1 < len(cmd) else None


def pid(settings: Settings) -> int | None:
    """The pid of the local server for this data dir, or None; a stale pid file is removed."""
    if not settings.uses_local_neo4j:
        return None
    path = pid_file(settings)
    try:
        recorded: int | None = int(path.read_text().strip())
    except (FileNotFoundError, ValueError):
        recorded = None
    if recorded is not None and _is_our_server(recorded, settings):
        return recorded
    if recorded is not None:
        log.info("removing stale pid file %s (process %s is gone)", path, recorded)
        path.unlink(missing_ok=True)
    return _find_server(settings)


def stopped_on_purpose(settings: Settings) -> bool:
    """`eok db stop` (or `stop()`) ended the server last, rather than a crash or an out-of-memory exit."""
    return _stop_mark(settings).exists()


def _stop_mark(settings: Settings) -> Path:
    return data_dir(settings) / "stopped-on-purpose"


def _find_server(settings: Settings) -> int | None:
    """A server for this data dir whose pid file was lost (deleted by hand), found by its command line."""
    for proc in psutil.process_iter(["pid", "name"]):
        if proc.info["name"] == "java" and _is_our_server(proc.info["pid"], settings):
            return int(proc.info["pid"])
    return None


def is_running(settings: Settings) -> bool:
    """Local: our server process exists. Remote (NEO4J_URI): the server answers `RETURN 1`."""
    if settings.uses_local_neo4j:
        return pid(settings) is not None
    return _answers(settings, timeout_s=5.0) is None


# -- start / stop ---------------------------------------------------------------------------------------


def start(settings: Settings, watch_pid: int | None = None) -> str:
    """Start the local server (or find it already running) and return its Bolt URI once it answers.

    With NEO4J_URI set, only check that that server answers. `watch_pid`: the server stops itself when
    that process ends (test sessions pass their own pid).
    """
    if not settings.uses_local_neo4j:
        problem = _answers(settings, timeout_s=10.0)
        if problem is not None:
            raise Unavailable(
                f"Neo4j at {settings.bolt_uri} does not answer: {problem}",
                "start that server, or unset NEO4J_URI to use the local one (`eok db start`)",
            )
        return settings.bolt_uri
    heap = _size(settings.local_neo4j_heap, "local_neo4j_heap")
    pagecache = _size(settings.local_neo4j_pagecache, "local_neo4j_pagecache")
    jar = ensure_built(settings)
    with _locked(_lock_file(settings)):
        running = pid(settings)
        if running is not None:
            _check_port(running, settings)
            pid_file(settings).write_text(f"{running}\n")  # restores a pid file lost by hand
        else:
            _refuse_taken_port(settings)
            _stop_mark(settings).unlink(missing_ok=True)
            running = _spawn(settings, jar, heap, pagecache, watch_pid)
        _await_bolt(settings, running)
    return settings.bolt_uri


def _size(value: str, field: str) -> str:
    if not _SIZE.match(value.strip()):
        raise InvalidInput(
            f"{field} = {value!r} is not a memory size",
            f"set EOK_{field.upper()} to a number with an optional k/m/g suffix, e.g. 1g or 512m",
        )
    return value.strip()


def _check_port(running: int, settings: Settings) -> None:
    port = _arg(psutil.Process(running).cmdline(), "--port")
    if port != str(settings.local_neo4j_port):
        raise InvalidInput(
            f"the local Neo4j for {data_dir(settings)} already runs on port {port} (pid {running}), "
            f"but local_neo4j_port is {settings.local_neo4j_port}",
            "run `eok db stop` first, or set EOK_LOCAL_NEO4J_PORT to the running port",
        )


def _refuse_taken_port(settings: Settings) -> None:
    port = settings.local_neo4j_port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(1.0)
        taken = s.connect_ex(("127.0.0.1", port)) == 0
    if taken:
        raise Unavailable(
            f"port {port} on 127.0.0.1 is already used by another program (not the local Neo4j for "
            f"{data_dir(settings)})",
            "stop that program, or set EOK_LOCAL_NEO4J_PORT to a free port",
        )


def _spawn(settings: Settings, jar: Path, heap: str, pagecache: str, watch_pid: int | None) -> int:
    data = data_dir(settings)
    logs = log_file(settings)
    logs.parent.mkdir(parents=True, exist_ok=True)
    cmd = [
        _require_tool("java"),
        # Neo4j advises initial = max heap; we trade that for a heap that shrinks again: a burst (a huge
        # analyst answer, a bulk ingest) is given back to the OS by G1's periodic collection.
        "-Xms128m",
        f"-Xmx{heap}",
        "-XX:+UseG1GC",
        "-XX:G1PeriodicGCInterval=5000",
        "-XX:MaxHeapFreeRatio=30",
        "-XX:MinHeapFreeRatio=10",
        "-XX:+ExitOnOutOfMemoryError",  # a dead server restarts cleanly; a half-alive one does not
        "-jar",
        str(jar),
        "--home",
        str(data),
        "--port",
        str(settings.local_neo4j_port),
        "--pagecache",
        pagecache,
    ]
    for key, value in hardening(data).items():
        cmd += ["--set", f"{key}={value}"]
    if watch_pid is not None:
        cmd += ["--watch-pid", str(watch_pid)]
    with logs.open("ab") as out:
        out.write(f"{_RUN_MARK} {time.strftime('%Y-%m-%dT%H:%M:%S')}: {' '.join(cmd)}\n".encode())
        out.flush()
        # Its own session: Ctrl-C in the terminal that ran `eok db start` must not reach the server.
        proc = subprocess.Popen(
            cmd,
            cwd=data,
            env=server_environment(),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    pid_file(settings).write_text(f"{proc.pid}\n")
    log.info("started the local Neo4j (pid %d) in %s", proc.pid, data)
    return proc.pid


def hardening(data: Path) -> dict[str, str]:
    """Neo4j settings that keep analysts' Cypher inside the graph even if the service's guard had a hole.

    The same settings are in docker-compose.yml (as NEO4J_* variables); docs/API.md explains each.
    """
    empty = data / "import-empty"  # LOAD CSV's root, if file URLs were ever re-enabled: nothing in it
    empty.mkdir(parents=True, exist_ok=True)
    return {
        "dbms.security.allow_csv_import_from_file_urls": "false",
        "server.directories.import": str(empty),
        # LOAD CSV over the network: every IPv4 and IPv6 address is blocked.
        "internal.dbms.cypher_ip_blocklist": "0.0.0.0/0,::/0",
        "dbms.security.procedures.allowlist": ",".join(PROCEDURE_ALLOWLIST),
        # One transaction may not take the server down (a 15-million-element answer, a huge collect()).
        "db.memory.transaction.max": "256m",
        "dbms.memory.transaction.total.max": "512m",
    }


# The procedures EoK itself calls, and the read procedures analysts may call; nothing else is loaded.
PROCEDURE_ALLOWLIST = (
    "db.awaitIndex",
    "db.awaitIndexes",
    "db.labels",
    "db.relationshipTypes",
    "db.propertyKeys",
    "db.schema.visualization",
    "db.schema.nodeTypeProperties",
    "db.schema.relTypeProperties",
    "db.index.fulltext.queryNodes",
    "db.index.fulltext.queryRelationships",
    "db.index.vector.queryNodes",
    "db.ping",
    "dbms.components",
)

# What the server's JVM inherits: enough to run java, nothing else (no EOK_API_KEYS, no LLM key: a
# server file read such as /proc/self/environ would otherwise hand them out).
_SERVER_ENV = ("PATH", "JAVA_HOME", "LANG", "LC_ALL", "TZ", "TMPDIR")


def server_environment() -> dict[str, str]:
    env = {k: os.environ[k] for k in _SERVER_ENV if k in os.environ}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    return env


def _await_bolt(settings: Settings, running: int) -> None:
    logs = log_file(settings)
    deadline = time.monotonic() + settings.local_neo4j_start_timeout_s
    problem = "not tried"
    while time.monotonic() < deadline:
        if not _alive(running):
            pid_file(settings).unlink(missing_ok=True)
            raise Unavailable(
                f"the local Neo4j (pid {running}) exited while starting; last lines of {logs}:\n" + _tail(logs),
                f"fix the cause above; Neo4j's own log is {logs.parent / 'debug.log'}",
            )
        problem = _answers(settings, timeout_s=2.0)
        # The answer must come from the process we started: another program that took the port between
        # our check and our bind would answer too (and have its data used, or wiped, as ours).
        if problem is None and _listens(running, settings.local_neo4j_port):
            return
        if problem is None:
            problem = f"port {settings.local_neo4j_port} is answered by another program, not pid {running}"
        time.sleep(0.25)
    raise Unavailable(
        f"the local Neo4j (pid {running}) did not answer on {settings.bolt_uri} within "
        f"{settings.local_neo4j_start_timeout_s:.0f} s ({problem}); last lines of {logs}:\n" + _tail(logs),
        "it is left running: wait and retry `eok db start`, raise EOK_LOCAL_NEO4J_START_TIMEOUT_S, or `eok db stop`",
    )


def _listens(pid: int, port: int) -> bool:
    """True when process `pid` has a listening TCP socket on `port`."""
    try:
        sockets = psutil.Process(pid).net_connections(kind="tcp")
    except psutil.Error:
        return False
    return any(c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port for c in sockets)


def _answers(settings: Settings, timeout_s: float) -> str | None:
    """None when the server answers `RETURN 1` over Bolt, else why not."""
    auth = (settings.neo4j_user, settings.neo4j_password.get_secret_value())
    try:
        with (
            GraphDatabase.driver(settings.bolt_uri, auth=auth, connection_timeout=timeout_s) as driver,
            driver.session() as session,
        ):
            session.run("RETURN 1 AS one").single(strict=True)
        return None
    except AuthError as e:
        return f"credentials refused ({e.message}); set NEO4J_USER and NEO4J_PASSWORD"
    except (DriverError, Neo4jError, OSError, ValueError) as e:
        first_line = (str(e).strip().splitlines() or [""])[0].rstrip(" :")
        return f"{type(e).__name__}: {first_line}"[:300]


def stop(settings: Settings, timeout_s: float = STOP_TIMEOUT_S) -> bool:
    """Stop the local server; True if one was running. SIGTERM, then SIGKILL only after `timeout_s`."""
    if not settings.uses_local_neo4j:
        raise InvalidInput(
            f"NEO4J_URI points at {settings.bolt_uri}; eok does not manage that server",
            "stop it where it runs, or unset NEO4J_URI to manage the local one",
        )
    with _locked(_lock_file(settings)):
        running = pid(settings)
        if running is None:
            return False
        _stop_mark(settings).touch()  # first: a supervisor (the service) must not start it again meanwhile
        os.kill(running, signal.SIGTERM)  # the launcher's shutdown hook checkpoints and closes the store
        if not _wait_gone(running, timeout_s):
            log.warning("the local Neo4j (pid %d) ignored SIGTERM for %.0f s; killing it", running, timeout_s)
            os.kill(running, signal.SIGKILL)
            _wait_gone(running, 30.0)
        pid_file(settings).unlink(missing_ok=True)
    return True


def _wait_gone(running: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not _alive(running):
            return True
        time.sleep(0.1)
    return not _alive(running)


def stopped_cleanly(settings: Settings) -> bool:
    """Whether the last run's log ends with the launcher's clean-shutdown line."""
    lines = _tail(log_file(settings), 5).splitlines()
    return bool(lines) and lines[-1].endswith("stopped cleanly")


# -- helpers --------------------------------------------------------------------------------------------


def _tail(path: Path, n: int = 20) -> str:
    """The last n lines the current (latest) run wrote to the launcher log."""
    try:
        with path.open("rb") as fh:
            fh.seek(max(0, path.stat().st_size - 65536))
            text = fh.read().decode("utf-8", errors="replace")
    except FileNotFoundError:
        return "(no log yet)"
    run = text.rsplit(_RUN_MARK, 1)[-1].split("\n", 1)[-1] if _RUN_MARK in text else text
    return _last_lines(run, n) or "(the log has nothing from this run yet)"


def _last_lines(text: str, n: int) -> str:
    return "\n".join(text.rstrip().splitlines()[-n:])
