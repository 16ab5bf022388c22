"""Knob settings read from a thought's mined code: what the expert kernel actually did.

A mined thought carries the hunk that did the trick. When that hunk is RVV code, some of its choices map
straight onto the offline families' knobs: the register grouping it computes with (`vfloat32m8_t`,
`__riscv_vle32_v_f32m8`, `vsetvl_e32m8` -> lmul 8) and how many independent accumulators its FMAs
update (`acc0 = __riscv_vfmacc_vv_f32m4(acc0, ...)` ... `acc3` -> accumulators 4). The generator tries
those values first instead of walking the grid one step at a time from the plain setting, so a graph
that knows how OpenBLAS or ggml wrote the kernel starts where they ended.

RVV code also shows where it reduces and how it widens (agent.offline.loop_rewrite's knobs): a
`vfredusum` / `vredsum` / `vwredsum` inside the code's loop reduces every strip (`reduce_at` = "inloop",
ggml's q8_0 dot), one only after the loop keeps vector accumulators (`reduce_at` = "after"); an int8
product widened by `vwmacc` on sign-extended operands is `widen` = "wmacc", `vwmul` then `vwadd.wv` is
"wadd" (a `vwmul` whose products go straight to `vwredsum` says nothing about widening).

Only what the code states unambiguously becomes a hint; code of other ISAs gives accumulator counts
(their register width is not RVV's grouping, so no LMUL), and no code gives nothing.
"""

from __future__ import annotations

import re
from collections import Counter

from agent.offline.base import KnobValue

_RVV_LMUL = re.compile(
    r"\b(?:v(?:float|int|uint)\d+m([1248])_t|__riscv_\w+?_[fiu]\d+m([1248])\b|vsetvl(?:max)?_e\d+m([1248]))"
)
_OLD_RVV_LMUL = re.compile(r"\bv\w+_v_[fiu]\d+m([1248])\b|\bvsetvl(?:max)?_e\d+m([1248])\b")
# An FMA-like update of an accumulator: `acc = fma(acc, ...)` (RVV, NEON, SVE) or `acc = fma(a, b, acc)`.
_FMA_ASSIGN = re.compile(
    r"\b(\w+)\s*=\s*(?:__riscv_)?(?:vf?w?macc|vfmadd|vfwmacc|vmacc|vwmacc|vfmaq|vmlaq|vdotq|svmla|svdot|svmad|"
    r"_mm\d*_fmadd|_mm\d*_dpbusd|_mm\d*_madd|__lasx_xvfmadd|__lsx_vfmadd|vec_madd)\w*\s*\(([^;]*)\)\s*;"
)
RVV_ISAS = {"rvv", "xtheadvector"}


def code_hints(code: str, isa: str) -> dict[str, KnobValue]:
    """Knob values the example code shows: `lmul` (RVV only) and `accumulators`; {} when it shows none."""
    hints: dict[str, KnobValue] = {}
    if not code:
        return hints
    added = "\n".join(line[1:] for line in code.split("\n") if line.startswith("+")) or code
    if isa in RVV_ISAS:
        lmul = _lmul(added)
        if lmul:
            hints["lmul"] = lmul
        hints.update(_structure(added))  # a widening kernel's LMUL replaces the count of every type's
    acc = _accumulators(added)
    if acc > 1:
        hints["accumulators"] = acc
    return hints


_REDUCTION = re.compile(r"\b(?:__riscv_)?v(?:f?w?red(?:u|o)?sum|f?red(?:max|min)u?)\w*\s*\(")
_LOOP = re.compile(r"\b(?:for|while)\s*\(|\bdo\s*\{")


def _structure(code: str) -> dict[str, KnobValue]:
    """Where the code reduces (`reduce_at`) and how it widens int8 products (`widen`), where it shows it."""
    found: dict[str, KnobValue] = {}
    body = _loop_body(code)
    if body is not None and _REDUCTION.search(code):
        found["reduce_at"] = "inloop" if _REDUCTION.search(body) else "after"
    if _call("vwmacc", r"_i32m\d", code) and _call("vsext_vf2", r"_i16m\d", code):
        found["widen"] = "wmacc"
    elif _call("vwadd_wv", r"_i32m\d", code) and _call("vwmul", r"_i16m\d", code):
        found["widen"] = "wadd"
    narrow = [int(m) for m in re.findall(r"(?<![A-Za-z0-9])(?:__riscv_)?vle8_v_i8m([1248])", code)]
    if narrow and _call(
        "vw", r"_i(?:16|32)m\d", code
    ):  # a widening kernel's LMUL is its int8 loads' (the rewrite's knob)
        found["lmul"] = max(set(narrow), key=narrow.count)
    return found


def _call(name: str, suffix: str, code: str) -> bool:
    """Whether the code calls the RVV intrinsic `name` (with or without `__riscv_`) at a type matching `suffix`."""
    return re.search(rf"(?<![A-Za-z0-9])(?:__riscv_)?{name}\w*?{suffix}", code) is not None


def _loop_body(code: str) -> str | None:
    """The text of the code's first loop (from its keyword to its closing brace), None without a loop."""
    m = _LOOP.search(code)
    if m is None:
        return None
    depth, start = 0, code.find("{", m.start())
    if start < 0:
        return code[m.start() : code.find(";", m.end()) + 1]
    for j in range(start, len(code)):
        depth += {"{": 1, "}": -1}.get(code[j], 0)
        if depth == 0:
            return code[m.start() : j + 1]
    return code[m.start() :]  # a hunk cut inside the loop: all of it is the loop


def _lmul(code: str) -> int | None:
    """The register grouping most of the code computes with (a lone m1 reduction seed does not count)."""
    seen: Counter[int] = Counter()
    for rx in (_RVV_LMUL, _OLD_RVV_LMUL):
        for groups in rx.findall(code):
            for g in groups:
                if g:
                    seen[int(g)] += 1
    if not seen:
        return None
    wide = {k: v for k, v in seen.items() if k > 1}
    # Reductions seed and read an m1 register whatever the loop's grouping: m1 wins only when it dominates.
    if wide and max(wide.values()) * 2 >= seen.get(1, 0):
        return max(wide, key=lambda k: (wide[k], k))
    return max(seen, key=lambda k: (seen[k], k))


def _accumulators(code: str) -> int:
    """How many distinct variables FMA-like updates accumulate into (each updated from itself)."""
    names = set()
    for target, args in _FMA_ASSIGN.findall(code):
        if re.search(rf"\b{re.escape(target)}\b", args):
            names.add(target)
    return len(names)
