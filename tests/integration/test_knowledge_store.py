"""The graph store, embeddings, FAISS cache and hybrid retrieval against the real Neo4j."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

from knowledge.models import (
    Commit,
    Experience,
    Idea,
    Relationship,
    Repository,
    Run,
    Target,
    Task,
    Thought,
)
from knowledge.retrieval import SearchFilters

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


def sample_nodes() -> list:
    return [
        Repository(
            name="openblas",
            url="https://example.invalid/openblas.git",
            library="openblas",
            last_mined_head="a" * 40,
            mined_at=NOW,
            commits_read=12,
        ),
        Commit(
            sha="b" * 40,
            repo="openblas",
            title="RVV sgemv: use LMUL=8",
            message="2.1x faster on K1",
            author="dev",
            authored_at=NOW,
            files=["kernel/riscv64/gemv_t_vector.c"],
            insertions=40,
            deletions=10,
            isas=["rvv"],
            operators=["gemv"],
            techniques=["vector_length"],
            perf_claims=[2.1],
            score=0.9,
            reasons=["kernel path", "perf claim"],
            is_optimization=True,
        ),
        Idea(
            id="idea:lmul",
            title="Use the widest register group the kernel can afford",
            principle="Bigger LMUL amortises loop overhead",
            techniques=["vector_length"],
        ),
        Thought(
            id="th:lmul:gemv:riscv",
            idea_id="idea:lmul",
            title="LMUL 8 for RVV gemv_t",
            description="Process 8 registers per vle32 in the transposed GEMV",
            example_code="vle32_v_f32m8",
            identifiers="__riscv_vle32_v_f32m8 __riscv_vfmacc_vv_f32m8",
            technique="vector_length",
            isa="rvv",
            operator="gemv",
            evidence_commits=1,
            prior_speedup=2.1,
        ),
        Target(key="k1-x60", name="SpacemiT K1 (X60)", isa="rv64gcv", vlen=256, dlen=128, clock_ghz=1.6),
        Task(
            id="sgemv_t",
            name="sgemv_t",
            category="blas",
            operator="gemv",
            dtype="f32",
            shapes='[{"m": 64, "n": 64}]',
            description="y = A^T x",
        ),
        Run(id="run-1", task_id="sgemv_t", target_key="k1-x60", budget=8, directions=2, started_at=NOW),
        Experience(
            id="exp-1",
            task_id="sgemv_t",
            target_key="k1-x60",
            run_id="run-1",
            thought_ids=["th:lmul:gemv:riscv"],
            code="void f(void){}",
            code_hash="c" * 64,
            status="ok",
            speedup=1.7,
            baseline_cycles=1000.0,
            candidate_cycles=588.0,
            summary="LMUL 8 gemv_t: ok, 1.7x",
            created_at=NOW,
        ),
    ]


def sample_rels() -> list[Relationship]:
    def rel(t: str, sl: str, sk: str, el: str, ek: str, **p) -> Relationship:
        return Relationship(type=t, start_label=sl, start_key=sk, end_label=el, end_key=ek, props=p)

    return [
        rel("IN_REPO", "Commit", "b" * 40, "Repository", "openblas"),
        rel("HAS_THOUGHT", "Idea", "idea:lmul", "Thought", "th:lmul:gemv:riscv"),
        rel("EVIDENCED_BY", "Thought", "th:lmul:gemv:riscv", "Commit", "b" * 40),
        rel("APPLIED", "Experience", "exp-1", "Thought", "th:lmul:gemv:riscv"),
        rel("FOR_TASK", "Experience", "exp-1", "Task", "sgemv_t"),
        rel("ON_TARGET", "Experience", "exp-1", "Target", "k1-x60"),
        rel("IN_RUN", "Experience", "exp-1", "Run", "run-1"),
    ]


def test_every_model_round_trips(container) -> None:
    nodes = sample_nodes()
    container.ingestor.ingest(nodes, sample_rels())
    for node in nodes:
        back = container.store.get_node(type(node), node.key_value())
        assert back == node, node.label


def test_ingesting_the_same_batch_twice_leaves_identical_counts(container) -> None:
    first = container.ingestor.ingest(sample_nodes(), sample_rels())
    counts = container.store.stats()
    second = container.ingestor.ingest(sample_nodes(), sample_rels())
    assert container.store.stats() == counts
    assert first.embedded == 4  # Idea, Thought, Task, Experience
    assert second.embedded == 0  # unchanged text is not embedded again
    assert counts["relationships"]["HAS_THOUGHT"] == 1


def test_changed_text_is_re_embedded(container) -> None:
    container.ingestor.ingest(sample_nodes())
    idea = Idea(id="idea:lmul", title="A different principle altogether", techniques=["unroll"])
    assert container.ingestor.ingest([idea]).embedded == 1


def _thoughts(n: int, isa: str = "rvv", operator: str = "dot") -> list[Thought]:
    techs = ["unroll", "multi_accumulator", "prefetch", "packing"]
    return [
        Thought(
            id=f"t{i}",
            idea_id="idea:x",
            title=f"{techs[i % 4]} trick number {i} for {operator}",
            description=f"apply {techs[i % 4]} to the {operator} loop",
            technique=techs[i % 4],
            isa=isa,
            operator=operator,
        )
        for i in range(n)
    ]


def test_faiss_index_deleted_or_stale_is_rebuilt_with_same_answers(container) -> None:
    container.ingestor.ingest([Idea(id="idea:x", title="x"), *_thoughts(40)])
    assert container.index.ensure_fresh() == "rebuilt"  # no file yet
    before = [h.id for h in container.retriever.search("prefetch trick for dot", k=5)]
    assert container.index.ensure_fresh() == "fresh"

    for f in (container.settings.home / "index").glob("faiss-*"):
        f.unlink()
    container.__dict__.pop("index")
    container.__dict__.pop("retriever")
    assert container.index.ensure_fresh() == "rebuilt"
    assert [h.id for h in container.retriever.search("prefetch trick for dot", k=5)] == before

    # A second process (a new index object) loads the file instead of rebuilding.
    container.__dict__.pop("index")
    container.__dict__.pop("retriever")
    assert container.index.ensure_fresh() == "loaded"

    # The graph moves on: the index catches up without a full rebuild and finds the new node.
    container.ingestor.ingest(
        [
            Thought(
                id="t-new",
                idea_id="idea:x",
                title="software pipelining of vle32 loads",
                technique="prefetch",
                isa="rvv",
                operator="dot",
            )
        ]
    )
    assert container.index.ensure_fresh() == "updated"
    thoughts_only = SearchFilters(kind="thought")  # idea:x gathers half the score of each of its 41 thoughts
    assert container.retriever.search("software pipelining vle32 loads", k=1, filters=thoughts_only)[0].id == "t-new"

    # A node deleted behind the index's back: counts disagree, so it rebuilds.
    container.store.write("MATCH (t:Thought {id: 't0'}) DETACH DELETE t")
    container.store.bump_embedding_generation()
    assert container.index.ensure_fresh() == "rebuilt"
    assert container.index.size == 40 + 1 - 1 + 1  # thoughts + t-new - t0 + the idea


def test_corrupt_index_file_is_rebuilt(container) -> None:
    container.ingestor.ingest([Idea(id="idea:x", title="x"), *_thoughts(10)])
    container.index.ensure_fresh()
    for f in (container.settings.home / "index").glob("faiss-*.faiss"):
        f.write_bytes(b"not a faiss index")
    container.__dict__.pop("index")
    assert container.index.ensure_fresh() == "rebuilt"
    assert container.index.size == 11


def test_filters_work_together_with_hybrid_search(container) -> None:
    nodes = [Idea(id="idea:x", title="x"), *_thoughts(8, "rvv", "dot")]
    nodes += [t.model_copy(update={"id": f"n{t.id}", "isa": "neon"}) for t in _thoughts(8, "neon", "dot")]
    nodes += [t.model_copy(update={"id": f"g{t.id}", "operator": "gemv"}) for t in _thoughts(8, "rvv", "gemv")]
    rels = [
        Relationship(type="HAS_THOUGHT", start_label="Idea", start_key="idea:x", end_label="Thought", end_key=n.id)
        for n in nodes[1:]
    ]
    container.ingestor.ingest(nodes, rels)

    hits = container.retriever.search("unroll trick", k=30, filters=SearchFilters(isa="rvv", operator="dot"))
    thoughts = [h for h in hits if h.kind == "thought"]
    assert thoughts and all(h.node["isa"] == "rvv" and h.node["operator"] == "dot" for h in thoughts)
    assert {h.id for h in thoughts} <= {f"t{i}" for i in range(8)}

    only = container.retriever.search("unroll", k=30, filters=SearchFilters(kind="thought", technique="unroll"))
    assert only and all(h.kind == "thought" and h.node["technique"] == "unroll" for h in only)

    ideas = container.retriever.search("trick", k=5, filters=SearchFilters(kind="idea"))
    assert [h.id for h in ideas] == ["idea:x"]


def test_full_text_finds_intrinsic_names_and_reports_sources(container) -> None:
    container.ingestor.ingest(sample_nodes(), sample_rels())
    hits = container.retriever.search("__riscv_vle32_v_f32m8", k=3, filters=SearchFilters(kind="thought"))
    assert hits[0].id == "th:lmul:gemv:riscv"
    assert "fulltext" in hits[0].sources
    assert hits[0].evidence[0]["sha"] == "b" * 40  # graph expansion attaches the evidence commit


def test_measured_effect_on_the_target_outranks_mined_evidence(container) -> None:
    a = Thought(
        id="ta",
        idea_id="idea:x",
        title="unroll the dot loop by four",
        technique="unroll",
        isa="rvv",
        operator="dot",
        evidence_commits=3,
    )
    b = Thought(
        id="tb",
        idea_id="idea:x",
        title="unroll the dot loop by eight",
        technique="unroll",
        isa="rvv",
        operator="dot",
        evidence_commits=3,
    )
    container.ingestor.ingest([Idea(id="idea:x", title="x"), a, b, Target(key="k1-x60")])
    base = {
        h.id: h.score
        for h in container.retriever.search("unroll the dot loop", k=5, filters=SearchFilters(kind="thought"))
    }
    loser = min(base, key=base.__getitem__)
    container.store.upsert_relationships(
        [
            Relationship(
                type="EFFECT_ON",
                start_label="Thought",
                start_key=loser,
                end_label="Target",
                end_key="k1-x60",
                props={
                    "trials": 10,
                    "correct": 10,
                    "successes": 9,
                    "sum_log_speedup": 10 * np.log(2.5),
                    "sum_log_gain": 10 * np.log(1.8),
                },
            )
        ]
    )
    hits = container.retriever.search(
        "unroll the dot loop", k=5, filters=SearchFilters(kind="thought", target="k1-x60")
    )
    assert hits[0].id == loser
    assert hits[0].measured and hits[0].measured["trials"] == 10
    assert np.isclose(hits[0].measured["mean_speedup"], 2.5) and np.isclose(hits[0].measured["mean_gain"], 1.8)


def test_unknown_filter_value_is_an_error_naming_it(container) -> None:
    from core.errors import InvalidInput

    with pytest.raises(InvalidInput, match="filter isa"):
        container.retriever.search("x", filters=SearchFilters(isa="mmx2000"))


def test_neo4j_vector_index_is_synced_after_ingest(container) -> None:
    store = container.store
    container.ingestor.ingest([Idea(id="idea:x", title="x"), *_thoughts(12)])
    stored = store.read("MATCH (t:Thought {id: 't3'}) RETURN t.embedding AS v, t.embedding_vector AS f")[0]
    assert isinstance(stored["v"], bytes) and len(stored["v"]) == 4 * 384  # float32 bytes, not a list
    assert stored["f"] is None  # the float-list copy for the Neo4j index is not in the ingest path
    assert store.vector_index_pending() == 13

    assert store.sync_vector_index() == 13
    assert store.vector_index_pending() == 0
    assert store.sync_vector_index() == 0  # nothing new: a no-op
    store.read("CALL db.awaitIndexes(60)")
    vec = container.embedder.embed([_thoughts(12)[3].embedding_text()])[0].tolist()
    rows = store.read(
        "CALL db.index.vector.queryNodes('thought_embedding_vector', 3, $v) YIELD node, score "
        "RETURN node.id AS id, score",
        v=vec,
    )
    assert rows[0]["id"] == "t3" and rows[0]["score"] > 0.99

    # Re-embedded text is synced again; unchanged nodes are not copied twice.
    changed = _thoughts(12)[5].model_copy(update={"title": "a completely different title"})
    container.ingestor.ingest([changed])
    assert store.vector_index_pending() == 1
    assert store.sync_vector_index() == 1


def test_float_list_embeddings_of_older_graphs_still_load(container) -> None:
    """Graphs written before schema 6 stored float lists: FAISS and the vector sync read both forms."""
    container.ingestor.ingest([Idea(id="idea:x", title="x"), *_thoughts(6)])
    container.store.write(
        "MATCH (t:Thought {id: 't2'}) SET t.embedding = $v", v=container.embedder.embed(["legacy"])[0].tolist()
    )
    assert container.index.ensure_fresh() == "rebuilt"
    assert container.index.size == 7
    assert container.retriever.search("legacy", k=1, filters=SearchFilters(kind="thought"))[0].id == "t2"
    assert container.store.sync_vector_index() == 7


def test_search_answers_are_reused_until_the_graph_changes(container, neo4j_settings) -> None:
    import time

    from knowledge.store import GraphStore
    from knowledge.vector_index import FRESHNESS_CHECK_S

    container.ingestor.ingest([Idea(id="idea:x", title="x"), *_thoughts(10)])
    thoughts = SearchFilters(kind="thought")
    first = container.retriever.search("prefetch trick for dot", k=3, filters=thoughts)
    again = container.retriever.search("prefetch trick for dot", k=3, filters=thoughts)
    assert [h.id for h in again] == [h.id for h in first]
    assert (container.retriever.cache_hits, container.retriever.cache_misses) == (1, 1)

    # This process writes: the next search looks again and finds the new thought at once.
    new = Thought(
        id="t-new",
        idea_id="idea:x",
        title="prefetch trick for dot, the best one",
        technique="prefetch",
        isa="rvv",
        operator="dot",  # like its neighbours: the query names the operator, and retrieval weighs that
    )
    container.ingestor.ingest([new])
    assert "t-new" in [h.id for h in container.retriever.search("prefetch trick for dot", k=3, filters=thoughts)]
    assert container.retriever.cache_misses == 2

    # Another process writes (its own connection): seen once the freshness window has passed.
    with GraphStore.connect(neo4j_settings, migrate=False) as other:
        other.write("MATCH (t:Thought {id: 't-new'}) SET t.title = 'renamed'")
    time.sleep(FRESHNESS_CHECK_S + 0.05)
    hits = container.retriever.search("prefetch trick for dot", k=3, filters=thoughts)
    assert container.retriever.cache_misses == 3
    assert "renamed" in [h.title for h in hits if h.id == "t-new"] or "t-new" not in [h.id for h in hits]


def test_index_of_a_wiped_graph_is_not_taken_for_fresh(container) -> None:
    """A wiped and refilled graph restarts the generation counter; the epoch tells the two graphs apart."""
    container.ingestor.ingest([Idea(id="idea:x", title="x"), *_thoughts(5)])
    assert container.index.ensure_fresh() == "rebuilt"
    container.store.write("MATCH (n) WHERE NOT n:Migration DETACH DELETE n")
    container.ingestor.ingest([Idea(id="idea:y", title="y"), *_thoughts(5, operator="gemv")])
    container.__dict__.pop("index")  # a new process: finds the saved file with the same generation number
    assert container.index.ensure_fresh() == "rebuilt"
    vec = container.embedder.embed_query(_thoughts(5)[1].embedding_text())
    hits = container.index.search(vec, 5, {"Thought"}, {"operator": "gemv"})  # the old graph had only "dot"
    assert len(hits) == 5


def test_index_that_looked_while_a_writer_was_storing_sees_the_rest(container) -> None:
    """A reader catching up between a writer's generation bump and its node writes must not lose them."""
    from knowledge.store import embedding_properties

    store, index = container.store, container.index
    container.ingestor.ingest([Idea(id="idea:x", title="x"), *_thoughts(3)])
    assert index.ensure_fresh() == "rebuilt"
    gen = store.bump_embedding_generation()  # a writer reserved its generation...
    assert index.ensure_fresh() == "updated"  # ...a reader looked (nothing stored yet)...
    late = Thought(id="t-late", idea_id="idea:x", title="late arrival", technique="unroll")
    vec = container.embedder.embed([late.embedding_text()])[0]
    props = embedding_properties(vec, "h", container.embedder.model_name, gen)
    store.upsert_nodes([late], extra={"t-late": props})  # ...then the nodes arrive, and the writer bumps again
    assert index.ensure_fresh() == "updated"  # caught up incrementally, not by a full rebuild
    assert index.size == 5 and index.search(vec, 1, {"Thought"})[0].key == "t-late"
