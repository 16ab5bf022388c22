"""The agent's context when retrieval's indexes lag the graph (thoughts written a moment ago)."""

from __future__ import annotations

from agent.context import gather
from evaluator.targets import load_target
from evaluator.tasks import load_task
from knowledge.starter import starter_knowledge


class IndexNotCaughtUp:
    """Answers like a retriever whose FAISS cache and full-text index have not seen the new thoughts yet."""

    def search(self, query, k=10, filters=None):
        return []


def test_directions_come_from_the_graph_when_retrieval_has_not_caught_up(container) -> None:
    container.ingestor.ingest(*starter_knowledge())
    task, target = load_task("saxpy"), load_target("k1-x60")
    ctx = gather(container.store, IndexNotCaughtUp(), task, target, directions=3)
    assert len(ctx.directions) == 3
    thoughts = [t for d in ctx.directions for t in d.thoughts]
    stored = {r["id"] for r in container.store.read("MATCH (t:Thought) RETURN t.id AS id")}
    assert thoughts and {t.id for t in thoughts} <= stored


def test_retrieval_is_used_when_it_answers(container) -> None:
    container.ingestor.ingest(*starter_knowledge())
    task, target = load_task("saxpy"), load_target("k1-x60")
    ctx = gather(container.store, container.retriever, task, target, directions=2)
    assert ctx.directions and any(t.relevance > 0 for d in ctx.directions for t in d.thoughts)


IQ1S_HUNK = (
    "// ggml/src/ggml-cpu/arch/x86/quants.c @ 0123abcd9 (avx2)\n@@ -1 +1 @@\n"
    "+        const __m256i q1b = _mm256_set_epi64x(iq1s_grid[qs[3] | ((qh[ib] >> 3) & 0x700)], iq1s_grid[qs[2]]);\n"
    '+        __asm__ __volatile__("" ::: "memory");'
)


def test_sdot_is_offered_fitting_thoughts_and_directions_on_accumulators_and_lmul(container) -> None:
    """The issue's sdot finding: an iq1_s lookup-table hunk (quantized, with an asm barrier) was the applied
    thought and no direction was about accumulators or LMUL. Thoughts named for the query rank it first."""
    from knowledge.models import Idea, Relationship, Thought
    from knowledge.taxonomy import Isa, Operator, Technique

    nodes, rels = starter_knowledge()
    nodes += [
        Idea(id="idea:iq1s", title="sdot dot product lookup tables", principle="vectorize the dot product"),
        Thought(
            id="thought:iq1s:avx2:vectorize",
            idea_id="idea:iq1s",
            title="ggml : faster sdot dot product for iq1_s on AVX2 [vectorize on avx2]",
            description="Single-precision dot product vector RISC-V sdot: lookup tables for the iq1_s dot product.",
            example_code=IQ1S_HUNK,
            technique=Technique.VECTORIZE,
            isa=Isa.AVX2,
            operator=Operator.DOT,
            rvv_equivalents=["_mm256_set_epi64x -> __riscv_vmv_v_x_i64m1"],
        ),
    ]
    rels.append(
        Relationship(
            type="HAS_THOUGHT",
            start_label="Idea",
            start_key="idea:iq1s",
            end_label="Thought",
            end_key="thought:iq1s:avx2:vectorize",
        )
    )
    container.ingestor.ingest(nodes, rels)
    task, target = load_task("sdot"), load_target("k1-x60")
    hit = container.retriever.search("sdot dot product iq1_s", k=5)
    assert "thought:iq1s:avx2:vectorize" in [h.id for h in hit]  # retrieval does find it

    ctx = gather(container.store, container.retriever, task, target, directions=4)
    offered = {t.id for d in ctx.directions for t in d.thoughts}
    assert "thought:iq1s:avx2:vectorize" not in offered
    techniques = [{t.technique for t in d.thoughts} for d in ctx.directions]
    assert Technique.MULTI_ACCUMULATOR in techniques[0] and Technique.VECTOR_LENGTH in techniques[1]
    assert all(t.example_problems == [] for d in ctx.directions for t in d.thoughts)  # the starter's are clean
