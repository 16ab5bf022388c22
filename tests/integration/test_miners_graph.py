"""Mining real git repositories into the real Neo4j: idempotent, incremental, searchable."""

from __future__ import annotations

from pathlib import Path

import pytest

from knowledge.retrieval import SearchFilters
from miners import MineOptions, Miner
from tests.support.gitrepos import (
    EXPECTED,
    RVV_DOT,
    add_commit,
    amend_head,
    build_attribution_repo,
    build_kernel_repo,
    init_repo,
)

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
    assert first.thoughts_created == 12 and first.mirrored_commits == 0  # 3 + 4 + 3 + 1 + 1 techniques
    assert first.ideas_created >= 7  # the seven techniques' own ideas, and any groups of them
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
    assert again.thoughts_created == 0 and again.embedded == 0  # the same evidence: nothing new, nothing re-embedded


def _thoughts(store) -> dict[str, dict]:
    rows = store.read(
        "MATCH (i:Idea)-[:HAS_THOUGHT]->(t:Thought) OPTIONAL MATCH (t)-[:EVIDENCED_BY]->(c:Commit) "
        "RETURN t {.*, embedding: null} AS t, i.id AS idea, i.source AS idea_source, collect(c.sha) AS shas"
    )
    return {
        r["t"]["id"]: {**r["t"], "idea": r["idea"], "idea_source": r["idea_source"], "shas": r["shas"]} for r in rows
    }


def test_thoughts_are_technique_instances_with_their_hunk_and_are_searchable(container, tmp_path: Path) -> None:
    repo = build_kernel_repo(tmp_path / "k", huge_mb=1)
    _miner(container).mine(str(tmp_path / "k"), MineOptions(library="openblas", name="test/k"))
    by_id = _thoughts(container.store)
    sdot = next(c for c in repo.iter_commits() if c.summary.startswith("Optimize sdot"))
    dot = by_id[f"thought:{sdot.hexsha[:12]}:rvv:reduction"]
    assert dot["shas"] == [sdot.hexsha] and dot["evidence_commits"] == 1 and dot["prior_speedup"] == pytest.approx(2.1)
    assert "__riscv_vfredusum" in dot["example_code"] and dot["isa"] == "rvv" and dot["rvv_equivalents"] == []
    assert dot["claims"] == [f"2.1x: 'Optimize sdot with RVV intrinsics, 2.1x faster' ({sdot.hexsha[:9]})"]
    neon = next(t for t in by_id.values() if t["isa"] == "neon" and t["technique"] == "prefetch")
    assert "__builtin_prefetch" in neon["example_code"] and neon["prior_speedup"] == pytest.approx(1.35)
    assert "vfmaq_f32 -> __riscv_vfmacc_vv_f32m1" in neon["rvv_equivalents"]
    # Every thought hangs under an idea; a technique's own idea is hand-written, so labelled "starter".
    assert all(t["idea"].startswith(f"idea:{t['technique']}") for t in by_id.values())
    assert all(t["idea_source"] == ("starter" if t["idea"].count(":") == 1 else "mined") for t in by_id.values())
    hits = container.retriever.search(
        "reduce once at the end of a dot product", k=5, filters=SearchFilters(kind="thought", isa="rvv")
    )
    assert hits and all(h.node["isa"] == "rvv" for h in hits)
    assert hits[0].id in by_id and hits[0].evidence


def test_multi_isa_changes_give_per_isa_hunks_and_names_no_speedups(container, tmp_path: Path) -> None:
    repo = build_attribution_repo(tmp_path / "ggml")
    _miner(container).mine(str(tmp_path / "ggml"), MineOptions(library="ggml", name="test/ggml"))
    by_id = _thoughts(container.store)
    sha = {c.summary: c.hexsha for c in repo.iter_commits()}
    silu = sha["ggml : vectorize silu for NEON and AVX2 (1.3x faster)"][:12]
    silu_thoughts = {t["isa"]: t for t in by_id.values() if t["change"] == silu}
    assert set(silu_thoughts) == {"neon", "avx2"}
    neon, avx = silu_thoughts["neon"]["example_code"], silu_thoughts["avx2"]["example_code"]
    assert "vld1q_f32" in neon and "_mm256" not in neon and "arm/vec.c" in neon
    assert "_mm256_loadu_ps" in avx and "vld1q" not in avx
    assert "Copyright" not in neon and "Copyright" not in avx and "#include" not in neon
    assert any(
        e.startswith("_mm256_loadu_ps -> __riscv_vle32_v_f32m1") for e in silu_thoughts["avx2"]["rvv_equivalents"]
    )
    x60 = sha["ggml : faster q8_0 dot on SpacemiT X60 (1.6x vs the x86 port, X100 too)"][:12]
    dispatch = [t for t in by_id.values() if t["change"] == x60]
    assert dispatch and {t["isa"] for t in dispatch} == {"rvv"}  # the #if chain's other ISAs give nothing
    assert all(t["prior_speedup"] == pytest.approx(1.6) for t in dispatch)
    assert "__riscv_vwmacc" in next(t for t in dispatch if t["technique"] == "multi_accumulator")["example_code"]
    why = next(t for t in dispatch if t["technique"] == "multi_accumulator")["description"]
    assert "Why: Four independent widening accumulators hide the vwmacc latency" in why
    commit = container.store.read(
        "MATCH (c:Commit {sha: $s}) RETURN c.perf_claims AS p, c.claim_spans AS s",
        s=sha["ggml : faster q8_0 dot on SpacemiT X60 (1.6x vs the x86 port, X100 too)"],
    )[0]
    assert commit["p"] == [1.6] and "1.6x vs the x86 port" in commit["s"][0]


