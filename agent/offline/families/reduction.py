"""Reductions of one or two f32 vectors to a scalar: dot, sum of squares (+ sqrt), sum, sum of |x|, max, min.

Applies to any task shaped `float f(int n, const float *x[, const float *y])` whose reference loop is
one of those operations (read from the reference, not from the task's name). The kernel keeps
`accumulators` independent vector accumulators of LMUL `lmul`, each fed `unroll` chunks per trip of
the main loop at VLMAX (no vsetvl in the loop), then a strip-mined tail that accumulates
tail-undisturbed into the first accumulator, so no element is read twice and none out of bounds.

X60 facts behind the knobs (reference/riscv-k1-k3.md 3.2): vfmacc latency 5 at one per cycle, so one
m1 accumulator is latency bound; vfredusum costs 15-57 cycles, so `reduce` = "tree" (combine
accumulators with vector ops, reduce once) and "fold" (halve LMUL down to m1 first) beat "inloop"
(a reduction per chunk, the naive translation of the scalar loop).

nrm2 accumulates the squares in f64 (vfwmacc into LMUL 2*lmul accumulators), as BLAS snrm2 must not
overflow or underflow: a float's square always fits a double (1.2e77 at most, 2e-90 at least), so no
scaling pass is needed; the task's inputs reach 1e30 and denormals (docs/TASKS.md, "Special values").
"""

from __future__ import annotations

import re

from agent.offline.base import Knob, KnobValue, Variant, register
from agent.offline.families._blas import (
    HEADER,
    LMULS,
    f32,
    is_f32_pointer,
    knob_values,
    pointers,
    scalars,
    sizes,
    strip_comments,
    variant,
    vf32,
)
from evaluator.targets import TargetProfile
from evaluator.tasks import KernelTask
from knowledge.taxonomy import Operator, Technique

# op -> (init value, vector step, tail-undisturbed vector step, scalar combine, final vector reduction)
OPS = ("dot", "nrm2", "sumsq", "sum", "asum", "max", "min")


def classify(task: KernelTask) -> str | None:
    """Which reduction the task computes, or None if it is not a plain 1-D reduction."""
    if task.return_type != "float" or len(sizes(task)) != 1 or scalars(task):
        return None
    ins = pointers(task)
    if not 1 <= len(ins) <= 2 or not all(is_f32_pointer(p) and p.const for p in ins):
        return None
    code = strip_comments(task.reference_code)
    if len(re.findall(r"\bfor\b|\bwhile\b", code)) != 1:
        return None
    if len(ins) == 2:
        return "dot" if "*" in _loop_body(code) else None
    body = _loop_body(code)
    if re.search(r"\bfmaxf?\b", body) or _select(body, ">"):
        return "max"
    if re.search(r"\bfminf?\b", body) or _select(body, "<"):
        return "min"
    if "+=" not in body and not re.search(r"(\w+)\s*=\s*\1\s*\+", body):
        return None
    if re.search(r"\bfabsf?\b", body):
        return "asum"
    if "*" in body:
        return "nrm2" if re.search(r"\bsqrtf?\b", code) else "sumsq"
    return "sum"


def _loop_body(code: str) -> str:
    m = re.search(r"\bfor\s*\(", code)
    return code[m.start() :] if m else ""


def _select(body: str, op: str) -> bool:
    """`a OP b ? a : b` (op '>' is a max, '<' a min), or the mirrored `b OP a ? b : a`."""
    pat = rf"([\w\[\]]+)\s*{re.escape(op)}=?\s*([\w\[\]]+)\s*\?\s*([\w\[\]]+)\s*:\s*([\w\[\]]+)"
    return any((a, b) == (c, d) for a, b, c, d in re.findall(pat, body))


