#!/usr/bin/env python3
"""Benchmark GET /ideas/search over HTTP on a graph of 100k thoughts (issue 6).

1. Starts a private local Neo4j (data under var/bench-api/, a free port) and fills it with 100k thoughts
   under 400 ideas, with precomputed random unit embeddings (knowledge.ingest.Ingestor, `precomputed=`)
   and measured EFFECT_ON statistics on k1-x60 for a tenth of them. A graph already holding that many
   thoughts is reused (--rebuild forces a new one).
2. Starts the service as `eok serve` (uvicorn, one worker process) on 127.0.0.1.
3. Drives GET /ideas/search from a second process with a bounded loop: at most --requests requests and
   --seconds seconds, --concurrency connections, queries drawn from a fixed set of --distinct phrases
   with a mix of filters (none / isa / operator+kind / target). The service keeps answers until the graph
   changes, so after the warm-up these are answered from memory: a search box's repeated queries.
4. Prints requests/s and p50/p90/p99 latency, and the targets: >= 200 req/s, p99 <= 100 ms on 2 cores;
   then --unique requests whose queries are all new (the full retrieval every time: phrases drawn afresh
   each run, so neither the answers nor the query vectors, kept in memory and on disk, can serve them),
   printed beside the target and beside the repeated-query figure of the same run; then the same load on
   GET /vocabulary (key check + JSON, no retrieval): the cost of the HTTP layer.
   Each phase also prints the CPU time the service and Neo4j spent per request (from /proc: on a shared
   machine wall time is distorted by others' load, CPU time much less) and the load average.

    python scripts/bench_api.py [--thoughts 100000] [--requests 4000] [--seconds 60] [--concurrency 8]
                                [--distinct 200] [--profile] [--mined-home DIR --neo4j-port N]

--mined-home runs the same phases on a graph `eok mine` built from real histories (its own local Neo4j),
with queries made of the words of its thoughts: the all-new-queries phase on real mined text.

--profile also times Retriever.search in-process (no HTTP) on new queries, one at a time, and prints where
a new query's time goes by stage (wall, this process's CPU, Neo4j's CPU), then cProfile's top entries.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import multiprocessing as mp
import os
import pstats
import random
import re
import shutil
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from core.settings import PROJECT_ROOT, Settings
from knowledge import local_neo4j
from knowledge.models import Idea, Relationship, RelType, Target, Thought
from knowledge.taxonomy import Isa, Operator, Technique
from service.bootstrap import Container

KEY = "bench-reader-key-0123456789"
DATA = PROJECT_ROOT / "var" / "bench-api"
_WORDS = (
    "accumulate accumulators unroll tile tiling pack packing prefetch fuse fused reduce reduction widen "
    "widening tail mask align stride strided gemm gemv dot axpy softmax norm conv lmul vsetvl vfmacc "
    "vle32 vse32 vfredusum vfmul register block blocking cache latency throughput quantized int8 q4_0 "
    "dequantize interleave transpose broadcast vector scalar loop kernel row column panel microkernel"
)
VOCAB = _WORDS.split()  # words the thoughts are written in; queries draw from them too
TARGET_RPS, TARGET_P99_MS = 200, 100  # docs/API.md, on the 2-core machine


# -- the graph ------------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def unit(rng: np.random.Generator) -> np.ndarray:
    v = rng.standard_normal(384).astype(np.float32)
    return v / np.linalg.norm(v)


def build_graph(c: Container, thoughts: int, seed: int = 11) -> None:
    rng = np.random.default_rng(seed)
    techs, isas, ops = list(Technique), list(Isa), list(Operator)
    n_ideas = max(1, thoughts // 250)
    ideas = [
        Idea(
            id=f"bi{i:04d}",
            title=f"{techs[i % len(techs)].value} principle {i}",
            principle=" ".join(rng.choice(VOCAB, 10)),
        )
        for i in range(n_ideas)
    ]
    c.ingestor.ingest(
        [Target(key="k1-x60", name="SpacemiT K1 (X60)"), *ideas], precomputed={i.id: unit(rng) for i in ideas}
    )
    chunk = 10_000
    began = time.perf_counter()
    for start in range(0, thoughts, chunk):
        nodes, rels, vecs = [], [], {}
        for i in range(start, min(thoughts, start + chunk)):
            idea = ideas[i % n_ideas]
            words = " ".join(rng.choice(VOCAB, 7))
            t = Thought(
                id=f"bt{i:06d}",
                idea_id=idea.id,
                title=f"{words} ({i})",
                description=" ".join(rng.choice(VOCAB, 16)),
                identifiers=" ".join(rng.choice(VOCAB, 3)),
                technique=techs[i % len(techs)],
                isa=isas[(i // 7) % len(isas)],
                operator=ops[(i // 3) % len(ops)],
                evidence_commits=int(rng.integers(0, 12)),
                prior_speedup=float(rng.uniform(1.0, 2.5)) if i % 4 == 0 else None,
            )
            nodes.append(t)
            vecs[t.id] = unit(rng)
            rels.append(
                Relationship(
                    type=RelType.HAS_THOUGHT, start_label="Idea", start_key=idea.id, end_label="Thought", end_key=t.id
                )
            )
            if i % 10 == 0:
                trials = int(rng.integers(1, 9))
                rels.append(
                    Relationship(
                        type=RelType.EFFECT_ON,
                        start_label="Thought",
                        start_key=t.id,
                        end_label="Target",
                        end_key="k1-x60",
                        props={
                            "trials": trials,
                            "correct": trials,
                            "successes": int(rng.integers(0, trials + 1)),
                            "sum_log_speedup": float(trials * rng.normal(0.3, 0.2)),
                            "sum_log_gain": float(trials * rng.normal(0.05, 0.2)),
                        },
                    )
                )
        c.ingestor.ingest(nodes, rels, precomputed=vecs)
        done = min(thoughts, start + chunk)
        print(f"  {done:>7,} thoughts ingested ({done / (time.perf_counter() - began):,.0f}/s)", flush=True)


def thought_count(c: Container) -> int:
    return c.store.read("MATCH (t:Thought) RETURN count(t) AS n")[0]["n"]


# -- the load -------------------------------------------------------------------------------------------


def queries(distinct: int, seed: int = 5, vocab: list[str] | None = None) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    words = vocab or VOCAB
    mixes = [{}, {"isa": "rvv"}, {"operator": "gemv", "kind": "thought"}, {"target": "k1-x60", "kind": "thought"}]
    return [{"q": " ".join(rng.sample(words, 4)), "k": 10, **mixes[i % len(mixes)]} for i in range(distinct)]


_WORD_RX = re.compile(r"[A-Za-z][A-Za-z0-9_]{2,30}")


def mined_vocabulary(c: Container, limit: int = 5000) -> list[str]:
    """The words of a mined graph's own thoughts (titles, descriptions, identifiers), most frequent first."""
    counts: dict[str, int] = {}
    for row in c.store.read("MATCH (t:Thought) RETURN t.title + ' ' + t.description + ' ' + t.identifiers AS x"):
        for w in _WORD_RX.findall(row["x"] or ""):
            counts[w.lower()] = counts.get(w.lower(), 0) + 1
    return sorted(counts, key=counts.__getitem__, reverse=True)[:limit]


