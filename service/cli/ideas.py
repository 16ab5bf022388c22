"""`eok ideas search QUERY` and `eok ideas show ID`: what the miners (and the agent) learnt."""

from __future__ import annotations

import os
import sys
from enum import StrEnum
from types import SimpleNamespace

import typer
from rich.padding import Padding
from rich.text import Text

from core.errors import NotFound
from service.cli.app import JsonOpt, app, console, print_json, working


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
    """Hybrid search (vectors + full text + graph) over ideas and thoughts, with evidence commits.

    When `eok serve` (or `eok up`) is running on the configured host and port over the same graph, it
    answers: its embedding model and index are already loaded, so the answer takes well under a second
    instead of the few seconds a cold load costs here."""
    params = {"q": query, "k": k, "kind": kind.value if kind else None, "isa": isa}
    params |= {"operator": operator, "technique": technique}
    served = _search_via_service(params)
    if served is not None:
        service_url, rows = served
        hits = [SimpleNamespace(**row) for row in rows]
    else:
        service_url, hits = None, _search_here(query, k, kind, isa, operator, technique)
    if json_out:
        print_json(rows if served is not None else [h.model_dump() for h in hits])
        return
    if not hits:
        console.print("no matching ideas or thoughts (mine a repository first: eok mine PATH)")
        return
    # A record per hit rather than a wide table: ids (typed into `eok ideas show`) stay whole on their own
    # line at 80 columns and the title wraps under them.
    console.print(f"[bold]ideas and thoughts for {query!r}[/]", highlight=False)
    for i, h in enumerate(hits, 1):
        node = h.node
        facts = [h.kind, *_figures(h.kind, node, h.measured)]
        console.print(f"{i:>2}. [bold]{h.id}[/]  ({', '.join(facts)})", highlight=False, soft_wrap=True)
        console.print(Padding(Text(h.title or ""), (0, 0, 0, 4)))
        ev = _evidence(h.evidence)
        if ev:
            console.print(Padding(Text(f"evidence: {ev}", style="dim"), (0, 0, 0, 4)))
    if service_url:
        console.print(f"[dim](answered by the running service at {service_url})[/]", highlight=False)


def _search_here(query: str, k: int, kind: Kind | None, isa: str | None, operator: str | None, technique: str | None):
    from knowledge.retrieval import SearchFilters
    from service.bootstrap import Container

    filters = SearchFilters(kind=kind.value if kind else None, isa=isa, operator=operator, technique=technique)
    c = Container()
    try:
        # A cold search loads the embedding model and the FAISS cache: seconds without a running service.
        with working(f"loading the embedding model and searching {c.settings.bolt_uri}"):
            return c.retriever.search(query, k=k, filters=filters)
    finally:
        c.close()


# Nothing listening is refused at once; a listening service gets time to count its graph for /health.
SERVICE_PROBE_S = 3.0
SERVICE_SEARCH_S = 10.0


def _search_via_service(params: dict) -> tuple[str, list[dict]] | None:
    """The running service's answer, or None to search here: no service, another graph, or a refusal.

    Only a service over the same Neo4j is asked (its /health names the graph), so the answer is the one
    this process would have computed. A query the service refuses (e.g. an ISA name it does not know, k over
    its cap) is searched here, where the error message names the argument."""
    import json
    import urllib.error
    import urllib.parse
    import urllib.request

    from core.settings import get_settings

    settings = get_settings()
    base = f"http://{settings.api_host}:{settings.api_port}"
    try:
        with urllib.request.urlopen(f"{base}/health", timeout=SERVICE_PROBE_S) as r:
            health = json.load(r)
        if health.get("neo4j_uri") != settings.bolt_uri or params["k"] > 100:
            raise ValueError(f"it serves {health.get('neo4j_uri')}, or k {params['k']} is over its cap of 100")
        query = urllib.parse.urlencode({key: v for key, v in params.items() if v is not None})
        request = urllib.request.Request(f"{base}/ideas/search?{query}")
        key = next(iter(settings.api_keys), None)  # any role may search
        if key:
            request.add_header("X-API-Key", key)
        with urllib.request.urlopen(request, timeout=SERVICE_SEARCH_S) as r:
            return base, json.load(r)["hits"]
    except (OSError, ValueError, KeyError) as e:  # refused, timed out, not JSON, not ours: search here
        if os.environ.get("EOK_DEBUG"):
            print(f"eok: searching here, not through {base}: {e!r}", file=sys.stderr)
        return None


