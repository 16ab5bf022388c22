"""Normalizations: layer norm and RMS norm over rows, inference batch norm over NCHW channel planes.

Detected by signature and reference: layernorm `(rows, cols, x, gamma, beta, y)` with gamma/beta of
`cols` elements and a mean subtracted before sqrtf; rmsnorm `(rows, cols, x, gamma, y)` with sqrtf of
a mean of squares; batchnorm `(n, c, hw, x, mean, var, gamma, beta, y)` with per-channel tables. The
epsilon is read from the reference (`eps = ...`). Row statistics are vector accumulators (tail lanes
kept with tail-undisturbed ops) reduced once per row; 1/sqrt is one scalar sqrtf and division per row.
Knobs: lmul (vector_length), accumulators (multi_accumulator: independent sum chains, each a full
VLMAX chunk), variance (fusion, layernorm: "two_pass" centred sum of squares as the reference, or
"one_pass" sums of x - x[0] and of its square together: one read of the row fewer, and the shift keeps
E[d^2] - E[d]^2 accurate when the mean is large), unroll (batchnorm: chunks per iteration).
"""

from __future__ import annotations

import re

from agent.offline.base import Knob, KnobValue, Variant, register
from agent.offline.families import rvv_math as rm
from evaluator.targets import TargetProfile
from evaluator.tasks import KernelTask, Param
from knowledge.taxonomy import Technique


def _epsilon(task: KernelTask) -> float | None:
    m = re.search(r"\beps\s*=\s*([0-9.]+(?:[eE][-+]?[0-9]+)?)f?\s*;", task.reference_code)
    return float(m.group(1)) if m else None


def _shape(task: KernelTask) -> tuple[list[Param], list[Param], Param] | None:
    """(size params, const float inputs, the float output) when that is the whole signature."""
    ps = task.params
    sizes = [p for p in ps if p.role == "size"]
    ins = [p for p in ps if p.role == "buffer" and rm.is_f32_pointer(p, const=True)]
    outs = [p for p in ps if p.role == "buffer" and rm.is_f32_pointer(p, const=False)]
    if task.return_type != "void" or len(outs) != 1 or len(sizes) + len(ins) + 1 != len(ps):
        return None
    if ps[: len(sizes)] != sizes:
        return None
    return sizes, ins, outs[0]


def norm_kind(task: KernelTask) -> str | None:
    """'layernorm', 'rmsnorm' or 'batchnorm', read from the signature and the reference."""
    shape, eps = _shape(task), _epsilon(task)
    if shape is None or eps is None:
        return None
    sizes, ins, out = shape
    ref = rm.squash(task.reference_code)
    if "sqrtf(" not in ref:
        return None
    s = [p.name for p in sizes]
    if len(s) == 2 and len(ins) in (2, 3):
        rows_cols = f"{s[0]}*{s[1]}"
        if not rm.all_counts_equal(task, [ins[0].name, out.name], rows_cols):
            return None
        if not rm.all_counts_equal(task, [p.name for p in ins[1:]], s[1]):
            return None
        if len(ins) == 3 and "mean" in ref:
            return "layernorm"
        if len(ins) == 2 and "mean" not in ref:
            return "rmsnorm"
    if len(s) == 3 and len(ins) == 5:
        if not rm.all_counts_equal(task, [ins[0].name, out.name], f"{s[0]}*{s[1]}*{s[2]}"):
            return None
        return "batchnorm" if rm.all_counts_equal(task, [p.name for p in ins[1:]], s[1]) else None
    return None


@register
class NormFamily:
    name = "norm"

    def applies(self, task: KernelTask) -> bool:
        return norm_kind(task) is not None

    def knobs(self, task: KernelTask, target: TargetProfile) -> list[Knob]:
        kind = norm_kind(task)
        out = [rm.knob("lmul", [1, 2, 4, 8], Technique.VECTOR_LENGTH, 4)]
        if kind == "batchnorm":
            out.append(rm.knob("unroll", [1, 2, 4], Technique.UNROLL, 2))
        else:
            out.append(rm.knob("accumulators", [1, 2, 4], Technique.MULTI_ACCUMULATOR, 1, also=(Technique.UNROLL,)))
        if kind == "layernorm":
            out.append(rm.knob("variance", ["one_pass", "two_pass"], Technique.FUSION, "one_pass"))
        return out

    def render(self, task: KernelTask, target: TargetProfile, knobs: dict[str, KnobValue]) -> Variant:
        kind, shape, eps = norm_kind(task), _shape(task), _epsilon(task)
        if kind is None or shape is None or eps is None:
            raise rm.InvalidInput(f"task {task.name!r} is not a normalization this family implements")
        spec = self.knobs(task, target)
        k = rm.resolve_knobs(self.name, spec, knobs)
        lmul = int(k["lmul"])
        sizes, ins, out = shape
        names = [p.name for p in sizes] + [p.name for p in ins] + [out.name]
        if kind == "batchnorm":
            kernel = _batchnorm(task, names, lmul, int(k["unroll"]), eps)
        else:
            kernel = _RowNorm(task, kind, names, lmul, int(k["accumulators"]), str(k.get("variance")), eps).code()
        src = rm.CSource(headers=("riscv_vector.h", "math.h", "stddef.h", "stdint.h"))
        desc = f"{kind}: " + ", ".join(f"{a} {b}" for a, b in k.items())
        code = src.render(kernel, f"{task.name}: {desc} (offline generator, family norm).")
        return rm.make_variant(self.name, spec, k, code, desc, (Technique.VECTORIZE, Technique.FUSION))


