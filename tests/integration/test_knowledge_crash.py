"""kill -9 of Neo4j in the middle of a large ingest: restart, re-run, and the graph is complete, no duplicates."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from knowledge import local_neo4j
from knowledge.store import GraphStore
from tests.conftest import free_port, local_test_settings

N = 6_000
BATCH = 1_000  # the ingest is killed after two committed batches of six

INGEST = textwrap.dedent(
    """
    import sys
    import numpy as np
    from core.settings import Settings
    from knowledge.embeddings import Embedder
    from knowledge.ingest import Ingestor
    from knowledge.models import Idea, Relationship, Thought
    from knowledge.store import GraphStore

    home, port, n, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    s = Settings(home=home, local_neo4j_port=port, NEO4J_URI=None)
    store = GraphStore.connect(s)
    emb = Embedder.from_settings(s)
    rng = np.random.default_rng(0)
    for start in range(0, n, batch):
        ids = range(start, min(n, start + batch))
        nodes = [Idea(id="idea:x", title="x")] + [
            Thought(id=f"t{i}", idea_id="idea:x", title=f"thought {i}", technique="unroll") for i in ids]
        rels = [Relationship(type="HAS_THOUGHT", start_label="Idea", start_key="idea:x", end_label="Thought",
                             end_key=f"t{i}") for i in ids]
        vecs = {f"t{i}": v for i, v in zip(ids, rng.standard_normal((len(ids), 384)).astype("float32"))}
        Ingestor(store, emb).ingest(nodes, rels, precomputed=vecs)
        print("batch", start, flush=True)
    print("done", flush=True)
    """
)


def _ingest(home: Path, port: int) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", INGEST, str(home), str(port), str(N), str(BATCH)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )


def test_kill_9_mid_ingest_then_rerun_is_complete_without_duplicates(tmp_path: Path) -> None:
    port = free_port()
    settings = local_test_settings(tmp_path, port)
    local_neo4j.start(settings, watch_pid=os.getpid())
    try:
        proc = _ingest(settings.home, port)
        batches = 0
        deadline = time.monotonic() + 300
        while batches < 2 and time.monotonic() < deadline:  # kill once part of the data is committed
            line = proc.stdout.readline()
            assert line, "ingest process ended early"
            batches += line.startswith("batch")
        os.kill(local_neo4j.pid(settings), signal.SIGKILL)
        proc.wait(timeout=120)
        assert proc.returncode != 0, "the ingest must notice the dead server"

        local_neo4j.start(settings, watch_pid=os.getpid())
        with GraphStore.connect(settings) as store:
            partial = store.read("MATCH (t:Thought) RETURN count(t) AS n")[0]["n"]
        assert 0 < partial < N

        rerun = _ingest(settings.home, port)
        out, _ = rerun.communicate(timeout=600)
        assert rerun.returncode == 0, out
        with GraphStore.connect(settings) as store:
            counts = store.read(
                "MATCH (t:Thought) RETURN count(t) AS n, count(DISTINCT t.id) AS ids, count(t.embedding) AS embedded"
            )[0]
            rels = store.read("MATCH (:Idea)-[r:HAS_THOUGHT]->(:Thought) RETURN count(r) AS n")[0]["n"]
            ideas = store.read("MATCH (i:Idea) RETURN count(i) AS n")[0]["n"]
        assert counts == {"n": N, "ids": N, "embedded": N}
        assert rels == N
        assert ideas == 1
    finally:
        local_neo4j.stop(settings)
