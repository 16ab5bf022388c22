"""Which library routine a task's kernel can become, and how its interface maps onto the library's.

A task's contract is often narrower than the library's interface (the suite's sdot: unit strides, n > 0;
OpenBLAS's kernel: any increments, any n). The rule for a narrow task (docs/UPSTREAM.md, "Export"): the
exported file routes the calls the task's contract covers to the run's kernel and every other call to the
library's existing kernel, compiled in the same file under another name (#include of the original file with
CNAME redefined). A task whose semantics differ from the routine's, or whose kernel has no place in the
library's design, is refused with the reason.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from core.errors import InvalidInput
from evaluator.tasks import KernelTask


class ExportRefused(InvalidInput):
    """A kernel that cannot honour the library's interface, a clone that cannot take it: nothing written."""


@dataclass(frozen=True)
class OpenBlasRoutine:
    """An OpenBLAS kernel slot: its KERNEL.<TARGET> entry, its C signature and the path the run covers."""

    routine: str  # the name evaluator.upstream's tests and benchmark know (sdot, saxpy, sgemv_t, snrm2)
    entry: str  # the KERNEL.<TARGET> variable naming the kernel file
    returns: str  # the kernel's return type
    params: str  # the kernel's parameter list, as OpenBLAS's kernel files declare it
    args: str  # the same parameters as call arguments
    covered: str  # C condition: the calls inside the task's contract
    call: str  # C statement(s) for those calls: the run's kernel is `EOK`

    def call_with(self, kernel: str) -> str:
        return re.sub(r"\bEOK\b", kernel, self.call)

    contract: str  # the task's contract in words, for the file, the commit and the docs
    full: bool = False  # the task has the library's whole interface (a library-grade `*_blas` variant)
    # Builds of the kernel file that are not the routine the run optimized: they compile the original unchanged
    # (Makefile.L3 compiles SGEMMKERNEL with -DTRMMKERNEL where a target names no STRMMKERNEL).
    not_this: tuple[str, ...] = ("DOUBLE", "COMPLEX", "DSDOT")
    packed: tuple[int, int] | None = None  # a GEMM micro-kernel: the (UNROLL_M, UNROLL_N) its panels are packed by


@dataclass(frozen=True)
class GgmlRoutine:
    """A ggml CPU function whose RVV branch the run's kernel replaces."""

    routine: str  # the function's name, also what ggml's tests know it by
    block: str  # the block type of the first row (block_q8_0, block_q4_0)
    call: str  # C statement(s) of the RVV branch: the run's kernel is `EOK`

    def call_with(self, kernel: str) -> str:
        return re.sub(r"\bEOK\b", kernel, self.call)

    contract: str


_INT_N = "n > 0 && n <= INT_MAX"
OPENBLAS: dict[str, OpenBlasRoutine] = {
    "sdot": OpenBlasRoutine(
        routine="sdot",
        entry="SDOTKERNEL",
        returns="FLOAT",
        params="BLASLONG n, FLOAT *x, BLASLONG inc_x, FLOAT *y, BLASLONG inc_y",
        args="n, x, inc_x, y, inc_y",
        covered=f"inc_x == 1 && inc_y == 1 && {_INT_N}",
        call="return EOK((int)n, x, y);",
        contract="unit strides and 0 < n <= INT_MAX",
    ),
    "saxpy": OpenBlasRoutine(
        routine="saxpy",
        entry="SAXPYKERNEL",
        returns="int",
        params=(
            "BLASLONG n, BLASLONG dummy0, BLASLONG dummy1, FLOAT da, FLOAT *x, BLASLONG inc_x, FLOAT *y, "
            "BLASLONG inc_y, FLOAT *dummy, BLASLONG dummy2"
        ),
        args="n, dummy0, dummy1, da, x, inc_x, y, inc_y, dummy, dummy2",
        covered=f"inc_x == 1 && inc_y == 1 && {_INT_N}",
        call="EOK((int)n, da, x, y);\n        return 0;",
        contract="unit strides and 0 < n <= INT_MAX",
    ),
    "sgemv_t": OpenBlasRoutine(
        routine="sgemv_t",
        entry="SGEMVTKERNEL",
        returns="int",
        params=(
            "BLASLONG m, BLASLONG n, BLASLONG dummy1, FLOAT alpha, FLOAT *a, BLASLONG lda, FLOAT *x, "
            "BLASLONG inc_x, FLOAT *y, BLASLONG inc_y, FLOAT *buffer"
        ),
        args="m, n, dummy1, alpha, a, lda, x, inc_x, y, inc_y, buffer",
        # OpenBLAS's interface scales y by beta before the kernel adds alpha*A^T*x: the task's beta is 1.
        covered="inc_x == 1 && inc_y == 1 && lda == m && m > 0 && n > 0 && m <= INT_MAX && n <= INT_MAX",
        call="EOK((int)m, (int)n, alpha, a, x, 1.0f, y);\n        return 0;",
        contract="unit strides, lda == m, 0 < m, n <= INT_MAX; beta = 1 (the library applied beta before)",
    ),
    "snrm2": OpenBlasRoutine(
        routine="snrm2",
        entry="SNRM2KERNEL",
        returns="FLOAT",
        params="BLASLONG n, FLOAT *x, BLASLONG inc_x",
        args="n, x, inc_x",
        covered=f"inc_x == 1 && {_INT_N}",
        call="return EOK((int)n, x);",
        contract="unit stride and 0 < n <= INT_MAX",
    ),
}

