"""Retrieval for one (task, target): directions (ideas with their thoughts), what was measured before, and
the target profile. Everything comes from the graph through the knowledge layer."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.examples import example_problems
from agent.posterior import ThoughtStats
from evaluator.safety import ALLOWED_HEADERS, MAX_SOURCE_BYTES
from evaluator.targets import TargetProfile
from evaluator.tasks import KernelTask
from knowledge.fit import OPERATOR_TECHNIQUES, misfit
from knowledge.models import effect_summary
from knowledge.retrieval import Retriever, SearchFilters
from knowledge.store import GraphStore
from knowledge.taxonomy import Technique

RVV_REFERENCE = (Path(__file__).parent / "rvv_reference.md").read_text()


@dataclass
class ThoughtCard:
    id: str
    idea_id: str
    title: str
    description: str
    technique: Technique
    operator: str
    isa: str
    example_code: str = ""  # the mined hunk that carries the technique
    relevance: float = 0.0
    stats: ThoughtStats = field(default_factory=lambda: ThoughtStats(""))
    rvv_equivalents: list[str] = field(default_factory=list)  # "vfmaq_f32 -> __riscv_vfmacc_vv_f32m1"
    claims: list[str] = field(default_factory=list)  # believable claims with the text they were parsed from
    effect: dict[str, Any] = field(default_factory=dict)  # effect_summary on this target ({} when untried)
    isa_fit: int = 0  # 2: the target's own ISA, 1: portable or translated to it, 0: another ISA only
    example_problems: list[str] = field(default_factory=list)  # candidate rules its example breaks as written


@dataclass
class Direction:
    idea_id: str
    title: str
    principle: str
    thoughts: list[ThoughtCard]
    relevance: float


@dataclass
class PriorExperience:
    id: str
    task_id: str
    speedup: float
    code: str
    cflags: list[str]
    variant: dict[str, Any]
    key: str  # the candidate key it was recorded under (offline variant key or code hash)
    competent_speedup: float | None = None  # over the competent baseline; `speedup` is over plain -O3
    target_key: str = ""  # where it was measured (set for transfers from other targets)
    vlen: int = 0  # that target's VLEN
    weight: float = 1.0  # SIMILAR_TO weight of its task x its target to the run's (1: the same)


@dataclass
class AgentContext:
    directions: list[Direction]
    same_task: list[PriorExperience]  # earlier results for this task on this target, best first
    similar_tasks: list[PriorExperience]  # best result of every other task on this target, best first
    target_profile: str
    rvv_reference: str = RVV_REFERENCE
    timing: str = ""  # how candidates are timed on this target and runner: what is modeled, what is not
    rules: str = ""  # what the evaluator rejects
    # Best results of this task on SIMILAR_TO targets and of SIMILAR_TO tasks on this or similar targets,
    # most similar first: decisions a run may start from, rescaled (agent/transfer.py).
    transfers: list[PriorExperience] = field(default_factory=list)
    # Every other task's best decision on this target and on each similar one, as (task, target, variant):
    # how their best knobs moved between two targets (agent/transfer.py learned_shifts).
    decisions: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)


def target_profile_text(target: TargetProfile) -> str:
    return (
        f"{target.name} [{target.key}]: {target.march}, -mcpu={target.mcpu or '-'}, VLEN {target.vlen}, "
        f"DLEN {target.dlen}, {target.issue}-issue {'out-of-order' if target.out_of_order else 'in-order'}, "
        f"{target.clock_ghz} GHz, L1D {target.l1d_kb} KiB, L2 {target.l2_kb} KiB, "
        f"cache line {target.cache_line} B. {target.description}"
    )


def target_isa(target: TargetProfile) -> str | None:
    """The vector ISA a candidate for this target is written in (None: the host, any ISA)."""
    return "rvv" if target.is_riscv and target.vlen else None


def timing_text(target: TargetProfile, runner: str) -> str:
    """What the number a candidate gets means, and what it does not see (docs/COSTMODEL.md)."""
    base = (
        f"Speedup = time of the reference compiled with clang-22 {' '.join(target.baseline_cflags)} / time of "
        "the candidate, one call at the bench size (other sizes are checked for correctness only)."
    )
    if runner == "ssh":
        return base + f" Times are measured on a {target.name} board (wall clock, median of repeats)."
    if runner == "native" or not target.cost_model:
        return base + " Times are measured natively on the host (wall clock, median of repeats)."
    return base + (
        f" Times are MODELED cycles: the kernel runs under qemu and every executed instruction is priced with "
        f"LLVM's {target.cost_model} scheduling model (llvm-mca): issue width, latency and occupancy per "
        "instruction and LMUL, in-order issue, the vector and scalar streams overlapping. NOT modeled: caches "
        "and DRAM (every load hits L1), branch mispredictions, tails (vl < VLMAX costs as much as a full "
        "vector), vsetvli (1 cycle). So: fewer dynamic instructions, enough independent accumulators to "
        "cover latency, loads with LMUL >= 2 and one reduction after the loop pay; prefetching and cache "
        "blocking do not show here."
        + ("" if target.modeled_exact else f" The model is a proxy for {target.name} (approximate).")
    )


def rules_text(task: KernelTask, target: TargetProfile) -> str:
    """What the evaluator rejects before or while running a candidate (evaluator/safety.py, toolchain.py)."""
    headers = ", ".join(f"<{h}>" for h in sorted(ALLOWED_HEADERS | set(target.extra_headers)))
    return (
        f"- One C file (at most {MAX_SOURCE_BYTES >> 10} KiB) defining `{task.signature}`; static helpers "
        "are fine. No main().\n"
        f"- Includes only: {headers}.\n"
        "- Rejected: I/O and printing, files, sockets, processes, signals, exit/abort/setjmp, getenv, mmap, "
        "threads; inline asm other than literal vector instructions; constructors/section/alias attributes; "
        "names starting eok_; mutable global or static state (use locals or `static const` tables).\n"
        f"- Output must match the reference within rtol={task.tolerance.rtol}, atol={task.tolerance.atol} at "
        "every tested size, tails included; never read or write outside the arguments' extents.\n"
        "- cflags (optional): -O0..-O3/-Os/-Oz/-Ofast, -f[no-]unroll-loops, -f[no-]vectorize, the -ffast-math "
        "family, -ffp-contract=, -mrvv-max-lmul=mN, -mrvv-vector-bits=, -DNAME[=value], -W..., -mllvm "
        "vectorizer/unroll/LMUL options; anything else rejects the candidate."
    )


def gather(
    store: GraphStore,
    retriever: Retriever,
    task: KernelTask,
    target: TargetProfile,
    directions: int,
    runner: str = "qemu",
) -> AgentContext:
    isa = target_isa(target)
    cards = _fitting(_thought_cards(retriever, task, target), task, isa) or _fitting(
        _thoughts_from_graph(store, task, target), task, isa
    )
    _attach_stats(store, cards, target.key)
    transfers = transfer_sources(store, task.name, target.key)
    elsewhere = any(p.target_key != target.key for p in transfers)  # knob moves matter only across targets
    return AgentContext(
        directions=_choose_directions(store, cards, directions, OPERATOR_TECHNIQUES.get(str(task.operator), ())),
        same_task=_prior(store, target.key, task_id=task.name),
        # Relatives are decided later by which offline family can re-render their knobs for this task.
        similar_tasks=_prior(store, target.key, exclude=task.name, limit=24),
        target_profile=target_profile_text(target),
        timing=timing_text(target, runner),
        rules=rules_text(task, target),
        transfers=transfers,
        decisions=best_decisions(store, task.name, target.key) if elsewhere else [],
    )


def _thought_cards(retriever: Retriever, task: KernelTask, target: TargetProfile) -> list[ThoughtCard]:
    query = f"{task.operator} {task.name.replace('_', ' ')} {task.description} vector RISC-V"
    isa = target_isa(target)
    searches = [
        SearchFilters(kind="thought", operator=str(task.operator), target=target.key),
        SearchFilters(kind="thought", target=target.key),
    ]
    # The technique families that decide this operator's speed: their thoughts must be among the candidates
    # even when the query's words favour others (an sdot query finds lookup tables before accumulators).
    searches += [
        SearchFilters(kind="thought", technique=str(t), target=target.key)
        for t in OPERATOR_TECHNIQUES.get(str(task.operator), ())
    ]
    if isa:  # the target's own ISA first: make sure its thoughts are among the candidates
        searches.insert(0, SearchFilters(kind="thought", operator=str(task.operator), isa=isa, target=target.key))
    cards: dict[str, ThoughtCard] = {}
    for filters in searches:
        for hit in retriever.search(query, k=40, filters=filters):
            if hit.id not in cards:
                cards[hit.id] = _card(hit.id, hit.node, hit.score, isa)
    return list(cards.values())


def _fitting(cards: list[ThoughtCard], task: KernelTask, isa: str | None) -> list[ThoughtCard]:
    """Only thoughts whose operator, data and ISA fit the task (knowledge/fit.py)."""
    return [c for c in cards if not misfit(_fit_fields(c), str(task.operator), task.dtype, isa)]


def _fit_fields(c: ThoughtCard) -> dict[str, Any]:
    return {
        "operator": c.operator,
        "isa": c.isa,
        "title": c.title,
        "example_code": c.example_code,
        "rvv_equivalents": c.rvv_equivalents,
    }


def _thoughts_from_graph(store: GraphStore, task: KernelTask, target: TargetProfile) -> list[ThoughtCard]:
    """Thoughts read from the graph itself, the operator's first.

    Retrieval reads indexes that follow the graph (the FAISS cache, Neo4j's eventually consistent full-text
    index), so thoughts written a moment ago (a fresh graph's starter ideas) may not be found yet; the agent
    still needs directions.
    """
    rows = store.read(
        "MATCH (t:Thought) RETURN t.id AS id, properties(t) AS p "
        "ORDER BY CASE WHEN t.operator = $op THEN 0 WHEN t.operator = 'other' THEN 1 ELSE 2 END, t.id LIMIT 200",
        op=str(task.operator),
    )
    isa = target_isa(target)
    return [_card(r["id"], r["p"], 0.0, isa) for r in rows]


def _card(thought_id: str, n: dict, score: float, isa: str | None) -> ThoughtCard:
    card = ThoughtCard(
        id=thought_id,
        idea_id=n.get("idea_id") or "",
        title=n.get("title") or thought_id,
        description=n.get("description") or "",
        technique=Technique(n["technique"]),
        operator=n.get("operator") or "other",
        isa=n.get("isa") or "generic",
        example_code=n.get("example_code") or "",
        relevance=score,
        stats=ThoughtStats(thought_id, n.get("evidence_commits") or 0, n.get("prior_speedup")),
        rvv_equivalents=list(n.get("rvv_equivalents") or []),
        claims=list(n.get("claims") or []),
    )
    card.isa_fit = _isa_fit(card, isa)
    card.example_problems = example_problems(card.example_code)
    return card


def _isa_fit(card: ThoughtCard, isa: str | None) -> int:
    if isa is None or card.isa == isa:
        return 2
    if card.isa == "generic" or (isa == "rvv" and card.rvv_equivalents):
        return 1
    return 0


def _attach_stats(store: GraphStore, cards: list[ThoughtCard], target_key: str) -> None:
    rows = store.read(
        "UNWIND $ids AS id MATCH (t:Thought {id: id})-[e:EFFECT_ON]->(:Target {key: $target}) "
        "RETURN id, properties(e) AS e",
        ids=[c.id for c in cards],
        target=target_key,
    )
    by_id = {r["id"]: effect_summary(r["e"]) for r in rows}
    for c in cards:
        if e := by_id.get(c.id):
            c.effect = e
            c.stats.trials, c.stats.successes = e["trials"], e["successes"]


def _choose_directions(
    store: GraphStore, cards: list[ThoughtCard], k: int, key_techniques: tuple[Technique, ...] = ()
) -> list[Direction]:
    """K ideas: first one per technique family that matters for the operator (`key_techniques`, in order),
    then those with thoughts in the target's ISA first (then translated or portable ones), by relevance
    inside each group, greedily diversified: an idea whose techniques are already covered waits."""
    by_idea: dict[str, list[ThoughtCard]] = {}
    for c in cards:
        by_idea.setdefault(c.idea_id, []).append(c)
    ideas = {
        r["id"]: r
        for r in store.read(
            "UNWIND $ids AS id MATCH (i:Idea {id: id}) RETURN i.id AS id, i.title AS title, i.principle AS principle",
            ids=list(by_idea),
        )
    }
    chosen = choose_ideas(by_idea, k, key_techniques)
    return [
        Direction(
            idea_id=i,
            title=(ideas.get(i) or {}).get("title") or i,
            principle=(ideas.get(i) or {}).get("principle") or "",
            thoughts=sorted(by_idea[i], key=lambda c: (c.isa_fit, c.relevance), reverse=True)[:8],
            relevance=max(c.relevance for c in by_idea[i]),
        )
        for i in chosen
    ]


def choose_ideas(
    by_idea: dict[str, list[ThoughtCard]], k: int, key_techniques: tuple[Technique, ...] = ()
) -> list[str]:
    """The ids of the K ideas directions follow (see _choose_directions)."""
    ranked = sorted(by_idea, key=lambda i: max((c.isa_fit, c.relevance) for c in by_idea[i]), reverse=True)
    chosen: list[str] = []
    covered: set[Technique] = set()
    for tech in key_techniques:  # the operator's own technique families first, one idea each
        idea = next((i for i in ranked if i not in chosen and any(c.technique == tech for c in by_idea[i])), None)
        if idea is not None and tech not in covered and len(chosen) < k:
            chosen.append(idea)
            covered |= {c.technique for c in by_idea[idea]}
    for idea in ranked:  # then new techniques only
        techs = {c.technique for c in by_idea[idea]}
        if techs - covered and len(chosen) < k:
            chosen.append(idea)
            covered |= techs
    for idea in ranked:  # then fill up by relevance
        if len(chosen) >= k:
            break
        if idea not in chosen:
            chosen.append(idea)
    return chosen


def _prior(
    store: GraphStore,
    target_key: str,
    task_id: str | None = None,
    exclude: str | None = None,
    limit: int = 8,
) -> list[PriorExperience]:
    rows = store.read(
        "MATCH (x:Experience {target_key: $target, status: 'ok'})-[:FOR_TASK]->(t:Task) "
        "WHERE ($task IS NULL OR t.id = $task) "
        "AND ($exclude IS NULL OR t.id <> $exclude) AND x.speedup IS NOT NULL "
        "WITH t, x ORDER BY x.speedup DESC WITH t, collect(x)[0] AS best "
        "RETURN best.id AS id, t.id AS task, best.speedup AS speedup, best.code AS code, best.cflags AS cflags, "
        "best.variant AS variant, best.code_hash AS key, best.competent_speedup AS competent "
        "ORDER BY speedup DESC LIMIT $limit",
        target=target_key,
        task=task_id,
        exclude=exclude,
        limit=limit,
    )
    return [_prior_from_row(r) for r in rows]


def _prior_from_row(row: dict, **where: Any) -> PriorExperience:
    """A best kernel as the queries above return it (`where`: the target it was measured on, for transfers)."""
    return PriorExperience(
        row["id"],
        row["task"],
        row["speedup"],
        row["code"] or "",
        list(row["cflags"] or []),
        json.loads(row["variant"] or "{}"),
        row["key"] or "",
        row["competent"],
        **where,
    )


# A measured kernel of an offline family (not clang's own vectorizer): a decision another run can re-render.
_OFFLINE_DECISION = (
    'x.speedup IS NOT NULL AND x.variant CONTAINS \'"family"\' AND NOT x.variant CONTAINS \'"family": "generic"\''
)

_SAME_TASK_ELSEWHERE = """
MATCH (:Target {key: $target})-[s:SIMILAR_TO]-(g:Target)
WITH g, max(s.weight) AS weight
MATCH (x:Experience {task_id: $task, target_key: g.key, status: 'ok'})
WHERE OFFLINE_DECISION
WITH g, weight, x ORDER BY x.speedup DESC
WITH g, weight, collect(x)[0] AS best
RETURN best.id AS id, best.task_id AS task, best.speedup AS speedup, best.code AS code, best.cflags AS cflags,
       best.variant AS variant, best.code_hash AS key, best.competent_speedup AS competent,
       g.key AS target, coalesce(g.vlen, 0) AS vlen, weight
""".replace("OFFLINE_DECISION", _OFFLINE_DECISION)

_RELATED_TASKS = """
MATCH (:Task {id: $task})-[s:SIMILAR_TO]-(t:Task)
WITH t, max(s.weight) AS task_w
MATCH (x:Experience {task_id: t.id, status: 'ok'})-[:ON_TARGET]->(g:Target)
WHERE OFFLINE_DECISION
OPTIONAL MATCH (g)-[gs:SIMILAR_TO]-(:Target {key: $target})
WITH t, task_w, g, CASE WHEN g.key = $target THEN 1.0 ELSE max(gs.weight) END AS target_w, x
WHERE target_w IS NOT NULL
WITH t, g, task_w * target_w AS weight, x ORDER BY x.speedup DESC
WITH t, g, weight, collect(x)[0] AS best
RETURN best.id AS id, best.task_id AS task, best.speedup AS speedup, best.code AS code, best.cflags AS cflags,
       best.variant AS variant, best.code_hash AS key, best.competent_speedup AS competent,
       g.key AS target, coalesce(g.vlen, 0) AS vlen, weight
""".replace("OFFLINE_DECISION", _OFFLINE_DECISION)


_BEST_DECISIONS = """
OPTIONAL MATCH (:Target {key: $target})-[:SIMILAR_TO]-(g:Target)
WITH collect(DISTINCT g.key) + [$target] AS keys
UNWIND keys AS key
MATCH (x:Experience {target_key: key, status: 'ok'})
WHERE x.task_id <> $task AND OFFLINE_DECISION
WITH x.task_id AS task, key, x ORDER BY x.speedup DESC
WITH task, key, collect(x.variant)[0] AS variant
RETURN task, key AS target, variant ORDER BY task, target LIMIT $limit
""".replace("OFFLINE_DECISION", _OFFLINE_DECISION)


def best_decisions(
    store: GraphStore, task_id: str, target_key: str, limit: int = 400
) -> list[tuple[str, str, dict[str, Any]]]:
    """Other tasks' best offline decisions on this target and the similar ones (one per task and target)."""
    rows = store.read(_BEST_DECISIONS, task=task_id, target=target_key, limit=limit)
    return [(r["task"], r["target"], json.loads(r["variant"] or "{}")) for r in rows]


def transfer_sources(store: GraphStore, task_id: str, target_key: str, limit: int = 8) -> list[PriorExperience]:
    """What a run may start from that was measured elsewhere: this task's best on each similar target, then
    each related task's best on this or a similar target; by SIMILAR_TO weight, then speedup."""
    rows = [*store.read(_SAME_TASK_ELSEWHERE, task=task_id, target=target_key)]
    rows += store.read(_RELATED_TASKS, task=task_id, target=target_key)
    rows.sort(key=lambda r: (-(r["weight"] or 0), r["task"] != task_id, -(r["speedup"] or 0)))
    return [
        _prior_from_row(r, target_key=r["target"], vlen=int(r["vlen"] or 0), weight=float(r["weight"] or 0))
        for r in rows[:limit]
    ]