@ideas_app.command()
def show(
    node_id: str = typer.Argument(..., help="An id `ideas search` printed: idea, thought or experience."),
    json_out: bool = JsonOpt,
) -> None:
    """Show one idea (with its thoughts), thought (example code, evidence commits) or experience (its result)."""
    from service.bootstrap import Container

    c = Container()
    try:
        with working(f"reading {node_id} from {c.settings.bolt_uri}"):
            experience = c.store.read(_EXPERIENCE, id=node_id)
        rows = (
            []
            if experience
            else c.store.read(
                "MATCH (n) WHERE (n:Idea OR n:Thought) AND n.id = $id "
                "OPTIONAL MATCH (n)-[:EVIDENCED_BY]->(c:Commit) "
                "OPTIONAL MATCH (n)-[:HAS_THOUGHT]->(t:Thought) "
                "RETURN labels(n)[0] AS label, properties(n) AS node, "
                "collect(DISTINCT c {.sha, .repo, .title, .perf_claims, .score}) AS commits, "
                "collect(DISTINCT t {.id, .title, .evidence_commits, .prior_speedup}) AS thoughts",
                id=node_id,
            )
        )
    finally:
        c.close()
    if experience:
        _show_experience(experience[0], json_out)
        return
    if not rows or rows[0]["label"] is None:
        raise NotFound(
            f"idea, thought or experience {node_id!r}: not in the graph", "find ids with: eok ideas search QUERY"
        )
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


_EXPERIENCE = """
MATCH (x:Experience {id: $id})
OPTIONAL MATCH (x)-[:APPLIED]->(t:Thought)
RETURN x {.id, .task_id, .target_key, .run_id, .step, .status, .speedup, .competent_speedup, .measurement,
          .summary, .feedback, .generator, .cflags, .code} AS node, collect(t {.id, .title, .technique}) AS thoughts
"""


def _show_experience(row: dict, json_out: bool) -> None:
    node = row["node"]
    if json_out:
        print_json({"label": "Experience", "node": node, "thoughts": row["thoughts"]})
        return
    console.print(f"[bold]Experience {node['id']}[/]: {', '.join(_figures('experience', node, None))}", highlight=False)
    console.print(
        f"run {node.get('run_id') or '-'}, step {node.get('step')}, {node.get('generator')}, "
        f"{node.get('measurement')}, flags: {' '.join(node.get('cflags') or []) or '-'}",
        highlight=False,
        markup=False,
    )
    for key in ("summary", "feedback"):
        if node.get(key):
            console.print(node[key], highlight=False, markup=False)
    for th in row["thoughts"]:
        console.print(f"  applied {th['id']}: {th['title']} ({th['technique']})", highlight=False, markup=False)
    if node.get("code"):
        console.print(node["code"], highlight=False, markup=False)


def _figures(kind: str, node: dict, measured: dict | None) -> list[str]:
    """What a hit has measured, over the competent baseline first (agent.report.yardstick), then its prior."""
    from agent.report import yardstick

    if kind == "experience":
        where = f"{node.get('task_id')} on {node.get('target_key')}"
        if node.get("status") == "ok" and node.get("speedup"):
            return [where, yardstick(node.get("competent_speedup"), node["speedup"])]
        return [where, str(node.get("status"))]
    out = [f"{node.get('isa', '')}/{node.get('operator', '')}"] if kind == "thought" else []
    if measured and measured.get("mean_speedup"):
        speed = yardstick(measured.get("mean_competent_speedup"), measured["mean_speedup"])
        out.append(f"measured {speed} on {measured.get('target')}")
    if node.get("prior_speedup"):
        out.append(f"prior {node['prior_speedup']:.2f}x")
    return out


def _evidence(items: list[dict]) -> str:
    """Commits by short sha; thoughts (an idea's evidence) by count, since a cut id is no id at all."""
    shas = [e["sha"][:10] for e in items if e.get("sha")]
    others = len(items) - len(shas)
    parts = [", ".join(shas[:3])] if shas else []
    if others:
        parts.append(f"{others} thought{'s' * (others != 1)}")
    return "; ".join(parts)
