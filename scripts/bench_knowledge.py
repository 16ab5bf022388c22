#!/usr/bin/env python3
"""Benchmark the knowledge layer at 100k thoughts (issue 2).

Prints: ingest rate of thoughts with precomputed embeddings (nodes/s), hybrid retrieval latency p50/p99,
plain FAISS search on the same vectors in the same run (the floor), and peak memory of Neo4j and of this
Python process. Uses the configured Neo4j (local by default: started if needed) and a scratch database
content: it DELETES all nodes first, so point it at a throwaway server (default port 7697, data under
var/bench-neo4j).

    python scripts/bench_knowledge.py [--thoughts 100000] [--queries 300]
"""

from __future__ import annotations

import argparse
import os
import resource
import time

import faiss
import numpy as np
import psutil

from core.settings import Settings
from knowledge import local_neo4j
from knowledge.models import Idea, Relationship, Thought
from knowledge.retrieval import SearchFilters
from knowledge.taxonomy import Isa, Operator, Technique
from service.bootstrap import Container

DOMAIN = (
    "vector accumulate unroll tile pack prefetch fuse reduce widen tail align thread stride gemm gemv dot softmax "
    "norm conv lmul register block cache latency throughput quantized int8 kernel loop load store broadcast "
    "interleave transpose panel microkernel epilogue mask slide gather scatter polynomial exponent reciprocal"
).split()
INTRINSICS = [
    f"__riscv_{op}_{t}m{m}"
    for op in (
        "vle32_v",
        "vse32_v",
        "vfmacc_vv",
        "vfmacc_vf",
        "vfredusum_vs",
        "vfadd_vv",
        "vfmul_vf",
        "vwmul_vv",
        "vwredsum_vs",
        "vlse32_v",
    )
    for t in ("f32", "i16", "i8")
    for m in (1, 2, 4, 8)
]
# Text like a mined corpus: a few common domain words and a long tail of identifiers (kernel, file and
# symbol names), so a word matches a fraction of the documents, not all of them.
WORDS = DOMAIN + INTRINSICS + [f"sym{i}" for i in range(3000)]
WEIGHTS = 1.0 / np.arange(1, len(WORDS) + 1) ** 0.9
WEIGHTS /= WEIGHTS.sum()
CHUNK = 10_000
WARMUP = 10_000
WARMUP_QUERIES = 50


def make_ideas() -> list[Idea]:
    return [Idea(id=f"idea:{t.value}", title=f"Principle of {t.value}", techniques=[t]) for t in Technique]


