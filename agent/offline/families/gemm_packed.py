"""A GEMM micro-kernel on panels packed the BLAS library's way (OpenBLAS's SGEMMKERNEL contract).

The task (evaluator/suite/sgemm_kernel_blas) passes (bm, bn, bk, alpha, ba, bb, c, ldc): A's bm rows packed
in blocks of UNROLL_M rows (then the powers of two below it), each block k-major at ba + first_row*bk; B's
bn columns the same in blocks of UNROLL_N; C column-major in ldc, C += alpha*A*B. Its reference states
the two unrolls as `#define UNROLL_M` / `#define UNROLL_N`: that is the contract this family reads.

The kernel: for each block of nr columns (one function per width, nr accumulators) and each block of mr
rows, the mr rows of a column of C are one vector (by default LMUL the smallest that holds UNROLL_M floats
at the target's VLEN; vl = mr for the row tails) or several of a smaller LMUL; per k it loads the block's
column of A once and does one vfmacc.vf per column and vector with B's values (scalar loads: the LS pipes,
not the vector load/store pipe); at the end C = C + alpha*acc with one vfmacc per vector. Knobs: lmul
(vector_length), the columns whose accumulators one pass over k keeps (register_blocking: all nr, or half
and a second pass that reads A again), k unroll (unroll) and which loop is outer (memory_access: column
blocks outside keep B's block hot, as OpenBLAS does; row blocks outside keep A's).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agent.offline.base import Knob, KnobValue, Variant, register
from agent.offline.families._blas import HEADER, VECTOR_REGISTERS, knob_values, strip_comments, variant
from evaluator.targets import TargetProfile
from evaluator.tasks import KernelTask
from knowledge.taxonomy import Operator, Technique

_INT = ("int", "int32_t", "int64_t", "size_t")


@dataclass(frozen=True)
class PackedContract:
    unroll_m: int
    unroll_n: int
    names: tuple[str, ...]  # bm, bn, bk, alpha, ba, bb, c, ldc as the task names them


def contract(task: KernelTask) -> PackedContract | None:
    """The packed micro-kernel contract of `task`, or None: the parameter list in OpenBLAS's order and
    the two unrolls (powers of two) its reference defines."""
    if task.operator != Operator.GEMM or task.return_type != "void" or len(task.params) != 8:
        return None
    p = task.params
    kinds = [
        (not q.pointer and q.ctype in _INT) if i in (0, 1, 2, 7) else
        (not q.pointer and q.ctype == "float") if i == 3 else
        (q.pointer and q.ctype == "float" and q.const == (i != 6))
        for i, q in enumerate(p)
    ]  # fmt: skip
    if not all(kinds):
        return None
    code = strip_comments(task.reference_code)
    found = {k: re.search(rf"#\s*define\s+{k}\s+(\d+)\b", code) for k in ("UNROLL_M", "UNROLL_N")}
    if not all(found.values()):
        return None
    um, un = (int(m.group(1)) for m in found.values() if m)
    if any(u < 1 or u & (u - 1) or u > 64 for u in (um, un)):
        return None
    return PackedContract(um, un, tuple(q.name for q in p))


def widths(unroll: int) -> list[int]:
    """Block widths of a panel: the unroll, then the powers of two below it."""
    out = [unroll]
    while out[-1] > 1:
        out.append(out[-1] // 2)
    return out


def row_lmul(target: TargetProfile, unroll_m: int) -> int | None:
    """The smallest LMUL whose vector holds UNROLL_M floats at the target's VLEN, or None (more than m8)."""
    return next((lm for lm in (1, 2, 4, 8) if target.vlen // 32 * lm >= unroll_m), None)


def parts(target: TargetProfile, unroll_m: int, lmul: int) -> int:
    """Vectors of LMUL `lmul` that a column of a full block of UNROLL_M rows takes."""
    per = target.vlen // 32 * lmul
    return -(-unroll_m // per)


def registers(target: TargetProfile, con: PackedContract, lmul: int, cols: int, unroll: int) -> int:
    """Vector registers of a tile: the accumulators of `cols` columns and `unroll` loads of A's column."""
    return parts(target, con.unroll_m, lmul) * (min(cols, con.unroll_n) + unroll) * lmul


def _block(nr: int, lmul: int, unroll: int, nparts: int, per: int, cols: int) -> list[str]:
    """tile_<nr>: mr (<= UNROLL_M) rows by nr columns; each column's rows in `nparts` vectors of `per` lanes
    (a part past mr gets vl 0: no lanes, no memory touched), `cols` columns of accumulators per pass over k."""
    s, t = f"f32m{lmul}", f"vfloat32m{lmul}_t"
    out = [
        f"static inline __attribute__((always_inline)) void tile_{nr}(int64_t mr, int64_t bk, float alpha, "
        "const float *a, const float *b, float *c, int64_t ldc)",
        "{",
    ]
    for p in range(nparts):
        left = "(size_t)mr" if p == 0 else f"(size_t)(mr > {p * per} ? mr - {p * per} : 0)"
        out.append(f"    const size_t vl{p} = __riscv_vsetvl_e32m{lmul}({left});")
    for g0 in range(0, nr, cols):
        group = range(g0, min(nr, g0 + cols))
        acc = {(p, j): f"acc{p}_{j}" for j in group for p in range(nparts)}
        out.append("    {")
        out += [f"        {t} {x} = __riscv_vfmv_v_f_{s}(0.0f, vl{p});" for (p, _), x in acc.items()]
        out += ["        int64_t k = 0;", f"        for (; k + {unroll} <= bk; k += {unroll}) {{"]
        steps = [("k" if q == 0 else f"(k + {q})", q) for q in range(unroll)]
        for kq, q in steps:
            for p in range(nparts):
                at = f"a + {kq} * mr" + (f" + {p * per}" if p else "")
                out.append(f"            const {t} a{q}_{p} = __riscv_vle32_v_{s}({at}, vl{p});")
        for kq, q in steps:
            for (p, j), x in acc.items():
                out.append(f"            {x} = __riscv_vfmacc_vf_{s}({x}, b[{kq} * {nr} + {j}], a{q}_{p}, vl{p});")
        out.append("        }")
        if unroll > 1:
            out.append("        for (; k < bk; k++) {")
            for p in range(nparts):
                at = "a + k * mr" + (f" + {p * per}" if p else "")
                out.append(f"            const {t} a0_{p} = __riscv_vle32_v_{s}({at}, vl{p});")
            for (p, j), x in acc.items():
                out.append(f"            {x} = __riscv_vfmacc_vf_{s}({x}, b[k * {nr} + {j}], a0_{p}, vl{p});")
            out.append("        }")
        for (p, j), x in acc.items():
            at = "c" + (f" + {j} * ldc" if j else "") + (f" + {p * per}" if p else "")
            old = f"__riscv_vle32_v_{s}({at}, vl{p})"
            out.append(f"        __riscv_vse32_v_{s}({at}, __riscv_vfmacc_vf_{s}({old}, alpha, {x}, vl{p}), vl{p});")
        out.append("    }")
    out += ["}", ""]
    return out


def _width(var: str, left: str, unroll: int) -> str:
    """C expression: the block width at `left` remaining (the unroll, else the largest power of two <= left)."""
    arms = [f"{left} >= {w} ? {w} : " for w in widths(unroll)[:-1]]
    return f"        {var} = {''.join(arms)}1;"


def source(
    task: KernelTask, target: TargetProfile, con: PackedContract, lmul: int, cols: int, unroll: int, rows_outer: bool
) -> str:
    bm, bn, bk, alpha, ba, bb, c, ldc = con.names
    nparts, per = parts(target, con.unroll_m, lmul), target.vlen // 32 * lmul
    blocks = [line for nr in widths(con.unroll_n) for line in _block(nr, lmul, unroll, nparts, per, cols)]
    dispatch = ["            switch (nr) {"]
    for nr in widths(con.unroll_n):
        dispatch.append(f"            case {nr}: tile_{nr}(mr, K, {alpha}, a, b, cc, {ldc}); break;")
    dispatch.append("            }")
    col_loop = ["    for (int64_t j0 = 0, nr = 0; j0 < N; j0 += nr) {", _width("nr", "N - j0", con.unroll_n)]
    row_loop = ["    for (int64_t i0 = 0, mr = 0; i0 < M; i0 += mr) {", _width("mr", "M - i0", con.unroll_m)]
    outer, inner = (row_loop, col_loop) if rows_outer else (col_loop, row_loop)
    body = [
        f"{task.signature.strip().rstrip(';')}",
        "{",
        f"    const int64_t M = (int64_t){bm}, N = (int64_t){bn}, K = (int64_t){bk};",
        "    if (M <= 0 || N <= 0 || K <= 0)",
        "        return;",
        *outer,
        *("    " + line for line in inner),
        f"            const float *a = {ba} + i0 * K, *b = {bb} + j0 * K;",
        f"            float *cc = {c} + i0 + j0 * (int64_t){ldc};",
        *dispatch,
        "        }",
        "    }",
        "}",
        "",
    ]
    return "\n".join([HEADER, *blocks, *body])


@register
class PackedGemmFamily:
    name = "rvv_gemm_packed"
    priority = 10

    def applies(self, task: KernelTask) -> bool:
        return contract(task) is not None

    def knobs(self, task: KernelTask, target: TargetProfile) -> list[Knob]:
        con = contract(task)
        un = con.unroll_n if con else 8
        lmul = (row_lmul(target, con.unroll_m) if con else None) or 1
        return [
            Knob(name="lmul", values=[1, 2, 4, 8], technique=Technique.VECTOR_LENGTH, default=lmul),
            Knob(name="cols", values=sorted({max(1, un // 2), un}), technique=Technique.REGISTER_BLOCKING, default=un),
            # defaults: the best of the knobs' extremes on the modeled X60 at the bench size (docs/TASKS.md)
            Knob(name="unroll", values=[1, 2, 4], technique=Technique.UNROLL, default=4),
            Knob(name="rows_outer", values=[0, 1], technique=Technique.MEMORY_ACCESS, default=1),
        ]

    def valid(self, task: KernelTask, target: TargetProfile, knobs: dict[str, KnobValue]) -> bool:
        con = contract(task)
        if con is None or target.vlen < 32:
            return False
        lmul, cols, unroll = int(knobs["lmul"]), int(knobs["cols"]), int(knobs["unroll"])
        return registers(target, con, lmul, cols, unroll) <= VECTOR_REGISTERS

    def render(self, task: KernelTask, target: TargetProfile, knobs: dict[str, KnobValue]) -> Variant:
        kn = self.knobs(task, target)
        values = knob_values(kn, knobs)
        con = contract(task)
        if con is None:
            raise ValueError(f"{task.name}: not a packed GEMM micro-kernel this family implements")
        lmul, cols = int(values["lmul"]), int(values["cols"])
        code = source(task, target, con, lmul, cols, int(values["unroll"]), bool(values["rows_outer"]))
        n = parts(target, con.unroll_m, lmul)
        what = (
            f"RVV packed GEMM micro-kernel {con.unroll_m}x{con.unroll_n} (a column's rows in {n} m{lmul} "
            f"vector{'s' if n > 1 else ''}, {cols} columns a pass)"
        )
        return variant(self.name, kn, values, code, what)
