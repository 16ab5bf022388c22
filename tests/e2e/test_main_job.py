"""The main job end to end: `eok up` loads knowledge, optimizes a suite task on the emulated K1, prints the
result and serves the API (with a session key when none is configured)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.conftest import free_port

ROOT = Path(__file__).resolve().parents[2]


def test_eok_up_prints_the_result_then_serves(neo4j_settings, store, tmp_path: Path) -> None:
    port = free_port()
    env = {
        **os.environ,
        "EOK_HOME": str(tmp_path / "home"),
        "NEO4J_URI": neo4j_settings.bolt_uri,
        "EOK_API_PORT": str(port),
        "COLUMNS": "200",
    }
    env.pop("EOK_API_KEYS", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "service.cli", "up", "--task", "sdot", "--budget", "4"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    lines: list[str] = []
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            assert line or proc.poll() is None, "eok up ended early:\n" + "".join(lines)
            lines.append(line)
            if "serving the API" in line:
                break
        out = "".join(lines)
        assert "starter set" in out  # no repositories configured: the shipped ideas
        assert "over competent" in out and re.search(r"│ \d+\.\d+x", out), out
        key = re.search(r"operator key is (eok-\S+)", out).group(1)
        base = f"http://127.0.0.1:{port}"
        for _ in range(100):
            try:
                if httpx.get(f"{base}/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.2)
        assert httpx.get(f"{base}/tasks", timeout=10).status_code == 401
        runs = httpx.get(f"{base}/runs", headers={"X-API-Key": key}, timeout=10)
        assert runs.status_code == 200 and "sdot" in runs.text
    finally:
        proc.terminate()
        proc.wait(timeout=60)
