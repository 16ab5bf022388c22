"""The search-answer cache is bounded by bytes, not by a count of answers of any size; new queries get the
graph's answer whether their hits' facts are read or reused, and batched query vectors equal single ones."""

from __future__ import annotations

import numpy as np
import pytest

from knowledge import retrieval
from knowledge.retrieval import Retriever, SearchFilters
from service.bootstrap import Container
from tests.integration.conftest import READER


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


def test_batched_query_vectors_equal_single_ones(api_graph: Container) -> None:
    """Concurrent new queries share one model call (QueryBatcher): padded to the longest of the batch,
    each vector is the one the query alone gets."""
    texts = ["lmul", "four vector accumulators for dot", "x", "pack the B panel so the kernel reads it", "tail"]
    encoder = api_graph.embedder._encoder
    batched = encoder.encode(texts)
    alone = np.stack([encoder.encode([t])[0] for t in texts])
    assert float(np.abs(batched - alone).max()) <= 1e-5


def test_new_queries_get_the_graphs_answer_through_the_fact_cache(api_graph: Container, client) -> None:
    """The endpoint's answer to a new query equals a cold retriever's, also when the hits' details, the
    expansion and the translation checks come from what earlier queries read; a write makes them read anew."""
    served = api_graph.retriever
    queries = [
        ("rvv gemv kernel with lmul", {}),
        ("vector accumulators in the dot kernel", {"isa": "rvv"}),
        ("register blocking of a gemm micro kernel", {"kind": "thought", "target": "k1-x60"}),
        ("gemv on rvv, unrolled", {"operator": "gemv"}),
    ]
    hits_before = served.facts.hits
    for q, extra in queries:
        r = client.get("/ideas/search", params={"q": q, "k": 5, **extra}, headers=READER)
        assert r.status_code == 200, r.text
        cold = Retriever(api_graph.store, api_graph.embedder, api_graph.index)
        want = cold.search(q, k=5, filters=SearchFilters(**extra))
        assert want and r.json()["hits"] == [h.model_dump(mode="json") for h in want]
    assert served.facts.hits > hits_before  # later queries did reuse facts earlier ones read

    params = {"q": "rvv gemv kernel with lmul", "k": 5, "kind": "thought"}
    first = client.get("/ideas/search", params=params, headers=READER).json()["hits"][0]
    old = first["node"]["title"]
    api_graph.store.write("MATCH (t:Thought {id: $id}) SET t.title = $t", id=first["id"], t="renamed")
    try:
        again = client.get("/ideas/search", params=params, headers=READER).json()["hits"]
        assert {h["id"]: h["node"]["title"] for h in again}[first["id"]] == "renamed"
    finally:
        api_graph.store.write("MATCH (t:Thought {id: $id}) SET t.title = $t", id=first["id"], t=old)
