"""`eok ideas search` and `eok ideas show` on the seeded graph: one yardstick, and every printed id opens."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

from core.settings import Settings
from service.bootstrap import Container


def _eok(settings: Settings, *args: str) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "NEO4J_URI": settings.bolt_uri,
        "NEO4J_PASSWORD": settings.neo4j_password.get_secret_value(),
        "NEO4J_USER": settings.neo4j_user,
        "EOK_HOME": str(settings.home),
        "COLUMNS": "80",
    }
    cmd = [sys.executable, "-c", "from service.cli import main; main()", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)


def test_search_shows_competent_first_and_show_opens_every_printed_id(
    api_graph: Container, api_settings: Settings
) -> None:
    done = _eok(api_settings, "ideas", "search", "LMUL row sweep for gemv", "-k", "8")
    assert done.returncode == 0, done.stderr
    # exp-3 is 1.8x over -O3 and 1.2x over the competent baseline (tests/integration/conftest.py).
    assert "1.20x over competent, 1.80x over -O3" in done.stdout
    ids = re.findall(r"^\s*\d+\. (\S+)", done.stdout, re.M)
    assert "exp-3" in ids and any(i.startswith("t-") for i in ids)
    for node_id in ids:
        shown = _eok(api_settings, "ideas", "show", node_id)
        assert shown.returncode == 0, (node_id, shown.stderr)
    shown = _eok(api_settings, "ideas", "show", "exp-3")
    assert "Experience exp-3" in shown.stdout and "sgemv_n on k1-x60" in shown.stdout
    assert "applied t-lmul-gemv" in shown.stdout


def test_search_is_answered_by_a_running_service_over_the_same_graph(
    api_graph: Container, api_settings: Settings, live_api: str
) -> None:
    port = live_api.rsplit(":", 1)[1]
    # The CLI reads the same settings as the service it asks: its port and a key from EOK_API_KEYS.
    env_port = {"EOK_API_PORT": port, "EOK_API_KEYS": json.dumps(api_settings.api_keys), "EOK_DEBUG": "1"}
    os.environ.update(env_port)
    try:
        served = _eok(api_settings, "ideas", "search", "LMUL row sweep for gemv", "-k", "8")
        served_json = _eok(api_settings, "ideas", "search", "LMUL row sweep for gemv", "-k", "8", "--json")
    finally:
        for name in env_port:
            os.environ.pop(name)
    here = _eok(api_settings, "ideas", "search", "LMUL row sweep for gemv", "-k", "8")  # no service on 8000
    assert served.returncode == 0 and here.returncode == 0, (served.stderr, here.stderr)
    assert f"answered by the running service at http://127.0.0.1:{port}" in served.stdout, served.stderr
    assert "answered by the running service" not in here.stdout
    ids = re.compile(r"^\s*\d+\. (\S+)", re.M)
    assert ids.findall(served.stdout) == ids.findall(here.stdout) and "exp-3" in ids.findall(served.stdout)
    assert [hit["id"] for hit in json.loads(served_json.stdout)] == ids.findall(here.stdout)
