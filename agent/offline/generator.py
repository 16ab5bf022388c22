"""The offline generator: turns a thought's technique into a concrete, never-seen-before variant.

Each applicable family (and the generic one, which applies to every task) exposes a grid of knob
settings. A thought names a technique; the generator moves the knobs tagged with it, one step at a
time from the parent, nearest values first, so the first proposals of a direction are the cheap,
likely-good ones (the family default, then its neighbours). Everything is deterministic given the rng.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

from agent.offline import families as _families  # noqa: F401  (registers every family module)
from agent.offline.base import REGISTRY, Family, Knob, KnobValue, Proposal, ThoughtRef, Variant
from agent.offline.generic import GenericFamily
from agent.offline.loop_rewrite import LoopRewriteFamily
from evaluator.targets import TargetProfile
from evaluator.tasks import KernelTask
from knowledge.taxonomy import Technique

Setting = dict[str, KnobValue]
# Knobs that tune an already-vectorized kernel. A "plain" start sets them to their simplest value (LMUL 1,
# one accumulator, no unrolling, no blocking, no prefetch): the straightforward RVV code a vendor writes
# first. The tuned values are then the search's to find and the graph's to remember, not the code's.
TUNING_TECHNIQUES = {
    Technique.VECTOR_LENGTH,
    Technique.UNROLL,
    Technique.MULTI_ACCUMULATOR,
    Technique.REGISTER_BLOCKING,
    Technique.PREFETCH,
}
Start = Literal["plain", "tuned"]
GRID_LIMIT = 200_000  # grids larger than this are counted, not enumerated, by space_size


@dataclass
class _Space:
    """One family's knobs for this task, with the validity rule it may define."""

    family: Family
    knobs: list[Knob]
    task: KernelTask
    target: TargetProfile

    @property
    def name(self) -> str:
        return self.family.name

    def defaults(self) -> Setting:
        return {k.name: k.default for k in self.knobs}

    def plain(self) -> Setting:
        """The defaults with every tuning knob at its simplest value (see TUNING_TECHNIQUES)."""
        setting = self.defaults()
        for k in self.knobs:
            if k.technique in TUNING_TECHNIQUES and all(isinstance(v, int) for v in k.values):
                candidate = {**setting, k.name: min(k.values)}
                if self.valid(candidate):
                    setting = candidate
        return setting

    def start(self, mode: Start) -> Setting:
        return self.plain() if mode == "plain" else self.defaults()

    def implements(self, technique: Technique) -> bool:
        return technique == Technique.VECTORIZE or any(k.serves(technique) for k in self.knobs)

    def valid(self, setting: Setting) -> bool:
        # Optional family hook valid(task, target, knobs): e.g. register-budget limits of a GEMM tile.
        check = getattr(self.family, "valid", None)
        return True if check is None else bool(check(self.task, self.target, setting))

    def normalize(self, knobs: dict[str, KnobValue]) -> Setting:
        """A parent's knobs restricted to this family's grid; unknown or missing values take the default."""
        out = self.defaults()
        for k in self.knobs:
            if knobs.get(k.name) in k.values:
                out[k.name] = knobs[k.name]
        return out


