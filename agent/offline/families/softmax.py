"""Row-wise softmax and log-softmax of a rows x cols row-major matrix.

Applies to `void f(int rows, int cols, const float *x, float *y)` tasks (rows*cols elements in and out)
whose reference exponentiates x minus the row max: softmax when it divides by the sum, log-softmax when
it takes logf of the sum. Passes per row: max (vector max accumulated with tail-undisturbed ops, one
reduction), exp and sum, then the output pass. Knobs:
- lmul (vector_length), unroll (independent exp chains and sum accumulators in the exp pass),
- exp_degree (approximation; softmax doubles exp's relative error at most, so the budget is rtol/4),
- fusion: softmax "store" keeps exp(x - max) in y and scales it, "recompute" does not store and
  recomputes exp in the scale pass; "online" (both) fuses max and sum in one pass with per-lane
  rescaling by exp(m_old - m_new), trading one memory pass for a second exp,
- reduction: "once" accumulates vectors and reduces once per row, "per_chunk" reduces every chunk.
"""

from __future__ import annotations

from agent.offline.base import Knob, KnobValue, Variant, register
from agent.offline.families import rvv_math as rm
from evaluator.targets import TargetProfile
from evaluator.tasks import KernelTask
from knowledge.taxonomy import Technique


def row_matrix_f32(task: KernelTask) -> tuple[str, str, str, str] | None:
    """(rows, cols, x, y) when the task is `void f(int rows, int cols, const float *x, float *y)`."""
    ps = task.params
    if task.return_type != "void" or len(ps) != 4:
        return None
    r, c, x, y = ps
    if r.role != "size" or c.role != "size":
        return None
    if not rm.is_f32_pointer(x, const=True) or not rm.is_f32_pointer(y, const=False):
        return None
    return (
        (r.name, c.name, x.name, y.name) if rm.all_counts_equal(task, [x.name, y.name], f"{r.name}*{c.name}") else None
    )


def softmax_kind(task: KernelTask) -> str | None:
    """'softmax' or 'log_softmax' from the reference (exp of x minus a max, then divide or log)."""
    if row_matrix_f32(task) is None:
        return None
    ref = rm.squash(task.reference_code)
    has_max = any(p in ref for p in (">mx", "fmaxf(", ">max", "<mx", "<max"))
    if "expf(" not in ref or not has_max:
        return None
    if "logf(" in ref:
        return "log_softmax"
    if "/sum" in ref or "1.0f/sum" in ref or "*=inv" in ref:
        return "softmax"
    return None


@register
class SoftmaxFamily:
    name = "softmax"

    def applies(self, task: KernelTask) -> bool:
        return softmax_kind(task) is not None

    def knobs(self, task: KernelTask, target: TargetProfile) -> list[Knob]:
        kind = softmax_kind(task)
        fusions = ["store", "recompute", "online"] if kind == "softmax" else ["three_pass", "online"]
        return [
            rm.knob("lmul", [1, 2, 4, 8], Technique.VECTOR_LENGTH, 2),
            rm.knob("unroll", [1, 2, 4], Technique.UNROLL, 2, also=(Technique.MULTI_ACCUMULATOR,)),
            rm.knob("exp_degree", rm.exp_degrees(max(task.tolerance.rtol, 1e-7), 2.0), Technique.APPROXIMATION, 4),
            rm.knob("fusion", fusions, Technique.FUSION, fusions[0]),
            rm.knob("reduction", ["once", "per_chunk"], Technique.REDUCTION, "once"),
        ]

    def render(self, task: KernelTask, target: TargetProfile, knobs: dict[str, KnobValue]) -> Variant:
        kind, names = softmax_kind(task), row_matrix_f32(task)
        if kind is None or names is None:
            raise rm.InvalidInput(f"task {task.name!r} is not a row softmax this family implements")
        spec = self.knobs(task, target)
        k = rm.resolve_knobs(self.name, spec, knobs)
        src = rm.CSource(headers=("riscv_vector.h", "math.h", "stddef.h", "stdint.h"))
        kernel = _Kernel(task, names, kind, k, src).code()
        desc = f"{kind}: LMUL m{k['lmul']}, unroll {k['unroll']}, fusion {k['fusion']}, reduction {k['reduction']}"
        code = src.render(kernel, f"{task.name}: {desc} (offline generator, family softmax).")
        return rm.make_variant(
            self.name, spec, k, code, desc, (Technique.VECTORIZE, Technique.APPROXIMATION, Technique.REDUCTION)
        )