# Library-grade variants (the `*_blas` tasks): the task takes the library's increments with BLAS's meaning
# (a negative increment starts at the far end of the array), OpenBLAS's interface has already moved the
# pointer to that far end (interface/dot.c, axpy.c, nrm2.c, gemv.c): eok_start moves it back. What is left
# to the library's previous kernel: sizes and increments beyond int, and a zero alpha (the task returns at
# once; OpenBLAS's interface never calls the kernel with one, its other callers may, and expect y += 0*x).
_INT_INC = "{v} >= -INT_MAX && {v} <= INT_MAX"
_FULL = {
    "sdot_blas": ("sdot", f"n <= INT_MAX && {_INT_INC.format(v='inc_x')} && {_INT_INC.format(v='inc_y')}",
                  "return EOK((int)n, eok_start(x, n, inc_x), (int)inc_x, eok_start(y, n, inc_y), (int)inc_y);"),
    "saxpy_blas": ("saxpy",
                   f"n <= INT_MAX && da != 0.0f && {_INT_INC.format(v='inc_x')} && {_INT_INC.format(v='inc_y')}",
                   "EOK((int)n, da, eok_start(x, n, inc_x), (int)inc_x, eok_start(y, n, inc_y), (int)inc_y);\n"
                   "        return 0;"),
    "sgemv_t_blas": ("sgemv_t",
                     "m <= INT_MAX && n <= INT_MAX && lda <= INT_MAX && alpha != 0.0f && "
                     f"{_INT_INC.format(v='inc_x')} && {_INT_INC.format(v='inc_y')}",
                     "EOK((int)m, (int)n, alpha, a, (int)lda, eok_start(x, m, inc_x), (int)inc_x, 1.0f, "
                     "eok_start(y, n, inc_y), (int)inc_y);\n        return 0;"),
    "snrm2_blas": ("snrm2", f"n <= INT_MAX && {_INT_INC.format(v='inc_x')}",
                   "return EOK((int)n, eok_start(x, n, inc_x), (int)inc_x);"),
}  # fmt: skip
for _task, (_narrow, _covered, _call) in _FULL.items():
    _zero = ", alpha != 0" if "0.0f" in _covered else ""
    OPENBLAS[_task] = replace(
        OPENBLAS[_narrow],
        covered=_covered,
        call=_call,
        full=True,
        contract=f"the library's whole interface (increments of either sign, n <= 0) within int{_zero}",
    )

# The packed GEMM micro-kernel (sgemm_kernel_blas): the task is OpenBLAS's kernel contract itself (docs/TASKS.md),
# so every call with sizes >= 0 runs the run's kernel; only what no caller passes (a negative size) is left to
# the library's. Its panels are packed by the unrolls of the task's reference, which must be the target's.
OPENBLAS["sgemm_kernel_blas"] = OpenBlasRoutine(
    routine="sgemm_kernel",
    entry="SGEMMKERNEL",
    returns="int",
    params="BLASLONG bm, BLASLONG bn, BLASLONG bk, FLOAT alpha, FLOAT *ba, FLOAT *bb, FLOAT *C, BLASLONG ldc",
    args="bm, bn, bk, alpha, ba, bb, C, ldc",
    covered="bm >= 0 && bn >= 0 && bk >= 0",
    call="EOK(bm, bn, bk, alpha, ba, bb, C, ldc);\n        return 0;",
    contract="OpenBLAS's SGEMMKERNEL contract: packed panels, C += alpha*A*B in ldc, sizes >= 0",
    full=False,
    not_this=("DOUBLE", "COMPLEX", "TRMMKERNEL"),
    # packed: set from the task by openblas_routine (agent.offline.families.gemm_packed.contract)
)