@register
class ReductionFamily:
    name = "rvv_reduction"
    priority = 10

    def applies(self, task: KernelTask) -> bool:
        op = classify(task)
        if op is None:
            return False
        # The operator, when specific, must agree with what the reference computes.
        expected = {Operator.DOT: {"dot"}, Operator.NRM2: {"nrm2"}}.get(task.operator)
        return expected is None or op in expected

    def knobs(self, task: KernelTask, target: TargetProfile) -> list[Knob]:
        return [
            Knob(name="lmul", values=LMULS, technique=Technique.VECTOR_LENGTH, default=4),
            # |x| then add is a two-op chain per chunk: more accumulators hide it (measured: 8.5x -> 10.4x)
            Knob(
                name="accumulators",
                values=[1, 2, 4, 8],
                technique=Technique.MULTI_ACCUMULATOR,
                default=4 if classify(task) == "asum" else 2,
            ),
            Knob(name="unroll", values=[1, 2, 4], technique=Technique.UNROLL, default=1),
            Knob(name="reduce", values=["tree", "fold", "inloop"], technique=Technique.REDUCTION, default="tree"),
        ]

    def valid(self, task: KernelTask, target: TargetProfile, knobs: dict[str, KnobValue]) -> bool:
        lmul, acc = int(knobs["lmul"]), int(knobs["accumulators"])
        op = classify(task)
        inputs = len(pointers(task)) if op == "dot" else 1
        if op == "nrm2":  # f64 accumulators take twice the registers, and LMUL 16 does not exist
            return lmul <= 4 and (2 * acc + inputs) * lmul <= 32
        # the accumulators plus one chunk's loads must fit the 32 vector registers, or it spills
        return (acc + inputs) * lmul <= 32

    def render(self, task: KernelTask, target: TargetProfile, knobs: dict[str, KnobValue]) -> Variant:
        kn = self.knobs(task, target)
        values = knob_values(kn, knobs)
        op = classify(task)
        if op is None:
            raise ValueError(f"{task.name}: not a reduction this family implements")
        code = _Kernel(task, op, int(values["lmul"]), int(values["accumulators"]), int(values["unroll"]),
                       str(values["reduce"])).source()  # fmt: skip
        return variant(self.name, kn, values, code, f"RVV {op} reduction")


