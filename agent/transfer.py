"""Transfer of a decision between targets and tasks: what a kernel chose on one, re-rendered for another.

A *decision* is an offline family's knob setting of a measured kernel (LMUL 4, 4 rows x 1 vector, unroll 4).
It transfers to another target or task in three steps:
  1. the family: the same one when it applies to the new task, else the new task's first family, whose knobs
     take the values of the source knobs that serve the same technique (sgemv's `cols` register blocking ->
     matmulnbits' `rows`; its `unroll` -> `blocks`);
  2. the vector length: a register group of LMUL x VLEN bits holds the same elements on a machine with
     another VLEN at LMUL x VLEN_from / VLEN_to, so LMUL (the VECTOR_LENGTH knob) is rescaled to keep the
     elements per group, and with them the tile a GEMM's rows and vectors span (K1's m4 is K3 A100's m1);
  3. what other tasks measured on both targets: when the graph holds, for other tasks of the same family, the
     best decision on the source target and on this one, and every such task moved a numeric knob the same
     way (K1's best reduction LMUL 1 was X100's 8: in-order and out-of-order cores want different groups),
     the knob takes the median of those moves (`learned_shifts`); a measured move of LMUL replaces the VLEN
     rule of step 2, which is a rule of thumb;
  4. the grid: numbers the new grid lacks, or that its register budget rejects, take the largest value below
     (OfflineGenerator.adopt).
Where the decision came from and what it became is recorded as (Experience)-[:TRANSFERS_TO]->(Experience)
once the new kernel is measured (agent/recorder.py), so the graph holds the outcome on both sides.

Similarity weights (written as SIMILAR_TO when a run is created, read by agent/context.py):
  targets: two vector targets, 1 / (1 + |log2(VLEN_a / VLEN_b)|): X60 ~ X100 (both 256) 1.0, X60 ~ A100 0.33;
  tasks: the same operator 1.0, a neighbouring one (knowledge.taxonomy.OPERATOR_NEIGHBOURS) 0.5.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass, field
from typing import Any

from agent.offline import OfflineGenerator, Variant
from agent.offline.base import Knob, KnobValue
from knowledge.taxonomy import OPERATOR_NEIGHBOURS, Operator, Technique

LMUL_KNOB = "lmul"


@dataclass
class Transfer:
    """One decision carried from a measured kernel to a candidate for another target or task."""

    source_id: str  # the Experience the decision comes from
    from_task: str
    from_target: str
    from_vlen: int
    from_speedup: float
    decision: dict[str, Any]  # {"family": ..., "knobs": {...}} as measured at the source
    applied: dict[str, Any] = field(default_factory=dict)  # the same for the candidate it became
    rescaled: str = ""  # "lmul 4 -> 1 for VLEN 256 -> 1024" ("" when nothing was rescaled)
    via: str = "target"  # target | task | target+task: what differs between source and candidate

    def describe(self) -> str:
        knobs = ", ".join(f"{k} {v}" for k, v in self.decision.get("knobs", {}).items())
        said = f"; {self.rescaled}" if self.rescaled else ""
        return (
            f"decision of {self.from_task} on {self.from_target} ({self.from_speedup:.2f}x: "
            f"{self.decision.get('family')} {knobs}{said})"
        )

    def properties(self, to_speedup: float | None, to_status: str) -> dict[str, Any]:
        """The TRANSFERS_TO edge's properties (docs/CYPHER.md): both decisions and both outcomes."""
        props: dict[str, Any] = {
            "decision": json.dumps(self.decision, sort_keys=True),
            "applied": json.dumps(self.applied, sort_keys=True),
            "rescaled": self.rescaled,
            "via": self.via,
            "from_task": self.from_task,
            "from_target": self.from_target,
            "from_vlen": self.from_vlen,
            "from_speedup": self.from_speedup,
            "to_status": to_status,
        }
        if to_speedup:
            props["to_speedup"] = to_speedup
        return props


def target_weight(vlen_a: int | None, vlen_b: int | None) -> float:
    """How much one vector target's measurements say about another's (0: not comparable)."""
    if not vlen_a or not vlen_b:
        return 0.0
    return round(1.0 / (1.0 + abs(math.log2(vlen_a / vlen_b))), 3)


def task_weight(op_a: str, op_b: str) -> float:
    if op_a == op_b:
        return 1.0
    try:
        a, b = Operator(op_a), Operator(op_b)
    except ValueError:
        return 0.0
    return 0.5 if b in OPERATOR_NEIGHBOURS.get(a, frozenset()) or a in OPERATOR_NEIGHBOURS.get(b, frozenset()) else 0.0


@dataclass(frozen=True)
class KnobShift:
    """How a numeric knob's best value moved from one target to another over other tasks of one family."""

    knob: str
    factor: float  # median of best_on_destination / best_on_source
    tasks: tuple[str, ...]  # the tasks measured on both targets that show it


