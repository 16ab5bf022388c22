"""Elementwise maps over f32 vectors, compiled from the reference's own loop body, and fp16<->fp32.

A task applies when its reference is one loop `for (i = 0; i < n; i++)` whose body only declares
float locals and assigns `p[i] = <expr>` (or `p[i] op= <expr>`), where <expr> uses loads `q[i]`,
float scalar parameters, float constants, + - * /, unary minus, fminf/fmaxf/fabsf/sqrtf and
comparisons inside `?:`. The expression is translated node by node to RVV intrinsics, so saxpy,
sscal, relu, hardswish and any other such map need no hand-written kernel. fp16<->fp32 conversions
(uint16_t bit patterns) use the Zvfh widening/narrowing converts, which clang-22 accepts for
spacemit-x60 and qemu 7.2 executes (checked: subnormals, inf, round-to-nearest-even ties).

Knobs: LMUL (vector_length), chunks per trip of the main loop (unroll), fusing a*b+c into one
vfmacc (fusion; only when the tolerance is not exact) and dividing by a constant as a multiply by its
reciprocal (approximation; only when rtol >= 1e-6: the two differ by about one ulp).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agent.offline.base import Knob, KnobValue, Variant, register
from agent.offline.families._blas import HEADER, LMULS, c_float, f32, knob_values, sizes, strip_comments, variant, vf32
from agent.offline.generic import CParseError, Token, statement_end, tokenize
from evaluator.targets import TargetProfile
from evaluator.tasks import KernelTask
from knowledge.taxonomy import Technique

RECIP_MIN_RTOL = 1e-6
# C spelling -> (canonical name, arity); float and double spellings give the same f32 result here.
_FUNCS = {
    "fminf": ("fmin", 2), "fmin": ("fmin", 2), "fmaxf": ("fmax", 2), "fmax": ("fmax", 2),
    "fabsf": ("fabs", 1), "fabs": ("fabs", 1), "sqrtf": ("sqrt", 1), "sqrt": ("sqrt", 1),
}  # fmt: skip
_CMP = {">": "vmfgt", "<": "vmflt", ">=": "vmfge", "<=": "vmfle", "==": "vmfeq", "!=": "vmfne"}
_BIN = {"+": "vfadd", "-": "vfsub", "*": "vfmul", "/": "vfdiv"}


class Unsupported(ValueError):
    """The reference is not a map this family can translate."""


# ---------------------------------------------------------------------------------------- the AST


@dataclass(frozen=True)
class Node:
    kind: str  # const | scalar | load | bin | neg | call | select
    value: float = 0.0
    name: str = ""  # scalar/pointer name, operator, function or comparison
    args: tuple[Node, ...] = ()


@dataclass
class MapSpec:
    """What the loop computes: stores in order, each a pointer and an expression."""

    stores: list[tuple[str, Node]]
    loads: list[str]


class _Parser:
    def __init__(self, toks: list[Token], env: dict[str, Node], pointers: set[str], scalars: set[str], index: str):
        self.toks, self.i = toks, 0
        self.env, self.pointers, self.scalars, self.index = env, pointers, scalars, index

    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.toks[j].text if j < len(self.toks) else ""

    def take(self, expected: str | None = None) -> str:
        t = self.peek()
        if expected is not None and t != expected:
            raise Unsupported(f"expected {expected!r}, found {t!r}")
        self.i += 1
        return t

    def expr(self) -> Node:
        cond = self.comparison()
        if self.peek() != "?":
            return cond
        self.take("?")
        then = self.expr()
        self.take(":")
        other = self.expr()
        if cond.kind != "cmp":
            raise Unsupported("?: needs a comparison")
        return Node("select", name=cond.name, args=(*cond.args, then, other))

    def comparison(self) -> Node:
        left = self.additive()
        if self.peek() in _CMP:
            op = self.take()
            return Node("cmp", name=op, args=(left, self.additive()))
        return left

    def additive(self) -> Node:
        node = self.mult()
        while self.peek() in ("+", "-"):
            op = self.take()
            node = Node("bin", name=op, args=(node, self.mult()))
        return node

    def mult(self) -> Node:
        node = self.unary()
        while self.peek() in ("*", "/"):
            op = self.take()
            node = Node("bin", name=op, args=(node, self.unary()))
        return node

    def unary(self) -> Node:
        if self.peek() == "-":
            self.take()
            return Node("neg", args=(self.unary(),))
        if self.peek() == "+":
            self.take()
            return self.unary()
        if self.peek() == "(" and self.peek(1) == "float" and self.peek(2) == ")":
            self.i += 3
            return self.unary()
        return self.primary()

    def primary(self) -> Node:
        t = self.take()
        if t == "(":
            node = self.expr()
            self.take(")")
            return node
        if re.fullmatch(r"(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?[fF]?", t):
            return Node("const", value=float(t.rstrip("fF")))
        if t in _FUNCS and self.peek() == "(":
            self.take("(")
            args = [self.expr()]
            while self.peek() == ",":
                self.take(",")
                args.append(self.expr())
            self.take(")")
            name, arity = _FUNCS[t]
            if len(args) != arity:
                raise Unsupported(f"{t} takes {arity} arguments")
            return Node("call", name=name, args=tuple(args))
        if t in self.pointers and self.peek() == "[":
            self.take("[")
            self.take(self.index)
            self.take("]")
            return Node("load", name=t)
        if t in self.env:
            return self.env[t]
        if t in self.scalars:
            return Node("scalar", name=t)
        raise Unsupported(f"cannot translate {t!r}")


def parse_map(task: KernelTask) -> MapSpec:
    """The loop of the task's reference as stores of expressions, or Unsupported."""
    if task.return_type != "void" or len(sizes(task)) != 1:
        raise Unsupported("needs a void function with one size parameter")
    ptrs = [p for p in task.params if p.pointer]
    if not ptrs or any(p.ctype != "float" for p in ptrs):
        raise Unsupported("only float buffers")
    if any(p.ctype != "float" for p in task.params if p.role == "scalar"):
        raise Unsupported("only float scalars")
    toks = tokenize(strip_comments(task.reference_code))
    body = _function_body(toks, task.function_name)
    if sum(t.text in ("for", "while", "do") for t in body) != 1 or body[0].text != "for":
        raise Unsupported("the body must be exactly one for loop")
    index = _check_header(body, sizes(task)[0].name)
    close = _header_close(body)
    last = statement_end(body, close + 1)
    if last != len(body) - 1:
        raise Unsupported("statements after the loop")
    stmts = body[close + 1 : last + 1]
    if stmts[0].text == "{":
        stmts = stmts[1:-1]
    return _statements(stmts, task, index)


