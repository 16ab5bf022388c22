"""POST /bootstraps over real HTTP with the real agent: plan, watch by SSE, inspect, resume, refuse."""

from __future__ import annotations

import httpx
import pytest

from knowledge.starter import starter_knowledge
from service.api.app import create_app
from service.bootstrap import Container
from tests.integration.conftest import OPERATOR, READER, free_port, serve_in_thread
from tests.integration.test_api_runs import read_events

pytestmark = [pytest.mark.qemu, pytest.mark.slow]


def test_a_bootstrap_over_http(api_graph: Container) -> None:
    api_graph.ingestor.ingest(*starter_knowledge())
    app = create_app(container=api_graph, warm=False)
    server, thread = serve_in_thread(app, port := free_port())
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120) as http:
            body = {"tasks": "relu,sscal", "targets": ["k1-x60"], "budget": 2, "directions": 1}
            assert http.post("/bootstraps", json=body, headers=READER).status_code == 403  # operators only
            bad = http.post("/bootstraps", json={**body, "tasks": "nosuch"}, headers=OPERATOR)
            assert bad.status_code == 422 and "nosuch" in bad.text
            r = http.post("/bootstraps", json=body, headers=OPERATOR)
            assert r.status_code == 202, r.text
            accepted = r.json()
            events = read_events(http, accepted["events_url"])
            assert events[0]["event"] == "started" and events[-1]["event"] == "finished", events[-1]
            assert events[-1]["data"]["runs_done"] == events[-1]["data"]["runs_total"] == 2
            assert [int(e["id"]) for e in events] == list(range(len(events)))  # ids never restart
            summary = api_graph.settings.home / "bootstraps" / accepted["id"] / "summary.json"
            written = summary.read_text()
            detail = http.get(accepted["url"], headers=READER).json()
            again = http.post(f"{accepted['url']}/resume", headers=OPERATOR)
            assert summary.read_text() == written  # reading a bootstrap leaves what its end wrote
    finally:
        server.should_exit = True
        thread.join(timeout=60)
    assert detail["status"] == "done" and not detail["active"]
    assert {(r["task"], r["target"]) for r in detail["rows"]} == {("relu", "k1-x60"), ("sscal", "k1-x60")}
    assert all(r["status"] == "done" and 1 <= r["evaluations"] <= 2 for r in detail["rows"])
    assert again.status_code == 409  # a finished bootstrap has nothing to resume


def test_a_resumed_bootstrap_records_the_executor_it_really_has(api_graph: Container) -> None:
    """Planned on a two-node Ray cluster and interrupted, resumed by a service that evaluates in-process: the
    bootstrap says where it runs now and keeps where it ran before, instead of still claiming "2 nodes"."""
    api_graph.ingestor.ingest(*starter_knowledge())
    app = create_app(container=api_graph, warm=False)
    server, thread = serve_in_thread(app, port := free_port())
    two_nodes = "Ray cluster 127.0.0.1:6380: 2 nodes, 2 CPUs, boards 1 x k1-x60"
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120) as http:
            body = {"tasks": "relu", "targets": ["k1-x60"], "budget": 1, "directions": 1}
            r = http.post("/bootstraps", json=body, headers=OPERATOR)
            assert r.status_code == 202, r.text
            url = r.json()["url"]
            read_events(http, r.json()["events_url"])
            here = http.get(url, headers=READER).json()["executor"]
            assert here.startswith("in this process")
            # as the bootstrap would stand had it started on the two-node cluster and been interrupted there
            api_graph.store.write(
                "MATCH (b:Bootstrap {id: $id}) SET b.executor = $ray, b.executors = [$ray], b.status = 'interrupted'",
                id=r.json()["id"],
                ray=two_nodes,
            )
            again = http.post(f"{url}/resume", headers=OPERATOR)
            assert again.status_code == 202, again.text
            events = read_events(http, again.json()["events_url"])
            detail = http.get(url, headers=READER).json()
    finally:
        server.should_exit = True
        thread.join(timeout=60)
    assert events[0]["event"] == "started" and here in events[0]["data"]["message"], events[0]
    assert detail["executor"] == here
    assert detail["executors"] == [two_nodes, here]
