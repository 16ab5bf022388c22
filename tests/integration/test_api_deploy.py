"""The container files: docker-compose.yml's structure (PyYAML) and Docker Compose's own validation, and a
Dockerfile that installs every package and serves. No Docker engine runs here, so nothing is built."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import yaml

from core.settings import PROJECT_ROOT

COMPOSE = PROJECT_ROOT / "docker-compose.yml"
DOCKERFILE = PROJECT_ROOT / "Dockerfile"


def compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE.read_text())


def test_compose_runs_neo4j_with_a_volume_and_a_healthcheck() -> None:
    neo4j = compose()["services"]["neo4j"]
    assert neo4j["image"] == "neo4j:5.26-community"
    assert neo4j["environment"]["NEO4J_AUTH"].startswith("neo4j/${NEO4J_PASSWORD")  # from the environment
    volume, mount = neo4j["volumes"][0].split(":")
    assert mount == "/data" and volume in compose()["volumes"]  # a named volume, not a host path
    health = neo4j["healthcheck"]
    assert health["test"][0] == "CMD-SHELL" and "RETURN 1" in health["test"][1]
    assert health["retries"] >= 3 and health["interval"]


def test_compose_service_waits_for_healthy_neo4j_and_points_at_it() -> None:
    services = compose()["services"]
    eok = services["eok"]
    assert eok["build"] == "."
    assert eok["depends_on"] == {"neo4j": {"condition": "service_healthy"}}
    env = eok["environment"]
    assert env["NEO4J_URI"] == "bolt://neo4j:7687"
    assert env["NEO4J_PASSWORD"].startswith("${NEO4J_PASSWORD")
    assert env["EOK_API_KEYS"].startswith("${EOK_API_KEYS")
    assert any(str(p).endswith(":8000") for p in eok["ports"])
    assert set(compose()["volumes"]) == {"neo4j-data", "eok-home"}


def test_docker_compose_accepts_the_file() -> None:
    tool = shutil.which("docker-compose")
    assert tool, "Docker Compose is needed to validate docker-compose.yml: apt-get install docker-compose"
    env = {**os.environ, "NEO4J_PASSWORD": "test-password-1", "EOK_API_KEYS": json.dumps({"k" * 12: "operator"})}
    done = subprocess.run([tool, "-f", str(COMPOSE), "config", "-q"], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    # Without the secrets Compose refuses, naming the variable: nothing starts with a default password.
    env.pop("NEO4J_PASSWORD")
    done = subprocess.run([tool, "-f", str(COMPOSE), "config", "-q"], capture_output=True, text=True, env=env)
    assert done.returncode != 0 and "NEO4J_PASSWORD" in done.stderr


def test_dockerfile_installs_every_package_and_serves() -> None:
    text = DOCKERFILE.read_text()
    assert re.search(r"^FROM python:3\.11-slim\b", text, re.M)
    copied = set(re.findall(r"^COPY (\S+) ", text, re.M))
    packages = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    for pattern in packages["include"]:
        assert pattern.rstrip("*") in copied, f"the Dockerfile does not copy {pattern.rstrip('*')}/"
    assert "cypher" in copied  # schema migrations and saved queries are read from there
    for path in copied - {"pyproject.toml"}:
        assert (PROJECT_ROOT / path).exists(), path
    assert "pip install --no-cache-dir --no-deps -e ." in text
    assert re.search(r'^CMD \["eok", "serve"', text, re.M)
    assert "qemu-user" in text and "clang-22" in text  # runs on the emulated K1 work in the container


def test_compose_neo4j_has_the_local_launchers_hardening(tmp_path: Path) -> None:
    """The container's Neo4j refuses what the local one refuses (knowledge/local_neo4j.hardening)."""
    import fnmatch

    from knowledge.local_neo4j import PROCEDURE_ALLOWLIST, hardening

    env = compose()["services"]["neo4j"]["environment"]
    for key, value in hardening(tmp_path).items():
        name = "NEO4J_" + key.replace("_", "__").replace(".", "_")
        assert name in env, name
        if key == "dbms.security.procedures.allowlist":
            patterns = str(env[name]).split(",")
            assert all(any(fnmatch.fnmatch(p, pat) for pat in patterns) for p in PROCEDURE_ALLOWLIST)
        elif key != "server.directories.import":  # a path inside the container
            assert str(env[name]) == value, name


def test_compose_offers_an_optional_ray_head_and_worker() -> None:
    services = compose()["services"]
    head, worker = services["ray-head"], services["ray-worker"]
    assert head["profiles"] == worker["profiles"] == ["ray"]  # `docker compose up` alone starts no cluster
    assert head["command"][:3] == ["eok", "worker", "--head"] and "--num-cpus" in head["command"]
    assert worker["command"][:4] == ["eok", "worker", "--cluster", "ray-head:6380"]
    assert "EOK_RAY_ADDRESS" in services["eok"]["environment"]