def _function_body(toks: list[Token], name: str) -> list[Token]:
    for i in range(len(toks) - 1):
        if toks[i].text == name and toks[i + 1].text == "(":
            depth, j = 0, i + 1
            while j < len(toks):
                depth += {"(": 1, ")": -1}.get(toks[j].text, 0)
                if depth == 0:
                    break
                j += 1
            if j + 1 < len(toks) and toks[j + 1].text == "{":
                end = statement_end(toks, j + 1)
                return toks[j + 2 : end]
    raise Unsupported(f"no definition of {name}")


def _header_close(body: list[Token]) -> int:
    depth = 0
    for j, t in enumerate(body):
        depth += {"(": 1, ")": -1}.get(t.text, 0)
        if t.text == ")" and depth == 0:
            return j
    raise Unsupported("unterminated for header")


def _check_header(body: list[Token], n: str) -> str:
    """`for (int i = 0; i < n; i++)` (or ++i, i += 1): the index variable."""
    text = " ".join(t.text for t in body[: _header_close(body) + 1])
    m = re.fullmatch(
        r"for \( (?:int |size_t |long )?(\w+) = 0 ; (\w+) < (\w+) ; (?:(\w+) \+\+|\+\+ (\w+)|(\w+) \+= 1) \)", text
    )
    if not m or m.group(3) != n or m.group(2) != m.group(1) or (m.group(4) or m.group(5) or m.group(6)) != m.group(1):
        raise Unsupported("the loop must be for (i = 0; i < n; i++)")
    return m.group(1)


