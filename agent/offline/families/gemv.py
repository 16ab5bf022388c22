"""Matrix-vector products y = alpha*op(A)*x + beta*y over f32, for either storage order of A.

The task's layout is read from its spec, not its name: A is stored as `lines` contiguous runs of
`line` elements (column-major A: lines are columns of length m; row-major: rows of length n, as the
reference's index arithmetic shows), and the element counts of x and y at a size where m != n say
which way the product runs:
- "axpy" form (x indexes lines, e.g. column-major y = A*x): y[chunk] += x[j] * line_j[chunk], vectors
  along the line, `rows` register blocks of VLMAX outputs per pass, `accumulators` partial sums per
  block (alternate lines), lines unrolled by `unroll`;
- "dot" form (x runs along lines, e.g. column-major y = A^T*x): each output is a dot product of a line
  with x; `cols` lines share every loaded chunk of x, one vector accumulator each, one reduction each
  at the end.
alpha/beta follow BLAS: with beta == 0 the old y is not read (it may hold NaN).
"""

from __future__ import annotations

from dataclasses import dataclass

from agent.offline.base import Knob, KnobValue, Variant, register
from agent.offline.families._blas import (
    HEADER,
    LMULS,
    f32,
    knob_values,
    pointers,
    scalars,
    sizes,
    strides,
    variant,
    vf32,
)
from evaluator.targets import TargetProfile
from evaluator.tasks import KernelTask
from knowledge.taxonomy import Operator, Technique


@dataclass(frozen=True)
class GemvLayout:
    form: str  # axpy | dot
    a: str
    x: str
    y: str
    line: str  # C expression: elements per contiguous line of A (also the stride between lines)
    lines: str  # C expression: number of lines
    alpha: str | None
    beta: str | None


def layout(task: KernelTask) -> GemvLayout | None:
    """The gemv shape of the task, or None when it is not one."""
    if task.return_type != "void" or len(sizes(task)) != 2:
        return None
    ptrs = pointers(task)
    if len(ptrs) != 3 or any(p.ctype != "float" for p in ptrs) or any(p.ctype != "float" for p in scalars(task)):
        return None
    ins = [p for p in ptrs if p.const]
    outs = [p for p in ptrs if not p.const]
    if len(ins) != 2 or len(outs) != 1:
        return None
    m, n = (p.name for p in sizes(task))
    probe = next((i for i, s in enumerate(task.sizes) if s[m] != s[n] and s[m] > 1 and s[n] > 1), None)
    if probe is None:
        return None
    size, counts = task.sizes[probe], task.counts[probe]
    a = next((p.name for p in ins if counts[p.name] == size[m] * size[n]), None)
    x = next((p.name for p in ins if p.name != a), None)
    y = outs[0].name
    if a is None or x is None:
        return None
    stride = strides(task, a)
    if stride == {m}:  # a[i + j*m]: lines of m elements, n of them
        line, lines = m, n
    elif stride == {n}:  # a[i*n + j]: lines of n elements, m of them
        line, lines = n, m
    else:
        return None
    if counts[x] == size[lines] and counts[y] == size[line]:
        form = "axpy"
    elif counts[x] == size[line] and counts[y] == size[lines]:
        form = "dot"
    else:
        return None
    alpha, beta = _alpha_beta(task)
    if beta is not None and task.args[y].kind != "inout":
        return None
    return GemvLayout(form, a, x, y, line, lines, alpha, beta)


def _alpha_beta(task: KernelTask) -> tuple[str | None, str | None]:
    names = [p.name for p in scalars(task)]
    if not names:
        return None, None
    alpha = next((s for s in names if s.lower() == "alpha"), names[0])
    rest = [s for s in names if s != alpha]
    return alpha, (rest[0] if rest else None)


def epilogue(vec: str, y_at: str, lay: GemvLayout, lmul: int, vl: str, indent: str) -> list[str]:
    """Store alpha*vec + beta*y (BLAS semantics: y not read when beta == 0)."""
    s = f32(lmul)
    scaled = f"__riscv_vfmul_vf_{s}({vec}, {lay.alpha}, {vl})" if lay.alpha else vec
    if lay.beta is None:
        return [f"{indent}__riscv_vse32_v_{s}({y_at}, {scaled}, {vl});"]
    return [
        f"{indent}if ({lay.beta} == 0.0f)",
        f"{indent}    __riscv_vse32_v_{s}({y_at}, {scaled}, {vl});",
        f"{indent}else",
        f"{indent}    __riscv_vse32_v_{s}({y_at}, __riscv_vfmacc_vf_{s}({scaled}, {lay.beta}, "
        f"__riscv_vle32_v_{s}({y_at}, {vl}), {vl}), {vl});",
    ]


