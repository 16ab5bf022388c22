"""The optimization loop for one (task, target): retrieve -> directions -> generate -> evaluate -> record.

K directions (one idea each) run side by side. Inside a direction, thoughts are drawn by Thompson sampling
on their effectiveness posterior on this target; each candidate improves on the direction's best with the
last feedback; the global best migrates into directions that stagnate. Every evaluated candidate is an
Experience in the graph, written before the next one starts, so a run killed at any point resumes from the
graph and loses no evaluated candidate.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import random
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from agent.context import AgentContext, Direction, PriorExperience, ThoughtCard, gather
from agent.generation import (
    Generated,
    GenerationRequest,
    Generator,
    OfflineCandidateGenerator,
    Parent,
    repeat_notice,
)
from agent.lease import RunLease
from agent.offline import OfflineGenerator, Variant
from agent.offline.base import Knob
from agent.parts import AgentParts
from agent.posterior import is_success, thompson_pick
from agent.recorder import BatchRecorder
from agent.report import candidates, lineage, write_artifacts, yardstick
from agent.transfer import Transfer, adapt, learned_shifts
from agent.types import ProgressEvent, RunOutcome, RunRequest
from core.errors import InvalidInput, NotFound, Unavailable
from evaluator.evaluate import Candidate, EvalResult, Evaluator
from evaluator.executor import EvalExecutor, EvalJob, InProcessExecutor, SummarySpec
from evaluator.targets import TargetProfile, load_target
from evaluator.tasks import KernelTask, load_task
from evaluator.toolchain import baseline_note
from knowledge.models import Experience, ExperienceStatus, Run, RunStatus, Target, Task, utcnow
from knowledge.starter import starter_knowledge

log = logging.getLogger(__name__)
EventSink = Callable[[ProgressEvent], None]
MAX_IDLE_STEPS = 200  # a generator that only repeats itself ends the run instead of spinning
MAX_LLM_REPEATS = 4  # steps in a row where the LLM only re-proposed tried candidates: stop paying for it
MIGRATE_AFTER = 3  # evaluations without improvement before a direction adopts the global best
MAX_SEEDS = 2  # candidates re-measured from earlier experience before the search proper
FINISHED = {RunStatus.DONE, RunStatus.FAILED, RunStatus.CANCELLED}


@dataclass
class DirectionState:
    index: int
    direction: Direction
    best: Parent
    rng: random.Random
    evaluations: int = 0
    since_improvement: int = 0
    exhausted: set[str] = field(default_factory=set)  # thought ids with nothing untried left
    notes: list[str] = field(default_factory=list)  # told to the generator in this direction's next request
    last: Parent | None = None  # the latest candidate evaluated in this direction (code + its own feedback)

    @property
    def open_thoughts(self) -> list[ThoughtCard]:
        return [t for t in self.direction.thoughts if t.id not in self.exhausted]


@dataclass
class RunState:
    run: Run
    task: KernelTask
    target: TargetProfile
    runner: str
    ctx: AgentContext
    directions: list[DirectionState]
    tried: set[str] = field(default_factory=set)
    history: list[float | None] = field(default_factory=list)  # best speedup after each evaluation
    best: Parent | None = None
    step: int = 0
    llm_calls: int = 0
    llm_tokens: int = 0
    idle_steps: int = 0  # steps in a row that evaluated nothing (duplicates, exhausted thoughts)
    llm_repeats: int = 0  # steps in a row whose LLM requests only produced already-tried candidates
    outcomes: dict[str, str] = field(default_factory=dict)  # candidate key -> its result, for repeat notices
    # competent / plain speedup: the same for every candidate of the task (plain / competent baseline time)
    competent_ratio: float | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    graph_gone: Unavailable | None = None  # the first record that found the graph gone: later ones do not wait

    @property
    def best_speedup(self) -> float | None:
        return self.best.speedup if self.best else None

    @property
    def best_competent_speedup(self) -> float | None:
        best = self.best_speedup
        return best * self.competent_ratio if best and self.competent_ratio else None


class Optimizer:
    def __init__(
        self,
        container: AgentParts,
        generator: Generator | None = None,
        evaluator: Evaluator | None = None,
        executor: EvalExecutor | None = None,
    ) -> None:
        self.c = container
        self.settings = container.settings
        self._generator = generator
        self.evaluator = evaluator or Evaluator(self.settings)
        # Where evaluations run: threads of this process unless a cluster executor is handed in.
        self.executor = executor or InProcessExecutor(self.settings, self.evaluator)
        # One writer for every run of this process (a bootstrap's side by side): a transaction per batch.
        self.recorder = BatchRecorder(container.store, container.embedder)

    # ------------------------------------------------------------------------------------- public API

    def create_run(self, req: RunRequest, run_id: str | None = None, bootstrap_id: str | None = None) -> Run:
        """A new queued run; `run_id` fixes its id (a bootstrap names its runs so a resume finds them)."""
        task = load_task(req.task, self.settings)
        target = load_target(req.target)
        generator = self._resolve_generator_name(req.generator)
        runner = req.runner or (self.settings.default_runner if target.is_riscv else "native")
        self.executor.check(runner, target)  # a runner that cannot serve the target is an error now
        run = Run(
            id=run_id or f"run-{utcnow():%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:6]}",
            bootstrap_id=bootstrap_id,
            task_id=task.name,
            target_key=target.key,
            budget=req.budget,
            directions=req.directions,
            generator=generator,
            seed=req.seed,
            settings=json.dumps({"task_path": str(task.directory), "runner": runner, **_target_path(req.target)}),
            baseline_note=baseline_note(task),
        )
        self.c.ingestor.ingest([_task_node(task), _target_node(target), run])
        # Explicit similarity, so retrieval can start this run from what was measured on its relatives.
        self.recorder.link_similar(task.name, str(task.operator), target.key, target.vlen or None)
        return run

    def first_prompt(self, req: RunRequest) -> list[dict[str, str]]:
        """The messages an LLM would get for the run's first generated candidate, without running anything
        (no run is created, nothing is compiled; a graph without thoughts gets the starter ideas first)."""
        from agent.llm import messages_for

        task = load_task(req.task, self.settings)
        target = load_target(req.target)
        runner = req.runner or (self.settings.default_runner if target.is_riscv else "native")
        self._ensure_knowledge()
        ctx = gather(self.c.store, self.c.retriever, task, target, req.directions, runner)
        if not ctx.directions:
            raise InvalidInput("the graph offers no ideas for this task", "mine a repository with `eok mine`")
        d = DirectionState(0, ctx.directions[0], Parent(code="", cflags=[]), random.Random(f"{req.seed}:0"))
        pick = thompson_pick([t.stats for t in d.open_thoughts], d.rng)
        card = next(t for t in d.open_thoughts if t.stats is pick)
        return messages_for(GenerationRequest(task, target, card, d.best, ctx, set(), d.rng))

    def get_run(self, run_id: str) -> Run:
        run = self.c.store.get_node(Run, run_id)
        if run is None:
            raise NotFound(f"run {run_id!r} does not exist", "list runs with `eok cypher recent_runs`")
        return run

    def unfinished_runs(self) -> list[Run]:
        rows = self.c.store.read("MATCH (r:Run) WHERE r.status IN ['queued', 'running'] RETURN r.id AS id")
        return [self.get_run(r["id"]) for r in rows]

    def execute(
        self, run_id: str, on_event: EventSink | None = None, cancel: threading.Event | None = None
    ) -> RunOutcome:
        run = self.get_run(run_id)
        if RunStatus(run.status) in FINISHED:
            return self.outcome(run_id)
        emit = on_event or (lambda e: None)
        cancel = cancel or threading.Event()
        t0 = time.monotonic()
        with RunLease(self.c.store, run_id).held(cancel) as lease:  # LeaseHeld: another process has it
            run = self.get_run(run_id)  # as of taking the lease: another owner may just have finished it
            if RunStatus(run.status) in FINISHED:
                return self.outcome(run_id)
            try:
                state = self._prepare(run)
                emit(self._event(state, "started", message=f"{len(state.directions)} directions"))
                self._loop(state, emit, cancel)
                if lease.graph_gone:
                    raise lease.graph_gone
                self.recorder.flush(run_id)  # every evaluation is in the graph before the run says done
            except Unavailable as e:  # the graph is gone: nothing can record the failure; say how to go on
                lease.graph_gone = lease.graph_gone or e  # and nothing can release the lease: it expires
                emit(ProgressEvent(run_id=run_id, kind="failed", message=e.message[:500]))
                raise Unavailable(
                    f"the graph stopped answering during run {run_id} ({e.message})",
                    f"start it again (`eok db start`), then `eok optimize --resume {run_id}` takes the run over; "
                    "every evaluation recorded before it stopped is kept",
                ) from e
            except Exception as e:
                self.recorder.flush()  # what was queued is written while this process still holds the run
                self.recorder.update_run(
                    run_id, status=RunStatus.FAILED.value, error=str(e)[:2000], finished_at=utcnow()
                )
                emit(ProgressEvent(run_id=run_id, kind="failed", message=str(e)[:500]))
                raise
            status = RunStatus.CANCELLED if cancel.is_set() else RunStatus.DONE
            if not lease.lost:  # a lost lease: the run is another process's now, its status theirs to set
                self.recorder.update_run(run_id, status=status.value, error=None, finished_at=utcnow())
        outcome = self.outcome(run_id, seconds=time.monotonic() - t0)
        emit(
            self._event(
                state,
                "cancelled" if cancel.is_set() else "finished",
                message=f"best {yardstick(outcome.run.best_competent_speedup, outcome.run.best_speedup)}",
            )
        )
        return outcome

    def outcome(self, run_id: str, seconds: float = 0.0) -> RunOutcome:
        run = self.get_run(run_id)
        best = self.c.store.get_node(Experience, run.best_experience_id) if run.best_experience_id else None
        history, evaluated = self._history(run_id)
        out = RunOutcome(
            run=run,
            best=best,
            history=history,
            evaluated=evaluated,
            seconds=seconds,
            lineage=lineage(self.c.store, best.id) if best else [],
            candidates=candidates(self.c.store, run_id),
        )
        out.artifacts = write_artifacts(self.settings.home / "runs" / run_id, out)
        return out

    # ---------------------------------------------------------------------------------------- set-up

    def _resolve_generator_name(self, choice: str) -> str:
        if choice == "auto":
            return "llm" if self.settings.llm_configured else "offline"
        if choice == "llm" and not self.settings.llm_configured:
            raise InvalidInput("generator 'llm' needs an endpoint", "set OPENAI_BASE_URL (and OPENAI_API_KEY)")
        return choice

    def _generator_for(self, run: Run) -> Generator:
        if self._generator is not None:
            return self._generator
        if run.generator == "llm":
            from agent.llm import LlmGenerator

            self._generator = LlmGenerator(self.settings)
        else:
            self._generator = OfflineCandidateGenerator()
        return self._generator

    def _prepare(self, run: Run) -> RunState:
        opts = json.loads(run.settings or "{}")
        task = load_task(opts.get("task_path") or run.task_id, self.settings)
        target = load_target(opts.get("target_path") or run.target_key)
        runner = opts.get("runner") or self.settings.default_runner
        self._ensure_knowledge()
        self.recorder.update_run(run.id, status=RunStatus.RUNNING.value)
        baseline = self.executor.submit(EvalJob.baseline(task, target, runner)).result()
        if not baseline.ok:
            raise InvalidInput(
                f"task {task.name}: the reference fails its own harness on {target.key} ({baseline.status}): "
                f"{baseline.feedback}",
                "fix the task's reference.c or task.toml",
            )
        ctx = gather(self.c.store, self.c.retriever, task, target, run.directions, runner)
        if not ctx.directions:
            raise InvalidInput("the graph offers no ideas for this task", "mine a repository with `eok mine`")
        dirs = [
            DirectionState(i, d, Parent(code="", cflags=[]), random.Random(f"{run.seed}:{i}"))
            for i, d in enumerate(ctx.directions)
        ]
        state = RunState(run=run, task=task, target=target, runner=runner, ctx=ctx, directions=dirs)
        self._replay(state)
        return state

    def _ensure_knowledge(self) -> None:
        """A graph without thoughts gets the shipped starter ideas, so a fresh install can still run."""
        if not self.c.store.read("MATCH (t:Thought) RETURN t.id LIMIT 1"):
            nodes, rels = starter_knowledge()
            self.c.ingestor.ingest(nodes, rels)

    def _replay(self, state: RunState) -> None:
        """Resume: rebuild tried keys, bests and statistics from the experiences already in the graph."""
        rows = self.c.store.read("MATCH (x:Experience {run_id: $run}) RETURN x.id AS id", run=state.run.id)
        recorded = self.c.store.get_nodes(Experience, [r["id"] for r in rows])
        by_idea = {d.direction.idea_id: d for d in state.directions}
        for exp in sorted(recorded.values(), key=lambda x: x.step):
            parent = _parent_of(exp)
            state.tried.add(exp.code_hash)
            state.outcomes[exp.code_hash] = f"ok {exp.speedup:.2f}x" if exp.speedup else str(exp.status)
            state.step = max(state.step, exp.step + 1)
            if exp.speedup and exp.competent_speedup:
                state.competent_ratio = exp.competent_speedup / exp.speedup
            d = by_idea.get(exp.direction or "")
            if exp.status == ExperienceStatus.OK and exp.speedup:
                if d and (d.best.speedup or 0) < exp.speedup:
                    d.best = parent
                if (state.best_speedup or 0) < exp.speedup:
                    state.best = parent
            if d:
                d.evaluations += 1
                d.last = parent
            state.history.append(state.best_speedup)

    # ------------------------------------------------------------------------------------------ loop

    def _loop(self, state: RunState, emit: EventSink, cancel: threading.Event) -> None:
        budget = state.run.budget
        patience = max(12, budget // 2)
        # Candidates of all directions evaluate at once, up to the executor's free slots for this runner.
        parallel = max(1, min(len(state.directions), self.executor.slots(state.runner, state.target)))
        pending: dict[Future, DirectionState] = {}
        seeds = self._seeds(state) if not state.history else []
        turn = 0
        with ThreadPoolExecutor(max_workers=parallel, thread_name_prefix="eok-direction") as pool:
            while True:
                while (
                    len(pending) < parallel
                    and len(state.history) + len(pending) < budget
                    and not cancel.is_set()
                    and not _stagnant(state.history, patience)
                    and state.idle_steps <= MAX_IDLE_STEPS
                    and state.llm_repeats < MAX_LLM_REPEATS
                ):
                    live = [d for d in state.directions if d.open_thoughts]
                    if not live:
                        break
                    d = live[turn % len(live)]
                    turn += 1
                    seed = seeds.pop(0) if seeds else None
                    pending[pool.submit(self._step, state, d, seed, emit)] = d
                if not pending:
                    break
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for fut in done:
                    pending.pop(fut)
                    fut.result()  # a bug in a step is a failed run, not a silent hang

    def _seeds(self, state: RunState) -> list[Generated]:
        """What worked before, re-measured first: this task's earlier best on this target, then decisions
        measured elsewhere (this task on similar targets, related tasks), rescaled for this target."""
        seeds: list[Generated] = []
        if state.ctx.same_task:
            p = state.ctx.same_task[0]
            seeds.append(
                Generated(
                    code=p.code,
                    cflags=p.cflags,
                    key=p.key,
                    variant=_variant(p.variant, p.code, p.cflags),
                    description=f"earlier best for this task ({p.speedup:.2f}x)",
                )
            )
        offline = OfflineGenerator(state.task, state.target)
        for p in [*state.ctx.transfers, *state.ctx.similar_tasks]:
            if len(seeds) >= MAX_SEEDS:
                break
            seed = self._transferred(p, offline, state)
            if seed is not None and seed.key not in {s.key for s in seeds}:
                seeds.append(seed)
        if not seeds and isinstance(self._generator_for(state.run), OfflineCandidateGenerator):
            seeds.extend(self._hand_vectorized(state))
        return seeds

    def _hand_vectorized(self, state: RunState) -> list[Generated]:
        """A cold offline run's first candidate: the generator's hand-vectorized kernel for the task, as plain
        RVV code (LMUL 1, no unrolling). Without it a run whose directions name only techniques the task's
        kernel family has no knob for (LMUL, widening for quantize_row_q8_0) tuned auto-vectorized C and never
        wrote the vector kernel: the mined graph's focused directions lost to a blank graph's scattered ones
        (bench_ablation, 2026-12-03). It is the generator's own expertise, not the graph's, so it credits no
        thought, and the directions then tune it as any parent."""
        gen = OfflineGenerator(state.task, state.target, start="plain")
        if not gen.family_spaces:  # only "generic" applies: clang's own vectorizer, no kernel of ours
            return []
        family = gen.family_spaces[0].name
        v = gen.render(family, gen.knobs_at_start(family))
        return [
            Generated(
                code=v.code,
                cflags=list(v.cflags),
                key=v.key,
                variant=v,
                description=f"{v.family}: the task's vector kernel, plain",
            )
        ]

    def _transferred(self, p: PriorExperience, gen: OfflineGenerator, state: RunState) -> Generated | None:
        """Another task's or target's best decision as a candidate for this run (agent/transfer.py)."""
        family = str(p.variant.get("family") or "")
        source_target = p.target_key or state.target.key
        from_vlen = p.vlen if p.target_key else state.target.vlen
        source_knobs = [] if family in gen.families() else self._family_knobs(p.task_id, family, state.target)
        shifts = None
        if source_target != state.target.key:
            shifts = learned_shifts(state.ctx.decisions, family, source_target, state.target.key, state.task.name)
        made = adapt(p.variant, source_knobs, from_vlen, gen, shifts)
        if made is None:
            return None
        v, rescaled = made
        other_target, other_task = source_target != state.target.key, p.task_id != state.task.name
        via = "target+task" if other_target and other_task else "task" if other_task else "target"
        transfer = Transfer(
            source_id=p.id,
            from_task=p.task_id,
            from_target=source_target,
            from_vlen=from_vlen,
            from_speedup=p.speedup,
            decision={"family": family, "knobs": dict(p.variant.get("knobs") or {})},
            applied={"family": v.family, "knobs": dict(v.knobs)},
            rescaled=rescaled,
            via=via,
        )
        return Generated(
            code=v.code, cflags=v.cflags, key=v.key, variant=v, description=transfer.describe(), transfer=transfer
        )

    def _family_knobs(self, task_id: str, family: str, target: TargetProfile) -> list[Knob]:
        """The knobs (with their techniques) of the family a source kernel was made with."""
        try:
            return OfflineGenerator(load_task(task_id, self.settings), target).knobs(family)
        except (InvalidInput, NotFound):
            return []  # the source task or its family is gone: only knobs of the same name can carry over

    def _step(self, state: RunState, d: DirectionState, seed: Generated | None, emit: EventSink) -> None:
        with state.lock:
            # Migration: a direction that stagnates, or has not started yet (e.g. after the seeds), takes the
            # global best as its parent.
            if (
                (d.since_improvement >= MIGRATE_AFTER or d.evaluations == 0)
                and state.best
                and (state.best_speedup or 0) > (d.best.speedup or 0)
            ):
                d.best = state.best
                d.since_improvement = 0
            parent = d.best
            if not d.open_thoughts:
                return  # exhausted by a step that finished after this one was queued
            thought = thompson_pick([t.stats for t in d.open_thoughts], d.rng)
            card = next(t for t in d.open_thoughts if t.stats is thought)
            step = state.step
            state.step += 1
        gen = seed or self._generate(state, d, card, parent)
        with state.lock:
            if gen.error and not gen.llm_calls:
                d.exhausted.add(card.id)  # offline: nothing untried left for this thought; costs no evaluation
                state.idle_steps += 1
                return
            if gen.key in state.tried and not gen.error and not gen.reserved:
                state.idle_steps += 1
                if gen.llm_calls:
                    state.llm_repeats += 1
                    d.notes = [repeat_notice(state.outcomes.get(gen.key))]
                    self._account_llm(state, gen)  # requests that evaluated nothing still cost
                return  # a duplicate (an LLM repeating itself, a seed already measured): not evaluated again
            state.tried.add(gen.key)
            state.idle_steps = 0
            state.llm_repeats = 0
        result = self._evaluate(state, gen, None if seed else card) if not gen.error else None
        # A seed re-measures earlier experience: it is no trial of the sampled thought, so it credits none.
        self._record(state, d, None if seed else card, parent, gen, result, step, emit)

    def _generate(self, state: RunState, d: DirectionState, card: ThoughtCard, parent: Parent) -> Generated:
        generator = self._generator_for(state.run)
        if isinstance(generator, OfflineCandidateGenerator):
            # Propose against the live set of tried keys and reserve the result in the same critical
            # section, so two directions never propose the same variant at once (proposals are cheap).
            with state.lock:
                req = GenerationRequest(state.task, state.target, card, parent, state.ctx, state.tried, d.rng)
                gen = generator.generate(req)
                if not gen.error:
                    state.tried.add(gen.key)
                    gen.reserved = True
            return gen
        with state.lock:
            notes, d.notes = d.notes, []
            req = GenerationRequest(
                state.task,
                state.target,
                card,
                parent,
                state.ctx,
                set(state.tried),
                d.rng,
                dict(state.outcomes),
                notes,
                last_attempt=d.last,
                run_best=state.best,
            )
        return generator.generate(req)

    def _account_llm(self, state: RunState, gen: Generated) -> None:
        """Count LLM requests of a step that stored no experience (the run's counters, in the graph too)."""
        state.llm_calls += gen.llm_calls
        state.llm_tokens += gen.llm_tokens
        self.recorder.add_llm_usage(state.run.id, gen.llm_calls, gen.llm_tokens)

    def _evaluate(self, state: RunState, gen: Generated, card: ThoughtCard | None) -> EvalResult:
        job = EvalJob(
            state.task,
            state.target,
            state.runner,
            Candidate(code=gen.code, cflags=gen.cflags),
            summary=self._summary_spec(state, card, gen),
        )
        return self.executor.submit(job).result()

    def _summary_spec(self, state: RunState, card: ThoughtCard | None, gen: Generated) -> SummarySpec:
        """The experience's summary but its verdict, for the worker to finish and embed (docs/SCALE.md)."""
        return _summary_spec(card, gen, state.task.name, self.recorder.embedder.model_name)

    def _gate(
        self, state: RunState, card: ThoughtCard | None, gen: Generated, result: EvalResult | None, parent: Parent
    ) -> EvalResult | None:
        """Held-out sizes and seeds before a result may count as a success or become the run's best.

        Only results that would count are re-verified (correctness only), so the gate costs little; one
        that fails gets GENERALIZATION_FAILED, no speedup, and never raises a thought's effectiveness.
        """
        if result is None or not result.ok or not result.speedup:
            return result
        counts = is_success(True, result.speedup, parent.speedup) or result.speedup > (state.best_speedup or 0)
        if not counts:
            return result
        cand = Candidate(code=gen.code, cflags=gen.cflags, label="gate")
        spec = self._summary_spec(state, card, gen)  # a failed gate's worker embeds the summary it gives
        job = EvalJob(state.task, state.target, state.runner, cand, kind="gate", summary=spec)
        gate = self.executor.submit(job).result()  # where evaluations run: a board may be on a worker
        if gate.ok:
            return result
        update = {"status": gate.status, "speedup": None, "feedback": gate.feedback}
        update |= {"summary": gate.summary, "summary_vector": gate.summary_vector, "summary_model": gate.summary_model}
        return result.model_copy(update=update)

    def _record(
        self,
        state: RunState,
        d: DirectionState,
        card: ThoughtCard | None,
        parent: Parent,
        gen: Generated,
        result: EvalResult | None,
        step: int,
        emit: EventSink,
    ) -> None:
        result = self._gate(state, card, gen, result, parent)
        status = ExperienceStatus(result.status.value) if result else ExperienceStatus.GENERATION_ERROR
        speedup = result.speedup if result and result.ok else None
        success = is_success(status == ExperienceStatus.OK, speedup, parent.speedup)
        exp = Experience(
            id=f"{state.run.id}-{step:04d}",
            task_id=state.task.name,
            target_key=state.target.key,
            run_id=state.run.id,
            parent_id=parent.experience_id,
            thought_ids=[card.id] if card else [],
            direction=d.direction.idea_id,
            step=step,
            code=gen.code,
            code_hash=gen.key,
            cflags=gen.cflags,
            variant=json.dumps(_variant_record(gen.variant)),
            status=status,
            speedup=speedup,
            competent_speedup=result.competent_speedup if result and result.ok else None,
            speedup_over_library=result.speedup_over_library if result and result.ok else None,
            library_cycles=result.library_cycles if result else None,
            library_label=result.library_label if result else None,
            baseline_cycles=result.baseline_cycles if result else None,
            competent_cycles=result.competent_cycles if result else None,
            candidate_cycles=result.candidate_cycles if result else None,
            seconds=result.candidate_seconds if result else None,
            max_error=result.max_error if result else None,
            measurement=(result.measurement if result and result.measurement else "none"),
            feedback=(result.feedback if result else gen.error or "")[:4000],
            generator=getattr(self._generator_for(state.run), "label", self._generator_for(state.run).name),
            summary=self._summary_spec(state, card, gen).text(status.value, speedup),
        )
        vector = _worker_vector(result, exp, self.recorder.embedder.model_name)
        with state.lock:
            if speedup and exp.competent_speedup:
                state.competent_ratio = exp.competent_speedup / speedup
            improves = bool(speedup and speedup > (state.best_speedup or 0))
            if state.graph_gone:  # each attempt would wait out the driver's retry budget for nothing
                raise state.graph_gone
            try:
                self.recorder.record(
                    exp, success, parent.speedup, improves, gen.llm_calls, gen.llm_tokens, vector=vector
                )
                if gen.transfer is not None:  # the edge needs both experiences written: a seed is rare
                    self.recorder.flush(state.run.id)
                    self.recorder.record_transfer(gen.transfer, exp)
            except Unavailable as e:
                state.graph_gone = e
                raise
            if card:
                card.stats.observe(success)
            d.evaluations += 1
            node = Parent(
                code=gen.code,
                cflags=gen.cflags,
                variant=gen.variant,
                speedup=speedup,
                feedback=exp.feedback,
                experience_id=exp.id,
                status=status.value,
                competent_speedup=exp.competent_speedup,
            )
            d.last = node
            if speedup and speedup > (d.best.speedup or 0):
                d.best, d.since_improvement = node, 0
            else:
                d.since_improvement += 1
                # Keep the best with its own feedback: the latest attempt's diagnostic travels with its code.
                d.best = dataclasses.replace(d.best)
            if improves:
                state.best = node
            state.outcomes[gen.key] = f"{status.value} {speedup:.2f}x" if speedup else status.value
            state.history.append(state.best_speedup)
            state.llm_calls += gen.llm_calls
            state.llm_tokens += gen.llm_tokens
            event = self._event(
                state,
                "improved" if improves else "evaluation",
                direction=d.direction.idea_id,
                status=status.value,
                speedup=speedup,
                competent_speedup=exp.competent_speedup,
                experience_id=exp.id,
                message=f"{card.technique.value if card else 'transfer'}: {gen.description}"[:300],
            )
        emit(event)

    def _event(self, state: RunState, kind: str, **kw: object) -> ProgressEvent:
        return ProgressEvent(
            run_id=state.run.id,
            kind=kind,
            evaluations=len(state.history),
            budget=state.run.budget,
            best_speedup=state.best_speedup,
            best_competent_speedup=state.best_competent_speedup,
            **kw,
        )  # type: ignore[arg-type]

    def _history(self, run_id: str) -> tuple[list[float | None], list[float | None]]:
        """Best speedup after each evaluation, and each evaluation's own speedup (None when it failed)."""
        rows = self.c.store.read(
            "MATCH (x:Experience {run_id: $run}) RETURN x.speedup AS s, x.status AS st ORDER BY x.step", run=run_id
        )
        best, history, evaluated = None, [], []
        for r in rows:
            s = r["s"] if r["st"] == "ok" else None
            if s and s > (best or 0):
                best = s
            history.append(best)
            evaluated.append(s)
        return history, evaluated


def _stagnant(history: list[float | None], patience: int) -> bool:
    if len(history) <= patience:
        return False
    return history[-1] == history[-1 - patience]


def _summary_spec(card: ThoughtCard | None, gen: Generated, task: str, model: str) -> SummarySpec:
    """The experience's summary, "<task>: <what> -> <speedup or status>. <description>", but its verdict."""
    what = f"{card.technique.value} ({card.title})" if card else "transfer of earlier experience"
    return SummarySpec(head=f"{task}: {what} -> ", tail=f". {gen.description}", model=model)


def _worker_vector(result: EvalResult | None, exp: Experience, model: str) -> np.ndarray | None:
    """The summary's embedding the worker sent with the result, when it is this experience's: embedded with
    the recorder's model, from this very summary, and a unit vector. Anything else (an old worker, a
    local evaluation, a mismatch): None, and the recorder embeds the summary itself."""
    if result is None or result.summary_vector is None or result.summary_model != model:
        return None
    if result.summary != exp.summary or (exp.embedding_text() or exp.id) != result.summary.strip():
        return None
    vector = np.asarray(result.summary_vector, dtype=np.float32)
    norm = float(np.linalg.norm(vector)) if vector.ndim == 1 and vector.size else 0.0
    return vector if math.isclose(norm, 1.0, abs_tol=1e-3) else None


def _parent_of(exp: Experience) -> Parent:
    return Parent(
        code=exp.code,
        cflags=list(exp.cflags),
        variant=_variant(json.loads(exp.variant or "{}"), exp.code, list(exp.cflags)),
        speedup=exp.speedup,
        feedback=exp.feedback,
        experience_id=exp.id,
        status=str(exp.status),
        competent_speedup=exp.competent_speedup,
    )


def _variant(spec: dict, code: str, cflags: list[str]) -> Variant | None:
    """The offline generator's variant behind a stored experience (None when an LLM wrote the code)."""
    if not spec.get("family"):
        return None
    return Variant(family=spec["family"], knobs=spec.get("knobs") or {}, code=code, cflags=cflags)


def _task_node(task: KernelTask) -> Task:
    return Task(
        id=task.name,
        name=task.name,
        category=str(task.category),
        operator=task.operator,
        dtype=task.dtype,
        shapes=json.dumps(task.sizes),
        description=task.description,
    )


def _target_node(t: TargetProfile) -> Target:
    return Target(
        key=t.key,
        name=t.name,
        isa=t.march,
        vlen=t.vlen or None,
        dlen=t.dlen or None,
        clock_ghz=t.clock_ghz,
        description=t.description,
    )


__all__ = ["Optimizer"]


def _target_path(target: str) -> dict[str, str]:
    """A target given as a TOML path (e.g. written by `eok calibrate`) is reloaded from that file when the run
    executes or resumes: its key alone would name the built-in target and its figures."""
    return {"target_path": str(Path(target).resolve())} if target.endswith(".toml") else {}


def _variant_record(v: Variant | None) -> dict[str, Any]:
    """What the graph keeps of an offline variant: family and knobs, and the knobs a thought's code set."""
    if v is None:
        return {}
    return {"family": v.family, "knobs": v.knobs} | ({"from_code": v.from_code} if v.from_code else {})
