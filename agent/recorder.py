"""Writes what the agent learns: every evaluated candidate as an Experience, linked to its thoughts, task,
target, parent and run, with the (thought, target) effectiveness statistics updated in the same transaction.

An Experience holds both speedups: `speedup` over the plain baseline and `competent_speedup` over the
competent one (docs/TASKS.md). EFFECT_ON (one meaning: docs/CYPHER.md "Measured effect") adds, for a correct
candidate, log(speedup) over the plain baseline to sum_log_speedup and log(speedup / parent's) to sum_log_gain,
and, when the task has a competent baseline, log(competent speedup) to sum_log_competent (counted in
competent_correct: the figure surfaces lead with); both speedups of one task divide the same candidate time, so
the gain is the same over either baseline.

Idempotent: recording the same experience id twice changes nothing (statistics move only on creation), so a
resumed run can never double-count.
"""

from __future__ import annotations

import math
from typing import Any

from agent.transfer import Transfer, target_weight, task_weight
from knowledge.embeddings import Embedder
from knowledge.models import Experience, Run
from knowledge.store import GraphStore, embedding_properties

_RECORD = """
MERGE (x:Experience {id: $props.id})
ON CREATE SET x += $props, x.created_now = true
WITH x, coalesce(x.created_now, false) AS created
REMOVE x.created_now
WITH x, created
MATCH (task:Task {id: $props.task_id})
MATCH (tg:Target {key: $props.target_key})
MATCH (run:Run {id: $props.run_id})
MERGE (x)-[:FOR_TASK]->(task)
MERGE (x)-[:ON_TARGET]->(tg)
MERGE (x)-[:IN_RUN]->(run)
SET run.evaluations = CASE WHEN created THEN coalesce(run.evaluations, 0) + 1 ELSE run.evaluations END,
    run.llm_calls = coalesce(run.llm_calls, 0) + CASE WHEN created THEN $llm_calls ELSE 0 END,
    run.llm_tokens = coalesce(run.llm_tokens, 0) + CASE WHEN created THEN $llm_tokens ELSE 0 END
FOREACH (_ IN CASE WHEN created AND $improves_run THEN [1] ELSE [] END |
    SET run.best_experience_id = x.id, run.best_speedup = x.speedup,
        run.best_competent_speedup = x.competent_speedup)
WITH x, created, tg
CALL (x) {
    OPTIONAL MATCH (p:Experience {id: x.parent_id})
    FOREACH (_ IN CASE WHEN p IS NULL THEN [] ELSE [1] END | MERGE (x)-[:DERIVED_FROM]->(p))
}
CALL (x, created, tg) {
    UNWIND x.thought_ids AS tid
    MATCH (t:Thought {id: tid})
    MERGE (x)-[:APPLIED]->(t)
    MERGE (t)-[e:EFFECT_ON]->(tg)
    ON CREATE SET e.trials = 0, e.successes = 0, e.correct = 0, e.sum_log_speedup = 0.0, e.sum_log_gain = 0.0,
                  e.competent_correct = 0, e.sum_log_competent = 0.0
    FOREACH (_ IN CASE WHEN created THEN [1] ELSE [] END |
        SET e.trials = e.trials + 1,
            e.successes = e.successes + $success,
            e.correct = e.correct + $correct,
            e.sum_log_speedup = e.sum_log_speedup + $log_speedup,
            e.sum_log_gain = coalesce(e.sum_log_gain, 0.0) + $log_gain,
            e.competent_correct = coalesce(e.competent_correct, 0) + $competent_correct,
            e.sum_log_competent = coalesce(e.sum_log_competent, 0.0) + $log_competent)
}
RETURN created
"""


