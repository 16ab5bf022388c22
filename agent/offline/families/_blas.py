"""Helpers shared by the BLAS-like RVV families (reduction, elementwise, gemv, gemm).

Only naming and bookkeeping: RVV 1.0 intrinsic spellings for f32 at a given LMUL, the task's
parameters by role, the techniques a knob setting applies, and reading a task's layout from its
reference (which size parameter strides which pointer).
"""

from __future__ import annotations

import re

from agent.offline.base import Knob, KnobValue, Variant
from evaluator.targets import TargetProfile
from evaluator.tasks import KernelTask, Param
from knowledge.taxonomy import Technique

HEADER = "#include <riscv_vector.h>\n#include <stddef.h>\n#include <stdint.h>\n#include <math.h>\n"
LMULS = [1, 2, 4, 8]
VECTOR_REGISTERS = 32


def f32(lmul: int) -> str:
    """Intrinsic suffix, e.g. f32m4."""
    return f"f32m{lmul}"


def vf32(lmul: int) -> str:
    """Vector type, e.g. vfloat32m4_t."""
    return f"vfloat32m{lmul}_t"


def vlmax(target: TargetProfile, lmul: int, sew: int = 32) -> int:
    return target.vlen // sew * lmul


def c_float(value: float) -> str:
    text = repr(float(value))
    return (text if ("." in text or "e" in text) else text + ".0") + "f"


def sizes(task: KernelTask) -> list[Param]:
    return [p for p in task.params if p.role == "size"]


def pointers(task: KernelTask) -> list[Param]:
    return [p for p in task.params if p.pointer]


def scalars(task: KernelTask) -> list[Param]:
    return [p for p in task.params if p.role == "scalar"]


def is_f32_pointer(p: Param) -> bool:
    return p.pointer and p.ctype == "float"


def knob_values(knobs: list[Knob], given: dict[str, KnobValue]) -> dict[str, KnobValue]:
    """Every knob's value: given ones (if legal) over defaults."""
    out: dict[str, KnobValue] = {}
    for k in knobs:
        out[k.name] = given[k.name] if given.get(k.name) in k.values else k.default
    return out


def applied_techniques(knobs: list[Knob], values: dict[str, KnobValue]) -> list[Technique]:
    """Vectorize, plus every knob's technique whose value is not its first (neutral) one."""
    used = [Technique.VECTORIZE]
    for k in knobs:
        if values[k.name] != k.values[0] and k.technique not in used:
            used.append(k.technique)
    return used


def variant(family: str, knobs: list[Knob], values: dict[str, KnobValue], code: str, what: str) -> Variant:
    return Variant(
        family=family,
        knobs=values,
        code=code,
        cflags=[],
        techniques=applied_techniques(knobs, values),
        description=f"{what}: " + ", ".join(f"{k}={v}" for k, v in values.items()),
    )


def strip_comments(code: str) -> str:
    code = re.sub(r"/\*.*?\*/", " ", code, flags=re.S)
    return re.sub(r"//[^\n]*", " ", code)


def normalized(code: str) -> str:
    """Reference text without comments, casts to size types and whitespace, for layout patterns."""
    code = strip_comments(code)
    code = re.sub(r"\(\s*(?:size_t|long|ptrdiff_t|int64_t|long long|unsigned)\s*\)", "", code)
    return re.sub(r"\s+", "", code)


def strides(task: KernelTask, pointer: str) -> set[str]:
    """Size parameters that multiply an index of `pointer` in the reference: `p[i*k+j]`, `p + j*m`."""
    text = normalized(task.reference_code)
    names = {p.name for p in sizes(task)}
    found: set[str] = set()
    for m in re.finditer(rf"(?<![\w.]){re.escape(pointer)}(?:\[|\+)([^;\]]*)", text):
        for a, b in re.findall(r"\(?(\w+)\)?\*\(?(\w+)\)?", m.group(1)):
            found |= {a, b} & names
    return found