class _Kernel:
    def __init__(self, task: KernelTask, op: str, lmul: int, acc: int, unroll: int, reduce: str) -> None:
        self.task, self.op, self.lmul, self.acc, self.unroll, self.reduce = task, op, lmul, acc, unroll, reduce
        self.n = sizes(task)[0].name
        self.ins = [p.name for p in pointers(task)]
        self.s = f32(lmul)
        self.t = vf32(lmul)
        # the accumulators: f32 at the loads' LMUL, or f64 at twice it for nrm2 (widening FMA)
        self.ew, self.alm = (64, 2 * lmul) if op == "nrm2" else (32, lmul)
        self.as_ = f"f{self.ew}m{self.alm}"
        self.at = f"vfloat{self.ew}m{self.alm}_t"

    # --- the operation, per op
    @property
    def init(self) -> str:
        return {"max": "-INFINITY", "min": "INFINITY", "nrm2": "0.0"}.get(self.op, "0.0f")

    def _term(self, loads: list[str], vl: str) -> str:
        """The vector each chunk contributes, for ops that add (used by inloop and asum)."""
        if self.op == "asum":
            return f"__riscv_vfabs_v_{self.s}({loads[0]}, {vl})"
        if self.op == "dot":
            return f"__riscv_vfmul_vv_{self.s}({loads[0]}, {loads[1]}, {vl})"
        if self.op == "nrm2":
            return f"__riscv_vfwmul_vv_{self.as_}({loads[0]}, {loads[0]}, {vl})"
        if self.op == "sumsq":
            return f"__riscv_vfmul_vv_{self.s}({loads[0]}, {loads[0]}, {vl})"
        return loads[0]

    def step(self, acc: str, loads: list[str], vl: str, tail: bool) -> str:
        """acc updated with one chunk (tail: tail-undisturbed, so lanes past vl keep their value)."""
        tu = "_tu" if tail else ""
        a, b = loads[0], loads[-1]
        if self.op == "nrm2":
            return f"__riscv_vfwmacc_vv_{self.as_}{tu}({acc}, {a}, {a}, {vl})"
        if self.op in ("dot", "sumsq"):
            other = b if self.op == "dot" else a
            return f"__riscv_vfmacc_vv_{self.s}{tu}({acc}, {a}, {other}, {vl})"
        fn = {"max": "vfmax", "min": "vfmin"}.get(self.op, "vfadd")
        term = self._term(loads, vl)
        first = f"{acc}, " if tail else ""
        return f"__riscv_{fn}_vv_{self.s}{tu}({first}{acc}, {term}, {vl})"

    def combine(self, a: str, b: str) -> str:
        fn = {"max": "vfmax", "min": "vfmin"}.get(self.op, "vfadd")
        return f"__riscv_{fn}_vv_{self.as_}({a}, {b}, vlmax)"

    @property
    def redfn(self) -> str:
        return {"max": "vfredmax", "min": "vfredmin"}.get(self.op, "vfredusum")

    def finish(self, value: str) -> str:
        return f"(float)sqrt({value})" if self.op == "nrm2" else value

    # --- code
    def source(self) -> str:
        sig = self.task.signature.strip().rstrip(";")
        body = self._inloop() if self.reduce == "inloop" else self._vector_acc()
        empty = self.finish(self.init) if self.op not in ("max", "min") else self.init
        lines = [HEADER, f"{sig}\n{{", f"    if ({self.n} <= 0)", f"        return {empty};",
                 f"    const size_t len = (size_t){self.n};", *body, "}", ""]  # fmt: skip
        return "\n".join(lines)

    def _loads(self, offset: str, vl: str, tag: str) -> tuple[list[str], list[str]]:
        names, decls = [], []
        for p in self.ins if self.op == "dot" else self.ins[:1]:
            name = f"{p}{tag}"
            decls.append(f"{self.t} {name} = __riscv_vle32_v_{self.s}({p} + {offset}, {vl});")
            names.append(name)
        return names, decls

    def _main_loop(self, update: callable) -> list[str]:  # type: ignore[valid-type]
        chunks = self.acc * self.unroll
        out = [f"    const size_t step = {chunks} * vlmax;", "    size_t i = 0;",
               "    for (; i + step <= len; i += step) {"]  # fmt: skip
        for u in range(self.unroll):
            for a in range(self.acc):
                c = u * self.acc + a
                offset = "i" if c == 0 else f"i + {c} * vlmax"
                names, decls = self._loads(offset, "vlmax", f"_{c}")
                out += [f"        {d}" for d in decls]
                out.append(f"        {update(a, names)}")
        out.append("    }")
        return out

    def _tail_loop(self, update: callable) -> list[str]:  # type: ignore[valid-type]
        names, decls = self._loads("i", "vl", "_t")
        return [
            "    while (i < len) {",
            f"        const size_t vl = __riscv_vsetvl_e32m{self.lmul}(len - i);",
            *[f"        {d}" for d in decls],
            f"        {update(names)}",
            "        i += vl;",
            "    }",
        ]

    def _vector_acc(self) -> list[str]:
        out = [f"    const size_t vlmax = __riscv_vsetvlmax_e32m{self.lmul}();"]
        out += [f"    {self.at} acc{a} = __riscv_vfmv_v_f_{self.as_}({self.init}, vlmax);" for a in range(self.acc)]
        out += self._main_loop(lambda a, names: f"acc{a} = {self.step(f'acc{a}', names, 'vlmax', False)};")
        out += self._tail_loop(lambda names: f"acc0 = {self.step('acc0', names, 'vl', True)};")
        width = self.acc
        while width > 1:  # pairwise tree: log2(accumulators) dependent vector ops
            half = width // 2
            out += [f"    acc{a} = {self.combine(f'acc{a}', f'acc{a + half}')};" for a in range(half)]
            width = half
        lmul, var, e = self.alm, "acc0", self.ew
        if self.reduce == "fold":
            fn = {"max": "vfmax", "min": "vfmin"}.get(self.op, "vfadd")
            while lmul > 1:  # halve the register group: cheaper reductions at smaller LMUL
                half = lmul // 2
                lo = f"__riscv_vget_v_f{e}m{lmul}_f{e}m{half}({var}, 0)"
                hi = f"__riscv_vget_v_f{e}m{lmul}_f{e}m{half}({var}, 1)"
                out.append(
                    f"    vfloat{e}m{half}_t fold{half} = __riscv_{fn}_vv_f{e}m{half}({lo}, {hi}, "
                    f"__riscv_vsetvlmax_e{e}m{half}());"
                )
                var, lmul = f"fold{half}", half
        out += [
            f"    const vfloat{e}m1_t seed = __riscv_vfmv_v_f_f{e}m1({self.init}, 1);",
            f"    const vfloat{e}m1_t red = __riscv_{self.redfn}_vs_f{e}m{lmul}_f{e}m1({var}, seed, "
            f"__riscv_vsetvlmax_e{e}m{lmul}());",
            f"    return {self.finish(f'__riscv_vfmv_f_s_f{e}m1_f{e}(red)')};",
        ]
        return out

    def _inloop(self) -> list[str]:
        """A horizontal reduction of every chunk into a one-lane running value (chained per accumulator)."""
        out = [f"    const size_t vlmax = __riscv_vsetvlmax_e32m{self.lmul}();"]
        e = self.ew
        out += [f"    vfloat{e}m1_t acc{a} = __riscv_vfmv_v_f_f{e}m1({self.init}, 1);" for a in range(self.acc)]
        red = f"__riscv_{self.redfn}_vs_{self.as_}_f{e}m1"
        out += self._main_loop(lambda a, names: f"acc{a} = {red}({self._term(names, 'vlmax')}, acc{a}, vlmax);")
        out += self._tail_loop(lambda names: f"acc0 = {red}({self._term(names, 'vl')}, acc0, vl);")
        fn = {"max": "fmaxf", "min": "fminf"}.get(self.op)
        total = f"__riscv_vfmv_f_s_f{e}m1_f{e}(acc0)"
        for a in range(1, self.acc):
            term = f"__riscv_vfmv_f_s_f{e}m1_f{e}(acc{a})"
            total = f"{fn}({total}, {term})" if fn else f"({total} + {term})"
        out.append(f"    return {self.finish(total)};")
        return out