def drive(
    base: str, path: str, params: list[dict[str, Any]], requests: int, seconds: float, concurrency: int, out: Any
) -> None:
    """Runs in its own process: `concurrency` threads share a bounded count of requests and a deadline."""
    lock = threading.Lock()
    state = {"next": 0, "errors": 0, "codes": {}}
    latencies: list[float] = []
    deadline = time.monotonic() + seconds

    def worker() -> None:
        with httpx.Client(base_url=base, headers={"X-API-Key": KEY}, timeout=30) as http:
            while True:
                with lock:
                    i = state["next"]
                    if i >= requests or time.monotonic() >= deadline:
                        return
                    state["next"] += 1
                t = time.perf_counter()
                try:
                    r = http.get(path, params=params[i % len(params)])
                    code = r.status_code
                except httpx.HTTPError:
                    code = -1
                dt = (time.perf_counter() - t) * 1000
                with lock:
                    latencies.append(dt)
                    state["codes"][code] = state["codes"].get(code, 0) + 1
                    if code != 200:
                        state["errors"] += 1

    began = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    out.put(
        {
            "seconds": time.perf_counter() - began,
            "latencies": latencies,
            "errors": state["errors"],
            "codes": state["codes"],
        }
    )


def pct(xs: list[float], p: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, round(p / 100 * (len(s) - 1)))]


