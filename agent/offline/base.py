"""Shapes shared by the offline generator and its operator families."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Protocol

from pydantic import BaseModel, Field

from evaluator.targets import TargetProfile
from evaluator.tasks import KernelTask
from knowledge.taxonomy import Technique

KnobValue = int | str


class Knob(BaseModel):
    """One tunable parameter of a family, and the technique that turning it applies."""

    name: str
    values: list[KnobValue]
    technique: Technique
    default: KnobValue
    # Further techniques a thought may turn this knob for (e.g. fast-math serves `reduction` and
    # `multi_accumulator`). Added by the generator's author; empty keeps the one-technique behaviour.
    also: list[Technique] = []

    def serves(self, technique: Technique) -> bool:
        return technique == self.technique or technique in self.also


class Variant(BaseModel):
    """A concrete candidate: code + flags, the family and knob settings that produced it."""

    family: str
    knobs: dict[str, KnobValue] = {}
    code: str
    cflags: list[str] = []
    techniques: list[Technique] = []  # what this variant applies relative to the plain reference
    description: str = ""
    # Knobs a thought's mined code set away from the uninformed start (agent.offline.hints): only then was
    # the thought's code a starting point, and only then is it credited for it. Not part of the identity.
    from_code: dict[str, KnobValue] = {}

    @property
    def key(self) -> str:
        """Stable identity of (family, knobs, flags): the generator never proposes the same key twice."""
        blob = json.dumps([self.family, sorted(self.knobs.items()), sorted(self.cflags)], default=str)
        return hashlib.sha1(blob.encode()).hexdigest()[:16]


class ThoughtRef(BaseModel):
    """What the generator needs of a Thought (knowledge.models.Thought satisfies it)."""

    id: str
    technique: Technique
    operator: str = "other"
    isa: str = "generic"
    title: str = ""
    hints: dict[str, KnobValue] = {}  # knob values its mined code shows (agent.offline.hints), tried first


class Family(Protocol):
    """An operator family with a parameterized RVV implementation.

    `applies` says whether the family can implement this task (by signature/operator/name);
    `knobs` lists the parameters with their technique tags; `render` produces the C code for one knob
    setting (it must define exactly the task's function with the task's signature, use only
    <riscv_vector.h>, <math.h>, <stdint.h>, <stddef.h>, <string.h> and static helpers).
    """

    name: str

    def applies(self, task: KernelTask) -> bool: ...

    def knobs(self, task: KernelTask, target: TargetProfile) -> list[Knob]: ...

    def render(self, task: KernelTask, target: TargetProfile, knobs: dict[str, KnobValue]) -> Variant: ...


FamilyFactory = Callable[[], Family]
REGISTRY: list[FamilyFactory] = []


def register(factory: FamilyFactory) -> FamilyFactory:
    """Class decorator: add a family to the registry the generator consults."""
    REGISTRY.append(factory)
    return factory


class Proposal(BaseModel):
    variant: Variant
    thought_id: str | None = None
    mutation: str = Field("", description="which knob moved, from what to what")