def _statements(stmts: list[Token], task: KernelTask, index: str) -> MapSpec:
    pointers = {p.name for p in task.params if p.pointer}
    writable = {p.name for p in task.params if p.pointer and not p.const}
    scalar_names = {p.name for p in task.params if p.role == "scalar"}
    env: dict[str, Node] = {}
    stores: list[tuple[str, Node]] = []
    i = 0
    while i < len(stmts):
        end = next((j for j in range(i, len(stmts)) if stmts[j].text == ";"), None)
        if end is None:
            raise Unsupported("statement without ';'")
        stmt = stmts[i:end]
        while stmt and stmt[0].text == "const":
            stmt = stmt[1:]
        words = [t.text for t in stmt]
        if words[:1] == ["float"] and len(words) > 3 and words[2] == "=":
            env[words[1]] = _parse_expr(stmt[3:], env, pointers, scalar_names, index)
        elif len(words) > 5 and words[0] in writable and words[1:4] == ["[", index, "]"]:
            op = words[4]
            rhs = _parse_expr(stmt[5:], env, pointers, scalar_names, index)
            if op in ("+=", "-=", "*=", "/="):
                rhs = Node("bin", name=op[0], args=(Node("load", name=words[0]), rhs))
            elif op != "=":
                raise Unsupported(f"assignment {op}")
            stores.append((words[0], rhs))
        else:
            raise Unsupported(f"statement {' '.join(words)[:40]!r}")
        i = end + 1
    if not stores:
        raise Unsupported("the loop stores nothing")
    loads: list[str] = []
    stored: list[str] = []
    for ptr, node in stores:
        mine: list[str] = []
        _collect_loads(node, mine)
        if set(mine) & set(stored) or ptr in stored:
            # every chunk loads first and stores last: a later statement may not read an earlier store
            raise Unsupported(f"{ptr} is stored and read back in one iteration")
        stored.append(ptr)
        loads += [m for m in mine if m not in loads]
    return MapSpec(stores=stores, loads=loads)


def _parse_expr(toks: list[Token], env: dict[str, Node], pointers: set[str], scalars: set[str], index: str) -> Node:
    parser = _Parser(toks, env, pointers, scalars, index)
    node = parser.expr()
    if parser.i != len(toks):
        raise Unsupported(f"unparsed {parser.peek()!r}")
    return node


def _collect_loads(node: Node, out: list[str]) -> None:
    if node.kind == "load" and node.name not in out:
        out.append(node.name)
    for a in node.args:
        _collect_loads(a, out)


# --------------------------------------------------------------------------------------- codegen


def _ops(node: Node) -> int:
    """Vector operations the node costs (loads and scalars are free)."""
    own = 1 if node.kind in ("bin", "neg", "call", "select") else 0
    return own + sum(_ops(a) for a in node.args)


def _has_fusable(node: Node) -> bool:
    if node.kind == "bin" and node.name in "+-" and any(a.kind == "bin" and a.name == "*" for a in node.args):
        return True
    return any(_has_fusable(a) for a in node.args)


def _has_const_div(node: Node) -> bool:
    if node.kind == "bin" and node.name == "/" and node.args[1].kind in ("const", "scalar"):
        return True
    return any(_has_const_div(a) for a in node.args)


