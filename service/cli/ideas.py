"""`eok ideas search QUERY` and `eok ideas show ID`: what the miners (and the agent) learnt."""

from __future__ import annotations

from enum import StrEnum

import typer
from rich.table import Table

from core.errors import NotFound
from service.cli.app import JsonOpt, app, console, print_json


class Kind(StrEnum):
    thought = "thought"
    idea = "idea"
    experience = "experience"


ideas_app = typer.Typer(help="Search and show mined ideas and thoughts.", no_args_is_help=True)
app.add_typer(ideas_app, name="ideas")


@ideas_app.command()
def search(
    query: str = typer.Argument(..., help="What you want to do, e.g. 'accumulate dot product in registers'."),
    isa: str | None = typer.Option(None, "--isa", help="Only thoughts for this ISA (rvv, avx2, neon, ...)."),
    operator: str | None = typer.Option(None, "--operator", help="Only thoughts for this operator (gemv, ...)."),
    technique: str | None = typer.Option(None, "--technique", help="Only thoughts using this technique."),
    kind: Kind | None = typer.Option(None, "--kind", help="Only this kind of node."),
    k: int = typer.Option(10, "-k", "--top", min=1, max=200, help="How many results."),
    json_out: bool = JsonOpt,
) -> None:
    """Hybrid search (vectors + full text + graph) over ideas and thoughts, with evidence commits."""
    from knowledge.retrieval import SearchFilters
    from service.bootstrap import Container

    filters = SearchFilters(kind=kind.value if kind else None, isa=isa, operator=operator, technique=technique)
    c = Container()
    try:
        hits = c.retriever.search(query, k=k, filters=filters)
    finally:
        c.close()
    if json_out:
        print_json([h.model_dump() for h in hits])
        return
    if not hits:
        console.print("no matching ideas or thoughts (mine a repository first: eok mine PATH)")
        return
    t = Table(title=f"ideas and thoughts for {query!r}")
    for col in ("#", "kind", "id", "title", "isa/op", "prior", "evidence"):
        t.add_column(col, overflow="fold")
    for i, h in enumerate(hits, 1):
        node = h.node
        isa_op = f"{node.get('isa', '')}/{node.get('operator', '')}" if h.kind == "thought" else ""
        prior = node.get("prior_speedup")
        ev = ", ".join(f"{e.get('sha', e.get('id', ''))[:9]}" for e in h.evidence[:3])
        t.add_row(str(i), h.kind, h.id, h.title, isa_op, f"{prior:.2f}x" if prior else "", ev)
    console.print(t)


@ideas_app.command()
def show(
    node_id: str = typer.Argument(..., help="An idea or thought id, e.g. thought:unroll:dot:riscv."),
    json_out: bool = JsonOpt,
) -> None:
    """Show one idea (with its thoughts) or one thought (with example code and evidence commits)."""
    from service.bootstrap import Container

    c = Container()
    try:
        rows = c.store.read(
            "MATCH (n) WHERE (n:Idea OR n:Thought) AND n.id = $id "
            "OPTIONAL MATCH (n)-[:EVIDENCED_BY]->(c:Commit) "
            "OPTIONAL MATCH (n)-[:HAS_THOUGHT]->(t:Thought) "
            "RETURN labels(n)[0] AS label, properties(n) AS node, "
            "collect(DISTINCT c {.sha, .repo, .title, .perf_claims, .score}) AS commits, "
            "collect(DISTINCT t {.id, .title, .evidence_commits, .prior_speedup}) AS thoughts",
            id=node_id,
        )
    finally:
        c.close()
    if not rows or rows[0]["label"] is None:
        raise NotFound(f"idea or thought {node_id!r}: not in the graph", "find ids with: eok ideas search QUERY")
    row = rows[0]
    node = {k: v for k, v in row["node"].items() if not k.startswith("embedding")}
    if json_out:
        print_json({"label": row["label"], "node": node, "commits": row["commits"], "thoughts": row["thoughts"]})
        return
    console.print(f"[bold]{row['label']} {node_id}[/]: {node.get('title', '')}", highlight=False)
    for key in ("principle", "description"):
        if node.get(key):
            console.print(node[key], highlight=False)
    if row["label"] == "Thought":
        console.print(
            f"technique {node.get('technique')}, isa {node.get('isa')}, operator {node.get('operator')}, "
            f"evidence {node.get('evidence_commits')} commits, prior {node.get('prior_speedup') or '-'}",
            highlight=False,
        )
        if node.get("example_code"):
            console.print(node["example_code"], highlight=False, markup=False)
    commits = sorted(row["commits"], key=lambda c: -(c.get("score") or 0))
    for cm in commits[:15]:
        console.print(f"  {cm['sha'][:10]} {cm['repo']}: {cm['title']}", highlight=False, markup=False)
    for th in row["thoughts"]:
        console.print(
            f"  - {th['id']}: {th['title']} ({th['evidence_commits']} commits)", highlight=False, markup=False
        )