class _RowNorm:
    """layernorm / rmsnorm: statistics with `acc` vector accumulators, then one fused output pass."""

    def __init__(
        self, task: KernelTask, kind: str, names: list[str], lmul: int, acc: int, variance: str, eps: float
    ) -> None:
        self.task, self.kind, self.names, self.acc = task, kind, names, acc
        self.lmul, self.one_pass, self.eps = lmul, variance == "one_pass", eps
        self.s, self.t = rm.suffix("f", 32, lmul), rm.vtype("f", 32, lmul)

    def code(self) -> str:
        rows, cols, x = self.names[:3]
        y = self.names[-1]
        lines = [
            self.task.signature,
            "{",
            f"    const size_t vm = __riscv_vsetvlmax_e32m{self.lmul}();",
            f"    const size_t nc = {cols} > 0 ? (size_t){cols} : 0;",
            "    if (nc == 0)",
            "        return;",
            f"    for (int r = 0; r < {rows}; r++) {{",
            f"        const float *xr = {x} + (size_t)r * nc;",
            f"        float *yr = {y} + (size_t)r * nc;",
        ]
        if self.kind == "rmsnorm":
            lines += self._accumulate([("q", "sq")])
            lines.append(f"        float inv = 1.0f / sqrtf(q / (float)nc + {rm.c_float(self.eps)});")
        elif self.one_pass:
            # Shifted data: sums of d = x - x[0] keep E[d^2] - E[d]^2 free of cancellation for large means.
            lines += ["        const float shift = xr[0];"]
            lines += self._accumulate([("sum", "csum"), ("q", "csq")], centre="shift")
            lines += [
                "        float dm = sum / (float)nc;",
                "        float mean = shift + dm;",
                "        float var = q / (float)nc - dm * dm;",
                "        var = var > 0.0f ? var : 0.0f;",
                f"        float inv = 1.0f / sqrtf(var + {rm.c_float(self.eps)});",
            ]
        else:
            lines += self._accumulate([("sum", "sum")])
            lines.append("        float mean = sum / (float)nc;")
            lines += self._accumulate([("q", "csq")], centre="mean")
            lines.append(f"        float inv = 1.0f / sqrtf(q / (float)nc + {rm.c_float(self.eps)});")
        lines += self._output()
        return "\n".join([*lines, "    }", "}"])

    def _accumulate(self, accs: list[tuple[str, str]], centre: str = "") -> list[str]:
        """Each (name, op) in `accs` becomes `float name` = the row sum of op: "sum" (x), "sq" (x*x),
        "csum" (x - centre), "csq" ((x - centre)^2). `self.acc` independent vector chains per statistic,
        one reduction each."""
        s, t, a = self.s, self.t, self.acc
        i = f"i{accs[0][0]}"  # one index per statistic: the passes share the row's scope
        lines = [f"        {t} {n}{j} = __riscv_vfmv_v_f_{s}(0.0f, vm);" for n, _ in accs for j in range(a)]
        lines += [f"        size_t {i} = 0;", f"        for (; {i} + {a} * vm <= nc; {i} += {a} * vm) {{"]
        for j in range(a):
            off = f" + {j} * vm" if j else ""
            lines.append(f"            {t} v{j} = __riscv_vle32_v_{s}(xr + {i}{off}, vm);")
            if centre:
                lines.append(f"            {t} d{j} = __riscv_vfsub_vf_{s}(v{j}, {centre}, vm);")
            lines += [
                f"            {n}{j} = {_acc_op(s, op, f'{n}{j}', f'v{j}', f'd{j}', 'vm', False)};" for n, op in accs
            ]
        lines += [
            "        }",
            f"        for (size_t vl; {i} < nc; {i} += vl) {{",
            f"            vl = __riscv_vsetvl_e32m{self.lmul}(nc - {i});",
            f"            {t} v = __riscv_vle32_v_{s}(xr + {i}, vl);",
        ]
        if centre:
            lines.append(f"            {t} d = __riscv_vfsub_vf_{s}(v, {centre}, vl);")
        lines += [f"            {n}0 = {_acc_op(s, op, f'{n}0', 'v', 'd', 'vl', True)};" for n, op in accs]
        lines.append("        }")
        for n, _ in accs:
            lines += [f"        {n}0 = __riscv_vfadd_vv_{s}({n}0, {n}{j}, vm);" for j in range(1, a)]
            lines.append(
                f"        float {n} = __riscv_vfmv_f_s_f32m1_f32(__riscv_vfredusum_vs_{s}_f32m1({n}0, "
                "__riscv_vfmv_s_f_f32m1(0.0f, 1), vm));"
            )
        return lines

    def _output(self) -> list[str]:
        s, t = self.s, self.t
        xv, gv = f"__riscv_vle32_v_{s}(xr + j, vl)", f"__riscv_vle32_v_{s}({self.names[3]} + j, vl)"
        lines = [
            "        for (size_t j = 0, vl; j < nc; j += vl) {",
            f"            vl = __riscv_vsetvl_e32m{self.lmul}(nc - j);",
        ]
        if self.kind == "rmsnorm":
            lines.append(f"            {t} v = __riscv_vfmul_vf_{s}({xv}, inv, vl);")
            lines.append(f"            __riscv_vse32_v_{s}(yr + j, __riscv_vfmul_vv_{s}(v, {gv}, vl), vl);")
        else:
            bv = f"__riscv_vle32_v_{s}({self.names[4]} + j, vl)"
            lines.append(f"            {t} v = __riscv_vfmul_vf_{s}(__riscv_vfsub_vf_{s}({xv}, mean, vl), inv, vl);")
            lines.append(f"            __riscv_vse32_v_{s}(yr + j, __riscv_vfmadd_vv_{s}(v, {gv}, {bv}, vl), vl);")
        return [*lines, "        }"]


