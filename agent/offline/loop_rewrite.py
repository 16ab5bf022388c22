"""An RVV intrinsics rewrite of a new task's hot loop, for the shapes agent.offline.loop_shapes reads.

The offline generator offers this family for a task no operator family claims, so a new kind of task is
not limited to pragmas and flags. Each shape becomes the loop a competent engineer writes by hand:
- map and stencil: strip-mined with vsetvl (the tail is the last, shorter strip: no scalar tail), every
  load at its offset (`x + i + k` for a stencil tap), the taps' loop kept as written;
- reduction: `accumulators` vector accumulators at VLMAX in the main loop, the remainder strip-mined
  tail-undisturbed into the first, one reduction after the loop (or, with `reduce` = "inloop", one per
  strip into an m1 register, as ggml's q8_0 dot does);
- widening (int8/int16 products summed into int32): vwmul into 16 bits then vwadd.wv into the 32-bit
  accumulators (`widen` = "wadd"), or sign-extension then vwmacc ("wmacc"); int16 goes straight to vwmacc.

LMUL is a knob bounded by the register budget (`valid`). Float sums are reordered only where the task's
tolerance admits it (the competent baseline's rule: rtol >= 1e-4); a float product and sum are fused
only where the tolerance is not exact. Anything else is no rewrite, with the reason in `why_not`.
"""

from __future__ import annotations

import re

from agent.offline.base import Knob, KnobValue, Variant
from agent.offline.families._blas import HEADER, applied_techniques
from agent.offline.generic import add_restrict
from agent.offline.loop_shapes import LoopShape, Node, NoShape, classify, scalar_text
from evaluator.targets import TargetProfile
from evaluator.tasks import KernelTask
from knowledge.taxonomy import Technique

REORDER_MIN_RTOL = 1e-4  # evaluator.toolchain.competent_cflags' threshold for reassociated float sums
VECTOR_REGISTERS = 32
SEW = {"f32": 32, "i32": 32, "i16": 16, "i8": 8, "u8": 8}


_SHAPES: dict[tuple[str, str, str, float, float], LoopShape | str] = {}


def _shape(task: KernelTask) -> LoopShape | str:
    """The task's loop shape, or why it has none (read once per reference, signature and tolerance)."""
    key = (task.function_name, task.signature, task.reference_code, task.tolerance.rtol, task.tolerance.atol)
    if key not in _SHAPES:
        _SHAPES[key] = _classify(task)
    return _SHAPES[key]


def _classify(task: KernelTask) -> LoopShape | str:
    try:
        shape = classify(task)
    except NoShape as e:
        return str(e)
    reorders_floats = shape.kind == "reduction" and shape.ctype == "float" and shape.op == "add"
    if reorders_floats and task.tolerance.rtol < REORDER_MIN_RTOL:
        return f"a float sum reordered needs rtol >= {REORDER_MIN_RTOL} (task: {task.tolerance.rtol})"
    if shape.ctype == "uint8_t" and shape.kind != "map":
        return "uint8 accumulation is not rewritten"
    try:
        _Emitter(task, shape, 1, 1, "after", "wadd").source()  # every construct of the shape is translatable
    except NoShape as e:
        return str(e)
    return shape


def why_not(task: KernelTask) -> str | None:
    """Why the task's loop gets no rewrite (None when it does)."""
    found = _shape(task)
    return found if isinstance(found, str) else None


