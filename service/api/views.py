"""Read views the routes serve: one function per resource, plain Cypher over the store, JSON-ready dicts."""

from __future__ import annotations

import base64
import binascii
import json
from datetime import datetime
from typing import Any

from core.errors import InvalidInput, NotFound
from knowledge.models import ExperienceStatus, Run, effect_summary
from knowledge.store import GraphStore
from service.api.cypher import to_json

_EXPERIENCE_FIELDS = (
    ".id, .task_id, .target_key, .run_id, .parent_id, .direction, .step, .status, .speedup, .competent_speedup, "
    ".speedup_over_library, .library_label, .measurement, "
    ".generator, .summary, .created_at"
)


def _rows(store: GraphStore, cypher: str, **params: Any) -> list[dict[str, Any]]:
    return [to_json(r) for r in store.read(cypher, **params)]


# -- ideas and thoughts ---------------------------------------------------------------------------------


def idea_detail(store: GraphStore, idea_id: str) -> dict[str, Any]:
    rows = _rows(
        store,
        "MATCH (i:Idea {id: $id}) RETURN i {.id, .title, .principle, .techniques, .source} AS idea",
        id=idea_id,
    )
    if not rows:
        raise NotFound(f"no idea with id {idea_id!r}", "find ideas with GET /ideas/search?q=...")
    thoughts = _rows(
        store,
        "MATCH (:Idea {id: $id})-[:HAS_THOUGHT]->(t:Thought) "
        "OPTIONAL MATCH (t)-[e:EFFECT_ON]->(:Target) "
        "WITH t, sum(coalesce(e.trials, 0)) AS trials, sum(coalesce(e.correct, 0)) AS correct, "
        "sum(coalesce(e.successes, 0)) AS successes "
        "RETURN t {.id, .title, .technique, .isa, .operator, .evidence_commits, .prior_speedup} AS t, "
        "trials, correct, successes ORDER BY t.evidence_commits DESC, t.id",
        id=idea_id,
    )
    idea = rows[0]["idea"]
    idea["thoughts"] = [
        {**r["t"], "trials": r["trials"], "correct": r["correct"], "successes": r["successes"]} for r in thoughts
    ]
    return idea


def thought_detail(store: GraphStore, thought_id: str) -> dict[str, Any]:
    rows = _rows(
        store,
        "MATCH (t:Thought {id: $id}) OPTIONAL MATCH (i:Idea)-[:HAS_THOUGHT]->(t) "
        "RETURN t {.id, .idea_id, .title, .description, .example_code, .technique, .isa, .operator, "
        ".evidence_commits, .prior_speedup, .source} AS thought, i {.id, .title} AS idea LIMIT 1",
        id=thought_id,
    )
    if not rows:
        raise NotFound(f"no thought with id {thought_id!r}", "find thoughts with GET /ideas/search?q=...&kind=thought")
    out = rows[0]["thought"]
    out["idea"] = rows[0]["idea"]
    out["evidence"] = [
        _commit(r["c"], r["url"])
        for r in _rows(
            store,
            "MATCH (:Thought {id: $id})-[:EVIDENCED_BY]->(c:Commit) OPTIONAL MATCH (c)-[:IN_REPO]->(r:Repository) "
            "RETURN c {.sha, .repo, .title, .authored_at, .isas, .operators, .perf_claims} AS c, r.url AS url "
            "ORDER BY c.authored_at DESC, c.sha LIMIT 50",
            id=thought_id,
        )
    ]
    out["effects"] = [
        _effect(r)
        for r in _rows(
            store,
            "MATCH (:Thought {id: $id})-[e:EFFECT_ON]->(g:Target) "
            "RETURN g.key AS target, properties(e) AS e ORDER BY target",
            id=thought_id,
        )
    ]
    out["experiences"] = [
        r["x"]
        for r in _rows(
            store,
            f"MATCH (x:Experience)-[:APPLIED]->(:Thought {{id: $id}}) RETURN x {{{_EXPERIENCE_FIELDS}}} AS x "
            "ORDER BY CASE WHEN x.status = 'ok' THEN coalesce(x.speedup, 0.0) ELSE -1.0 END DESC, x.id LIMIT 50",
            id=thought_id,
        )
    ]
    return out


def _commit(c: dict[str, Any], repo_url: str | None) -> dict[str, Any]:
    url = None
    if repo_url and repo_url.startswith(("https://", "http://")):
        url = f"{repo_url.rstrip('/').removesuffix('.git')}/commit/{c['sha']}"
    return {
        **c,
        "isas": c.get("isas") or [],
        "operators": c.get("operators") or [],
        "perf_claims": c.get("perf_claims") or [],
        "url": url,
    }