def scalar_epilogue(value: str, y_at: str, lay: GemvLayout, indent: str) -> list[str]:
    scaled = f"{lay.alpha} * {value}" if lay.alpha else value
    if lay.beta is None:
        return [f"{indent}{y_at} = {scaled};"]
    return [f"{indent}{y_at} = ({lay.beta} == 0.0f) ? {scaled} : {scaled} + {lay.beta} * {y_at};"]


# ------------------------------------------------------------------------------------ axpy form


def render_axpy(task: KernelTask, lay: GemvLayout, lmul: int, rows: int, accs: int, unroll: int) -> str:
    s, t = f32(lmul), vf32(lmul)
    a, x = lay.a, lay.x
    out = [HEADER, f"{task.signature.strip().rstrip(';')}\n{{",
           f"    if ({lay.line} <= 0)", "        return;",
           f"    const size_t L = (size_t){lay.line};",
           f"    const size_t NL = {lay.lines} > 0 ? (size_t){lay.lines} : 0;",
           f"    const size_t vlmax = __riscv_vsetvlmax_e32m{lmul}();",
           "    size_t i = 0;"]  # fmt: skip
    out += [f"    for (; i + {rows} * vlmax <= L; i += {rows} * vlmax) {{"]
    out += _axpy_block(s, t, a, x, lay, rows, accs, unroll, "vlmax", "        ")
    out += ["    }", "    while (i < L) {", f"        const size_t vl = __riscv_vsetvl_e32m{lmul}(L - i);"]
    out += _axpy_block(s, t, a, x, lay, 1, accs, 1, "vl", "        ")
    out += ["        i += vl;", "    }", "}", ""]
    return "\n".join(out)


def _axpy_block(
    s: str, t: str, a: str, x: str, lay: GemvLayout, rows: int, accs: int, unroll: int, vl: str, ind: str
) -> list[str]:
    """Outputs i .. i + rows*vl: sum over lines j of x[j] * A-line j, then the epilogue."""
    acc = [[f"acc{r}_{k}" for k in range(accs)] for r in range(rows)]
    out = [f"{ind}{t} {name} = __riscv_vfmv_v_f_{s}(0.0f, {vl});" for row in acc for name in row]
    out += [f"{ind}const float *col = {a} + i;", f"{ind}size_t j = 0;"]
    per_trip = accs * unroll
    out.append(f"{ind}for (; j + {per_trip} <= NL; j += {per_trip}) {{")
    for u in range(per_trip):
        k = u % accs
        j = "j" if u == 0 else f"j + {u}"
        out.append(f"{ind}    const float x{u} = {x}[{j}];")
        for r in range(rows):
            off = f"({j}) * L" + (f" + {r} * vlmax" if r else "")
            out.append(
                f"{ind}    {acc[r][k]} = __riscv_vfmacc_vf_{s}({acc[r][k]}, x{u}, "
                f"__riscv_vle32_v_{s}(col + {off}, {vl}), {vl});"
            )
    out += [f"{ind}}}", f"{ind}for (; j < NL; j++) {{"]
    for r in range(rows):
        off = "j * L" + (f" + {r} * vlmax" if r else "")
        out.append(
            f"{ind}    {acc[r][0]} = __riscv_vfmacc_vf_{s}({acc[r][0]}, {x}[j], "
            f"__riscv_vle32_v_{s}(col + {off}, {vl}), {vl});"
        )
    out.append(f"{ind}}}")
    for r in range(rows):
        total = acc[r][0]
        for k in range(1, accs):
            out.append(f"{ind}{acc[r][0]} = __riscv_vfadd_vv_{s}({acc[r][0]}, {acc[r][k]}, {vl});")
        y_at = f"{lay.y} + i" + (f" + {r} * vlmax" if r else "")
        out += epilogue(total, y_at, lay, int(s[4:]), vl, ind)
    return out


# ------------------------------------------------------------------------------------- dot form


def render_dot(task: KernelTask, lay: GemvLayout, lmul: int, cols: int, unroll: int) -> str:
    out = [HEADER, f"{task.signature.strip().rstrip(';')}\n{{",
           f"    if ({lay.lines} <= 0)", "        return;",
           f"    const size_t L = {lay.line} > 0 ? (size_t){lay.line} : 0;",
           f"    const size_t NL = (size_t){lay.lines};",
           f"    const size_t vlmax = __riscv_vsetvlmax_e32m{lmul}();",
           "    const vfloat32m1_t zero = __riscv_vfmv_v_f_f32m1(0.0f, 1);",
           "    size_t j = 0;",
           f"    for (; j + {cols} <= NL; j += {cols}) {{"]  # fmt: skip
    out += _dot_block(lay, lmul, cols, unroll, "        ")
    out += ["    }", "    for (; j < NL; j++) {"]
    out += _dot_block(lay, lmul, 1, 1, "        ")
    out += ["    }", "}", ""]
    return "\n".join(out)