def learned_shifts(
    decisions: list[tuple[str, str, dict[str, Any]]], family: str, from_target: str, to_target: str, task: str
) -> dict[str, KnobShift]:
    """The knob moves other tasks' best decisions of `family` show from `from_target` to `to_target`.

    `decisions` holds (task, target, variant) of each task's best kernel per target. A knob counts only when
    every task measured on both targets moved it the same way (a task that kept it, or moved it the other
    way, says the move is not the targets' doing), and `task` itself is left out: its own best on the
    destination is what the run is looking for."""
    by_task: dict[str, dict[str, dict[str, Any]]] = {}
    for t, target, variant in decisions:
        if t != task and variant.get("family") == family:
            by_task.setdefault(t, {})[target] = dict(variant.get("knobs") or {})
    moves: dict[str, list[tuple[str, float]]] = {}
    for t, on in sorted(by_task.items()):
        if from_target in on and to_target in on:
            for name, a in on[from_target].items():
                b = on[to_target].get(name)
                if _positive_int(a) and _positive_int(b):
                    moves.setdefault(name, []).append((t, math.log2(b / a)))
    return {
        name: KnobShift(name, 2 ** statistics.median(m for _, m in rows), tuple(t for t, _ in rows))
        for name, rows in moves.items()
        if all(m > 0 for _, m in rows) or all(m < 0 for _, m in rows)
    }


def _positive_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v > 0


def adapt(
    decision: dict[str, Any],
    source_knobs: list[Knob],
    from_vlen: int,
    gen: OfflineGenerator,
    shifts: dict[str, KnobShift] | None = None,
) -> tuple[Variant, str] | None:
    """The decision re-rendered for `gen`'s task and target, and what rescaling it needed; None: no family fits.
    `shifts` (learned_shifts for the decision's family and this pair of targets) apply when the family stays."""
    family = decision.get("family")
    knobs: dict[str, KnobValue] = dict(decision.get("knobs") or {})
    if not family or family == "generic":
        return None
    families = [f for f in gen.families() if f != "generic"]
    if not families:
        return None
    if family in families:
        into = family
    else:
        into = families[0]
        knobs = _by_technique(knobs, source_knobs, gen.knobs(into))
        shifts = None  # the moves were measured on the source family's knobs
    shifts = shifts or {}
    shifted = {n: max(1, round(v * shifts[n].factor)) for n, v in knobs.items() if n in shifts and _positive_int(v)}
    rescaled = ""
    knobs = {**knobs, **shifted}
    if LMUL_KNOB not in shifted:
        knobs, rescaled = _rescale(knobs, gen.knobs(into), from_vlen, gen.target.vlen)
    variant = gen.adopt(into, knobs)  # the grid snaps a shifted value to the largest one not above it
    moved = [
        f"{n} {old} -> {variant.knobs[n]} as other tasks' best moved (x{shifts[n].factor:.3g}: "
        f"{', '.join(shifts[n].tasks)})"
        for n, old in sorted(decision.get("knobs", {}).items())
        if n in shifted and variant.knobs.get(n) != old
    ]
    return variant, "; ".join([*moved, rescaled] if rescaled else moved)


def _by_technique(knobs: dict[str, KnobValue], source: list[Knob], dest: list[Knob]) -> dict[str, KnobValue]:
    """Source knob values moved onto the destination knobs that serve the same technique."""
    by_tech: dict[Technique, KnobValue] = {}
    for k in source:
        if k.name in knobs:
            by_tech.setdefault(Technique(k.technique), knobs[k.name])
    out: dict[str, KnobValue] = {}
    for k in dest:
        if k.name in knobs and k.name not in out:
            out[k.name] = knobs[k.name]  # same name (e.g. lmul): same meaning
        elif Technique(k.technique) in by_tech:
            out[k.name] = by_tech[Technique(k.technique)]
    return out


def _rescale(
    knobs: dict[str, KnobValue], dest: list[Knob], from_vlen: int, to_vlen: int
) -> tuple[dict[str, KnobValue], str]:
    """LMUL rescaled to keep the elements of a register group across VLENs (largest grid value not above)."""
    lmul = next((k for k in dest if k.name == LMUL_KNOB), None)
    value = knobs.get(LMUL_KNOB)
    if lmul is None or not isinstance(value, int) or not from_vlen or not to_vlen or from_vlen == to_vlen:
        return knobs, ""
    want = value * from_vlen / to_vlen
    grid = sorted(v for v in lmul.values if isinstance(v, int))
    new = max((v for v in grid if v <= want), default=grid[0])
    if new == value:
        return knobs, ""
    return {**knobs, LMUL_KNOB: new}, f"lmul {value} -> {new} for VLEN {from_vlen} -> {to_vlen}"


__all__ = ["KnobShift", "Transfer", "adapt", "learned_shifts", "target_weight", "task_weight"]
