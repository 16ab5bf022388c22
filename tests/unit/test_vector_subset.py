"""A filtered FAISS search over a copy of the filter's members gives what a selector over the whole shard gives:
the same hits, scores and order of ties; a change to the shard makes the copy anew."""

from __future__ import annotations

import faiss
import numpy as np

from knowledge.vector_index import ATTRS, _Shard


def test_subset_search_equals_the_selector_search_and_follows_changes() -> None:
    rng = np.random.default_rng(3)
    n, dim = 4000, 64
    x = rng.standard_normal((n, dim)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    x[50:90] = x[7]  # exact ties: their order must survive
    shard = _Shard(dim)
    shard.upsert([f"k{i}" for i in range(n)], x, {a: [i % 7 if a == "isa" else 0 for i in range(n)] for a in ATTRS})
    mask = shard.arrays["isa"] == 0
    bitmap = np.packbits(mask, bitorder="little")
    params = faiss.SearchParameters(sel=faiss.IDSelectorBitmap(n, faiss.swig_ptr(bitmap)))
    positions, sub = shard.subset(("isa", "x"), mask)
    assert sub.ntotal == int(mask.sum()) < n
    for t in range(40):
        q = x[7:8] if t % 2 else (x[rng.integers(n)] + 0.3 * rng.standard_normal(dim)).astype(np.float32)[None]
        want_d, want_i = shard.index.search(q, 30, params=params)
        got_d, got_i = sub.search(q, 30)
        assert np.array_equal(want_d, got_d) and np.array_equal(want_i[0], positions[got_i[0]])

    assert shard.subset(("isa", "x"), mask)[1] is sub  # kept while the shard is unchanged
    moved = np.roll(x[:1], 1, axis=1)
    shard.upsert(["k0"], moved, {a: [0] for a in ATTRS})  # k0 (a member) gets another vector
    again = shard.subset(("isa", "x"), shard.arrays["isa"] == 0)[1]
    assert again is not sub and np.array_equal(again.reconstruct(0), moved[0].astype(np.float16).astype(np.float32))
