"""The search-answer cache is bounded by bytes, not by a count of answers of any size."""

from __future__ import annotations

import pytest

from knowledge import retrieval
from service.bootstrap import Container


def test_answer_cache_stays_under_its_byte_bound(api_graph: Container, monkeypatch: pytest.MonkeyPatch) -> None:
    retriever = api_graph.retriever
    one = sum(len(h.model_dump_json()) for h in retriever.search("vector length multiplier", k=20))
    assert one > 0
    cap = 3 * one  # room for about three answers of this size
    monkeypatch.setattr(retrieval, "RESULT_CACHE_BYTES", cap)
    monkeypatch.setattr(retrieval, "RESULT_MAX_BYTES", cap)
    queries = ["lmul gemv", "unroll dot", "accumulators", "tail handling", "blocking gemm", "prefetch"]
    for q in queries:
        retriever.search(q, k=20)
        assert retriever.cached_bytes <= cap
    misses = retriever.cache_misses
    retriever.search(queries[-1], k=20)  # the newest answer is still kept
    assert retriever.cache_misses == misses
    retriever.search(queries[0], k=20)  # the oldest was evicted to stay under the bound
    assert retriever.cache_misses == misses + 1
