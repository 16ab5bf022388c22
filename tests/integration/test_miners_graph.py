"""Mining real git repositories into the real Neo4j: idempotent, incremental, searchable."""

from __future__ import annotations

from pathlib import Path

import pytest

from knowledge.models import Thought
from knowledge.retrieval import SearchFilters
from miners import MineOptions, Miner, gitwalk
from miners.distill import Evidence, build_thoughts
from miners.pipeline import classify_commits
from miners.profiles import OPENBLAS
from tests.support.gitrepos import EXPECTED, add_commit, amend_head, build_kernel_repo, init_repo

pytestmark = pytest.mark.neo4j


def _miner(container) -> Miner:
    return Miner(container.store, lambda: container.embedder, container.settings)


def _counts(store) -> dict[str, int]:
    rows = store.read(
        "MATCH (n) WHERE n:Commit OR n:Thought OR n:Idea OR n:Repository RETURN labels(n)[0] AS l, count(*) AS n"
    )
    rels = store.read("MATCH ()-[r:IN_REPO|HAS_THOUGHT|EVIDENCED_BY]->() RETURN type(r) AS t, count(*) AS n")
    return {r["l"]: r["n"] for r in rows} | {r["t"]: r["n"] for r in rels}


def test_mine_twice_is_a_no_op_and_new_commits_add_only_themselves(container, tmp_path: Path) -> None:
    repo = build_kernel_repo(tmp_path / "k", huge_mb=2)
    miner = _miner(container)
    first = miner.mine(str(tmp_path / "k"), MineOptions(library="openblas", name="test/k"))
    assert first.commits_read == first.new_commits == len(EXPECTED)
    assert first.optimization_commits == sum(1 for v in EXPECTED.values() if v[0])
    assert first.optimization_by_isa == {"rvv": 3, "avx2": 1, "neon": 1}
    assert (first.ideas_created, first.thoughts_created, first.thoughts_merged) == (7, 13, 0)
    before = _counts(container.store)
    # Only commits whose patch was read are nodes (5 optimizations + 3 near misses); the rest are counted.
    assert first.candidates == before["Commit"] == before["IN_REPO"] == 8
    stored = {r["t"] for r in container.store.read("MATCH (c:Commit) RETURN c.title AS t")}
    assert {t for t, v in EXPECTED.items() if v[0]} <= stored and "Update README with build instructions" not in stored
    repo_row = container.store.read("MATCH (r:Repository {name: 'test/k'}) RETURN r.commits_read AS n")
    assert repo_row[0]["n"] == len(EXPECTED)

    again = miner.mine(str(tmp_path / "k"), MineOptions(library="openblas", name="test/k"))
    assert again.up_to_date and again.commits_read == 0
    assert _counts(container.store) == before

    add_commit(
        repo,
        "Unroll RVV sscal by 2 for 1.3x",
        {"kernel/riscv64/scal_rvv.c": "void f(float *x) { x[0] = 1; x[1] = 1; x[2] = 1; x[3] = 1; }\n"},
        1_700_001_000,
    )
    third = miner.mine(str(tmp_path / "k"), MineOptions(library="openblas", name="test/k"))
    assert third.commits_read == third.new_commits == 1
    after = _counts(container.store)
    assert after["Commit"] == before["Commit"] + 1
    repo_node = container.store.read(
        "MATCH (r:Repository {name: 'test/k'}) RETURN r.last_mined_head AS h, r.commits_read AS n"
    )
    assert repo_node[0]["h"] == repo.head.commit.hexsha and repo_node[0]["n"] == len(EXPECTED) + 1


def test_rewritten_history_counts_only_the_new_commits(container, tmp_path: Path) -> None:
    repo = build_kernel_repo(tmp_path / "k", huge_mb=1)
    miner = _miner(container)
    miner.mine(str(tmp_path / "k"), MineOptions(library="openblas", name="test/k"))
    # Amend the newest commit: the mined head is no longer an ancestor, so the whole history is walked.
    amend_head(repo, "Add generated exp table (regenerated)", 1_700_002_000)
    again = miner.mine(str(tmp_path / "k"), MineOptions(library="openblas", name="test/k"))
    assert again.commits_read == len(EXPECTED) and again.new_commits == 1
    row = container.store.read(
        "MATCH (r:Repository {name: 'test/k'}) RETURN r.commits_read AS n, r.last_mined_head AS h"
    )
    assert row[0]["n"] == len(EXPECTED) and row[0]["h"] == repo.head.commit.hexsha
    assert again.thoughts_created == 0  # the same evidence: every thought merged into itself