def _batchnorm(task: KernelTask, names: list[str], lmul: int, unroll: int, eps: float) -> str:
    """Per (batch, channel) plane: scale = gamma/sqrt(var + eps), shift = beta - mean*scale, y = x*scale + shift."""
    n, c, hw, x, mean, var, gamma, beta, y = names
    s, t = rm.suffix("f", 32, lmul), rm.vtype("f", 32, lmul)
    lines = [
        task.signature,
        "{",
        f"    const size_t vm = __riscv_vsetvlmax_e32m{lmul}();",
        f"    const size_t plane = {hw} > 0 ? (size_t){hw} : 0;",
        f"    for (int b = 0; b < {n}; b++) {{",
        f"        for (int ch = 0; ch < {c}; ch++) {{",
        f"            const float sc = {gamma}[ch] / sqrtf({var}[ch] + {rm.c_float(eps)});",
        f"            const float sh = {beta}[ch] - {mean}[ch] * sc;",
        f"            const size_t base = ((size_t)b * (size_t){c} + (size_t)ch) * plane;",
        f"            const float *xp = {x} + base;",
        f"            float *yp = {y} + base;",
        f"            const {t} vsh = __riscv_vfmv_v_f_{s}(sh, vm);",
        "            size_t i = 0;",
    ]
    if unroll > 1:
        lines.append(f"            for (; i + {unroll} * vm <= plane; i += {unroll} * vm) {{")
        for j in range(unroll):
            off = f" + {j} * vm" if j else ""
            lines.append(f"                {t} v{j} = __riscv_vle32_v_{s}(xp + i{off}, vm);")
        for j in range(unroll):
            off = f" + {j} * vm" if j else ""
            lines.append(
                f"                __riscv_vse32_v_{s}(yp + i{off}, __riscv_vfmadd_vf_{s}(v{j}, sc, vsh, vm), vm);"
            )
        lines.append("            }")
    lines += [
        "            for (size_t vl; i < plane; i += vl) {",
        f"                vl = __riscv_vsetvl_e32m{lmul}(plane - i);",
        f"                {t} v = __riscv_vle32_v_{s}(xp + i, vl);",
        f"                __riscv_vse32_v_{s}(yp + i, __riscv_vfmadd_vf_{s}(v, sc, vsh, vl), vl);",
        "            }",
        "        }",
        "    }",
        "}",
    ]
    return "\n".join(lines)


def _acc_op(s: str, op: str, acc: str, v: str, d: str, vl: str, tail: bool) -> str:
    """acc (+)= op, tail-undisturbed when `tail` (lanes past vl keep their partial sums)."""
    tu = "_tu" if tail else ""
    if op in ("sum", "csum"):
        v = v if op == "sum" else d
        return f"__riscv_vfadd_vv_{s}{tu}({acc + ', ' if tail else ''}{acc}, {v}, {vl})"
    w = v if op == "sq" else d
    return f"__riscv_vfmacc_vv_{s}{tu}({acc}, {w}, {w}, {vl})"
