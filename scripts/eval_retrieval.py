#!/usr/bin/env python3
"""Precision@k of thought retrieval on a frozen query set (issue 12: >= 0.8 at k=5 on >= 20 K1 queries).

The queries and the rules that judge a returned thought relevant live in tests/data/retrieval/k1_queries.json
(written before any tuning). Runs each query through the agent's own retrieval (`Retriever.search`, kind
thought, target k1-x60) against the configured graph: point it at a graph mined from real histories, e.g.

    EOK_HOME=/work/study/eok-home EOK_LOCAL_NEO4J_PORT=7801 python scripts/eval_retrieval.py [--show] [--json]

A query's precision is relevant hits in the top k / k (a short answer counts its missing places as misses).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from statistics import mean
from typing import Any

from core.settings import get_settings
from knowledge.retrieval import SearchFilters
from service.bootstrap import Container

QUERIES = Path(__file__).resolve().parents[1] / "tests" / "data" / "retrieval" / "k1_queries.json"


def relevant(node: dict[str, Any], rule: dict[str, Any]) -> bool:
    for field in ("isa", "operator", "technique"):
        if field in rule and node.get(field) not in rule[field]:
            return False
    if "text" in rule:
        text = " ".join(str(node.get(f) or "") for f in ("title", "description", "example_code"))
        if not re.search(rule["text"], text, re.IGNORECASE):
            return False
    return True


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
    args = ap.parse_args()
    try:
        queries = json.loads(args.queries.read_text())["queries"]
    except (OSError, ValueError, KeyError) as e:
        print(f"{args.queries}: cannot read the query set ({e}); fix the file", file=sys.stderr)
        return 2
    container = Container(get_settings())
    try:
        thoughts = container.store.read("MATCH (t:Thought) RETURN count(t) AS n")[0]["n"]
        rows = evaluate(container, queries, args.k, args.target)
    finally:
        container.close()
    p = mean(r["precision"] for r in rows)
    ceiling = mean(r["ceiling"] for r in rows)
    if args.json:
        print(
            json.dumps(
                {
                    "precision_at_k": p,
                    "ceiling": ceiling,
                    "k": args.k,
                    "queries": len(rows),
                    "thoughts": thoughts,
                    "rows": rows,
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
    print(f"precision@{args.k} = {p:.3f} (ceiling on this graph: {ceiling:.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
