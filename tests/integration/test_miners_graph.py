"""Mining real git repositories into the real Neo4j: idempotent, incremental, searchable."""

from __future__ import annotations

from pathlib import Path

import pytest

from knowledge.retrieval import SearchFilters
from miners import MineOptions, Miner
from tests.support.gitrepos import EXPECTED, add_commit, build_kernel_repo, init_repo

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
    assert before["Commit"] == len(EXPECTED) and before["IN_REPO"] == len(EXPECTED)

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
    repo_node = container.store.read("MATCH (r:Repository {name: 'test/k'}) RETURN r.last_mined_head AS h")
    assert repo_node[0]["h"] == repo.head.commit.hexsha


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
