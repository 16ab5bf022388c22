"""The read endpoints against a real, seeded Neo4j: health, search, ideas, thoughts, experiences, catalog."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

from fastapi.testclient import TestClient

from core.settings import Settings
from knowledge.models import Bootstrap, Run, RunStatus
from tests.integration.conftest import PAGED_EXPERIENCES, READER, SEED_RUN


def test_health_is_public_and_reports_graph_and_index(client: TestClient) -> None:
    r = client.get("/health")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["status"] == "ok"
    assert body["schema_version"] >= 1
    assert body["index_size"] >= 10  # ideas + thoughts + tasks + experiences of the seed are embedded
    assert body["nodes"]["Thought"] == 5
    assert body["agent"] is True


def test_search_finds_the_lmul_thought_with_evidence(client: TestClient) -> None:
    r = client.get("/ideas/search", params={"q": "LMUL row sweep for gemv", "kind": "thought", "k": 3}, headers=READER)
    assert r.status_code == 200, r.text
    hits = r.json()["hits"]
    assert len(hits) == 3 and all(h["kind"] == "thought" for h in hits)
    lmul = next(h for h in hits if h["id"] == "t-lmul-gemv")
    assert lmul["evidence"][0]["repo"] == "OpenBLAS"


def test_search_filters_combine(client: TestClient) -> None:
    r = client.get("/ideas/search", params={"q": "accumulate", "operator": "gemv", "isa": "generic"}, headers=READER)
    assert r.status_code == 200, r.text
    thoughts = [h for h in r.json()["hits"] if h["kind"] == "thought"]
    assert [h["id"] for h in thoughts] == ["t-unroll-gemv"]
    assert r.json()["filters"] == {"operator": "gemv", "isa": "generic"}


def test_search_on_a_target_ranks_by_measured_effect(client: TestClient) -> None:
    # Without a target the mined prior of the 2.0x gemm claim competes; measured on K1 it is 0.95x.
    r = client.get(
        "/ideas/search", params={"q": "LMUL row sweep for gemv", "kind": "thought", "target": "k1-x60"}, headers=READER
    )
    hits = r.json()["hits"]
    assert hits[0]["id"] == "t-lmul-gemv"
    assert hits[0]["measured"]["trials"] == 3


def test_search_rejects_an_unknown_operator_by_name(client: TestClient) -> None:
    r = client.get("/ideas/search", params={"q": "x", "operator": "gemmm"}, headers=READER)
    assert r.status_code == 422
    err = r.json()["error"]
    assert err["code"] == "invalid_request"
    assert "query parameter 'operator'" in err["message"] and "'gemv'" in err["message"]


def test_search_validates_k(client: TestClient) -> None:
    r = client.get("/ideas/search", params={"q": "x", "k": 0}, headers=READER)
    assert r.status_code == 422
    assert "query parameter 'k'" in r.json()["error"]["message"]


def test_idea_lists_its_thoughts_with_trials(client: TestClient) -> None:
    r = client.get("/ideas/idea-lmul", headers=READER)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["title"].startswith("Match the vector register grouping")
    by_id = {t["id"]: t for t in body["thoughts"]}
    assert set(by_id) == {"t-lmul-gemv", "t-tail-vl"}
    assert by_id["t-lmul-gemv"]["trials"] == 5  # 3 on K1 + 2 on K3


def test_unknown_idea_is_404_json(client: TestClient) -> None:
    r = client.get("/ideas/nope", headers=READER)
    assert r.status_code == 404
    assert r.json()["error"]["code"] == "not_found"
    assert "'nope'" in r.json()["error"]["message"]


def test_thought_has_evidence_commits_effects_and_experiences(client: TestClient) -> None:
    r = client.get("/thoughts/t-lmul-gemv", headers=READER)
    assert r.status_code == 200, r.text
    t = r.json()
    assert t["idea"] == {"id": "idea-lmul", "title": "Match the vector register grouping to the machine"}
    assert [c["sha"] for c in t["evidence"]] == ["a1" * 20]
    assert t["evidence"][0]["url"] == "https://github.com/OpenMathLib/OpenBLAS/commit/" + "a1" * 20
    assert t["evidence"][0]["authored_at"].startswith("2023-05-02")
    effects = {e["target"]: e for e in t["effects"]}
    assert math.isclose(effects["k1-x60"]["mean_speedup"], 1.6, rel_tol=1e-9)
    assert effects["k3-x100"]["successes"] == 0 and effects["k3-x100"]["success_rate"] == 0
    assert [x["id"] for x in t["experiences"]] == ["exp-3", "exp-4"]  # best first


def test_experiences_pages_are_complete_and_disjoint(client: TestClient) -> None:
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        params = {"task": "sgemm_64", "limit": 4, **({"cursor": cursor} if cursor else {})}
        r = client.get("/experiences", params=params, headers=READER)
        assert r.status_code == 200, r.text
        body = r.json()
        seen += [x["id"] for x in body["items"]]
        pages += 1
        cursor = body["next_cursor"]
        if cursor is None:
            break
    assert len(seen) == len(set(seen)) == PAGED_EXPERIENCES
    assert pages == math.ceil(PAGED_EXPERIENCES / 4)
    assert seen[0] == "exp-gemm-24"  # newest first


def test_experiences_filters(client: TestClient) -> None:
    r = client.get("/experiences", params={"status": "ok", "min_speedup": 1.5, "target": "k1-x60"}, headers=READER)
    ids = {x["id"] for x in r.json()["items"]}
    assert "exp-3" in ids and "exp-6" not in ids and "exp-4" not in ids
    assert all(x["speedup"] >= 1.5 for x in r.json()["items"])


def test_experiences_bad_cursor_and_status_are_clear(client: TestClient) -> None:
    r = client.get("/experiences", params={"cursor": "not-a-cursor"}, headers=READER)
    assert r.status_code == 422 and "cursor" in r.json()["error"]["message"]
    r = client.get("/experiences", params={"status": "great"}, headers=READER)
    assert r.status_code == 422 and "compile_error" in r.json()["error"]["message"]


def test_experience_detail_has_code_and_thoughts(client: TestClient) -> None:
    r = client.get("/experiences/exp-3", headers=READER)
    assert r.status_code == 200, r.text
    x = r.json()
    assert "m4" in x["code"] and x["thoughts"][0]["id"] == "t-lmul-gemv"


def test_targets_and_tasks_come_from_the_evaluator(client: TestClient) -> None:
    targets = {t["key"]: t for t in client.get("/targets", headers=READER).json()}
    assert {"k1-x60", "k3-x100"} <= set(targets)
    assert targets["k1-x60"]["vlen"] == 256 and targets["k1-x60"]["experiences"] >= 4
    tasks = {t["name"]: t for t in client.get("/tasks", headers=READER).json()}
    assert "sgemv_n" in tasks and tasks["sgemv_n"]["operator"] == "gemv"
    assert tasks["sgemv_n"]["best_speedup"] == 1.8


def test_vocabulary_lists_filter_values(client: TestClient) -> None:
    v = client.get("/vocabulary", headers=READER).json()
    assert "rvv" in v["isas"] and "gemv" in v["operators"] and "compile_error" in v["statuses"]


def test_run_artefacts_are_served_read_only_from_the_run_folder(client: TestClient, api_settings: Settings) -> None:
    folder = api_settings.home / "runs" / SEED_RUN
    (folder / "candidates").mkdir(parents=True, exist_ok=True)
    (folder / "report.md").write_text("# run-seed-1\n")
    (folder / "best.c").write_text("void sgemv_n(void) {}\n")
    (folder / "candidates" / "002.c").write_text("/* step 2 */\n")
    (api_settings.home / "secret.txt").write_text("not for you")
    (folder / "run.json").symlink_to(api_settings.home / "secret.txt")  # planted: resolves outside the folder
    r = client.get(f"/runs/{SEED_RUN}/artefacts", headers=READER)
    assert r.status_code == 200, r.text
    assert [a["name"] for a in r.json()["items"]] == ["report.md", "best.c"] and r.json()["candidates"] == 1
    r = client.get(f"/runs/{SEED_RUN}/artefacts/report.md", headers=READER)
    assert r.status_code == 200 and r.text == "# run-seed-1\n" and r.headers["content-type"].startswith("text/markdown")
    assert client.get(f"/runs/{SEED_RUN}/artefacts/candidates/002.c", headers=READER).text == "/* step 2 */\n"
    # Only the named files: no traversal, no symlink out, no unknown run, a key needed.
    for name in ("../../secret.txt", "..%2F..%2Fsecret.txt", "candidates/../../secret.txt", "settings.toml"):
        r = client.get(f"/runs/{SEED_RUN}/artefacts/{name}", headers=READER)
        assert r.status_code in (403, 404) and "not for you" not in r.text, name
    r = client.get(f"/runs/{SEED_RUN}/artefacts/run.json", headers=READER)
    assert r.status_code == 404 and "not for you" not in r.text
    assert client.get("/runs/no-such-run/artefacts/report.md", headers=READER).status_code == 404
    assert client.get(f"/runs/{SEED_RUN}/artefacts/report.md").status_code == 401
    # The run's parameters, for the page's panel.
    body = client.get(f"/runs/{SEED_RUN}", headers=READER).json()
    assert (body["seed"], body["generator"], body["directions"], body["budget"]) == (0, "offline", 1, 3)
    assert body["runner"] is None and body["bootstrap_id"] is None  # the seeded run records neither


def test_bootstraps_are_listed_newest_first_in_pages(client: TestClient) -> None:
    store = client.app.state.eok.container.store
    at = datetime(2026, 1, 1, tzinfo=UTC)
    boots = [
        Bootstrap(
            id=f"boot-list-{i}",
            tasks='["relu", "sscal"]',
            targets='["k1-x60"]',
            budget=2,
            started_at=at + timedelta(hours=i),
        )
        for i in range(3)
    ]
    runs = [
        Run(id=f"boot-list-2-{t}", bootstrap_id="boot-list-2", task_id=t, target_key="k1-x60", budget=2, status=s)
        for t, s in (("relu", RunStatus.DONE), ("sscal", RunStatus.QUEUED))
    ]
    runs[0].finished_at = at + timedelta(hours=5)
    store.upsert_nodes([*boots, *runs])
    try:
        r = client.get("/bootstraps", params={"limit": 2}, headers=READER)
        assert r.status_code == 200, r.text
        first = r.json()
        assert [b["id"] for b in first["items"]] == ["boot-list-2", "boot-list-1"]  # newest first
        newest = first["items"][0]
        assert (newest["tasks"], newest["targets"], newest["runs_total"], newest["runs_done"]) == (2, 1, 2, 1)
        assert newest["url"] == "/bootstraps/boot-list-2" and newest["active"] is False
        assert newest["created_at"].startswith("2026-01-01T02:00") and newest["updated_at"] >= "2026-01-01T05:00"
        r = client.get("/bootstraps", params={"limit": 2, "cursor": first["next_cursor"]}, headers=READER)
        assert [b["id"] for b in r.json()["items"]] == ["boot-list-0"] and r.json()["next_cursor"] is None
        assert client.get("/bootstraps", params={"cursor": "nope"}, headers=READER).status_code == 422
    finally:
        store.write("MATCH (n) WHERE n.id STARTS WITH 'boot-list-' DETACH DELETE n")
