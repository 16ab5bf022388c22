"""Writes what the agent learns: every evaluated candidate as an Experience, linked to its thoughts, task,
target, parent and run, with the (thought, target) effectiveness statistics updated in the same transaction.

An Experience holds both speedups: `speedup` over the plain baseline and `competent_speedup` over the
competent one (docs/TASKS.md). EFFECT_ON (one meaning: docs/CYPHER.md "Measured effect") adds, for a correct
candidate, log(speedup) over the plain baseline to sum_log_speedup and log(speedup / parent's) to sum_log_gain,
and, when the task has a competent baseline, log(competent speedup) to sum_log_competent (counted in
competent_correct: the figure surfaces lead with); both speedups of one task divide the same candidate time, so
the gain is the same over either baseline.

Records are written in batches, one transaction each (docs/SCALE.md "The graph writer"): the experiences are
MERGEd on their id first, and only those created by that transaction move the run's counters and the EFFECT_ON
statistics, so recording an experience id twice (a resumed run, a batch the driver retried after a lost
commit reply) changes nothing and can never double-count. A batch commits whole or not at all.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

from agent.transfer import Transfer, target_weight, task_weight
from core.errors import Unavailable
from knowledge.embeddings import Embedder, text_hash
from knowledge.models import Experience, Run
from knowledge.store import GraphStore, embedding_properties

log = logging.getLogger(__name__)
R = TypeVar("R")
BATCH_RECORDS = 500  # records per transaction at most (a farm's burst; ~1 MB of parameters with the code)
BATCH_WAIT_S = 0.2  # a record waits at most this long for others to share its transaction
# The summaries' embeddings are computed by a few embedding threads in front of the writer, not by the writer:
# a model call per text costs ~5 ms of one core, 30x the write path's ~0.15 ms (docs/SCALE.md). Each call
# takes up to EMBED_TEXTS queued summaries: below knowledge.embeddings.BULK_TEXTS, so every thread stays on the
# model's one-core session (16 texts cost the same per text as 500, a text alone ~1.5x that).
EMBED_TEXTS = 16
EMBEDDERS = max(1, min(4, os.cpu_count() or 1))  # embedding threads at most (they release the GIL in the model)

# Only the experiences this transaction creates come back: the rest were recorded before.
_CREATE = """
UNWIND $rows AS props
MERGE (x:Experience {id: props.id})
ON CREATE SET x += props, x.created_now = true
WITH x, coalesce(x.created_now, false) AS created
WHERE created
REMOVE x.created_now
RETURN x.id AS id
"""

_LINK = """
UNWIND $rows AS row
MATCH (x:Experience {id: row.id})
MATCH (task:Task {id: row.task_id})
MATCH (tg:Target {key: row.target_key})
MATCH (run:Run {id: row.run_id})
CREATE (x)-[:FOR_TASK]->(task), (x)-[:ON_TARGET]->(tg), (x)-[:IN_RUN]->(run)
WITH x, row
CALL (x, row) {
    OPTIONAL MATCH (p:Experience {id: row.parent_id})
    FOREACH (_ IN CASE WHEN p IS NULL THEN [] ELSE [1] END | CREATE (x)-[:DERIVED_FROM]->(p))
}
CALL (x, row) {
    UNWIND row.thought_ids AS tid
    MATCH (t:Thought {id: tid})
    MERGE (x)-[:APPLIED]->(t)
}
"""

_EFFECTS = """
UNWIND $rows AS row
MATCH (t:Thought {id: row.thought})
MATCH (tg:Target {key: row.target})
MERGE (t)-[e:EFFECT_ON]->(tg)
ON CREATE SET e.trials = 0, e.successes = 0, e.correct = 0, e.sum_log_speedup = 0.0, e.sum_log_gain = 0.0,
              e.competent_correct = 0, e.sum_log_competent = 0.0
SET e.trials = e.trials + row.trials,
    e.successes = e.successes + row.successes,
    e.correct = e.correct + row.correct,
    e.sum_log_speedup = e.sum_log_speedup + row.sum_log_speedup,
    e.sum_log_gain = coalesce(e.sum_log_gain, 0.0) + row.sum_log_gain,
    e.competent_correct = coalesce(e.competent_correct, 0) + row.competent_correct,
    e.sum_log_competent = coalesce(e.sum_log_competent, 0.0) + row.sum_log_competent
"""

_RUNS = """
UNWIND $rows AS row
MATCH (run:Run {id: row.id})
SET run.evaluations = coalesce(run.evaluations, 0) + row.evaluations,
    run.llm_calls = coalesce(run.llm_calls, 0) + row.llm_calls,
    run.llm_tokens = coalesce(run.llm_tokens, 0) + row.llm_tokens