def test_mirrored_pull_requests_are_one_change_and_nothing_is_re_embedded(container, tmp_path: Path) -> None:
    """A llama.cpp PR synced into ggml ("(#N)" there, "(llama/N)" here) is one thought with both commits."""
    llama, ggml = init_repo(tmp_path / "llama.cpp"), init_repo(tmp_path / "ggml")
    path = "ggml/src/ggml-cpu/arch/riscv/quants.c"
    for r, suffix in ((llama, "#4242"), (ggml, "llama/4242")):
        add_commit(r, "ggml : initial", {path: "// scalar\n"}, 1_700_000_000)
        add_commit(
            r, f"ggml : RVV q8_0 dot with widening accumulators, 1.5x faster ({suffix})", {path: RVV_DOT}, 1_700_000_100
        )
    miner = _miner(container)
    first = miner.mine(str(tmp_path / "llama.cpp"), MineOptions(library="ggml", name="test/llama.cpp"))
    before = _thoughts(container.store)
    assert first.thoughts_created == len(before) > 0 and first.embedded > 0
    second = miner.mine(str(tmp_path / "ggml"), MineOptions(library="ggml", name="test/ggml"))
    after = _thoughts(container.store)
    assert set(after) == set(before) and second.thoughts_created == 0
    assert second.mirrored_commits == len(after) and second.embedded == 0  # same text: not embedded again
    for tid, t in after.items():
        assert t["repos"] == ["test/ggml", "test/llama.cpp"] and len(t["shas"]) == t["evidence_commits"] == 2
        assert (t["title"], t["description"], t["example_code"]) == (
            before[tid]["title"],
            before[tid]["description"],
            before[tid]["example_code"],
        )
    rows = container.store.read("MATCH (t:Thought) WHERE t.change STARTS WITH 'pr' RETURN count(t) AS n")
    assert rows[0]["n"] == len(after)


def test_since_then_plain_mine_loses_nothing_and_full_rewalks(container, tmp_path: Path) -> None:
    repo = build_kernel_repo(tmp_path / "k", huge_mb=1)
    head, base = repo.head.commit.hexsha, repo.commit("HEAD~4").hexsha
    in_range = int(repo.git.rev_list("--count", head, f"^{base}"))
    miner, opts = _miner(container), {"library": "openblas", "name": "test/k"}
    part = miner.mine(str(tmp_path / "k"), MineOptions(since=base, **opts))
    assert part.commits_read == part.new_commits == in_range < len(EXPECTED)
    assert part.mined_ranges == [f"{head}^{base}"]
    stored = container.store.read("MATCH (r:Repository {name: 'test/k'}) RETURN r.last_mined_head AS h")[0]
    assert stored["h"] is None  # the history below the range is not mined yet
    rest = miner.mine(str(tmp_path / "k"), MineOptions(**opts))
    assert not rest.up_to_date and rest.commits_read == len(EXPECTED)
    assert rest.new_commits == len(EXPECTED) - in_range and rest.mined_ranges == []
    assert rest.optimization_commits == sum(1 for v in EXPECTED.values() if v[0])
    row = container.store.read(
        "MATCH (r:Repository {name: 'test/k'}) RETURN r.last_mined_head AS h, r.commits_read AS n, "
        "r.mined_ranges AS ranges"
    )[0]
    assert (row["h"], row["n"], row["ranges"]) == (head, len(EXPECTED), [])
    assert _counts(container.store)["Commit"] == 8  # as one full mine: the 8 candidates, none twice
    assert miner.mine(str(tmp_path / "k"), MineOptions(**opts)).up_to_date
    again = miner.mine(str(tmp_path / "k"), MineOptions(full=True, **opts))
    assert (again.commits_read, again.new_commits, again.thoughts_created, again.embedded) == (len(EXPECTED), 0, 0, 0)
    assert len(again.commits) == 8 and {c["verdict"] for c in again.commits} == {"optimization", "other"}
    sdot = next(c for c in again.commits if c["title"].startswith("Optimize sdot"))
    assert sdot["claims"] == [{"value": 2.1, "span": "Optimize sdot with RVV intrinsics, 2.1x faster", "flag": ""}]


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
    with pytest.raises(InvalidInput, match="--full and --since"):
        _miner(container).mine(str(tmp_path / "empty"), MineOptions(full=True, since="HEAD"))
    with pytest.raises(InvalidInput, match="--library"):
        _miner(container).mine(str(tmp_path / "empty"), MineOptions(library="blis"))


def test_a_repository_without_kernel_code_is_said_so_and_adds_nothing(container, tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "webapp")
    add_commit(
        repo, "Optimize the request router: 3x faster lookups", {"app/router.py": "ROUTES = {}\n"}, 1_700_000_000
    )
    add_commit(repo, "Vectorize the scoring loop with numpy (2x)", {"app/score.py": "import numpy\n"}, 1_700_000_100)
    add_commit(repo, "Docs", {"README.md": "# web app\n", "third_party/lib/fast.c": "int f;\n"}, 1_700_000_200)
    before = _counts(container.store)
    report = _miner(container).mine(str(tmp_path / "webapp"), MineOptions(name="test/webapp"))
    assert report.no_kernel_code and report.commits_read == 0 and report.thoughts_created == 0
    assert _counts(container.store) == before  # no repository, commit, thought or idea added
    # One C file of its own makes it a repository with kernel code again.
    add_commit(repo, "Add a C scoring kernel", {"app/score.c": "float f(float x) { return x; }\n"}, 1_700_000_300)
    assert not _miner(container).mine(str(tmp_path / "webapp"), MineOptions(name="test/webapp")).no_kernel_code