class Recorder:
    def __init__(self, store: GraphStore, embedder: Embedder) -> None:
        self.store = store
        self.embedder = embedder

    def record(
        self,
        exp: Experience,
        success: bool,
        parent_speedup: float | None,
        improves_run: bool,
        llm_calls: int = 0,
        llm_tokens: int = 0,
    ) -> bool:
        """Store the experience and update statistics atomically. Returns False if it already existed."""
        props = exp.properties()
        text = exp.embedding_text() or exp.id
        vec = self.embedder.embed([text])[0]
        # Stamped with a fresh generation so the FAISS cache picks the vector up (a bump for an experience
        # that already existed only costs the index an empty catch-up).
        gen = self.store.bump_embedding_generation()
        props.update(embedding_properties(vec, self.embedder.hashes([text])[0], self.embedder.model_name, gen))
        # EFFECT_ON's meaning is knowledge.models.effect_summary: logs only of correct candidates.
        ok = bool(exp.status == "ok" and exp.speedup)
        log_speedup = math.log(exp.speedup) if ok else 0.0
        log_gain = math.log(exp.speedup / (parent_speedup or 1.0)) if ok else 0.0
        competent = bool(ok and exp.competent_speedup)
        log_competent = math.log(exp.competent_speedup) if competent and exp.competent_speedup else 0.0
        rows = self.store.write(
            _RECORD,
            props=props,
            success=int(success),
            correct=int(ok),
            log_speedup=log_speedup,
            log_gain=log_gain,
            competent_correct=int(competent),
            log_competent=log_competent,
            improves_run=improves_run,
            llm_calls=llm_calls,
            llm_tokens=llm_tokens,
        )
        self.store.bump_embedding_generation()  # the vector is in: an index that looked meanwhile looks again
        return bool(rows and rows[0]["created"])

    def record_transfer(self, transfer: Transfer, exp: Experience) -> None:
        """(source)-[:TRANSFERS_TO]->(exp) with both decisions and both outcomes; idempotent (MERGE)."""
        self.store.write(
            "MATCH (src:Experience {id: $src}) MATCH (x:Experience {id: $dst}) "
            "MERGE (src)-[t:TRANSFERS_TO]->(x) SET t += $props",
            src=transfer.source_id,
            dst=exp.id,
            props=transfer.properties(exp.speedup, str(exp.status)),
        )

    def link_similar(self, task_id: str, operator: str, target_key: str, vlen: int | None) -> None:
        """SIMILAR_TO between this task and the graph's other tasks, and this target and the other targets,
        weighted as agent/transfer.py says (edges of weight 0 are not written)."""
        tasks = self.store.read("MATCH (t:Task) WHERE t.id <> $id RETURN t.id AS id, t.operator AS op", id=task_id)
        targets = self.store.read("MATCH (g:Target) WHERE g.key <> $k RETURN g.key AS k, g.vlen AS v", k=target_key)
        task_edges = [{"id": r["id"], "w": task_weight(operator, r["op"] or "other")} for r in tasks]
        target_edges = [{"k": r["k"], "w": target_weight(vlen, r["v"])} for r in targets]
        self.store.write(
            "MATCH (a:Task {id: $id}) UNWIND $tasks AS e MATCH (b:Task {id: e.id}) "
            "MERGE (a)-[s:SIMILAR_TO]-(b) SET s.weight = e.w",
            id=task_id,
            tasks=[e for e in task_edges if e["w"] > 0],
        )
        self.store.write(
            "MATCH (a:Target {key: $k}) UNWIND $targets AS e MATCH (b:Target {key: e.k}) "
            "MERGE (a)-[s:SIMILAR_TO]-(b) SET s.weight = e.w",
            k=target_key,
            targets=[e for e in target_edges if e["w"] > 0],
        )

    def add_llm_usage(self, run_id: str, calls: int, tokens: int) -> None:
        """LLM requests that produced no experience (a repeated candidate) still count on the run."""
        self.store.write(
            "MATCH (r:Run {id: $id}) SET r.llm_calls = coalesce(r.llm_calls, 0) + $calls, "
            "r.llm_tokens = coalesce(r.llm_tokens, 0) + $tokens",
            id=run_id,
            calls=calls,
            tokens=tokens,
        )

    def update_run(self, run_id: str, **changes: Any) -> None:
        """Set only the named Run properties (the counters belong to `record`)."""
        Run.model_validate({"id": run_id, "task_id": "-", "target_key": "-", "budget": 1, **changes})
        self.store.write("MATCH (r:Run {id: $id}) SET r += $changes", id=run_id, changes=changes)
