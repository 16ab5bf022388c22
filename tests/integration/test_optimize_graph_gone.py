"""Neo4j killed under a running `eok optimize`: noticed in seconds (it took 135 s), one line naming the run
and how to resume it, no traceback. (Taking over a dead owner's run is tests/integration/test_run_lease.py's.)"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from core.settings import PROJECT_ROOT
from knowledge import local_neo4j
from knowledge.store import GraphStore
from tests.conftest import free_port, local_test_settings

# From the server gone to the command's exit: the evaluation in flight (qemu + model), then at most one
# lease renewal period (10 s) or the 5 s retry budget of its record, on a loaded machine. It was 135 s.
NOTICED_WITHIN_S = 30.0


def _experiences(store: GraphStore) -> tuple[str | None, int]:
    rows = store.read(
        "MATCH (r:Run {task_id: 'saxpy'}) OPTIONAL MATCH (x:Experience {run_id: r.id}) RETURN r.id AS id, count(x) AS n"
    )
    return (rows[0]["id"], rows[0]["n"]) if rows else (None, 0)


def test_a_killed_graph_ends_the_run_at_once_with_the_resume_line(tmp_path: Path) -> None:
    settings = local_test_settings(tmp_path, free_port())
    local_neo4j.start(settings, watch_pid=os.getpid())
    env = {
        **os.environ,
        "EOK_HOME": str(settings.home),
        "EOK_LOCAL_NEO4J_PORT": str(settings.local_neo4j_port),
        "EOK_LOCAL_NEO4J_DATA": str(settings.local_neo4j_data),
    }
    env.pop("NEO4J_URI", None)
    cmd = [sys.executable, "-m", "service.cli", "optimize", "saxpy", "--budget", "8", "--generator", "offline"]
    try:
        with GraphStore.connect(settings) as store:
            proc = subprocess.Popen(cmd, cwd=PROJECT_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            run_id, deadline = None, time.monotonic() + 300
            while time.monotonic() < deadline and not run_id:  # until a first result is recorded
                time.sleep(0.3)
                assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
                found, n = _experiences(store)
                run_id = found if n >= 1 else None
            assert run_id, "the run never recorded a candidate"

        # kill -9: gone at once (a clean stop takes seconds, in which the run could simply finish)
        os.kill(local_neo4j.pid(settings), signal.SIGKILL)
        began = time.monotonic()
        _, err = proc.communicate(timeout=180)
        took = time.monotonic() - began

        text = err.decode()
        assert "Traceback" not in text, text
        assert proc.returncode == 3, text
        assert f"the graph stopped answering during run {run_id}" in text
        assert f"`eok optimize --resume {run_id}`" in text
        print(f"noticed {took:.1f} s after the server stopped")
        assert took <= NOTICED_WITHIN_S, f"noticed after {took:.1f} s"

    finally:
        local_neo4j.stop(settings)
