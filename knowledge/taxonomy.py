"""One fixed vocabulary shared by the miners (what a commit did) and the agent (what to try next).

Changing a value here is a schema change: stored Thoughts carry these strings.
"""

from __future__ import annotations

from enum import StrEnum
from typing import TypeVar


class Technique(StrEnum):
    VECTORIZE = "vectorize"
    VECTOR_LENGTH = "vector_length"  # LMUL / vector width choice
    UNROLL = "unroll"
    MULTI_ACCUMULATOR = "multi_accumulator"
    REGISTER_BLOCKING = "register_blocking"  # register blocking / cache tiling
    PACKING = "packing"  # packing / data layout
    PREFETCH = "prefetch"
    FUSION = "fusion"  # fused operations (FMA, fused loops)
    REDUCTION = "reduction"  # reduction restructuring
    APPROXIMATION = "approximation"  # polynomial or table approximation
    WIDENING = "widening"  # widening / integer dot products
    TAIL_HANDLING = "tail_handling"
    ALIGNMENT = "alignment"
    THREADING = "threading"
    MEMORY_ACCESS = "memory_access"  # access pattern: strides, streaming, reuse
    ALGORITHMIC = "algorithmic"


TECHNIQUE_DESCRIPTIONS: dict[Technique, str] = {
    Technique.VECTORIZE: "Replace scalar loops with SIMD/vector instructions or intrinsics",
    Technique.VECTOR_LENGTH: "Choose the vector length / register grouping (LMUL) to match the machine",
    Technique.UNROLL: "Unroll loops to cut loop overhead and expose independent work",
    Technique.MULTI_ACCUMULATOR: "Keep several independent accumulators in flight to hide FMA latency",
    Technique.REGISTER_BLOCKING: "Block computation in registers and tile for caches to reuse loaded data",
    Technique.PACKING: "Pack or re-layout data so the kernel reads it contiguously",
    Technique.PREFETCH: "Prefetch data ahead of use to hide memory latency",
    Technique.FUSION: "Fuse operations (FMA, fused loops) to save passes over memory",
    Technique.REDUCTION: "Restructure reductions: accumulate vectors, reduce horizontally once at the end",
    Technique.APPROXIMATION: "Use polynomial or table approximations for transcendental functions",
    Technique.WIDENING: "Use widening multiplies / integer dot products for low-precision data",
    Technique.TAIL_HANDLING: "Handle loop tails with vector-length control or masks instead of scalar loops",
    Technique.ALIGNMENT: "Align data or handle misalignment explicitly",
    Technique.THREADING: "Parallelise across cores",
    Technique.MEMORY_ACCESS: "Improve the memory access pattern: unit strides, streaming, reuse",
    Technique.ALGORITHMIC: "Change the algorithm or its complexity",
}


# A claimed speedup above this for a CPU SIMD change is flagged by the miners and never ranks anything.
MAX_PLAUSIBLE_SPEEDUP = 20.0


class Isa(StrEnum):
    RVV = "rvv"
    XTHEADVECTOR = "xtheadvector"
    SSE = "sse"
    AVX = "avx"
    AVX2 = "avx2"
    AVX512 = "avx512"
    NEON = "neon"
    SVE = "sve"
    LSX = "lsx"
    LASX = "lasx"
    VSX = "vsx"
    WASM_SIMD = "wasm_simd"
    GENERIC = "generic"  # portable C, no ISA-specific code


ISA_FAMILY: dict[Isa, str] = {
    Isa.RVV: "riscv",
    Isa.XTHEADVECTOR: "riscv",
    Isa.SSE: "x86",
    Isa.AVX: "x86",
    Isa.AVX2: "x86",
    Isa.AVX512: "x86",
    Isa.NEON: "arm",
    Isa.SVE: "arm",
    Isa.LSX: "loongarch",
    Isa.LASX: "loongarch",
    Isa.VSX: "power",
    Isa.WASM_SIMD: "wasm",
    Isa.GENERIC: "generic",
}


class Operator(StrEnum):
    GEMM = "gemm"
    GEMV = "gemv"
    DOT = "dot"
    AXPY = "axpy"
    NRM2 = "nrm2"
    TRSM = "trsm"
    QUANT_DOT = "quant_dot"  # quantized dot products / quantized matmul
    QUANTIZE = "quantize"  # (de)quantization, type conversion
    SOFTMAX = "softmax"
    NORM = "norm"  # layer/rms/batch norm
    CONV = "conv"
    POOL = "pool"
    ACTIVATION = "activation"
    ELEMENTWISE = "elementwise"
    REDUCE = "reduce"
    ATTENTION = "attention"
    ROPE = "rope"
    RESIZE = "resize"
    TRANSPOSE = "transpose"
    SCAN = "scan"
    SORT = "sort"  # merge, compaction, histogram, NMS-like selection
    COPY = "copy"  # memcpy/memset/packing routines
    OTHER = "other"


# Operators whose kernels share their shape (the loops, the reduction, the data movement): a question about
# one is partly answered by the code of another (a gemv by a dot, a softmax by an exp activation and a max
# reduction). Retrieval gives such a thought a smaller boost than the operator named itself.
OPERATOR_NEIGHBOURS: dict[Operator, frozenset[Operator]] = {
    op: frozenset(ns)
    for op, ns in {
        Operator.GEMM: {Operator.GEMV, Operator.CONV, Operator.COPY, Operator.TRSM},
        Operator.GEMV: {Operator.GEMM, Operator.DOT, Operator.AXPY},
        Operator.DOT: {Operator.QUANT_DOT, Operator.GEMV, Operator.NRM2, Operator.REDUCE},
        Operator.AXPY: {Operator.ELEMENTWISE, Operator.DOT},
        Operator.NRM2: {Operator.DOT, Operator.REDUCE},
        Operator.TRSM: {Operator.GEMM},
        Operator.QUANT_DOT: {Operator.DOT, Operator.QUANTIZE, Operator.GEMV},
        Operator.QUANTIZE: {Operator.QUANT_DOT, Operator.ELEMENTWISE},
        Operator.SOFTMAX: {Operator.ACTIVATION, Operator.REDUCE, Operator.ELEMENTWISE},
        Operator.NORM: {Operator.REDUCE, Operator.ELEMENTWISE},
        Operator.CONV: {Operator.GEMM, Operator.POOL},
        Operator.POOL: {Operator.CONV, Operator.REDUCE},
        Operator.ACTIVATION: {Operator.ELEMENTWISE, Operator.SOFTMAX},
        Operator.ELEMENTWISE: {Operator.ACTIVATION, Operator.AXPY},
        Operator.REDUCE: {Operator.DOT, Operator.NRM2, Operator.NORM},
        Operator.ATTENTION: {Operator.SOFTMAX, Operator.GEMV, Operator.DOT},
        Operator.ROPE: {Operator.ELEMENTWISE},
        Operator.RESIZE: {Operator.ELEMENTWISE},
        Operator.TRANSPOSE: {Operator.COPY},
        Operator.COPY: {Operator.TRANSPOSE},
    }.items()
}


E = TypeVar("E", bound=StrEnum)


def parse_enum(enum: type[E], value: str, what: str) -> E:
    """Parse a user-given value, naming the field and the allowed values when it is wrong."""
    from core.errors import InvalidInput

    try:
        return enum(value.strip().lower())
    except ValueError:
        allowed = ", ".join(e.value for e in enum)
        raise InvalidInput(f"{what}: unknown value {value!r}", f"use one of: {allowed}") from None