class _Emitter:
    """Lowers one expression tree to intrinsic calls; returns C expressions for vectors or scalars."""

    def __init__(self, lmul: int, vl: str, loads: dict[str, str], fuse: bool, recip: bool) -> None:
        self.s, self.t, self.vl = f32(lmul), vf32(lmul), vl
        self.loads, self.fuse, self.recip = loads, fuse, recip

    def vec(self, node: Node) -> tuple[bool, str]:
        """(is_vector, C expression)."""
        k = node.kind
        if k == "const":
            return False, c_float(node.value)
        if k == "scalar":
            return False, node.name
        if k == "load":
            return True, self.loads[node.name]
        if k == "neg":
            isv, e = self.vec(node.args[0])
            return (True, f"__riscv_vfneg_v_{self.s}({e}, {self.vl})") if isv else (False, f"(-{e})")
        if k == "call":
            return self._call(node)
        if k == "select":
            return self._select(node)
        if k == "bin":
            return self._bin(node)
        raise Unsupported(k)

    def force(self, node: Node) -> str:
        isv, e = self.vec(node)
        return e if isv else f"__riscv_vfmv_v_f_{self.s}({e}, {self.vl})"

    def _bin(self, node: Node) -> tuple[bool, str]:
        op = node.name
        a, b = node.args
        if self.fuse and op in "+-":
            fused = self._fma(op, a, b)
            if fused:
                return True, fused
        if op == "/" and self.recip and b.kind in ("const", "scalar"):
            inv = c_float(1.0 / b.value) if b.kind == "const" else f"(1.0f / {b.name})"
            return self._bin(Node("bin", name="*", args=(a, Node("scalar", name=inv))))
        av, ae = self.vec(a)
        bv, be = self.vec(b)
        fn = _BIN[op]
        if av and bv:
            return True, f"__riscv_{fn}_vv_{self.s}({ae}, {be}, {self.vl})"
        if av:
            return True, f"__riscv_{fn}_vf_{self.s}({ae}, {be}, {self.vl})"
        if bv:
            if op in "+*":
                return True, f"__riscv_{fn}_vf_{self.s}({be}, {ae}, {self.vl})"
            rfn = "vfrsub" if op == "-" else "vfrdiv"
            return True, f"__riscv_{rfn}_vf_{self.s}({be}, {ae}, {self.vl})"
        return False, f"({ae} {op} {be})"

    def _fma(self, op: str, a: Node, b: Node) -> str | None:
        """a*b + c, c + a*b -> vfmacc; a*b - c -> vfmsac; c - a*b -> vfnmsac (vector operands only)."""
        if a.kind == "bin" and a.name == "*":
            prod, addend, kind = a, b, "vfmacc" if op == "+" else "vfmsac"
        elif b.kind == "bin" and b.name == "*":
            prod, addend, kind = b, a, "vfmacc" if op == "+" else "vfnmsac"
        else:
            return None
        pv, pe = self.vec(prod.args[0])
        qv, qe = self.vec(prod.args[1])
        cv, ce = self.vec(addend)
        if not cv or not (pv or qv):
            return None
        if pv and qv:
            return f"__riscv_{kind}_vv_{self.s}({ce}, {pe}, {qe}, {self.vl})"
        scalar, vector = (pe, qe) if not pv else (qe, pe)
        return f"__riscv_{kind}_vf_{self.s}({ce}, {scalar}, {vector}, {self.vl})"

    def _call(self, node: Node) -> tuple[bool, str]:
        vals = [self.vec(a) for a in node.args]
        name = node.name
        if not any(v for v, _ in vals):
            return False, f"{name}f({', '.join(e for _, e in vals)})"
        if name in ("fmin", "fmax"):
            (av, ae), (bv, be) = vals
            fn = "vfmin" if name == "fmin" else "vfmax"
            if av and bv:
                return True, f"__riscv_{fn}_vv_{self.s}({ae}, {be}, {self.vl})"
            vec_e, sc_e = (ae, be) if av else (be, ae)
            return True, f"__riscv_{fn}_vf_{self.s}({vec_e}, {sc_e}, {self.vl})"
        fn = {"fabs": "vfabs_v", "sqrt": "vfsqrt_v"}[name]
        return True, f"__riscv_{fn}_{self.s}({vals[0][1]}, {self.vl})"

    def _select(self, node: Node) -> tuple[bool, str]:
        a, b, then, other = node.args
        # `a > c ? a : c` with a constant c is fmax (same result for NaN a, and -0 == +0 when compared).
        if b.kind == "const" and (then, other) == (a, b) and node.name in (">", ">="):
            return self._call(Node("call", name="fmax", args=(a, b)))
        if b.kind == "const" and (then, other) == (a, b) and node.name in ("<", "<="):
            return self._call(Node("call", name="fmin", args=(a, b)))
        av, ae = self.vec(a)
        bv, be = self.vec(b)
        if not av and not bv:
            raise Unsupported("scalar condition")
        cmp = _CMP[node.name]
        if av and bv:
            mask = f"__riscv_{cmp}_vv_{self.s}_b{32 // int(self.s[4:])}({ae}, {be}, {self.vl})"
        elif av:
            mask = f"__riscv_{cmp}_vf_{self.s}_b{32 // int(self.s[4:])}({ae}, {be}, {self.vl})"
        else:
            flipped = {">": "vmflt", "<": "vmfgt", ">=": "vmfle", "<=": "vmfge"}.get(node.name, cmp)
            mask = f"__riscv_{flipped}_vf_{self.s}_b{32 // int(self.s[4:])}({be}, {ae}, {self.vl})"
        tv, te = self.vec(then)
        if not tv:
            return True, f"__riscv_vfmerge_vfm_{self.s}({self.force(other)}, {te}, {mask}, {self.vl})"
        return True, f"__riscv_vmerge_vvm_{self.s}({self.force(other)}, {te}, {mask}, {self.vl})"