class LoopRewriteFamily:
    """RVV intrinsics for the task's own loop, by shape (offered when no operator family applies)."""

    name = "rvv_loop"

    def applies(self, task: KernelTask) -> bool:
        return not isinstance(_shape(task), str)

    def knobs(self, task: KernelTask, target: TargetProfile) -> list[Knob]:
        shape = _shape(task)
        assert isinstance(shape, LoopShape)
        lmuls = _lmuls(shape)
        knobs = [
            Knob(name="lmul", values=lmuls, technique=Technique.VECTOR_LENGTH, default=lmuls[min(2, len(lmuls) - 1)])
        ]
        if shape.kind in ("reduction", "widening"):
            knobs += [
                # One accumulator waits on the previous strip's add (vfadd latency 5 on the X60): two hide it.
                Knob(name="accumulators", values=[1, 2, 4], technique=Technique.MULTI_ACCUMULATOR, default=2),
                Knob(name="reduce_at", values=["after", "inloop"], technique=Technique.REDUCTION, default="after"),
            ]
        if shape.kind == "widening" and shape.wide_type == "int8_t":
            knobs.append(Knob(name="widen", values=["wadd", "wmacc"], technique=Technique.WIDENING, default="wadd"))
        return knobs

    def valid(self, task: KernelTask, target: TargetProfile, knobs: dict[str, KnobValue]) -> bool:
        shape = _shape(task)
        assert isinstance(shape, LoopShape)
        lmul, acc = int(knobs["lmul"]), int(knobs.get("accumulators", 1))
        if shape.kind == "widening":  # accumulators at 4x (int8) or 2x (int16) the loads' LMUL
            grow = 4 if shape.wide_type == "int8_t" else 2
            return lmul * grow <= 8 and (acc * grow + 2 + grow // 2) * lmul <= VECTOR_REGISTERS
        if knobs.get("widen") == "wmacc" and knobs.get("reduce_at") == "inloop":
            return False  # an in-loop widening sum has no 32-bit accumulator to vwmacc into: same code as wadd
        live = len(shape.loads) + (acc if shape.kind == "reduction" else 1) + 1
        return live * lmul <= VECTOR_REGISTERS

    def render(self, task: KernelTask, target: TargetProfile, knobs: dict[str, KnobValue]) -> Variant:
        shape = _shape(task)
        if isinstance(shape, str):
            raise ValueError(f"{task.name}: no RVV rewrite ({shape})")
        kn = self.knobs(task, target)
        values = {k.name: knobs.get(k.name, k.default) for k in kn}
        values = {k.name: values[k.name] if values[k.name] in k.values else k.default for k in kn}
        code = _Emitter(task, shape, int(values["lmul"]), int(values.get("accumulators", 1)),
                        str(values.get("reduce_at", "after")), str(values.get("widen", "wadd"))).source()  # fmt: skip
        what = f"RVV rewrite of the {shape.kind} loop"
        return Variant(
            family=self.name,
            knobs=values,
            code=code,
            techniques=applied_techniques(kn, values),
            description=f"{what}: " + ", ".join(f"{k}={v}" for k, v in values.items()),
        )


def _lmuls(shape: LoopShape) -> list[int]:
    if shape.kind == "widening":
        return [1, 2] if shape.wide_type == "int8_t" else [1, 2, 4]
    return [1, 2, 4, 8]


# ---------------------------------------------------------------------------------------------- code


class _Emitter:
    def __init__(self, task: KernelTask, shape: LoopShape, lmul: int, acc: int, reduce: str, widen: str) -> None:
        self.task, self.s, self.lmul, self.acc, self.reduce, self.widen = task, shape, lmul, acc, reduce, widen
        self.et = _elem(shape.ctype)
        self.fuse = task.tolerance.rtol > 0 or task.tolerance.atol > 0  # exact tasks: round as the reference

    # names ------------------------------------------------------------------------------------------
    def sfx(self, et: str | None = None, lmul: int | None = None) -> str:
        return f"{et or self.et}m{lmul or self.lmul}"

    def vtype(self, et: str | None = None, lmul: int | None = None) -> str:
        et = et or self.et
        base = {"f": "vfloat", "i": "vint", "u": "vuint"}[et[0]]
        return f"{base}{et[1:]}m{lmul or self.lmul}_t"

    def setvl(self, n: str, lmul: int | None = None) -> str:
        return f"__riscv_vsetvl_e{SEW[self.et]}m{lmul or self.lmul}({n})"

    def vlmax(self, lmul: int | None = None) -> str:
        return f"__riscv_vsetvlmax_e{SEW[self.et]}m{lmul or self.lmul}()"

    # expressions ------------------------------------------------------------------------------------
    def vec(self, node: Node, i: str, vl: str) -> str:
        """C text of a vector value of `node` at strip start `i` (scalars are splatted only when alone)."""
        if not node.vector:
            return f"{self.splat()}({self.scalar(node)}, {vl})"
        if node.kind == "load":
            off = scalar_text(node.args[0])
            at = f"{node.text} + {i}" if off == "0" else f"{node.text} + {i} + ({off})"
            return f"__riscv_vle{SEW[self.et]}_v_{self.sfx()}({at}, {vl})"
        if node.kind == "scalar":
            raise NoShape(f"the loop index {node.text} is used as a value")
        if node.kind == "cast":
            if _elem(node.text) != self.et:
                raise NoShape(f"a cast to {node.text} in a {self.s.ctype} loop")
            return self.vec(node.args[0], i, vl)
        if node.kind == "neg":
            return f"__riscv_v{'f' if self.is_float else ''}neg_v_{self.sfx()}({self.vec(node.args[0], i, vl)}, {vl})"
        if node.kind == "call":
            return self.call(node, i, vl)
        return self.binary(node, i, vl)

    def splat(self, lmul: int | None = None) -> str:
        return f"__riscv_v{'f' if self.is_float else ''}mv_v_{'f' if self.is_float else 'x'}_{self.sfx(lmul=lmul)}"

    @property
    def is_float(self) -> bool:
        return self.et == "f32"

    def scalar(self, node: Node) -> str:
        text = scalar_text(node)
        return f"({self.s.ctype})({text})" if node.kind != "num" else text

    def op(self, name: str) -> str:
        unsigned = self.et[0] == "u"
        ints = {"+": "add", "-": "sub", "*": "mul", "max": "maxu" if unsigned else "max",
                "min": "minu" if unsigned else "min"}  # fmt: skip
        if self.is_float:
            return {"+": "fadd", "-": "fsub", "*": "fmul", "/": "fdiv", "max": "fmax", "min": "fmin"}[name]
        if name not in ints:
            raise NoShape(f"integer `{name}` is not rewritten (division by zero and rounding differ)")
        return ints[name]

    def binary(self, node: Node, i: str, vl: str) -> str:
        a, b = node.args
        name = node.text
        fused = self.fma(node, i, vl)
        if fused:
            return fused
        return self.apply(name, a, b, i, vl)

    def apply(self, name: str, a: Node, b: Node, i: str, vl: str) -> str:
        if a.vector and b.vector:
            return f"__riscv_v{self.op(name)}_vv_{self.sfx()}({self.vec(a, i, vl)}, {self.vec(b, i, vl)}, {vl})"
        v, s = (a, b) if a.vector else (b, a)
        form = "vf" if self.is_float else "vx"
        if name in ("-", "/") and not a.vector:  # scalar - vector, scalar / vector: the reversed forms
            name = {"-": "rsub", "/": "rdiv"}[name]
            op = ("f" if self.is_float else "") + name
        else:
            op = self.op(name)
        return f"__riscv_v{op}_{form}_{self.sfx()}({self.vec(v, i, vl)}, {self.scalar(s)}, {vl})"

    def fma(self, node: Node, i: str, vl: str) -> str | None:
        """`c + a*b` as one multiply-accumulate where the tolerance allows (ints: always exact)."""
        if node.text != "+" or not (self.fuse or not self.is_float):
            return None
        for add, mul in (node.args, node.args[::-1]):
            if mul.kind == "bin" and mul.text == "*" and mul.vector and add.vector:
                return self.macc(self.vec(add, i, vl), mul, i, vl)
        return None

    def macc(self, acc: str, mul: Node, i: str, vl: str, tu: str = "") -> str:
        a, b = mul.args
        name = "fmacc" if self.is_float else "macc"
        if a.vector and b.vector:
            return f"__riscv_v{name}_vv_{self.sfx()}{tu}({acc}, {self.vec(a, i, vl)}, {self.vec(b, i, vl)}, {vl})"
        v, s = (a, b) if a.vector else (b, a)
        form = "vf" if self.is_float else "vx"
        return f"__riscv_v{name}_{form}_{self.sfx()}{tu}({acc}, {self.scalar(s)}, {self.vec(v, i, vl)}, {vl})"

    def call(self, node: Node, i: str, vl: str) -> str:
        if node.text == "abs":
            if not self.is_float:
                raise NoShape("integer abs is not rewritten")
            return f"__riscv_vfabs_v_{self.sfx()}({self.vec(node.args[0], i, vl)}, {vl})"
        return self.apply(node.text, node.args[0], node.args[1], i, vl)

    # kernels ----------------------------------------------------------------------------------------
    def source(self) -> str:
        body = {"map": self.map, "stencil": self.stencil, "reduction": self.reduction, "widening": self.widening}
        note = f"/* EoK offline: RVV rewrite of the reference's {self.s.kind} loop, LMUL {self.lmul}. */\n"
        code = f"{HEADER}{note}{self.task.signature} {{\n{body[self.s.kind]()}}}\n"
        # restrict: the task's buffers never overlap (the harness maps each apart), so the taps of a stencil
        # stay in registers across strips instead of being reloaded after every store
        return add_restrict(code, self.task.function_name)

    def loop_head(self) -> str:
        s = self.s
        return (
            f"  for (size_t {s.index} = {s.start}, vl; {s.index} < (size_t)({s.bound}); {s.index} += vl) {{\n"
            f"    vl = {self.setvl(f'(size_t)({s.bound}) - {s.index}')};\n"
        )

    def guard(self) -> str:
        s = self.s  # the reference's loop may start at or past its bound; size_t arithmetic must not wrap
        return f"  if ((long)({s.start}) >= (long)({s.bound})) {self.empty()}\n"

    def empty(self) -> str:
        return "return;" if self.s.kind in ("map", "stencil") else self.finish(self.s.init)

    def map(self) -> str:
        s = self.s
        value = self.vec(s.expr, s.index, "vl")
        store = f"    __riscv_vse{SEW[self.et]}_v_{self.sfx()}({s.out} + {s.index}, {value}, vl);\n"
        return self.guard() + self.loop_head() + store + "  }\n"

    def stencil(self) -> str:
        s = self.s
        start, first = self.vec(Node("scalar", s.init), s.index, "vl"), "0"
        step = self.tap_step(f"{s.acc}v", s.expr)
        if step.startswith("__riscv_vf") and "macc" in step and _is_zero(s.init) and self.fuse:
            # the first tap's product is the sum so far: no zero splat
            start, first = self.vec(_substitute(s.expr, s.tap, "0"), s.index, "vl"), "1"
        return (
            self.guard()
            + self.loop_head()
            + f"    {self.vtype()} {s.acc}v = {start};\n"
            + f"    for (int {s.tap} = {first}; {s.tap} < {s.taps}; {s.tap}++) {s.acc}v = {step};\n"
            + self.store(f"{s.acc}v")
        )

    def tap_step(self, acc: str, term: Node) -> str:
        if term.kind == "bin" and term.text == "*" and (self.fuse or not self.is_float):
            return self.macc(acc, term, self.s.index, "vl")
        return f"__riscv_v{self.op('+')}_vv_{self.sfx()}({acc}, {self.vec(term, self.s.index, 'vl')}, vl)"

    def store(self, value: str) -> str:
        s = self.s
        return f"    __riscv_vse{SEW[self.et]}_v_{self.sfx()}({s.out} + {s.index}, {value}, vl);\n  }}\n"

    def finish(self, value: str) -> str:
        s = self.s
        return f"return {value};" if s.finish == "return" else f"{{ *{s.finish} = {value}; return; }}"

    def identity(self) -> str:
        if self.s.op != "add":
            return self.s.init  # max/min: the first value is its own identity
        return "0.0f" if self.is_float else "0"

    def strips(self, step, tail_step) -> list[str]:
        """The main loop (`accumulators` strips of VLMAX per trip) and the strip-mined tail."""
        s = self.s
        n, i, k = f"(size_t)({s.bound})", s.index, self.acc
        out = [f"  size_t {i} = {s.start};\n  for (; {i} + {k} * vlmax <= {n}; {i} += {k} * vlmax) {{\n"]
        out += [f"    {step(j, f'{i} + {j} * vlmax' if j else i)}\n" for j in range(k)]
        out.append(f"  }}\n  for (size_t vl; {i} < {n}; {i} += vl) {{\n    vl = {self.setvl(f'{n} - {i}')};\n")
        out.append(f"    {tail_step(i)}\n  }}\n")
        return out

    def reduction(self) -> str:
        s, t, f = self.s, self.vtype(), "f" if self.is_float else ""
        red_op = {"add": "redusum" if self.is_float else "redsum", "max": "redmax", "min": "redmin"}[s.op]
        if s.op != "add" and self.et[0] == "u":
            red_op += "u"
        red = f"__riscv_v{f}{red_op}_vs_{self.sfx()}_{self.sfx(lmul=1)}"
        splat1 = f"__riscv_v{f}mv_v_{'f' if self.is_float else 'x'}_{self.sfx(lmul=1)}({self.identity()}, 1)"
        out = [self.guard(), f"  const size_t vlmax = {self.vlmax()};\n", f"  {self.vtype(lmul=1)} r = {splat1};\n"]
        if self.reduce == "inloop":  # one reduction per strip into r: the scalar loop's shape, kept in vectors
            out += self.strips(lambda j, at: f"r = {red}({self.vec(s.expr, at, 'vlmax')}, r, vlmax);",
                               lambda at: f"r = {red}({self.vec(s.expr, at, 'vl')}, r, vl);")  # fmt: skip
        else:
            ident = self.vec(Node("scalar", self.identity()), s.index, "vlmax")
            out += [f"  {t} a{j} = {ident};\n" for j in range(self.acc)]
            out += self.strips(lambda j, at: self.update(f"a{j}", at, "vlmax", ""),
                               lambda at: self.update("a0", at, "vl", "_tu"))  # fmt: skip
            combine = self.op("+" if s.op == "add" else s.op)
            out += [f"  a0 = __riscv_v{combine}_vv_{self.sfx()}(a0, a{j}, vlmax);\n" for j in range(1, self.acc)]
            out.append(f"  r = {red}(a0, r, vlmax);\n")
        get = f"__riscv_v{f}mv_{'f' if self.is_float else 'x'}_s_{self.sfx(lmul=1)}_{self.et}(r)"
        out.append(f"  {self.finish(f'({s.init}) + {get}' if s.op == 'add' else get)}\n")
        return "".join(out)

    def update(self, a: str, at: str, vl: str, tu: str) -> str:
        """One strip of the reduction into accumulator `a` (tail-undisturbed in the tail)."""
        s = self.s
        if s.op == "add" and s.expr.kind == "bin" and s.expr.text == "*" and s.expr.vector:
            return f"{a} = {self.macc(a, s.expr, at, vl, tu)};"
        combine = self.op("+" if s.op == "add" else s.op)
        masked = f"{a}, " if tu else ""
        return f"{a} = __riscv_v{combine}_vv_{self.sfx()}{tu}({masked}{a}, {self.vec(s.expr, at, vl)}, {vl});"

    def widening(self) -> str:
        s = self.s
        self.et = _elem(s.wide_type)  # loads are of the narrow type: int8 or int16
        wl = self.lmul * (4 if self.et == "i8" else 2)
        out = [
            self.guard(),
            f"  const size_t vlmax = {self.vlmax()};\n",
            "  vint32m1_t r = __riscv_vmv_v_x_i32m1(0, 1);\n",
        ]
        if self.reduce == "inloop":
            out += self.strips(lambda j, at: self.wide_step("", at, "vlmax", "", wl),
                               lambda at: self.wide_step("", at, "vl", "", wl))  # fmt: skip
        else:
            out += [f"  vint32m{wl}_t a{j} = __riscv_vmv_v_x_i32m{wl}(0, vlmax);\n" for j in range(self.acc)]
            out += self.strips(lambda j, at: self.wide_step(f"a{j}", at, "vlmax", "", wl),
                               lambda at: self.wide_step("a0", at, "vl", "_tu", wl))  # fmt: skip
            out += [f"  a0 = __riscv_vadd_vv_i32m{wl}(a0, a{j}, vlmax);\n" for j in range(1, self.acc)]
            out.append(f"  r = __riscv_vredsum_vs_i32m{wl}_i32m1(a0, r, vlmax);\n")
        out.append(f"  {self.finish(f'({s.init}) + __riscv_vmv_x_s_i32m1_i32(r)')}\n")
        return "".join(out)

    def wide_step(self, a: str, at: str, vl: str, tu: str, wl: int) -> str:
        """`a += widen(x*y)` for one strip; with reduce = "inloop" (`a` empty) the strip is summed into `r`."""
        x, y = self.s.expr.args
        vx, vy = self.vec(x, at, vl), self.vec(y, at, vl)
        if self.et == "i16":
            if not a:
                return f"r = __riscv_vredsum_vs_i32m{wl}_i32m1(__riscv_vwmul_vv_i32m{wl}({vx}, {vy}, {vl}), r, {vl});"
            return f"{a} = __riscv_vwmacc_vv_i32m{wl}{tu}({a}, {vx}, {vy}, {vl});"
        half = wl // 2
        prod = f"__riscv_vwmul_vv_i16m{half}({vx}, {vy}, {vl})"
        if not a:  # ggml's q8_0 dot: products to 16 bits, one widening sum per strip
            return f"r = __riscv_vwredsum_vs_i16m{half}_i32m1({prod}, r, {vl});"
        if self.widen == "wmacc":
            ex = f"__riscv_vsext_vf2_i16m{half}"
            return f"{a} = __riscv_vwmacc_vv_i32m{wl}{tu}({a}, {ex}({vx}, {vl}), {ex}({vy}, {vl}), {vl});"
        masked = f"{a}, " if tu else ""
        return f"{a} = __riscv_vwadd_wv_i32m{wl}{tu}({masked}{a}, {prod}, {vl});"


def _is_zero(text: str) -> bool:
    return text.strip("()").rstrip("fF") in ("0", "0.0", "0.")


def _substitute(node: Node, var: str, value: str) -> Node:
    """`node` with the scalar variable `var` replaced by the constant `value` (a tap's index)."""
    if node.kind == "scalar":
        return Node("scalar", re.sub(rf"\b{re.escape(var)}\b", value, node.text), (), node.vector)
    return Node(node.kind, node.text, tuple(_substitute(a, var, value) for a in node.args), node.vector)


def _elem(ctype: str) -> str:
    return {"float": "f32", "int": "i32", "int32_t": "i32", "int16_t": "i16", "int8_t": "i8", "uint8_t": "u8"}[ctype]