class OfflineGenerator:
    """Proposes variants of one task for one target (see /work/notes/offline_api.md)."""

    def __init__(self, task: KernelTask, target: TargetProfile, start: Start = "tuned") -> None:
        """`start` picks where a family is entered: its tuned defaults, or plain vectorized code."""
        self.task = task
        self.target = target
        self.start = start
        found: list[Family] = [factory() for factory in REGISTRY]
        # The families emit RVV intrinsics: on a non-RISC-V target only the generic transformations apply.
        applicable = [f for f in found if target.is_riscv and f.applies(task)]
        # A family may rank itself (higher first) when two claim the same task; registry order breaks ties.
        applicable.sort(key=lambda f: -int(getattr(f, "priority", 0)))
        # A task no family claims: an RVV rewrite of its own hot loop, when the loop has a shape it knows.
        rewrite = LoopRewriteFamily()
        if target.is_riscv and not applicable and rewrite.applies(task):
            applicable = [rewrite]
        generic = GenericFamily()
        self.spaces = [self._space(f) for f in [*applicable, generic]]
        self.generic = self.spaces[-1]
        self.family_spaces = self.spaces[:-1]

    # ------------------------------------------------------------------------------------ public API

    def default(self) -> Variant:
        """The best-guess first candidate: the first family's default, else the generic default."""
        space = self.family_spaces[0] if self.family_spaces else self.generic
        return self._render(space, space.defaults())

    def propose(
        self,
        thought: ThoughtRef,
        parent: Variant | None,
        rng: random.Random,
        tried: set[str],
    ) -> Proposal | None:
        """A variant applying `thought.technique` to `parent` whose key is not in `tried`, or None."""
        technique = Technique(thought.technique)
        space, start, first = self._origin(technique, parent)
        if first is not None:
            # Entering a family: at the settings the thought's own code shows, if it shows any.
            hinted, said = _hinted(space, first, thought.hints, None)
            variant = _informed(self._render(space, hinted), first, hinted)
            if variant.key not in tried:
                what = "default" if space is not self.generic else "generic default"
                return Proposal(variant=variant, thought_id=thought.id, mutation=f"{space.name} {what}{said}")
        hinted, said = _hinted(space, start, thought.hints, technique)
        if hinted != start:  # the technique's knobs at the thought's values before any grid walk
            variant = _informed(self._render(space, hinted), start, hinted)
            if variant.key not in tried:
                return Proposal(variant=variant, thought_id=thought.id, mutation=said.strip(" ()"))
        for setting, mutation in self._moves(space, start, technique, rng):
            variant = self._render(space, setting)
            if variant.key not in tried:
                return Proposal(variant=variant, thought_id=thought.id, mutation=mutation)
        return None

    def space_size(self) -> int:
        """Distinct variants over every applicable family plus the generic one."""
        return sum(self._count(space) for space in self.spaces)

    def families(self) -> list[str]:
        """Names of the families that apply to this task, best first, then "generic"."""
        return [s.name for s in self.spaces]

    def knobs_at_start(self, family: str) -> dict[str, KnobValue]:
        """The knob settings a family is entered at (its plain or tuned start, as this generator's `start`)."""
        return self._space_named(family).start(self.start)

    def knobs(self, family: str) -> list[Knob]:
        """The knobs of one applicable family (for reports and the benchmark script)."""
        return self._space_named(family).knobs

    def render(self, family: str, knobs: dict[str, KnobValue]) -> Variant:
        """The variant of `family` at `knobs` (missing knobs take their defaults)."""
        space = self._space_named(family)
        return self._render(space, space.normalize(knobs))

    def adopt(self, family: str, knobs: dict[str, KnobValue]) -> Variant:
        """The variant of `family` at another kernel's knob values, each fitted to this task's grid.

        Unlike `render`, a number the grid lacks or the register budget rejects takes the largest value below
        it (as a thought's hints do), and knobs not given take the family's defaults.
        """
        space = self._space_named(family)
        whole = space.defaults()
        for knob in space.knobs:
            fits = _values_up_to(knob, knobs[knob.name]) if knob.name in knobs else []
            if fits:
                whole[knob.name] = fits[0]
        if space.valid(whole):  # the decision as a whole: its knobs were chosen together
            return self._render(space, whole)
        setting, _ = _hinted(space, space.defaults(), knobs, None)  # else knob by knob, within the budget
        return self._render(space, setting)

    # ---------------------------------------------------------------------------------- internals

    def _space(self, family: Family) -> _Space:
        knobs = [k for k in family.knobs(self.task, self.target) if len(k.values) > 1]
        return _Space(family, knobs, self.task, self.target)

    def _space_named(self, name: str) -> _Space:
        for space in self.spaces:
            if space.name == name:
                return space
        from core.errors import InvalidInput

        raise InvalidInput(
            f"family {name!r} does not apply to task {self.task.name!r}",
            f"use one of: {', '.join(self.families())}",
        )

    def _render(self, space: _Space, setting: Setting) -> Variant:
        return space.family.render(self.task, self.target, dict(setting))

    def _origin(self, technique: Technique, parent: Variant | None) -> tuple[_Space, Setting, Setting | None]:
        """Which space to search, the setting to move from, and a setting to try before any move."""
        parent_space = next((s for s in self.spaces if parent is not None and s.name == parent.family), None)
        if parent_space is not None and parent_space is not self.generic:
            return parent_space, parent_space.normalize(parent.knobs), None  # type: ignore[union-attr]
        family = next((s for s in self.family_spaces if s.implements(technique)), None)
        if family is not None:  # a family takes over from the reference or a generic parent
            first = family.start(self.start)
            return family, first, first
        if parent_space is self.generic:
            return self.generic, self.generic.normalize(parent.knobs), None  # type: ignore[union-attr]
        # From the plain reference: the technique's moves start at the generic default (default() is the
        # run's seed, so a direction's first proposal differs from it by the technique's knob).
        return self.generic, self.generic.defaults(), None

    def _moves(
        self, space: _Space, start: Setting, technique: Technique, rng: random.Random
    ) -> Iterator[tuple[Setting, str]]:
        """Settings near `start` that turn the technique's knobs, nearest first; validity-filtered."""
        tagged = [k for k in space.knobs if k.serves(technique)]
        others = [k for k in space.knobs if not k.serves(technique)]
        if not tagged:
            # The family has no knob for this technique: any single-knob move is the honest fallback.
            yield from _single_moves(space, start, list(space.knobs), rng)
            return
        yield from _single_moves(space, start, tagged, rng)
        if len(tagged) > 1:
            yield from _pair_moves(space, start, tagged, tagged, rng)
        yield from _pair_moves(space, start, tagged, others, rng, other_steps=1)

    def _count(self, space: _Space) -> int:
        sizes = [len(k.values) for k in space.knobs]
        total = 1
        for s in sizes:
            total *= s
        if total > GRID_LIMIT or getattr(space.family, "valid", None) is None:
            return total
        names = [k.name for k in space.knobs]
        return sum(
            1
            for combo in itertools.product(*(k.values for k in space.knobs))
            if space.valid(dict(zip(names, combo, strict=True)))
        )


