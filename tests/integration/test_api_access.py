"""API keys and roles, body limits, and the error format (never a stack trace)."""

from __future__ import annotations

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from core.errors import InvalidInput
from service.api.security import KeyRing
from tests.integration.conftest import ANALYST, ANALYST_KEY, OPERATOR, READER, READER_KEY

PROTECTED = [
    ("GET", "/ideas/search?q=gemv"),
    ("GET", "/ideas/idea-lmul"),
    ("GET", "/thoughts/t-lmul-gemv"),
    ("GET", "/experiences"),
    ("GET", "/targets"),
    ("GET", "/tasks"),
    ("GET", "/runs"),
    ("GET", "/queries"),
    ("POST", "/cypher"),
    ("POST", "/runs"),
    ("DELETE", "/runs/run-seed-1"),
]


@pytest.mark.parametrize(("method", "path"), PROTECTED)
def test_no_key_is_401_with_json_error(client: TestClient, method: str, path: str) -> None:
    r = client.request(method, path, json={} if method == "POST" else None)
    assert r.status_code == 401, r.text
    assert r.json()["error"]["code"] == "unauthorized"
    assert "X-API-Key" in r.json()["error"]["hint"]
    assert r.headers["WWW-Authenticate"].startswith("Bearer")


def test_wrong_key_is_401(client: TestClient) -> None:
    r = client.get("/experiences", headers={"X-API-Key": "not-a-real-key-at-all"})
    assert r.status_code == 401
    assert r.json()["error"]["message"] == "the API key is not valid"


def test_bearer_and_header_keys_both_work(client: TestClient) -> None:
    assert client.get("/experiences", headers={"Authorization": f"Bearer {READER_KEY}"}).status_code == 200
    assert client.get("/experiences", headers={"X-API-Key": READER_KEY}).status_code == 200


def test_reader_on_cypher_is_403(client: TestClient) -> None:
    r = client.post("/cypher", json={"query": "RETURN 1 AS one"}, headers=READER)
    assert r.status_code == 403
    err = r.json()["error"]
    assert err["code"] == "forbidden" and "analyst" in err["message"] and "reader" in err["message"]


def test_reader_and_analyst_cannot_start_runs(client: TestClient) -> None:
    for headers in (READER, ANALYST):
        r = client.post("/runs", json={"task": "sscal"}, headers=headers)
        assert r.status_code == 403
        assert "operator" in r.json()["error"]["message"]


def test_higher_roles_include_lower_ones(client: TestClient) -> None:
    assert client.post("/cypher", json={"query": "RETURN 1 AS one"}, headers=OPERATOR).status_code == 200
    assert client.get("/thoughts/t-lmul-gemv", headers={"X-API-Key": ANALYST_KEY}).status_code == 200


def test_public_endpoints_need_no_key(client: TestClient) -> None:
    assert client.get("/health").status_code == 200
    assert client.get("/openapi.json").status_code == 200
    page = client.get("/")
    assert page.status_code == 200 and "<html" in page.text.lower()
    docs = client.get("/docs")
    assert docs.status_code == 200 and "/docs-assets/swagger-ui-bundle.js" in docs.text
    assert client.get("/docs-assets/swagger-ui-bundle.js").status_code == 200  # served locally, no CDN


def test_body_over_the_limit_is_413_declared_or_streamed(client: TestClient) -> None:
    big = "RETURN 1 // " + "x" * 70_000
    r = client.post("/cypher", json={"query": big}, headers=ANALYST)
    assert r.status_code == 413
    assert r.json()["error"]["code"] == "payload_too_large"

    def chunks():  # no Content-Length: the limit must still hold
        for _ in range(20):
            yield b"x" * 8192

    r = client.post("/cypher", content=chunks(), headers={**ANALYST, "Content-Type": "application/json"})
    assert r.status_code == 413


def test_malformed_json_body_is_422_naming_the_problem(client: TestClient) -> None:
    r = client.post("/cypher", content=b"{not json", headers={**ANALYST, "Content-Type": "application/json"})
    assert r.status_code == 422
    assert r.json()["error"]["code"] == "invalid_request"
    assert "body" in r.json()["error"]["message"]
    r = client.post("/cypher", content=b"\xff\xfe\x1c", headers={**ANALYST, "Content-Type": "application/json"})
    assert r.status_code == 422 and "UTF-8" in r.json()["error"]["message"]


def test_unknown_route_and_method_are_json(client: TestClient) -> None:
    r = client.get("/no/such/thing")
    assert r.status_code == 404 and r.json()["error"]["message"] == "no such endpoint: GET /no/such/thing"
    r = client.put("/health")
    assert r.status_code == 405 and r.json()["error"]["code"] == "method_not_allowed"
    r = client.put("/runs", headers=READER)  # two routes share the path: Allow names both methods
    assert r.status_code == 405 and set(r.headers["Allow"].split(", ")) >= {"GET", "POST"}


def test_unexpected_errors_are_generic_500_without_traceback(api_app: FastAPI, client: TestClient) -> None:
    # A route that fails the way a bug would; the handler must hide the details from the client.
    @api_app.get("/__boom", include_in_schema=False)
    def boom() -> None:
        raise RuntimeError("secret internal detail")

    r = client.get("/__boom")
    assert r.status_code == 500
    err = r.json()["error"]
    assert err["code"] == "internal_error"
    assert "secret" not in r.text and "Traceback" not in r.text
    assert "reference" in err["message"]


def test_keyring_rejects_bad_configuration() -> None:
    with pytest.raises(InvalidInput, match="role 'admin'"):
        KeyRing({"long-enough-key": "admin"})
    with pytest.raises(InvalidInput, match="shorter than 8"):
        KeyRing({"short": "reader"})
