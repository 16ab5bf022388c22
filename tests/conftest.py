"""Shared pytest fixtures. Each owner keeps their fixtures in their own delimited section."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from core.settings import Settings

if TYPE_CHECKING:
    from knowledge.store import GraphStore

# ======================================================================================================
# Neo4j (owner: local Neo4j / `eok db`). A real server for the whole session, never a mock.
#
#   neo4j_settings  session: Settings pointing at a running Neo4j. By default a private one, started
#                   here on port EOK_TEST_NEO4J_PORT (default: a free port the OS picks) with its data in
#                   a temp dir, and stopped at the end. With EOK_TEST_NEO4J_URI or NEO4J_URI set, that
#                   server is used instead by the first pytest-xdist worker (or the only process), and
#                   the `store` fixture WIPES its data: point it at a scratch database only.
#   store           function: a GraphStore on an emptied database (schema and migration records kept).
#
# If Neo4j cannot start, every test using these fixtures errors with the reason; nothing is skipped.
# ======================================================================================================


def free_port() -> int:
    """A port nothing listens on now (the OS picks it), for a server started right after."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _xdist_worker() -> str:
    """This process's pytest-xdist worker ("gw0", "gw1", ...), or "" when the suite runs in one process."""
    return os.environ.get("PYTEST_XDIST_WORKER", "")


def _test_neo4j_port() -> int:
    explicit = os.environ.get("EOK_TEST_NEO4J_PORT")
    if explicit and _xdist_worker() in ("", "gw0"):
        return int(explicit)  # asked for: used as is, and start fails loudly if it is taken
    # Several sessions (and each xdist worker) may run at once on one machine: never share (and wipe)
    # another's server. A port the OS just handed out is not handed out again at once.
    return free_port()


def local_test_settings(root: Path, port: int) -> Settings:
    """Settings for a private local Neo4j under `root` (also used by tests that start their own)."""
    return Settings(
        home=root / "home",
        local_neo4j_port=port,
        local_neo4j_data=root / "neo4j",
        NEO4J_URI=None,  # a NEO4J_URI in the environment must not redirect a private server
    )


@pytest.fixture(scope="session")
def neo4j_settings(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    from knowledge import local_neo4j

    root = tmp_path_factory.mktemp("neo4j-session")
    remote = os.environ.get("EOK_TEST_NEO4J_URI") or os.environ.get("NEO4J_URI")
    # Under pytest-xdist only the first worker uses a given server; the others start private ones, since
    # each test empties the graph it uses.
    if remote and _xdist_worker() in ("", "gw0"):
        settings = Settings(home=root / "home", NEO4J_URI=remote)
        local_neo4j.start(settings)  # only checks that it answers; raises Unavailable naming it if not
        yield settings
        return
    settings = local_test_settings(root, _test_neo4j_port())
    # watch_pid: if this session dies without teardown, the server stops itself instead of lingering.
    local_neo4j.start(settings, watch_pid=os.getpid())
    try:
        yield settings
    finally:
        local_neo4j.stop(settings)


@pytest.fixture(scope="session")
def _session_store(neo4j_settings: Settings) -> Iterator[GraphStore]:
    from neo4j.exceptions import TransientError

    from knowledge.store import GraphStore

    # Connecting applies the schema migrations once per session. On a brand-new database a schema statement
    # can hit Neo4j's DeadlockDetected (a TransientError: "retry") against background index population;
    # the migrations are idempotent, so retrying is what Neo4j prescribes. Any other error fails loudly.
    for attempt in range(3):
        try:
            store = GraphStore.connect(neo4j_settings)
            break
        except TransientError:
            if attempt == 2:
                raise
            time.sleep(1.0)
    try:
        yield store
    finally:
        store.close()


@pytest.fixture
def store(_session_store: GraphStore) -> GraphStore:
    """The session's GraphStore with every node except the migration records deleted first."""
    with _session_store.session() as s:
        # Batched, in auto-commit transactions, so a large graph left by a previous test fits in memory.
        s.run("MATCH (n) WHERE NOT n:Migration CALL { WITH n DETACH DELETE n } IN TRANSACTIONS OF 10000 ROWS").consume()
    return _session_store


# A conftest can hold only one function per hook name: extend this one rather than defining another.
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Tests that use the real Neo4j get the `neo4j` marker, so `-m "not neo4j"` selects the rest.
    for item in items:
        if "neo4j_settings" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.neo4j)


# ======================================================================================================
# end of the Neo4j section
# ======================================================================================================


# ======================================================================================================
# Knowledge layer (owner: knowledge/). The real bundled embedding model, loaded once per session.
#
#   embedder        session: knowledge.embeddings.Embedder with the bundled all-MiniLM-L6-v2.
#   worker_embedder session: another Embedder of that model (own ONNX session and cache), as a worker's.
#   container       function: service.bootstrap.Container on the test Neo4j, an emptied graph, a private
#                   home (FAISS files, caches) and the session's embedder.
# ======================================================================================================


@pytest.fixture(scope="session")
def embedder(tmp_path_factory: pytest.TempPathFactory):
    from knowledge.embeddings import Embedder

    return Embedder.from_settings(Settings(home=tmp_path_factory.mktemp("embed-home")))


@pytest.fixture(scope="session")
def worker_embedder(embedder, tmp_path_factory: pytest.TempPathFactory):
    """A second Embedder of the same model as a Ray worker has one: its own ONNX session and its own cache
    (the session embedder's ONNX export is shared, so nothing is exported twice)."""
    from knowledge.embeddings import Embedder

    embedder.embed(["load the model"])  # makes the ONNX export the worker loads
    home = tmp_path_factory.mktemp("worker-home")
    (home / "cache").mkdir()
    (home / "cache" / "onnx").symlink_to(embedder._encoder._onnx_dir)
    return Embedder.from_settings(Settings(home=home))


@pytest.fixture
def container(neo4j_settings: Settings, store: GraphStore, embedder, tmp_path: Path):
    from service.bootstrap import Container

    settings = neo4j_settings.model_copy(update={"home": tmp_path / "home"})
    c = Container(settings)
    c.__dict__["store"] = store  # share the session's connection; the fixture emptied it
    c.__dict__["embedder"] = embedder
    return c


# ======================================================================================================
# end of the knowledge section
# ======================================================================================================