FOREACH (b IN CASE WHEN row.best IS NULL THEN [] ELSE [row.best] END |
    SET run.best_experience_id = b.id, run.best_speedup = b.speedup, run.best_competent_speedup = b.competent,
        run.best_speedup_over_library = b.over_library, run.library_label = b.library_label)
"""


@dataclass(frozen=True)
class Record:
    """One evaluated candidate to store, with what its statistics need from the moment it was judged."""

    experience: Experience
    success: bool
    parent_speedup: float | None
    improves_run: bool
    llm_calls: int = 0
    llm_tokens: int = 0
    queued_at: float = field(default_factory=time.monotonic, compare=False)
    # The summary's embedding when it came with the result (computed where the evaluation ran, with this
    # recorder's model, of this experience's embedding text): then nobody here calls the model for it.
    vector: np.ndarray | None = field(default=None, compare=False, repr=False)

    def effect(self) -> dict[str, float | int]:
        """This experience's contribution to EFFECT_ON (its meaning: knowledge.models.effect_summary)."""
        exp = self.experience
        ok = bool(exp.status == "ok" and exp.speedup)
        competent = bool(ok and exp.competent_speedup)
        return {
            "trials": 1,
            "successes": int(self.success),
            "correct": int(ok),
            "sum_log_speedup": math.log(exp.speedup) if ok and exp.speedup else 0.0,
            "sum_log_gain": math.log(exp.speedup / (self.parent_speedup or 1.0)) if ok and exp.speedup else 0.0,
            "competent_correct": int(competent),
            "sum_log_competent": math.log(exp.competent_speedup) if competent and exp.competent_speedup else 0.0,
        }


class Recorder:
    """Writes records in the caller's thread: one transaction per call of `record` or `record_batch`."""

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
        vector: np.ndarray | None = None,
    ) -> None:
        """Store the experience and update statistics atomically (nothing, if it was recorded before).
        `vector`: the summary's embedding, when the worker computed it (else the model is called here)."""
        self.record_batch([Record(exp, success, parent_speedup, improves_run, llm_calls, llm_tokens, vector=vector)])

    def flush(self, run_id: str | None = None, timeout: float | None = None) -> bool:
        """Nothing waits here: every record is written before `record` returns."""
        return True

    def record_batch(self, records: Sequence[Record]) -> set[str]:
        """Store the records in ONE transaction; returns the ids it created (the others existed already)."""
        records = _first_of_each(records)
        if not records:
            return set()
        return self._write(_embedded(self.embedder, records))

    def _write(self, rows: Sequence[tuple[Record, dict[str, Any]]]) -> set[str]:
        """One transaction for records whose properties already carry their embedding (`_embedded`): the
        write path does no model work. Only the generation is stamped here, taken in the same transaction."""
        records = [r for r, _ in rows]

        def write(q: Callable[..., list[dict]]) -> set[str]:
            gen = self.store.take_embedding_generation(q)  # commits with the vectors stamped with it
            created = {row["id"] for row in q(_CREATE, rows=[{**props, "embedding_gen": gen} for _, props in rows])}
            fresh = [r for r in records if r.experience.id in created]
            if fresh:
                q(_LINK, rows=[_links(r.experience) for r in fresh])
                q(_EFFECTS, rows=_effects(fresh))
                q(_RUNS, rows=_run_totals(fresh))
            return created

        return self.store.write_many(write)

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


@dataclass
class _Queued:
    """A queued record and, once an embedding thread has been through it, its properties with the vector."""

    record: Record
    props: dict[str, Any] | None = None
    error: Exception | None = None  # the embedding failed: the record is lost with the others of its call
    ready: bool = False  # embedded (or failed): from queueing on when the record came with its vector