class _Kernel:
    """C text of one softmax variant."""

    def __init__(
        self, task: KernelTask, names: tuple[str, str, str, str], kind: str, k: dict[str, KnobValue], src: rm.CSource
    ) -> None:
        self.task, self.names, self.kind, self.src = task, names, kind, src
        self.lmul, self.unroll = int(k["lmul"]), int(k["unroll"])
        self.fusion, self.once = str(k["fusion"]), k["reduction"] == "once"
        self.s, self.t = rm.suffix("f", 32, self.lmul), rm.vtype("f", 32, self.lmul)
        # softmax's masked positions must come out exactly 0: the full-range exp; log-softmax only sums
        # its terms (x - max, never NaN for its inputs), where one clamped to FLT_MIN is as good as 0
        tails = "ieee" if self.kind == "softmax" else "clamped"
        self.exp = rm.exp_f32(src, self.lmul, int(k["exp_degree"]), tails=tails)

    def code(self) -> str:
        rows, cols, x, y = self.names
        head = [
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
        body = self._online() if self.fusion == "online" else [*self._max_pass(), *self._exp_pass()]
        return "\n".join([*head, *body, *self._out_pass(), "    }", "}"])

    # --------------------------------------------------------------------------------- passes

    def _reduce(self, op: str, vec: str, init: str, vl: str = "vm") -> str:
        s = self.s
        return (
            f"__riscv_vfmv_f_s_f32m1_f32(__riscv_vf{op}_vs_{s}_f32m1({vec}, __riscv_vfmv_s_f_f32m1({init}, 1), {vl}))"
        )

    def _chunk_loop(self, inner: list[str], var: str = "i") -> list[str]:
        return [
            f"        for (size_t {var} = 0; {var} < nc;) {{",
            f"            size_t vl = __riscv_vsetvl_e32m{self.lmul}(nc - {var});",
            *inner,
            f"            {var} += vl;",
            "        }",
        ]

    def _max_pass(self) -> list[str]:
        s, t = self.s, self.t
        if not self.once:
            return [
                "        float mx = xr[0];",
                *self._chunk_loop(
                    [f"            mx = {self._reduce('redmax', f'__riscv_vle32_v_{s}(xr + i, vl)', 'mx', 'vl')};"]
                ),
            ]
        return [
            # -FLT_MAX, not xr[0]: a row that starts masked (-inf) would make exp(-inf - -inf) = NaN
            f"        {t} vmx = __riscv_vfmv_v_f_{s}({rm.c_float(-rm.FLT_MAX)}, vm);",
            *self._chunk_loop(
                [f"            vmx = __riscv_vfmax_vv_{s}_tu(vmx, vmx, __riscv_vle32_v_{s}(xr + i, vl), vl);"]
            ),
            f"        float mx = {self._reduce('redmax', 'vmx', 'xr[0]')};",
        ]

    def _exp_pass(self) -> list[str]:
        """exp(x - mx) (stored in y for softmax "store") and its sum into `sum`."""
        s, t, u, store = self.s, self.t, self.unroll, self.kind == "softmax" and self.fusion == "store"
        lines = [f"        {t} acc{j} = __riscv_vfmv_v_f_{s}(0.0f, vm);" for j in range(u)] if self.once else []
        lines += ["        float sum = 0.0f;", "        size_t i = 0;"]
        if u > 1:
            lines.append(f"        for (; i + {u} * vm <= nc; i += {u} * vm) {{")
            for j in range(u):
                off = f" + {j} * vm" if j else ""
                arg = f"__riscv_vfsub_vf_{s}(__riscv_vle32_v_{s}(xr + i{off}, vm), mx, vm)"
                lines.append(f"            {t} e{j} = {self.exp}({arg}, vm);")
            for j in range(u):
                off = f" + {j} * vm" if j else ""
                if store:
                    lines.append(f"            __riscv_vse32_v_{s}(yr + i{off}, e{j}, vm);")
                lines.append(self._accumulate(f"acc{j}", f"e{j}", "vm"))
            lines.append("        }")
        lines += [
            "        while (i < nc) {",
            f"            size_t vl = __riscv_vsetvl_e32m{self.lmul}(nc - i);",
            f"            {t} e = {self.exp}(__riscv_vfsub_vf_{s}(__riscv_vle32_v_{s}(xr + i, vl), mx, vl), vl);",
            *([f"            __riscv_vse32_v_{s}(yr + i, e, vl);"] if store else []),
            self._accumulate("acc0", "e", "vl", tail=True),
            "            i += vl;",
            "        }",
        ]
        if self.once:
            for j in range(1, u):
                lines.append(f"        acc0 = __riscv_vfadd_vv_{s}(acc0, acc{j}, vm);")
            lines.append(f"        sum = {self._reduce('redusum', 'acc0', '0.0f')};")
        return lines

    def _accumulate(self, acc: str, e: str, vl: str, tail: bool = False) -> str:
        s = self.s
        if not self.once:
            return f"            sum = {self._reduce('redusum', e, 'sum', vl)};"
        tu = "_tu" if tail else ""
        args = f"{acc}, {acc}, {e}, {vl}" if tail else f"{acc}, {e}, {vl}"
        return f"            {acc} = __riscv_vfadd_vv_{s}{tu}({args});"

    def _online(self) -> list[str]:
        """Max and sum in one pass: per lane m, s with s = s*exp(m - m') + exp(x - m') (tail-undisturbed)."""
        s, t, exp = self.s, self.t, self.exp
        return [
            # -FLT_MAX, not xr[0]: a row that starts masked (-inf) would make exp(-inf - -inf) = NaN
            f"        {t} vmx = __riscv_vfmv_v_f_{s}({rm.c_float(-rm.FLT_MAX)}, vm);",
            f"        {t} vs = __riscv_vfmv_v_f_{s}(0.0f, vm);",
            *self._chunk_loop(
                [
                    f"            {t} v = __riscv_vle32_v_{s}(xr + i, vl);",
                    f"            {t} mn = __riscv_vfmax_vv_{s}(vmx, v, vl);",
                    f"            {t} a = {exp}(__riscv_vfsub_vv_{s}(vmx, mn, vl), vl);",
                    f"            {t} b = {exp}(__riscv_vfsub_vv_{s}(v, mn, vl), vl);",
                    f"            vs = __riscv_vfmadd_vv_{s}_tu(vs, a, b, vl);",
                    f"            vmx = __riscv_vmv_v_v_{s}_tu(vmx, mn, vl);",
                ]
            ),
            f"        float mx = {self._reduce('redmax', 'vmx', 'xr[0]')};",
            f"        vs = __riscv_vfmul_vv_{s}(vs, {exp}(__riscv_vfsub_vf_{s}(vmx, mx, vm), vm), vm);",
            f"        float sum = {self._reduce('redusum', 'vs', '0.0f')};",
        ]

    def _out_pass(self) -> list[str]:
        s = self.s
        if self.kind == "log_softmax":
            out = f"__riscv_vfsub_vf_{s}({_load(s, 'xr + j')}, shift, vl)"
            return [
                "        float shift = mx + logf(sum);",
                *self._chunk_loop(
                    [f"            __riscv_vse32_v_{s}(yr + j, {out}, vl);"],
                    "j",
                ),
            ]
        if self.fusion == "store":
            val = f"__riscv_vfmul_vf_{s}(__riscv_vle32_v_{s}(yr + j, vl), inv, vl)"
        else:
            arg = f"__riscv_vfsub_vf_{s}({_load(s, 'xr + j')}, mx, vl)"
            val = f"__riscv_vfmul_vf_{s}({self.exp}({arg}, vl), inv, vl)"
        return [
            "        float inv = 1.0f / sum;",
            *self._chunk_loop([f"            __riscv_vse32_v_{s}(yr + j, {val}, vl);"], "j"),
        ]


def _load(s: str, ptr: str, vl: str = "vl") -> str:
    return f"__riscv_vle32_v_{s}({ptr}, {vl})"
