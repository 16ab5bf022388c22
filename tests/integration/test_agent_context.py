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