class BatchRecorder(Recorder):
    """Records queued by any thread (the directions of every run of this process), embedded by up to
    `embedders` embedding threads (one model call per EMBED_TEXTS; a record that came with its vector from
    the worker that evaluated it is ready as queued) and written by one writer thread in one
    transaction per batch of embedded records: when BATCH_RECORDS are ready, when the oldest has waited
    BATCH_WAIT_S, or when someone flushes. The writer takes records in the order they were queued (a run's
    best is its batch's last improvement), and never calls the model.

    A record still queued when the process dies is lost like an evaluation not yet judged: its run resumes
    from what the graph holds and evaluates again. A batch that fails (Neo4j gone past the driver's retries,
    or its embedding failed) is lost the same way, and its runs learn it: their next `record` or
    `flush(run_id)` raises, so the run fails (resumable) instead of finishing with evaluations missing.
    """

    def __init__(
        self,
        store: GraphStore,
        embedder: Embedder,
        batch: int = BATCH_RECORDS,
        wait_s: float = BATCH_WAIT_S,
        embedders: int = EMBEDDERS,
    ) -> None:
        super().__init__(store, embedder)
        self.batch = batch
        self.wait_s = wait_s
        self.embedders = max(1, embedders)
        self._cond = threading.Condition()
        self._queue: list[_Queued] = []  # in the order queued; the writer takes a ready prefix
        self._claimed = 0  # the first this many of the queue are embedded or being embedded
        self._ready = 0  # the first this many of the queue are embedded (or failed): the writer may take them
        self._embedding = 0  # embedding threads running
        self._queued = 0  # records ever queued
        self._settled = 0  # of those, written or lost with their batch (FIFO: always the oldest)
        self._wanted = 0  # a flush waits for the first this many: write without waiting out the interval
        self._lost: dict[str, Exception] = {}  # run id -> why a batch with its records failed
        self._writer: threading.Thread | None = None

    def record(
        self,
        exp: Experience,
        success: bool,
        parent_speedup: float | None,
        improves_run: bool,
        llm_calls: int = 0,
        llm_tokens: int = 0,
        vector: np.ndarray | None = None,
    ) -> None:
        """Queue the experience and return: an embedding thread embeds it (unless it comes with its
        `vector`), the writer stores it with the others of its batch."""
        rec = Record(exp, success, parent_speedup, improves_run, llm_calls, llm_tokens, vector=vector)
        queued = _Queued(rec)
        if vector is not None:  # no model call: its properties are ready now
            ((_, queued.props),) = _embedded(self.embedder, [rec])
            queued.ready = True
        with self._cond:
            self._raise_lost(exp.run_id)
            self._queue.append(queued)
            self._queued += 1
            if queued.ready:
                self._advance()
                self._cond.notify_all()
            if self._claimed < len(self._queue) and self._embedding < self.embedders:
                self._embedding += 1
                threading.Thread(target=self._embed_loop, name="eok-recorder-embed", daemon=True).start()
            if self._writer is None:
                self._writer = threading.Thread(target=self._write_loop, name="eok-recorder", daemon=True)
                self._writer.start()

    def flush(self, run_id: str | None = None, timeout: float | None = None) -> bool:
        """Wait until every record queued so far is written; False if `timeout` ran out first. With a run
        id, raise if a batch holding records of that run failed (once: the run now fails and can resume)."""
        with self._cond:
            target = self._queued
            self._wanted = max(self._wanted, target)
            self._cond.notify_all()
            done = self._cond.wait_for(lambda: self._settled >= target, timeout)
            if run_id is not None:
                self._raise_lost(run_id)
        return done

    def _raise_lost(self, run_id: str) -> None:
        err = self._lost.pop(run_id, None)
        if err is not None:
            raise Unavailable(
                f"run {run_id}: evaluations were not recorded: {err}",
                f"resume the run once the graph is reachable: `eok optimize --resume {run_id}`",
            ) from err

    def _embed_loop(self) -> None:
        """Claim the oldest records nobody embeds yet, embed them in one call, hand them to the writer."""
        while True:
            with self._cond:
                if self._claimed >= len(self._queue):
                    self._embedding -= 1
                    return
                window = self._queue[self._claimed : self._claimed + EMBED_TEXTS]
                self._claimed += len(window)
            claim = [q for q in window if not q.ready]  # some came with their vectors
            try:
                props = [p for _, p in _embedded(self.embedder, [q.record for q in claim])]
            except Exception as e:  # the model failed: these records are lost, their runs hear of it
                log.error("embedding %d experiences failed: %s", len(claim), e)
                props, error = [None] * len(claim), e
            else:
                error = None
            with self._cond:
                for q, p in zip(claim, props, strict=True):
                    q.props, q.error, q.ready = p, error, True
                self._advance()
                self._cond.notify_all()

    def _advance(self) -> None:
        """(Holding the condition.) Move the claim and ready marks over records that are ready: the next
        embedding thread starts at the first record that still needs the model, the writer may take every
        ready record up to the first that does not."""
        while self._claimed < len(self._queue) and self._queue[self._claimed].ready:
            self._claimed += 1
        while self._ready < len(self._queue) and self._queue[self._ready].ready:
            self._ready += 1

    def _write_loop(self) -> None:
        while True:
            with self._cond:
                if not self._queue:
                    self._writer = None  # the next record starts a new writer
                    return
                batch = self._next_batch()
            lost: dict[str, Exception] = {q.record.experience.run_id: q.error for q in batch if q.error}
            rows = _first_of_each([(q.record, q.props) for q in batch if q.error is None])
            try:
                if rows:
                    self._write(rows)
            except Exception as e:  # anything: the runs must hear of it rather than the thread dying silently
                log.error("recording %d experiences failed: %s", len(batch), e)
                lost.update((q.record.experience.run_id, e) for q in batch)
            with self._cond:
                for run_id, err in lost.items():
                    self._lost.setdefault(run_id, err)
                self._settled += len(batch)
                self._cond.notify_all()

    def _next_batch(self) -> list[_Queued]:
        """Wait (holding the condition) until a batch is due, then take it off the queue: up to `batch` of
        the embedded records at the queue's head."""
        while not self._due():
            # Nothing embedded yet: an embedding thread notifies. Else the oldest's interval runs out first.
            left = self._queue[0].record.queued_at + self.wait_s - time.monotonic()
            self._cond.wait(left if self._ready else None)
        n = min(self._ready, self.batch)
        batch, self._queue = self._queue[:n], self._queue[n:]
        self._ready -= n
        self._claimed -= n
        return batch

    def _due(self) -> bool:
        if self._ready == 0:
            return False
        # A full batch, or everything a flush waits for (the queue's head is always the first not settled).
        if self._ready >= self.batch or self._ready >= self._wanted - self._settled > 0:
            return True
        return time.monotonic() >= self._queue[0].record.queued_at + self.wait_s