def _dot_block(lay: GemvLayout, lmul: int, cols: int, unroll: int, ind: str) -> list[str]:
    s, t = f32(lmul), vf32(lmul)
    out = [f"{ind}const float *line = {lay.a} + j * L;"]
    out += [f"{ind}{t} acc{c} = __riscv_vfmv_v_f_{s}(0.0f, vlmax);" for c in range(cols)]
    out += [f"{ind}size_t i = 0;", f"{ind}for (; i + {unroll} * vlmax <= L; i += {unroll} * vlmax) {{"]
    for u in range(unroll):
        off = "i" if u == 0 else f"i + {u} * vlmax"
        out.append(f"{ind}    const {t} xv{u} = __riscv_vle32_v_{s}({lay.x} + {off}, vlmax);")
        for c in range(cols):
            col = f"line + {c} * L + {off}" if c else f"line + {off}"
            out.append(
                f"{ind}    acc{c} = __riscv_vfmacc_vv_{s}(acc{c}, __riscv_vle32_v_{s}({col}, vlmax), xv{u}, vlmax);"
            )
    out += [f"{ind}}}", f"{ind}while (i < L) {{", f"{ind}    const size_t vl = __riscv_vsetvl_e32m{lmul}(L - i);",
            f"{ind}    const {t} xv = __riscv_vle32_v_{s}({lay.x} + i, vl);"]  # fmt: skip
    for c in range(cols):
        col = f"line + {c} * L + i" if c else "line + i"
        out.append(f"{ind}    acc{c} = __riscv_vfmacc_vv_{s}_tu(acc{c}, __riscv_vle32_v_{s}({col}, vl), xv, vl);")
    out += [f"{ind}    i += vl;", f"{ind}}}"]
    for c in range(cols):
        value = f"__riscv_vfmv_f_s_f32m1_f32(__riscv_vfredusum_vs_{s}_f32m1(acc{c}, zero, vlmax))"
        out.append(f"{ind}const float dot{c} = {value};")
        out += scalar_epilogue(f"dot{c}", f"{lay.y}[j + {c}]" if c else f"{lay.y}[j]", lay, ind)
    return out


# ----------------------------------------------------------------------------------------- family


@register
class GemvFamily:
    name = "rvv_gemv"
    priority = 10

    def applies(self, task: KernelTask) -> bool:
        return task.operator in (Operator.GEMV, Operator.OTHER) and layout(task) is not None

    def knobs(self, task: KernelTask, target: TargetProfile) -> list[Knob]:
        lay = layout(task)
        if lay is not None and lay.form == "dot":
            return [
                # m2 x 8 lines: the best of a sweep on the modeled X60 (cheaper m2 reductions, x reused 8x)
                Knob(name="lmul", values=LMULS, technique=Technique.VECTOR_LENGTH, default=2),
                Knob(name="cols", values=[1, 2, 4, 8], technique=Technique.REGISTER_BLOCKING, default=8,
                     also=[Technique.MULTI_ACCUMULATOR]),
                Knob(name="unroll", values=[1, 2], technique=Technique.UNROLL, default=1),
            ]  # fmt: skip
        return [
            Knob(name="lmul", values=LMULS, technique=Technique.VECTOR_LENGTH, default=4),
            Knob(name="rows", values=[1, 2, 4], technique=Technique.REGISTER_BLOCKING, default=2),
            Knob(name="accumulators", values=[1, 2], technique=Technique.MULTI_ACCUMULATOR, default=1),
            Knob(name="unroll", values=[1, 2, 4], technique=Technique.UNROLL, default=1),
        ]

    def valid(self, task: KernelTask, target: TargetProfile, knobs: dict[str, KnobValue]) -> bool:
        lmul = int(knobs["lmul"])
        if "cols" in knobs:  # accumulators + the x chunk + one line chunk
            return (int(knobs["cols"]) + 2) * lmul * min(int(knobs["unroll"]), 2) <= 32 + lmul
        return (int(knobs["rows"]) * (int(knobs["accumulators"]) + 1)) * lmul <= 32

    def render(self, task: KernelTask, target: TargetProfile, knobs: dict[str, KnobValue]) -> Variant:
        kn = self.knobs(task, target)
        values = knob_values(kn, knobs)
        lay = layout(task)
        if lay is None:
            raise ValueError(f"{task.name}: not a gemv this family implements")
        lmul = int(values["lmul"])
        if lay.form == "dot":
            code = render_dot(task, lay, lmul, int(values["cols"]), int(values["unroll"]))
        else:
            code = render_axpy(task, lay, lmul, int(values["rows"]), int(values["accumulators"]),
                               int(values["unroll"]))  # fmt: skip
        return variant(self.name, kn, values, code, f"RVV gemv ({lay.form} form)")
