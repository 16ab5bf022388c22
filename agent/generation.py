"""What a generator is asked and what it answers; the offline generator behind that interface."""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field
from typing import Protocol

from agent.context import AgentContext, ThoughtCard
from agent.offline import OfflineGenerator, ThoughtRef, Variant
from agent.offline.hints import code_hints
from agent.transfer import Transfer
from evaluator.targets import TargetProfile
from evaluator.tasks import KernelTask


@dataclass
class Parent:
    """The state a direction improves on: the reference (variant None, code "") or an earlier candidate."""

    code: str
    cflags: list[str]
    variant: Variant | None = None
    speedup: float | None = None
    feedback: str = ""
    experience_id: str | None = None
    status: str = ""  # of its own evaluation ("" for the reference)
    competent_speedup: float | None = None  # the same code over the competent baseline (what headlines quote)


@dataclass
class GenerationRequest:
    task: KernelTask
    target: TargetProfile
    thought: ThoughtCard
    parent: Parent
    context: AgentContext
    tried: set[str]  # keys of candidates already evaluated in this run
    rng: random.Random
    outcomes: dict[str, str] = field(default_factory=dict)  # key -> what its evaluation gave ("ok 1.31x", ...)
    notes: list[str] = field(default_factory=list)  # said to the model before anything else (e.g. it repeated)
    last_attempt: Parent | None = None  # this direction's latest evaluated candidate, with its own diagnostic
    run_best: Parent | None = None  # the best candidate of the run so far (may be another direction's)


@dataclass
class Generated:
    code: str = ""
    cflags: list[str] = field(default_factory=list)
    key: str = ""  # identity used for de-duplication (variant key or code hash)
    variant: Variant | None = None
    description: str = ""
    error: str | None = None  # nothing usable was produced: why
    reserved: bool = False  # the key was already claimed in the run's tried set when it was proposed
    llm_calls: int = 0
    llm_tokens: int = 0
    transfer: Transfer | None = None  # a seed carrying another target's or task's decision (agent/transfer.py)


class Generator(Protocol):
    name: str

    def generate(self, req: GenerationRequest) -> Generated: ...


def code_key(code: str, cflags: list[str]) -> str:
    return hashlib.sha1((code + "\0" + " ".join(sorted(cflags))).encode()).hexdigest()[:16]


def repeat_notice(outcome: str | None) -> str:
    """What a model that proposed an already-tried candidate is told (in its conversation and next prompt)."""
    return (
        f"Your answer repeated a candidate already evaluated in this run (result: "
        f"{outcome or 'being evaluated now'}); it is not evaluated again. Propose a materially different kernel."
    )


class OfflineCandidateGenerator:
    """Turns the sampled thought into a concrete transformation of the parent (agent.offline)."""

    name = "offline"

    def __init__(self) -> None:
        self._by_task: dict[tuple[str, str], OfflineGenerator] = {}

    def _for(self, task: KernelTask, target: TargetProfile) -> OfflineGenerator:
        key = (task.name, target.key)
        if key not in self._by_task:
            # Plain start: the tuning is for the search to find and the graph to remember (docs/ARCHITECTURE.md).
            self._by_task[key] = OfflineGenerator(task, target, start="plain")
        return self._by_task[key]

    def generate(self, req: GenerationRequest) -> Generated:
        gen = self._for(req.task, req.target)
        ref = ThoughtRef(
            id=req.thought.id,
            technique=req.thought.technique,
            operator=req.thought.operator,
            isa=req.thought.isa,
            title=req.thought.title,
            hints=code_hints(req.thought.example_code, req.thought.isa),
        )
        proposal = gen.propose(ref, req.parent.variant, req.rng, req.tried)
        if proposal is None:
            return Generated(error=f"no untried transformation left for technique {ref.technique}")
        v = proposal.variant
        return Generated(
            code=v.code,
            cflags=list(v.cflags),
            key=v.key,
            variant=v,
            description=proposal.mutation or v.description,
        )