def _embedded(embedder: Embedder, records: Sequence[Record]) -> list[tuple[Record, dict[str, Any]]]:
    """Each record with its experience's properties and its summary's embedding: the vector it came with,
    else from one model call for all those without one."""
    texts = [r.experience.embedding_text() or r.experience.id for r in records]
    todo = [t for r, t in zip(records, texts, strict=True) if r.vector is None]
    fresh = iter(embedder.embed(todo) if todo else ())  # one batched encode (cached by text hash)
    model = embedder.model_name
    return [
        (r, {**r.experience.properties(), **_embedding(r.vector if r.vector is not None else next(fresh), h, model)})
        for r, h in zip(records, (text_hash(model, t) for t in texts), strict=True)
    ]


def _embedding(vector: np.ndarray, text_hash: str, model: str) -> dict[str, Any]:
    """The embedding's properties but its generation, which the writing transaction stamps."""
    props = embedding_properties(vector, text_hash, model, generation=-1)
    del props["embedding_gen"]
    return props


def _first_of_each(items: Sequence[R]) -> list[R]:
    """One record (or (record, properties) pair) per experience id, the first queued: a second is a replay
    and would change nothing."""
    seen: set[str] = set()
    out = []
    for item in items:
        exp_id = (item if isinstance(item, Record) else item[0]).experience.id
        if exp_id not in seen:
            seen.add(exp_id)
            out.append(item)
    return out


def _links(exp: Experience) -> dict[str, Any]:
    return {
        "id": exp.id,
        "task_id": exp.task_id,
        "target_key": exp.target_key,
        "run_id": exp.run_id,
        "parent_id": exp.parent_id,
        "thought_ids": exp.thought_ids,
    }


def _effects(records: Sequence[Record]) -> list[dict[str, Any]]:
    """EFFECT_ON increments summed per (thought, target) over the batch: one update per relationship."""
    sums: dict[tuple[str, str], dict[str, float | int]] = {}
    for r in records:
        for tid in r.experience.thought_ids:
            key = (tid, r.experience.target_key)
            add = r.effect()
            acc = sums.setdefault(key, dict.fromkeys(add, 0))
            for k, v in add.items():
                acc[k] += v
    return [{"thought": t, "target": tg, **acc} for (t, tg), acc in sums.items()]


def _run_totals(records: Sequence[Record]) -> list[dict[str, Any]]:
    """Per run: evaluations and LLM usage added, and the run's best as of the batch's last improvement
    (records are in the order the agent judged them, so the last improving one is the best)."""
    totals: dict[str, dict[str, Any]] = defaultdict(
        lambda: {"evaluations": 0, "llm_calls": 0, "llm_tokens": 0, "best": None}
    )
    for r in records:
        t = totals[r.experience.run_id]
        t["evaluations"] += 1
        t["llm_calls"] += r.llm_calls
        t["llm_tokens"] += r.llm_tokens
        if r.improves_run:
            exp = r.experience
            t["best"] = {
                "id": exp.id,
                "speedup": exp.speedup,
                "competent": exp.competent_speedup,
                "over_library": exp.speedup_over_library,
                "library_label": exp.library_label,
            }
    return [{"id": run_id, **t} for run_id, t in totals.items()]
