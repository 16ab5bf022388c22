"""Does a thought fit a task? Its operator, its data and its ISA against the task's.

A thought offered to a task must be about the same kind of kernel: the task's operator or one whose kernels
share its shape (`taxonomy.OPERATOR_NEIGHBOURS`), or portable advice ("other"); data of the same kind (a
quantized block format's lookup tables are no lesson for an f32 dot product); and code the target can use
(its own ISA, portable C, or another ISA's code carrying RVV equivalents of its intrinsics).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from knowledge.taxonomy import OPERATOR_NEIGHBOURS, Operator, Technique

# Quantized data: ggml's block formats (q4_0, q8_K, iq1_s, tq1_0, mxfp4), their block structs, int8 dot
# products (x86 dpbusd/maddubs, Arm sdot, RVV widening int8 multiplies) and int8 vector types.
_QUANTIZED = re.compile(
    r"(?:\b|_)(?:[it]?q[1-8]_(?:[01k]|[a-z]{1,2})|mxfp4|nvfp4)(?:\b|_)|\bblock_[it]?q\d|\biq\d\w*|"
    r"dpbusd|maddubs|\bvdotq?_[su]32|\bsvdot_[su]32|\bvwmacc\w*_i16|\b__riscv_vwmul\w*_i16|\bv(?:u?int)8m\w*_t\b|"
    r"\bint8x\d+_t\b|\bquantized\b|\bint8\b|\bi8mm\b",
    re.I,
)
# A quantized dot is quantized by its operator; a `quantize` thought only when its text shows a format (an
# fp16 -> fp32 conversion is a `quantize` kernel on float data).
QUANTIZED_OPERATORS = {Operator.QUANT_DOT.value}
QUANTIZED_DTYPES = {"q4_0", "q8_0", "q4_k", "q8_k", "i8", "int8", "mixed"}

# The technique families that decide a kernel's speed, per operator, most important first: what the
# directions of a run on that operator must cover when the graph holds thoughts for them. On the modeled
# X60 (docs/COSTMODEL.md) latency hiding (accumulators), register grouping (LMUL) and one reduction after
# the loop pay; prefetch and cache blocking do not show.
_T = Technique
OPERATOR_TECHNIQUES: dict[str, tuple[Technique, ...]] = {
    "dot": (_T.MULTI_ACCUMULATOR, _T.VECTOR_LENGTH, _T.REDUCTION, _T.UNROLL),
    "nrm2": (_T.MULTI_ACCUMULATOR, _T.VECTOR_LENGTH, _T.REDUCTION, _T.UNROLL),
    "reduce": (_T.MULTI_ACCUMULATOR, _T.VECTOR_LENGTH, _T.REDUCTION, _T.UNROLL),
    "quant_dot": (_T.WIDENING, _T.MULTI_ACCUMULATOR, _T.VECTOR_LENGTH, _T.REDUCTION),
    "quantize": (_T.VECTOR_LENGTH, _T.WIDENING, _T.VECTORIZE, _T.UNROLL),
    "gemm": (_T.REGISTER_BLOCKING, _T.VECTOR_LENGTH, _T.PACKING, _T.MULTI_ACCUMULATOR),
    "gemv": (_T.REGISTER_BLOCKING, _T.VECTOR_LENGTH, _T.MULTI_ACCUMULATOR, _T.REDUCTION),
    "trsm": (_T.REGISTER_BLOCKING, _T.PACKING, _T.VECTOR_LENGTH),
    "conv": (_T.REGISTER_BLOCKING, _T.VECTOR_LENGTH, _T.PACKING, _T.MEMORY_ACCESS),
    "axpy": (_T.VECTOR_LENGTH, _T.UNROLL, _T.FUSION, _T.TAIL_HANDLING),
    "elementwise": (_T.VECTOR_LENGTH, _T.UNROLL, _T.TAIL_HANDLING, _T.FUSION),
    "activation": (_T.APPROXIMATION, _T.VECTOR_LENGTH, _T.FUSION, _T.UNROLL),
    "softmax": (_T.FUSION, _T.APPROXIMATION, _T.REDUCTION, _T.VECTOR_LENGTH),
    "norm": (_T.REDUCTION, _T.FUSION, _T.MULTI_ACCUMULATOR, _T.VECTOR_LENGTH),
    "attention": (_T.FUSION, _T.REDUCTION, _T.MULTI_ACCUMULATOR, _T.VECTOR_LENGTH),
    "pool": (_T.VECTOR_LENGTH, _T.MEMORY_ACCESS, _T.UNROLL),
    "rope": (_T.VECTOR_LENGTH, _T.MEMORY_ACCESS, _T.FUSION),
    "resize": (_T.MEMORY_ACCESS, _T.VECTOR_LENGTH),
    "transpose": (_T.MEMORY_ACCESS, _T.REGISTER_BLOCKING),
    "copy": (_T.VECTOR_LENGTH, _T.MEMORY_ACCESS),
    "scan": (_T.ALGORITHMIC, _T.VECTOR_LENGTH),
    "sort": (_T.ALGORITHMIC, _T.VECTORIZE),
}


def quantized(thought: Mapping[str, Any]) -> bool:
    """Is the thought about quantized data (by its operator, or its title, identifiers or example code)?"""
    if thought.get("operator") in QUANTIZED_OPERATORS:
        return True
    text = " ".join(str(thought.get(f) or "") for f in ("title", "identifiers", "example_code"))
    return bool(_QUANTIZED.search(text))


def operator_fits(thought_operator: str | None, task_operator: str) -> bool:
    op = thought_operator or "other"
    if op in (task_operator, "other"):
        return True
    try:
        return Operator(op) in OPERATOR_NEIGHBOURS.get(Operator(task_operator), frozenset())
    except ValueError:
        return False


def data_fits(thought: Mapping[str, Any], task_dtype: str) -> bool:
    """A float task takes no quantized thought; a quantized task takes float thoughts too (its accumulation
    is float or integer arithmetic all the same)."""
    return task_dtype.lower() in QUANTIZED_DTYPES or not quantized(thought)


def isa_fits(thought: Mapping[str, Any], target_isa: str | None) -> bool:
    """The target's ISA, portable code, or (for RVV) another ISA's code with RVV equivalents."""
    isa = thought.get("isa") or "generic"
    if target_isa is None or isa in (target_isa, "generic"):
        return True
    return target_isa == "rvv" and (isa == "xtheadvector" or bool(thought.get("rvv_equivalents")))


def misfit(thought: Mapping[str, Any], task_operator: str, task_dtype: str, target_isa: str | None) -> str:
    """Why the thought does not fit the task ("" when it does)."""
    if not operator_fits(thought.get("operator"), task_operator):
        return f"operator {thought.get('operator')} is not {task_operator} or a neighbour"
    if not data_fits(thought, task_dtype):
        return f"quantized data for a {task_dtype} task"
    if not isa_fits(thought, target_isa):
        return f"{thought.get('isa')} code without {target_isa} equivalents"
    return ""