def make_thoughts(start: int, n: int, rng: np.random.Generator) -> tuple[list, list, dict[str, np.ndarray]]:
    """Thoughts start..start+n with their HAS_THOUGHT relationships and random unit vectors."""
    techs, isas, ops = list(Technique), list(Isa), list(Operator)
    nodes: list = []
    rels, vecs = [], {}
    for i in range(start, start + n):
        t = techs[i % len(techs)]
        words = " ".join(rng.choice(WORDS, 8, p=WEIGHTS))
        th = Thought(
            id=f"t{i:06d}",
            idea_id=f"idea:{t.value}",
            title=f"{t.value} thought {i}: {words}",
            description=words,
            technique=t,
            isa=isas[i % len(isas)],
            operator=ops[i % len(ops)],
            evidence_commits=int(rng.integers(0, 20)),
        )
        nodes.append(th)
        rels.append(
            Relationship(
                type="HAS_THOUGHT", start_label="Idea", start_key=th.idea_id, end_label="Thought", end_key=th.id
            )
        )
        v = rng.standard_normal(384).astype(np.float32)
        vecs[th.id] = v / np.linalg.norm(v)
    return nodes, rels, vecs


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(p / 100 * (len(xs) - 1)))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--thoughts", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--port", type=int, default=7697)
    args = ap.parse_args()
    home = Settings().home
    settings = Settings(home=home / "bench", local_neo4j_port=args.port, local_neo4j_data=home / "bench-neo4j")
    if settings.uses_local_neo4j:
        local_neo4j.start(settings)
    c = Container(settings)
    store = c.store
    with store.session() as s:  # CALL IN TRANSACTIONS needs an auto-commit transaction
        s.run("MATCH (n) WHERE NOT n:Migration CALL (n) { DETACH DELETE n } IN TRANSACTIONS OF 10000 ROWS").consume()
    rng = np.random.default_rng(7)
    c.ingestor.ingest(make_ideas())
    # JVM warm-up, as for any Java server: a throwaway load of 10k thoughts, then deleted.
    nodes, rels, vecs = make_thoughts(10_000_000, WARMUP, np.random.default_rng(1))
    c.ingestor.ingest(nodes, rels, precomputed=vecs)
    c.store.write("MATCH (t:Thought) WHERE t.id >= 't10000000' DETACH DELETE t")
    # A bulk load streams: records are generated and ingested in chunks, as a loader reading a file would.
    dt, matrix = 0.0, []
    for start in range(0, args.thoughts, CHUNK):
        nodes, rels, vecs = make_thoughts(start, min(CHUNK, args.thoughts - start), rng)
        t0 = time.perf_counter()
        c.ingestor.ingest(nodes, rels, precomputed=vecs)
        dt += time.perf_counter() - t0
        matrix.extend(vecs.values())
    print(
        f"ingest: {args.thoughts} thoughts + {args.thoughts} relationships + embeddings in {dt:.1f} s "
        f"= {args.thoughts / dt:,.0f} thoughts/s (target >= 20,000/s)"
    )

    t0 = time.perf_counter()
    synced = c.store.sync_vector_index()
    dt = time.perf_counter() - t0
    print(
        f"neo4j vector index (analysts' Cypher; deferred, not in the ingest path): {synced} vectors synced "
        f"in {dt:.1f} s = {synced / max(dt, 1e-9):,.0f}/s"
    )

    t0 = time.perf_counter()
    action = c.index.ensure_fresh()
    print(f"faiss index {action} from the graph in {time.perf_counter() - t0:.1f} s ({c.index.size} vectors)")

    queries = [" ".join(rng.choice(WORDS, 4, p=WEIGHTS)) for _ in range(args.queries)]
    filters = [None, SearchFilters(isa="rvv"), SearchFilters(operator="gemv", kind="thought")]
    for q in queries[-WARMUP_QUERIES:]:  # warm the model, the driver and Neo4j's query plans; not measured
        c.retriever.search(f"{q} warm", k=10, filters=filters[len(q) % len(filters)])
    lat = []
    for i, q in enumerate(queries):
        t = time.perf_counter()
        c.retriever.search(q, k=10, filters=filters[i % len(filters)])
        lat.append((time.perf_counter() - t) * 1000)
    print(
        f"hybrid retrieval (k=10, mixed filters): p50 {pct(lat, 50):.1f} ms, p99 {pct(lat, 99):.1f} ms "
        "(targets <= 15 / <= 50 ms)"
    )

    flat = faiss.IndexFlatIP(384)
    flat.add(np.stack(matrix))
    del matrix
    qv = c.embedder.embed(queries)
    lat_f = []
    for v in qv:
        t = time.perf_counter()
        flat.search(v.reshape(1, -1), 10)
        lat_f.append((time.perf_counter() - t) * 1000)
    lat_e = []
    nonce = os.urandom(4).hex()  # the embedder caches by text hash on disk: make every text new
    for q in queries:
        t = time.perf_counter()
        c.embedder.embed([f"{q} {nonce}"])
        lat_e.append((time.perf_counter() - t) * 1000)
    print(
        f"floor: plain FAISS flat search p50 {pct(lat_f, 50):.2f} ms, p99 {pct(lat_f, 99):.2f} ms; "
        f"query embedding alone p50 {pct(lat_e, 50):.1f} ms"
    )

    py_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    neo_pid = local_neo4j.pid(settings) if settings.uses_local_neo4j else None
    neo_rss = psutil.Process(neo_pid).memory_info().rss / 2**20 if neo_pid else float("nan")
    print(
        f"memory: python peak RSS {py_peak:,.0f} MiB; neo4j RSS {neo_rss:,.0f} MiB "
        f"(heap {settings.local_neo4j_heap}, page cache {settings.local_neo4j_pagecache}); "
        f"total {py_peak + neo_rss:,.0f} MiB (target: fits in 4096 MiB)"
    )
    c.close()
    if os.environ.get("EOK_BENCH_KEEP_DB") != "1" and settings.uses_local_neo4j:
        local_neo4j.stop(settings)


if __name__ == "__main__":
    main()
