"""Ctrl-C (a real SIGINT to the process group, as a terminal sends it) stops `eok optimize` within 2 s
with one line, marks its run interrupted (resumable) and leaves none of its compilers or qemu runs behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil

from core.settings import PROJECT_ROOT
from knowledge.models import Run, RunStatus


def test_ctrl_c_stops_optimize_within_2_s_and_marks_the_run_interrupted(container) -> None:
    env = {**os.environ, "EOK_HOME": str(container.settings.home), "NEO4J_URI": container.settings.bolt_uri}
    cmd = [sys.executable, "-m", "service.cli", "optimize", "saxpy", "--budget", "40", "--generator", "offline"]
    proc = subprocess.Popen(
        cmd, cwd=PROJECT_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
    )
    run_id, deadline = None, time.monotonic() + 300
    while time.monotonic() < deadline:  # until it is evaluating candidates (compilers and qemu running)
        time.sleep(0.3)
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        rows = container.store.read(
            "MATCH (r:Run {task_id: 'saxpy'}) OPTIONAL MATCH (x:Experience {run_id: r.id}) "
            "RETURN r.id AS id, count(x) AS n"
        )
        if rows and rows[0]["n"] >= 1:
            run_id = rows[0]["id"]
            break
    assert run_id, "the run never evaluated a candidate"
    children = psutil.Process(proc.pid).children(recursive=True)

    began = time.monotonic()
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    took = time.monotonic() - began

    assert took <= 2.0, f"Ctrl-C took {took:.1f} s"
    assert proc.returncode == 130
    text = err.decode()
    assert "Traceback" not in text
    last = text.strip().splitlines()[-1]
    assert last == f"interrupted: run {run_id} marked interrupted; resume with `eok optimize --resume {run_id}`"
    assert container.store.get_node(Run, run_id).status == RunStatus.INTERRUPTED.value
    time.sleep(0.2)
    assert not [c for c in children if c.is_running() and c.status() != psutil.STATUS_ZOMBIE]