GGML: dict[str, GgmlRoutine] = {
    "q8_0_q8_0_dot": GgmlRoutine(
        routine="ggml_vec_dot_q8_0_q8_0",
        block="block_q8_0",
        call="*s = n >= QK8_0 ? EOK(n / QK8_0, (const uint8_t *) vx, (const uint8_t *) vy) : 0.0f;",
        contract="one row pair (nrc == 1) of n / 32 blocks of block_q8_0 (34 bytes each)",
    ),
    "q4_0_q8_0_dot": GgmlRoutine(
        routine="ggml_vec_dot_q4_0_q8_0",
        block="block_q4_0",
        call="*s = n >= QK8_0 ? EOK(n / QK8_0, (const uint8_t *) vx, (const uint8_t *) vy) : 0.0f;",
        contract="one row pair (nrc == 1): n / 32 blocks of block_q4_0 (18 bytes) times block_q8_0 (34 bytes)",
    ),
    "q8_0_q8_0_dot_ggml": GgmlRoutine(
        routine="ggml_vec_dot_q8_0_q8_0",
        block="block_q8_0",
        call="EOK(n, s, bs, (const uint8_t *) vx, bx, (const uint8_t *) vy, by, nrc);",
        contract="ggml's own signature and layout (the task is ggml's contract with nrc == 1)",
    ),
}

# Tasks whose kernel has no place in the library, and why (a fact about the library, not a size limit).
_NO_PLACE = {
    ("openblas", "gemm"): (
        "OpenBLAS's SGEMMKERNEL is a packed micro-kernel (it multiplies SGEMM_UNROLL_M x SGEMM_UNROLL_N register "
        "blocks of panels that its copy routines packed), not a whole sgemm; the run optimized a whole "
        "C = A*B, which has no place in it"
    ),
}

# The library's promises a task must check before its kernel may stand in for the routine.
_FLT_SQRT_MAX, _FLT_SQRT_MIN = 1.8446742e19, 1.0842022e-19  # squares past float's range (FLT_MAX, FLT_MIN)


def openblas_routine(task: KernelTask) -> OpenBlasRoutine:
    """The OpenBLAS slot for `task`'s kernel, or ExportRefused naming why it has none."""
    from agent.offline.families.gemm_packed import contract

    if (packed := contract(task)) is not None:  # a micro-kernel on packed panels: SGEMMKERNEL's own contract
        return replace(OPENBLAS["sgemm_kernel_blas"], packed=(packed.unroll_m, packed.unroll_n))
    if reason := _NO_PLACE.get(("openblas", task.operator)):
        raise ExportRefused(f"{task.name} cannot be exported to OpenBLAS: {reason}", _fix(task, "openblas"))
    routine = OPENBLAS.get(task.name) or OPENBLAS.get(_same_contract_as(task, OPENBLAS) or "")
    if routine is None:
        raise ExportRefused(
            f"{task.name} has no OpenBLAS kernel slot EoK knows", f"exportable to OpenBLAS: {', '.join(OPENBLAS)}"
        )
    if task.operator == "nrm2" and not _checks_full_range(task):
        raise ExportRefused(
            f"{task.name} cannot stand in for OpenBLAS snrm2: the library promises a norm without overflow or "
            "underflow over the full float range, and the task never checks inputs whose squares leave float's "
            f"range (|x| > {_FLT_SQRT_MAX:.3g} or < {_FLT_SQRT_MIN:.3g})",
            "optimize the suite's snrm2 (its sizes scale inputs to 1e30 and 1e-39) and export that run",
        )
    return routine


def ggml_routine(task: KernelTask) -> GgmlRoutine:
    """The ggml function for `task`'s kernel, or ExportRefused naming why it has none."""
    routine = GGML.get(task.name) or GGML.get(_same_contract_as(task, GGML) or "")
    if routine is None:
        raise ExportRefused(
            f"{task.name} has no ggml function EoK knows how to replace", f"exportable to ggml: {', '.join(GGML)}"
        )
    return routine


def _same_contract_as(task: KernelTask, known: dict) -> str | None:
    """The known task a user's task is a variant of: the same operator and the same C signature (its
    function renamed). Its sizes, tolerance and inputs may differ: the checks below look at those."""
    from evaluator.harness import prototype
    from evaluator.tasks import load_task

    mine = prototype(task, name="f")
    for name in known:
        try:
            other = load_task(name)
        except InvalidInput:  # a library-grade variant this checkout does not have
            continue
        if other.operator == task.operator and prototype(other, name="f") == mine:
            return name
    return None


def _checks_full_range(task: KernelTask) -> bool:
    scales = [abs(s) for arg in task.args.values() for s in (getattr(arg, "scales", None) or [])]
    return any(s > _FLT_SQRT_MAX for s in scales) and any(0 < s < _FLT_SQRT_MIN for s in scales)


def _fix(task: KernelTask, library: str) -> str:
    if library == "openblas" and task.operator == "gemm":
        return "optimize the micro-kernel task sgemm_kernel_blas (OpenBLAS's SGEMMKERNEL contract) and export that run"
    return "see docs/UPSTREAM.md, Export"