def test_a_new_thought_folds_into_a_near_duplicate_already_in_the_graph(container, tmp_path: Path) -> None:
    """Near-duplicate merging also compares new thoughts with those in the graph (by embedding similarity)."""
    build_kernel_repo(tmp_path / "k", huge_mb=1)
    handle = gitwalk.open_repository(str(tmp_path / "k"), tmp_path)
    warnings = gitwalk.WalkWarnings()
    mined = classify_commits(handle, OPENBLAS, gitwalk.walk_commits(handle, ["HEAD"], warnings), warnings)
    evidence = [
        Evidence(m.raw.sha, "test/k", m.raw.title, m.classification, m.patch, frozenset(m.triage.patch_paths))
        for m in mined
        if m.classification.is_optimization
    ]
    twin = build_thoughts(evidence)["thought:reduction:dot:riscv"]
    # A curated thought, same operator and ISA family, same text: what mining would write under its own id.
    seeded = Thought(
        id="thought:curated:rvv-dot-reduction",
        idea_id="idea:reduction",
        title=twin.title,
        description=twin.description,
        technique="reduction",
        isa="rvv",
        operator="dot",
        source="starter",
    )
    container.ingestor.ingest([seeded])
    report = _miner(container).mine(str(tmp_path / "k"), MineOptions(library="openblas", name="test/k"))
    assert report.thoughts_merged == 1 and report.thoughts_created == 12 and report.thoughts_updated == 1
    ids = {r["id"] for r in container.store.read("MATCH (t:Thought) RETURN t.id AS id")}
    assert "thought:reduction:dot:riscv" not in ids and seeded.id in ids
    row = container.store.read(
        "MATCH (t:Thought {id: $id})-[:EVIDENCED_BY]->(c:Commit) "
        "RETURN t.evidence_commits AS n, t.source AS source, t.description AS d, collect(c.title) AS titles",
        id=seeded.id,
    )[0]
    assert row["titles"] == ["Optimize sdot with RVV intrinsics, 2.1x faster"] and row["n"] == 1
    assert row["source"] == "starter" and row["d"] == twin.description  # the curated text is kept
    # Mining again is a no-op, and a thought already in the graph never folds into another one.
    assert _miner(container).mine(str(tmp_path / "k"), MineOptions(library="openblas", name="test/k")).up_to_date


def test_thoughts_group_evidence_and_are_searchable(container, tmp_path: Path) -> None:
    build_kernel_repo(tmp_path / "k", huge_mb=1)
    _miner(container).mine(str(tmp_path / "k"), MineOptions(library="openblas", name="test/k"))
    rows = container.store.read(
        "MATCH (i:Idea)-[:HAS_THOUGHT]->(t:Thought)-[:EVIDENCED_BY]->(c:Commit) "
        "RETURN t.id AS id, i.id AS idea, t.evidence_commits AS n, t.prior_speedup AS prior, "
        "t.example_code AS code, collect(c.title) AS titles ORDER BY id"
    )
    by_id = {r["id"]: r for r in rows}
    assert set(by_id) == {
        "thought:fusion:axpy:arm",
        "thought:fusion:gemv:x86",
        "thought:multi_accumulator:gemv:x86",
        "thought:prefetch:axpy:arm",
        "thought:reduction:dot:riscv",
        "thought:unroll:axpy:arm",
        "thought:unroll:gemv:x86",
        "thought:vector_length:dot:riscv",
        "thought:vector_length:elementwise:riscv",
        "thought:vectorize:axpy:arm",
        "thought:vectorize:dot:riscv",
        "thought:vectorize:elementwise:riscv",
        "thought:vectorize:gemv:x86",
    }
    dot = by_id["thought:reduction:dot:riscv"]
    assert dot["idea"] == "idea:reduction" and dot["n"] == 1 and dot["prior"] == pytest.approx(2.1)
    assert "vfredusum" in dot["code"]
    assert by_id["thought:prefetch:axpy:arm"]["prior"] == pytest.approx(1.35)
    hits = container.retriever.search(
        "reduce once at the end of a dot product", k=5, filters=SearchFilters(kind="thought", isa="rvv")
    )
    assert hits and all(h.node["isa"] == "rvv" for h in hits)
    assert hits[0].id in by_id and hits[0].evidence


def test_empty_repository_and_bad_input(container, tmp_path: Path) -> None:
    from core.errors import InvalidInput, NotFound

    init_repo(tmp_path / "empty")
    report = _miner(container).mine(str(tmp_path / "empty"), MineOptions(name="empty"))
    assert report.up_to_date and report.head is None
    with pytest.raises(NotFound, match="no such path"):
        _miner(container).mine(str(tmp_path / "nope"))
    (tmp_path / "plain").mkdir()
    with pytest.raises(InvalidInput, match="not a git repository"):
        _miner(container).mine(str(tmp_path / "plain"))
    with pytest.raises(InvalidInput, match="--library"):
        _miner(container).mine(str(tmp_path / "empty"), MineOptions(library="blis"))