def render_map(task: KernelTask, spec: MapSpec, lmul: int, unroll: int, fuse: bool, recip: bool) -> str:
    n = sizes(task)[0].name
    sig = task.signature.strip().rstrip(";")
    t, s = vf32(lmul), f32(lmul)

    def chunk(offset: str, vl: str, indent: str) -> list[str]:
        names = {p: f"v_{p}" for p in spec.loads}
        lines = [f"{indent}const {t} v_{p} = __riscv_vle32_v_{s}({p} + {offset}, {vl});" for p in spec.loads]
        em = _Emitter(lmul, vl, names, fuse, recip)
        results = [(ptr, em.force(node)) for ptr, node in spec.stores]
        lines += [f"{indent}const {t} r_{k} = {expr};" for k, (_, expr) in enumerate(results)]
        lines += [f"{indent}__riscv_vse32_v_{s}({ptr} + {offset}, r_{k}, {vl});" for k, (ptr, _) in enumerate(results)]
        return lines

    out = [HEADER, f"{sig}\n{{", f"    const size_t len = {n} > 0 ? (size_t){n} : 0;", "    size_t i = 0;"]
    if unroll > 1:
        out += [f"    const size_t vlmax = __riscv_vsetvlmax_e32m{lmul}();",
                f"    for (; i + {unroll} * vlmax <= len; i += {unroll} * vlmax) {{"]  # fmt: skip
        for u in range(unroll):
            out.append("        {")
            out += chunk("i" if u == 0 else f"i + {u} * vlmax", "vlmax", "            ")
            out.append("        }")
        out.append("    }")
    out += ["    while (i < len) {", f"        const size_t vl = __riscv_vsetvl_e32m{lmul}(len - i);"]
    out += chunk("i", "vl", "        ")
    out += ["        i += vl;", "    }", "}", ""]
    return "\n".join(out)


# ------------------------------------------------------------------------------------ conversions


def conversion(task: KernelTask) -> str | None:
    """'h2f' or 'f2h' for `void f(int n, const uint16_t *x, float *y)` (or the reverse) on fp16 data."""
    if task.return_type != "void" or len(sizes(task)) != 1 or len(task.params) != 3:
        return None
    text = f"{task.dtype} {task.description}".lower()
    if not re.search(r"\bf16\b|fp16|binary16|half", text):
        return None
    src, dst = (p for p in task.params if p.pointer)
    if src.const and src.ctype == "uint16_t" and dst.ctype == "float" and not dst.const:
        return "h2f"
    if src.const and src.ctype == "float" and dst.ctype == "uint16_t" and not dst.const:
        return "f2h"
    return None