def _effect(r: dict[str, Any]) -> dict[str, Any]:
    return {"target": r["target"], **effect_summary(r["e"])}


# -- experiences ----------------------------------------------------------------------------------------


def encode_cursor(created_at: str | None, exp_id: str) -> str:
    raw = json.dumps([created_at, exp_id], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        created_at, exp_id = json.loads(raw)
        return datetime.fromisoformat(created_at), str(exp_id)
    except (binascii.Error, ValueError, TypeError, UnicodeDecodeError):
        raise InvalidInput(
            "query parameter 'cursor' is not a cursor this API issued",
            "pass the `next_cursor` of the previous page unchanged, or omit it for the first page",
        ) from None


def experiences_page(
    store: GraphStore,
    task: str | None,
    target: str | None,
    status: str | None,
    min_speedup: float | None,
    limit: int,
    cursor: str | None,
) -> dict[str, Any]:
    """Newest first; keyset pagination on (created_at, id), so pages stay stable while runs add rows."""
    conds, params = [], {"limit": limit + 1}
    for field, value in (("task_id", task), ("target_key", target), ("status", _status(status))):
        if value is not None:
            conds.append(f"x.{field} = ${field}")
            params[field] = value
    if min_speedup is not None:
        conds.append("x.speedup >= $min_speedup")
        params["min_speedup"] = min_speedup
    if cursor:
        after_t, after_id = decode_cursor(cursor)
        conds.append("(x.created_at < $after_t OR (x.created_at = $after_t AND x.id < $after_id))")
        params.update(after_t=after_t, after_id=after_id)
    where = f"WHERE {' AND '.join(conds)} " if conds else ""
    rows = _rows(
        store,
        f"MATCH (x:Experience) {where}RETURN x {{{_EXPERIENCE_FIELDS}}} AS x "
        "ORDER BY x.created_at DESC, x.id DESC LIMIT $limit",
        **params,
    )
    items = [r["x"] for r in rows[:limit]]
    more = len(rows) > limit and items and items[-1].get("created_at")
    return {"items": items, "next_cursor": encode_cursor(items[-1]["created_at"], items[-1]["id"]) if more else None}


# -- bootstraps -----------------------------------------------------------------------------------------


def bootstraps_page(store: GraphStore, limit: int, cursor: str | None) -> dict[str, Any]:
    """Bootstraps newest first with their runs counted (all, done) and the latest time anything of them
    started or ended; keyset pagination on (started_at, id) with the experiences' cursor."""
    params: dict[str, Any] = {"limit": limit + 1}
    where = ""
    if cursor:
        after_t, after_id = decode_cursor(cursor)
        where = "WHERE b.started_at < $after_t OR (b.started_at = $after_t AND b.id < $after_id) "
        params.update(after_t=after_t, after_id=after_id)
    rows = _rows(
        store,
        f"MATCH (b:Bootstrap) {where}WITH b ORDER BY b.started_at DESC, b.id DESC LIMIT $limit "
        "OPTIONAL MATCH (r:Run {bootstrap_id: b.id}) "
        "WITH b, count(r) AS runs, count(CASE WHEN r.status = 'done' THEN 1 END) AS done, "
        "max(r.started_at) AS run_started, max(r.finished_at) AS run_finished "
        "WITH b, runs, done, [t IN [b.started_at, b.finished_at, run_started, run_finished] WHERE t IS NOT NULL] AS ts "
        "RETURN b {.id, .status, .tasks, .targets, .executor, .executors, .started_at} AS b, runs, done, "
        "reduce(m = null, t IN ts | CASE WHEN m IS NULL OR t > m THEN t ELSE m END) AS updated_at "
        "ORDER BY b.started_at DESC, b.id DESC",
        **params,
    )
    items = [
        {
            "id": r["b"]["id"],
            "status": r["b"]["status"],
            "created_at": r["b"]["started_at"],
            "updated_at": r["updated_at"],
            "tasks": len(json.loads(r["b"]["tasks"] or "[]")),
            "targets": len(json.loads(r["b"]["targets"] or "[]")),
            "runs_total": r["runs"],
            "runs_done": r["done"],
            "executor": r["b"].get("executor") or "",
            "executors": r["b"].get("executors") or [],
            "url": f"/bootstraps/{r['b']['id']}",
        }
        for r in rows[:limit]
    ]
    more = len(rows) > limit and items
    return {"items": items, "next_cursor": encode_cursor(items[-1]["created_at"], items[-1]["id"]) if more else None}


def _status(status: str | None) -> str | None:
    if status is None:
        return None
    try:
        return ExperienceStatus(status.strip().lower()).value
    except ValueError:
        allowed = ", ".join(s.value for s in ExperienceStatus)
        raise InvalidInput(f"query parameter 'status': {status!r} is not a status", f"use one of: {allowed}") from None


def experience_detail(store: GraphStore, exp_id: str) -> dict[str, Any]:
    rows = _rows(
        store,
        "MATCH (x:Experience {id: $id}) OPTIONAL MATCH (x)-[:APPLIED]->(t:Thought) "
        f"RETURN x {{{_EXPERIENCE_FIELDS}, .code, .cflags, .feedback, .thought_ids, .baseline_cycles, "
        ".competent_cycles, .library_cycles, .candidate_cycles, .seconds, .max_error} AS x, "
        "collect(t {.id, .title, .technique}) AS thoughts",
        id=exp_id,
    )
    if not rows:
        raise NotFound(f"no experience with id {exp_id!r}", "list experiences with GET /experiences")
    x = rows[0]["x"]
    x["thoughts"] = rows[0]["thoughts"]
    x["cflags"] = x.get("cflags") or []
    x["thought_ids"] = x.get("thought_ids") or []
    return x


# -- catalog --------------------------------------------------------------------------------------------


def experience_counts(store: GraphStore, field: str) -> dict[str, dict[str, Any]]:
    """Per task or target: experiences recorded and the best passing speedups (plain and competent)."""
    if field not in ("task_id", "target_key"):
        raise ValueError(field)
    rows = store.read(
        f"MATCH (x:Experience) RETURN x.{field} AS k, count(x) AS n, "
        "max(CASE WHEN x.status = 'ok' THEN x.speedup END) AS best, "
        "max(CASE WHEN x.status = 'ok' THEN x.competent_speedup END) AS best_competent"
    )
    return {
        r["k"]: {"experiences": r["n"], "best_speedup": r["best"], "best_competent_speedup": r["best_competent"]}
        for r in rows
    }


# -- runs -----------------------------------------------------------------------------------------------


def list_runs(store: GraphStore, status: str | None, limit: int) -> list[Run]:
    rows = store.read(
        "MATCH (r:Run) WHERE $status IS NULL OR r.status = $status "
        "RETURN r.id AS id ORDER BY r.started_at DESC, r.id LIMIT $limit",
        status=status,
        limit=limit,
    )
    found = store.get_nodes(Run, [r["id"] for r in rows])
    return [found[r["id"]] for r in rows if r["id"] in found]


RUN_SUMMARY_FIELDS = {
    "id",
    "task_id",
    "target_key",
    "status",
    "evaluations",
    "budget",
    "best_competent_speedup",
    "best_speedup",
    "best_speedup_over_library",
    "library_label",
    "baseline_note",
    "started_at",
}


def node_counts(store: GraphStore) -> dict[str, int]:
    counts = store.stats()["labels"]
    return {k: v for k, v in counts.items() if k not in ("Migration", "IndexState")}


def top_techniques(store: GraphStore, per_target: int = 5) -> list[dict[str, Any]]:
    """Measured effects (EFFECT_ON) pooled by technique per target, best geometric mean first."""
    return _rows(
        store,
        "MATCH (t:Thought)-[e:EFFECT_ON]->(g:Target) WHERE e.trials > 0 "
        "WITH g.key AS target, t.technique AS technique, sum(e.trials) AS trials, "
        "sum(e.sum_log_speedup) AS logs, count(t) AS thoughts, "
        "sum(coalesce(e.sum_log_competent, 0.0)) AS clogs, sum(coalesce(e.competent_correct, 0)) AS competent "
        "WITH target, technique, trials, thoughts, exp(logs / trials) AS mean_speedup, "
        "CASE WHEN competent > 0 THEN exp(clogs / competent) END AS mean_competent "
        "ORDER BY target, mean_speedup DESC "
        "WITH target, collect({technique: technique, trials: trials, mean_speedup: mean_speedup, "
        "mean_competent: mean_competent, thoughts: thoughts})[..$n] AS best UNWIND best AS b "
        "RETURN target, b.technique AS technique, b.trials AS trials, b.mean_competent AS mean_competent_speedup, "
        "b.mean_speedup AS mean_speedup, b.thoughts AS thoughts",
        n=per_target,
    )


def link_lineage_commits(store: GraphStore, lineage: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each lineage commit gains `url`: the commit on its forge when its repository's remote is known."""
    repos = {c.get("repo") for step in lineage for c in step.get("commits") or []} - {None}
    urls = (
        {
            r["name"]: r["url"]
            for r in _rows(
                store,
                "MATCH (r:Repository) WHERE r.name IN $names RETURN r.name AS name, r.url AS url",
                names=sorted(repos),
            )
        }
        if repos
        else {}
    )
    return [
        {**step, "commits": [_commit(c, urls.get(c.get("repo"))) for c in step.get("commits") or []]}
        for step in lineage
    ]
