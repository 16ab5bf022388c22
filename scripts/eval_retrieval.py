#!/usr/bin/env python3
"""Precision@k of thought retrieval on a frozen query set (issue 12: >= 0.8 at k=5 on >= 20 K1 queries).

The queries and the rules that judge a returned thought relevant live in tests/data/retrieval/k1_queries.json
(written before any tuning). Runs each query through the agent's own retrieval (`Retriever.search`, kind
thought, target k1-x60) against the configured graph: point it at a graph mined from real histories, e.g.

    EOK_HOME=/work/study/eok-home EOK_LOCAL_NEO4J_PORT=7801 python scripts/eval_retrieval.py [--show] [--json]

A query's precision is relevant hits in the top k / k (a short answer counts its missing places as misses).
The 95% interval of the mean is a bootstrap over queries (resampled with replacement, fixed seed): it says how
far another set of queries like these could move the figure, which is what a ranking change is judged against.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from pathlib import Path
from statistics import mean
from typing import Any

from core.settings import get_settings
from knowledge.retrieval import SearchFilters
from service.bootstrap import Container

QUERIES = Path(__file__).resolve().parents[1] / "tests" / "data" / "retrieval" / "k1_queries.json"
BOOTSTRAP_SAMPLES = 10_000


def relevant(node: dict[str, Any], rule: dict[str, Any]) -> bool:
    for field in ("isa", "operator", "technique"):
        if field in rule and node.get(field) not in rule[field]:
            return False
    if "text" in rule:
        text = " ".join(str(node.get(f) or "") for f in ("title", "description", "example_code"))
        if not re.search(rule["text"], text, re.IGNORECASE):
            return False
    return True


def load_queries(path: Path) -> list[dict]:
    """The query set: {"queries": [{"query": "...", "rule": {...}}, ...]}, every rule's regex compiled."""
    queries = json.loads(path.read_text())["queries"]
    for i, q in enumerate(queries):
        if not isinstance(q.get("query"), str) or not isinstance(q.get("rule"), dict):
            raise ValueError(f"query {i + 1} needs a 'query' string and a 'rule' object")
        re.compile(q["rule"].get("text", ""))
    return queries


def bootstrap_interval(
    values: list[float], samples: int = BOOTSTRAP_SAMPLES, level: float = 0.95, seed: int = 0
) -> tuple[float, float]:
    """The percentile bootstrap interval of the mean: resample the queries with replacement `samples` times."""
    if not values:
        return (0.0, 0.0)
    rng = random.Random(seed)
    n = len(values)
    means = sorted(sum(rng.choices(values, k=n)) / n for _ in range(samples))
    tail = (1 - level) / 2
    return means[int(tail * samples)], means[min(samples - 1, int((1 - tail) * samples))]


def paired_difference(after: list[float], before: list[float]) -> dict[str, Any]:
    """Per-query precision differences of two rankings on the same queries: the same queries' difficulty
    cancels out, so the interval is narrower than the two separate ones suggest."""
    diff = [a - b for a, b in zip(after, before, strict=True)]
    return {
        "mean": mean(diff),
        "interval_95": list(bootstrap_interval(diff)),
        "better": sum(d > 0 for d in diff),
        "worse": sum(d < 0 for d in diff),
    }


def evaluate(container: Container, queries: list[dict], k: int, target: str) -> list[dict]:
    every = container.store.read(
        "MATCH (t:Thought) RETURN t {.isa, .operator, .technique, .title, .description, .example_code} AS t"
    )
    rows = []
    for q in queries:
        exist = sum(relevant(t["t"], q["rule"]) for t in every)
        hits = container.retriever.search(q["query"], k=k, filters=SearchFilters(kind="thought", target=target))
        judged = [(h, relevant(h.node, q["rule"])) for h in hits[:k]]
        rows.append(
            {
                "query": q["query"],
                "precision": sum(ok for _, ok in judged) / k,
                "relevant_in_graph": exist,
                "ceiling": min(exist, k) / k,  # the best any ranking could do on this graph
                "hits": [
                    {
                        "id": h.id,
                        "title": h.title,
                        "isa": h.node.get("isa"),
                        "operator": h.node.get("operator"),
                        "technique": h.node.get("technique"),
                        "relevant": ok,
                    }
                    for h, ok in judged
                ],
            }
        )
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=Path, default=QUERIES)
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--target", default="k1-x60")
    ap.add_argument("--show", action="store_true", help="print every query's hits")
    ap.add_argument("--json", action="store_true")
    ap.add_argument(
        "--baseline",
        type=Path,
        help="a --json result of another ranking on the same queries: report the paired difference per query",
    )
    args = ap.parse_args()
    try:
        queries = load_queries(args.queries)
    except (OSError, ValueError, KeyError, TypeError, re.error) as e:
        print(f"{args.queries}: cannot read the query set ({e}); fix the file", file=sys.stderr)
        return 2
    baseline = None
    if args.baseline:
        try:
            baseline = [r["precision"] for r in json.loads(args.baseline.read_text())["rows"]]
        except (OSError, ValueError, KeyError, TypeError) as e:
            print(f"{args.baseline}: not a --json result of this script ({e}); run it with --json", file=sys.stderr)
            return 2
        if len(baseline) != len(queries):
            print(
                f"{args.baseline}: {len(baseline)} queries, not {len(queries)}; use the same --queries", file=sys.stderr
            )
            return 2
    container = Container(get_settings())
    try:
        thoughts = container.store.read("MATCH (t:Thought) RETURN count(t) AS n")[0]["n"]
        rows = evaluate(container, queries, args.k, args.target)
    finally:
        container.close()
    p = mean(r["precision"] for r in rows)
    low, high = bootstrap_interval([r["precision"] for r in rows])
    ceiling = mean(r["ceiling"] for r in rows)
    paired = paired_difference([r["precision"] for r in rows], baseline) if baseline else None
    if args.json:
        print(
            json.dumps(
                {
                    "precision_at_k": p,
                    "interval_95": [low, high],
                    "ceiling": ceiling,
                    "k": args.k,
                    "queries": len(rows),
                    "thoughts": thoughts,
                    "rows": rows,
                    **({"paired_difference": paired} if paired else {}),
                }
            )
        )
        return 0
    print(f"{len(rows)} queries, k={args.k}, graph of {thoughts} thoughts")
    print("  prec  ceiling  (relevant in graph)  query")
    for r in rows:
        print(f"  {r['precision']:.1f}   {r['ceiling']:.1f}  ({r['relevant_in_graph']:4d})  {r['query'][:60]}")
        if args.show:
            for h in r["hits"]:
                mark = "+" if h["relevant"] else "-"
                print(f"       {mark} [{h['isa']}/{h['operator']}/{h['technique']}] {h['title'][:60]}")
    print(
        f"precision@{args.k} = {p:.3f}, 95% bootstrap interval {low:.3f}-{high:.3f} over {len(rows)} queries "
        f"(ceiling on this graph: {ceiling:.3f})"
    )
    if paired:
        print(
            f"against the baseline: {paired['mean']:+.3f} per query, 95% bootstrap interval "
            f"{paired['interval_95'][0]:+.3f} to {paired['interval_95'][1]:+.3f}; "
            f"{paired['better']} queries better, {paired['worse']} worse"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