# ------------------------------------------------------------------------------------------- moves


def _hinted(
    space: _Space, start: Setting, hints: dict[str, KnobValue], technique: Technique | None
) -> tuple[Setting, str]:
    """`start` with the knobs the thought's code sets (only those serving `technique`, unless None).

    A number the grid lacks, or that the family finds invalid beside the other knobs (its register
    budget), takes the largest value below it that fits (4 accumulators at LMUL 8 -> 2).
    """
    setting, moved = dict(start), []
    for knob in space.knobs:
        if knob.name not in hints or (technique is not None and not knob.serves(technique)):
            continue
        for value in _values_up_to(knob, hints[knob.name]):
            trial = {**setting, knob.name: value}
            if value == setting[knob.name] or space.valid(trial):
                if value != setting[knob.name]:
                    moved.append(f"{knob.name}: {setting[knob.name]} -> {value}")
                    setting = trial
                break
    said = f" ({', '.join(moved)}, as in the thought's code)" if moved else ""
    return setting, said


def _informed(variant: Variant, start: Setting, hinted: Setting) -> Variant:
    """The variant, noting the knobs the thought's code moved from the uninformed `start` (none: no credit)."""
    moved = {k: v for k, v in hinted.items() if start.get(k) != v}
    return variant.model_copy(update={"from_code": moved}) if moved else variant


def _values_up_to(knob: Knob, want: KnobValue) -> list[KnobValue]:
    """The knob's values to try for a hint: the hint itself, or for numbers every value below it, largest first."""
    if not isinstance(want, int) or not all(isinstance(v, int) for v in knob.values):
        return [want] if want in knob.values else []
    return sorted((v for v in knob.values if isinstance(v, int) and v <= want), reverse=True)


def _steps(knob: Knob, current: KnobValue) -> list[tuple[int, KnobValue]]:
    """(distance, value) for every other value of the knob, by distance along its ordered values."""
    idx = knob.values.index(current) if current in knob.values else knob.values.index(knob.default)
    return [(abs(i - idx), v) for i, v in enumerate(knob.values) if i != idx]


def _single_moves(
    space: _Space, start: Setting, knobs: list[Knob], rng: random.Random
) -> Iterator[tuple[Setting, str]]:
    candidates: list[tuple[int, float, Knob, KnobValue]] = []
    for knob in knobs:
        for dist, value in _steps(knob, start[knob.name]):
            candidates.append((dist, rng.random(), knob, value))
    candidates.sort(key=lambda c: (c[0], c[1]))
    for _, _, knob, value in candidates:
        setting = {**start, knob.name: value}
        if space.valid(setting):
            yield setting, f"{knob.name}: {start[knob.name]} -> {value}"


def _pair_moves(
    space: _Space,
    start: Setting,
    first: list[Knob],
    second: list[Knob],
    rng: random.Random,
    other_steps: int | None = None,
) -> Iterator[tuple[Setting, str]]:
    """Two knobs moved at once (a tagged knob and a neighbour step of another), nearest pairs first."""
    candidates: list[tuple[int, float, Knob, KnobValue, Knob, KnobValue]] = []
    for a in first:
        for b in second:
            if a.name >= b.name and b in first:
                continue  # each unordered pair of tagged knobs once
            for da, va in _steps(a, start[a.name]):
                for db, vb in _steps(b, start[b.name]):
                    if other_steps is None or db <= other_steps:
                        candidates.append((da + db, rng.random(), a, va, b, vb))
    candidates.sort(key=lambda c: (c[0], c[1]))
    for _, _, a, va, b, vb in candidates:
        setting = {**start, a.name: va, b.name: vb}
        if space.valid(setting):
            yield setting, f"{a.name}: {start[a.name]} -> {va}, {b.name}: {start[b.name]} -> {vb}"