def render_conversion(task: KernelTask, kind: str, lmul: int, unroll: int) -> str:
    n = sizes(task)[0].name
    src, dst = (p.name for p in task.params if p.pointer)
    half = {1: "mf2", 2: "m1", 4: "m2", 8: "m4"}[lmul]
    sig = task.signature.strip().rstrip(";")

    def chunk(offset: str, vl: str, indent: str) -> list[str]:
        if kind == "h2f":
            return [
                f"{indent}const vfloat16{half}_t h = __riscv_vreinterpret_v_u16{half}_f16{half}("
                f"__riscv_vle16_v_u16{half}({src} + {offset}, {vl}));",
                f"{indent}__riscv_vse32_v_f32m{lmul}({dst} + {offset}, "
                f"__riscv_vfwcvt_f_f_v_f32m{lmul}(h, {vl}), {vl});",
            ]
        return [
            f"{indent}const vfloat16{half}_t h = __riscv_vfncvt_f_f_w_f16{half}("
            f"__riscv_vle32_v_f32m{lmul}({src} + {offset}, {vl}), {vl});",
            f"{indent}__riscv_vse16_v_u16{half}({dst} + {offset}, "
            f"__riscv_vreinterpret_v_f16{half}_u16{half}(h), {vl});",
        ]

    out = [HEADER, f"{sig}\n{{", f"    const size_t len = {n} > 0 ? (size_t){n} : 0;", "    size_t i = 0;"]
    if unroll > 1:
        out += [f"    const size_t vlmax = __riscv_vsetvlmax_e32m{lmul}();",
                f"    for (; i + {unroll} * vlmax <= len; i += {unroll} * vlmax) {{"]  # fmt: skip
        for u in range(unroll):
            out += ["        {", *chunk("i" if u == 0 else f"i + {u} * vlmax", "vlmax", "            "), "        }"]
        out.append("    }")
    out += ["    while (i < len) {", f"        const size_t vl = __riscv_vsetvl_e32m{lmul}(len - i);"]
    out += [*chunk("i", "vl", "        "), "        i += vl;", "    }", "}", ""]
    return "\n".join(out)


# ----------------------------------------------------------------------------------------- family


@register
class ElementwiseFamily:
    name = "rvv_elementwise"
    priority = 5

    def _spec(self, task: KernelTask) -> MapSpec | str | None:
        kind = conversion(task)
        if kind:
            return kind
        try:
            return parse_map(task)
        except (Unsupported, CParseError):
            return None

    def applies(self, task: KernelTask) -> bool:
        return self._spec(task) is not None

    def knobs(self, task: KernelTask, target: TargetProfile) -> list[Knob]:
        spec = self._spec(task)
        # m4 is at the load/store bound for short maps; maps of 4+ vector ops gain from m8 (hardswish
        # 2.34x -> 2.56x on the modeled X60) when their registers fit
        heavy = isinstance(spec, MapSpec) and sum(_ops(n) for _, n in spec.stores) >= 4
        knobs = [
            Knob(name="lmul", values=LMULS, technique=Technique.VECTOR_LENGTH, default=8 if heavy else 4),
            Knob(name="unroll", values=[1, 2, 4], technique=Technique.UNROLL, default=1),
        ]
        if isinstance(spec, MapSpec):
            nodes = [node for _, node in spec.stores]
            if task.tolerance.rtol > 0 and any(_has_fusable(n) for n in nodes):
                knobs.append(Knob(name="fma", values=[0, 1], technique=Technique.FUSION, default=1))
            if task.tolerance.rtol >= RECIP_MIN_RTOL and any(_has_const_div(n) for n in nodes):
                knobs.append(Knob(name="recip", values=[0, 1], technique=Technique.APPROXIMATION, default=1))
        return knobs

    def valid(self, task: KernelTask, target: TargetProfile, knobs: dict[str, KnobValue]) -> bool:
        # live per chunk: the loads, the results and a temporary; unrolled chunks multiply that
        spec = self._spec(task)
        live = (len(spec.loads) + len(spec.stores) + 1) if isinstance(spec, MapSpec) else 3
        return live * int(knobs["lmul"]) * min(int(knobs["unroll"]), 2) <= 32

    def render(self, task: KernelTask, target: TargetProfile, knobs: dict[str, KnobValue]) -> Variant:
        kn = self.knobs(task, target)
        values = knob_values(kn, knobs)
        spec = self._spec(task)
        lmul, unroll = int(values["lmul"]), int(values["unroll"])
        if isinstance(spec, str):
            code = render_conversion(task, spec, lmul, unroll)
            what = "RVV fp16->fp32 widening convert" if spec == "h2f" else "RVV fp32->fp16 narrowing convert"
        elif spec is not None:
            code = render_map(task, spec, lmul, unroll, bool(values.get("fma", 0)), bool(values.get("recip", 0)))
            what = "RVV elementwise map"
        else:
            raise ValueError(f"{task.name}: not an elementwise map this family implements")
        return variant(self.name, kn, values, code, what)