def cpu_seconds(pid: int | None) -> float:
    """User + system CPU time of a process so far (0 when unknown)."""
    if not pid:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_load(
    base: str,
    args: argparse.Namespace,
    label: str,
    params: list[dict[str, Any]],
    path: str = "/ideas/search",
    pids: dict[str, int | None] | None = None,
) -> dict[str, Any]:
    pids = pids or {}
    cpu0 = {name: cpu_seconds(pid) for name, pid in pids.items()}
    load0 = os.getloadavg()[0]
    out: mp.Queue = mp.get_context("spawn").Queue()
    proc = mp.get_context("spawn").Process(
        target=drive, args=(base, path, params, args.requests, args.seconds, args.concurrency, out)
    )
    proc.start()
    result = out.get(timeout=args.seconds + 120)
    proc.join(timeout=30)
    lat = result["latencies"]
    rps = len(lat) / result["seconds"]
    cpu = {name: (cpu_seconds(pid) - cpu0[name]) * 1000 / max(1, len(lat)) for name, pid in pids.items()}
    spent = ", ".join(f"{name} {ms:.1f}" for name, ms in cpu.items())
    print(
        f"{label}: {len(lat)} requests in {result['seconds']:.1f} s = {rps:,.0f} req/s; latency p50 "
        f"{pct(lat, 50):.1f} ms, p90 {pct(lat, 90):.1f} ms, p99 {pct(lat, 99):.1f} ms, mean "
        f"{statistics.fmean(lat):.1f} ms; non-200: {result['errors']} {result['codes']}"
        + (f"\n    CPU ms per request: {spent}" if pids else "")
        + f"; load average {load0:.1f} -> {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    return {"rps": rps, "p50": pct(lat, 50), "p99": pct(lat, 99), "errors": result["errors"], "cpu": cpu}


def meets_target(result: dict[str, Any]) -> bool:
    return result["rps"] >= TARGET_RPS and result["p99"] <= TARGET_P99_MS and result["errors"] == 0


# -- the service ----------------------------------------------------------------------------------------


def start_service(settings: Settings, port: int, log: Path) -> subprocess.Popen:
    env = {
        **os.environ,
        "NEO4J_URI": settings.bolt_uri,
        "EOK_HOME": str(settings.home),
        "EOK_API_KEYS": json.dumps({KEY: "reader"}),
        "EOK_API_WORKERS": "1",
    }
    cmd = [
        sys.executable,
        "-c",
        "from service.cli import main; main()",
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--no-start-db",
        "--no-resume",
        "--log-level",
        "warning",
    ]
    proc = subprocess.Popen(cmd, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the service exited with {proc.returncode}; see {log}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    proc.terminate()
    raise SystemExit(f"the service did not answer /health within 600 s; see {log}")


def profile_in_process(c: Container, params: list[dict[str, Any]], neo4j_pid: int | None, n: int = 300) -> None:
    """New queries one at a time in this process: where a full retrieval's time goes, stage by stage."""
    from knowledge.retrieval import SearchFilters

    r = c.retriever
    stages: dict[str, list[float]] = {}  # name -> [wall, own CPU, Neo4j CPU] seconds

    def timed(obj: Any, name: str, label: str) -> None:
        inner = getattr(obj, name)

        def wrapper(*a: Any, **kw: Any) -> Any:
            t, p, q = time.perf_counter(), time.process_time(), cpu_seconds(neo4j_pid)
            try:
                return inner(*a, **kw)
            finally:
                acc = stages.setdefault(label, [0.0, 0.0, 0.0])
                acc[0] += time.perf_counter() - t
                acc[1] += time.process_time() - p
                acc[2] += cpu_seconds(neo4j_pid) - q

        setattr(obj, name, wrapper)

    def one(p: dict[str, Any]) -> None:
        f = SearchFilters(**{k: v for k, v in p.items() if k not in ("q", "k")})
        r.search(p["q"], k=p["k"], filters=f)

    for p in params[:20]:
        one(p)  # warm: model, index
    for obj, name, label in [
        (r.store, "graph_generation", "graph generation check"),
        (r.index, "ensure_fresh", "FAISS freshness check"),
        (r.embedder, "embed", "query embedding (model)"),
        (r.index, "search", "FAISS searches"),
        (r, "_fulltext", "full text (Lucene)"),
        (r, "_expand", "graph expansion"),
        (r, "_translated", "RVV-translation check"),
        (r, "_details", "hit details"),
        (r.store, "read_many", "  all graph reads (one tx)"),
    ]:
        timed(obj, name, label)
    lat = []
    prof = cProfile.Profile()
    cpu0, own0, began = cpu_seconds(neo4j_pid), time.process_time(), time.perf_counter()
    prof.enable()
    for p in params[20 : 20 + n]:
        t = time.perf_counter()
        one(p)
        lat.append((time.perf_counter() - t) * 1000)
    prof.disable()
    count = len(lat)
    own, neo, wall = time.process_time() - own0, cpu_seconds(neo4j_pid) - cpu0, time.perf_counter() - began
    print(
        f"in-process Retriever.search (no HTTP), {count} new queries one at a time: p50 {pct(lat, 50):.1f} ms, "
        f"p99 {pct(lat, 99):.1f} ms, mean {statistics.fmean(lat):.1f} ms; per query: this process's CPU "
        f"{own * 1000 / count:.1f} ms, Neo4j's CPU {neo * 1000 / count:.1f} ms (wall {wall * 1000 / count:.1f} ms, "
        f"under cProfile); load average {os.getloadavg()[0]:.1f}"
    )
    print(f"  {'stage':30s} {'wall ms':>8s} {'CPU ms':>8s} {'Neo4j CPU ms':>13s}  (per query)")
    for label, (wall, own, neo) in stages.items():
        print(f"  {label:30s} {wall * 1000 / count:8.2f} {own * 1000 / count:8.2f} {neo * 1000 / count:13.2f}")
    facts = getattr(r, "facts", None)  # node facts reused at the same graph generation (issue 23)
    if facts is not None and facts.hits + facts.misses:
        print(f"  node facts reused: {facts.hits:,} of {facts.hits + facts.misses:,} looked up")
    stats = pstats.Stats(prof)
    stats.sort_stats("tottime").print_stats(15)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--thoughts", type=int, default=100_000)
    ap.add_argument("--requests", type=int, default=4000, help="at most this many requests per phase")
    ap.add_argument("--seconds", type=float, default=60.0, help="at most this long per phase")
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--distinct", type=int, default=200, help="distinct query phrases (their embeddings get cached)")
    ap.add_argument("--unique", type=int, default=1000, help="requests of the phase where every query is new")
    ap.add_argument(
        "--seed", type=int, help="seed of the every-query-new phrases (default: a new one each run, printed)"
    )
    ap.add_argument("--neo4j-port", type=int, default=7698, help="Bolt port of the bench Neo4j")
    ap.add_argument("--rebuild", action="store_true", help="build the graph anew even if one is there")
    ap.add_argument("--keep-db", action="store_true", help="leave the bench Neo4j running")
    ap.add_argument("--profile", action="store_true", help="also profile Retriever.search in-process")
    ap.add_argument(
        "--mined-home",
        type=Path,
        help="use the graph a real `eok mine` wrote under this EOK home (its own local Neo4j) instead of a "
        "synthetic one; queries are then made of the words of its thoughts",
    )
    args = ap.parse_args()

    if args.rebuild and DATA.exists():
        shutil.rmtree(DATA)
    if args.mined_home:
        home = args.mined_home.resolve()
        settings = Settings(home=home, local_neo4j_port=args.neo4j_port, NEO4J_URI=None)
    else:
        settings = Settings(
            home=DATA / "home",
            local_neo4j_data=DATA / "neo4j",
            local_neo4j_port=args.neo4j_port,
            local_neo4j_pagecache="1g",
            NEO4J_URI=None,
        )
    print(f"starting the bench Neo4j on {settings.bolt_uri} (data in {DATA})", flush=True)
    local_neo4j.start(settings)
    service = None
    try:
        c = Container(settings)
        have = thought_count(c)
        vocab = None
        if args.mined_home:
            vocab = mined_vocabulary(c)
            print(f"mined graph: {have:,} thoughts, {len(vocab):,} words of their text for the queries")
        elif have != args.thoughts:
            print(f"building a graph of {args.thoughts:,} thoughts (found {have:,})", flush=True)
            if have:
                c.store.write(
                    "MATCH (n) WHERE NOT n:Migration CALL (n) { DETACH DELETE n } IN TRANSACTIONS OF 10000 ROWS"
                )
            build_graph(c, args.thoughts)
        params = queries(args.distinct, vocab=vocab)
        port = free_port()
        began = time.perf_counter()
        DATA.mkdir(parents=True, exist_ok=True)
        service = start_service(settings, port, DATA / "service.log")
        print(f"service up on 127.0.0.1:{port} in {time.perf_counter() - began:.1f} s (FAISS index and model loaded)")
        base = f"http://127.0.0.1:{port}"
        pids = {"service": service.pid, "Neo4j": local_neo4j.pid(settings)}
        run_load(
            base,
            argparse.Namespace(**{**vars(args), "requests": min(args.requests, 2 * args.distinct)}),
            "warm-up (first sight of each query: embeds it)",
            params,
            pids=pids,
        )
        repeated = run_load(
            base,
            args,
            f"measured (concurrency {args.concurrency}, {args.distinct} distinct queries)",
            params,
            pids=pids,
        )
        print(
            f"targets >= {TARGET_RPS} req/s and p99 <= {TARGET_P99_MS} ms on {os.cpu_count()} cores: "
            f"{'met' if meets_target(repeated) else 'NOT met'}"
        )
        # The same load with every query new: no answer or query vector to reuse, the full retrieval each time.
        # The phrases are drawn afresh each run: the query-vector cache on disk has never seen them either.
        seed = args.seed if args.seed is not None else time.time_ns()
        unique = [p for p in queries(args.unique, seed=seed, vocab=vocab) if p not in params]
        new = run_load(
            base,
            argparse.Namespace(**{**vars(args), "requests": len(unique)}),
            f"every query new ({len(unique)} unique queries, seed {seed}: full retrieval, nothing reused)",
            unique,
            pids=pids,
        )
        print(
            f"every query new: {new['rps']:,.0f} req/s, p99 {new['p99']:.0f} ms against the target >= {TARGET_RPS} "
            f"req/s and p99 <= {TARGET_P99_MS} ms: {'met' if meets_target(new) else 'NOT met'} (repeated queries in "
            f"this run: {repeated['rps']:,.0f} req/s, p99 {repeated['p99']:.0f} ms); CPU per new query: "
            + ", ".join(f"{name} {ms:.1f} ms" for name, ms in new["cpu"].items())
            + f" = {sum(new['cpu'].values()):.1f} ms of the {os.cpu_count()} cores' "
            f"{1000 * (os.cpu_count() or 1) / TARGET_RPS:.0f} ms a request may take at {TARGET_RPS} req/s"
        )
        # The same load on an authenticated endpoint that does no retrieval: what the HTTP layer costs.
        run_load(
            base, args, "HTTP layer alone (GET /vocabulary: key check + JSON, no graph)", [{}], "/vocabulary", pids=pids
        )
        if args.profile:
            fresh = queries(args.unique + 320, seed=seed + 1, vocab=vocab)[args.unique :]
            profile_in_process(c, fresh, pids["Neo4j"])
        c.close()
    finally:
        if service is not None:
            service.terminate()
            service.wait(timeout=60)
        if not args.keep_db:
            local_neo4j.stop(settings)


if __name__ == "__main__":
    main()
