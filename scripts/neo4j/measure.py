"""Measure the local Neo4j: time to first Bolt answer (cold = new data dir, warm = existing store) and the
resident memory of the Java process, idle and after a small write load.

    python scripts/neo4j/measure.py [--runs 3] [--port 7719] [--heap 1g] [--pagecache 512m]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import psutil
from neo4j import GraphDatabase

from core.settings import Settings
from knowledge import local_neo4j


def _rss_mb(pid: int) -> float:
    return round(psutil.Process(pid).memory_info().rss / 2**20, 1)


def _timed_start(settings: Settings) -> float:
    began = time.monotonic()
    local_neo4j.start(settings)
    return time.monotonic() - began


def _write_load(uri: str, nodes: int = 50_000) -> None:
    with GraphDatabase.driver(uri) as driver:
        for lo in range(0, nodes, 5_000):
            driver.execute_query(
                "UNWIND range($lo, $lo + 4999) AS i CREATE (:M {i: i, s: 'text ' + toString(i)})", lo=lo
            )
        driver.execute_query("MATCH (m:M) RETURN count(m), sum(m.i)")


def measure(runs: int, port: int, heap: str, pagecache: str) -> dict[str, object]:
    cold, warm, idle, loaded, cpu = [], [], [], [], []
    local_neo4j.ensure_built(Settings())  # build time is not start time
    for _ in range(runs):
        with tempfile.TemporaryDirectory(prefix="eok-neo4j-measure-") as tmp:
            settings = Settings(
                home=Path(tmp) / "home",
                local_neo4j_data=Path(tmp) / "neo4j",
                local_neo4j_port=port,
                local_neo4j_heap=heap,
                local_neo4j_pagecache=pagecache,
                NEO4J_URI=None,
            )
            try:
                cold.append(_timed_start(settings))
                times = psutil.Process(local_neo4j.pid(settings) or 0).cpu_times()
                cpu.append(times.user + times.system)  # CPU to get ready: load-independent, unlike wall time
                time.sleep(10)  # let JIT and startup jobs settle before calling it idle
                idle.append(_rss_mb(local_neo4j.pid(settings) or 0))
                _write_load(settings.bolt_uri)
                loaded.append(_rss_mb(local_neo4j.pid(settings) or 0))
                local_neo4j.stop(settings)
                warm.append(_timed_start(settings))
            finally:
                local_neo4j.stop(settings)
    return {
        "heap": heap,
        "pagecache": pagecache,
        "runs": runs,
        "cold_start_s": _summary(cold),
        "warm_start_s": _summary(warm),
        "cold_start_cpu_s": _summary(cpu),
        "load_average_1m": round(psutil.getloadavg()[0], 1),
        "idle_rss_mb": _summary(idle),
        "rss_after_50k_nodes_mb": _summary(loaded),
    }


def _summary(xs: list[float]) -> dict[str, float]:
    return {"median": round(statistics.median(xs), 2), "min": round(min(xs), 2), "max": round(max(xs), 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--port", type=int, default=7719)
    parser.add_argument("--heap", default=Settings().local_neo4j_heap)
    parser.add_argument("--pagecache", default=Settings().local_neo4j_pagecache)
    args = parser.parse_args()
    print(json.dumps(measure(args.runs, args.port, args.heap, args.pagecache), indent=2))


if __name__ == "__main__":
    main()
