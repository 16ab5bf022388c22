"""The hot loop of a new task, read into one of the shapes an RVV rewrite knows (agent.offline.loop_rewrite).

A task no operator family claims still has a loop worth vectorizing by hand. This module reads the
task's function with the generic generator's tokenizer and statement parser and says which shape the
loop has, or why it has none:

- map:       `for (i...) out[i] = f(in1[i + a], in2[i], scalars)` (also `out[i] += ...`);
- reduction: `T acc = init; for (i...) acc += g(x[i], y[i]);` (or `acc = fmaxf(acc, g)` /
             `acc = g > acc ? g : acc`), then `return acc;` or `*out = acc;`;
- widening:  a reduction whose accumulator is int32 and whose terms are products of int8 / int16 loads;
- stencil:   `for (i...) { T s = init; for (k = 0; k < K; k++) s += h(c[k], x[i + k]); out[i] = s; }`.

Expressions become small trees (`Node`); a subscript that uses the loop index must be `i`, `i + e` or
`i - e` with `e` free of it (a vector load at an offset), anything else (a stride, a gather) is no shape.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from agent.offline.generic import CParseError, Token, _canonical_header, _match, find_loops, statement_end, tokenize
from evaluator.tasks import KernelTask

ELEMENT_TYPES = {"float": "f32", "int": "i32", "int32_t": "i32", "int16_t": "i16", "int8_t": "i8", "uint8_t": "u8"}
WIDE_ACCUMULATORS = {"int", "int32_t"}
CALLS = {"fmaxf": "max", "fminf": "min", "fabsf": "abs"}


class NoShape(ValueError):
    """The loop has no shape the rewrite knows; the message says why (shown in the variant's notes)."""


@dataclass(frozen=True)
class Node:
    """An expression: `num`/`scalar` (text), `load` (pointer, offset text, vector or not), `bin`, `call`, `neg`."""

    kind: str
    text: str = ""
    args: tuple[Node, ...] = ()
    vector: bool = False  # depends on the loop index: a vector value in the rewrite


@dataclass
class LoopShape:
    kind: str  # map | reduction | widening | stencil
    ctype: str  # element type of the loads (the accumulator's for a reduction)
    index: str  # the loop's index variable
    start: str  # its first value (C text)
    bound: str  # the loop runs while index < bound (C text)
    expr: Node  # the value stored (map), added (reduction, stencil)
    out: str = ""  # output pointer (map, stencil)
    acc: str = ""  # accumulator variable (reduction, widening, stencil)
    acc_type: str = ""
    init: str = ""  # accumulator's first value (C text)
    op: str = "add"  # how the accumulator combines: add | max | min
    finish: str = "return"  # reduction: `return` or the pointer `*p = acc` stores into
    tap: str = ""  # stencil: the inner loop's variable and its trip count (C text)
    taps: str = ""
    loads: list[str] = field(default_factory=list)  # vector loads, for the register budget
    wide_type: str = ""  # widening: the narrow type multiplied


def classify(task: KernelTask) -> LoopShape:
    """The shape of the task's loop, or NoShape with the reason."""
    try:
        toks = tokenize(task.reference_code)
        body = _function_body(toks, task.function_name)
        return _Reader(task, toks).shape(body)
    except CParseError as e:
        raise NoShape(f"the reference could not be read ({e})") from e


def _function_body(toks: list[Token], name: str) -> tuple[int, int]:
    """Token indices just inside the braces of the definition of `name`."""
    depth = 0
    for i, tok in enumerate(toks):
        depth += tok.text == "{"
        depth -= tok.text == "}"
        if depth == 0 and tok.text == name and i + 1 < len(toks) and toks[i + 1].text == "(":
            close = _match(toks, i + 1)
            if close + 1 < len(toks) and toks[close + 1].text == "{":
                return close + 2, _match(toks, close + 1) - 1
    raise NoShape(f"no definition of {name}() in the reference")


class _Reader:
    def __init__(self, task: KernelTask, toks: list[Token]) -> None:
        self.task, self.toks = task, toks
        self.ptypes = {p.name: p.ctype for p in task.params if p.pointer}
        self.scalars = {p.name: p.ctype for p in task.params if not p.pointer}
        self.index = ""  # the loop's index variable, once the loop is found

    def shape(self, span: tuple[int, int]) -> LoopShape:
        stmts = self._statements(*span)
        loops = [s for s in stmts if self.toks[s[0]].text == "for"]
        if len(loops) != 1:
            raise NoShape(f"{len(loops)} top-level loops in the function (one is needed)")
        before = stmts[: stmts.index(loops[0])]
        after = stmts[stmts.index(loops[0]) + 1 :]
        loop = next(lp for lp in find_loops(self.toks) if lp.keyword == loops[0][0])
        header = _canonical_header(self.toks, loop)
        if header is None:
            raise NoShape("the loop is not `for (int i = a; i < b; i++)`")
        _, var, start, bound = header
        self.index = var
        acc = self._accumulator(before)
        inner = self._statements(loop.body_first, loop.body_last)
        if inner and self.toks[inner[0][0]].text == "{":
            inner = self._statements(inner[0][0] + 1, inner[0][1] - 1)
        if acc is not None:
            shape = self._reduction(inner, acc, after)
        elif len(inner) == 1:
            shape = self._map(inner[0])
        else:
            shape = self._stencil(inner)
        shape.index, shape.start, shape.bound = var, start, bound
        return shape

    # ------------------------------------------------------------------------------------ statements

    def _statements(self, first: int, last: int) -> list[tuple[int, int]]:
        out, i = [], first
        while i <= last:
            end = statement_end(self.toks, i)
            out.append((i, end))
            i = end + 1
        return out

    def _text(self, span: tuple[int, int]) -> list[str]:
        return [t.text for t in self.toks[span[0] : span[1] + 1]]

    def _accumulator(self, before: list[tuple[int, int]]) -> tuple[str, str, str] | None:
        """(name, type, initial value) of `T acc = init;` before the loop; None when there is nothing."""
        if not before:
            return None
        if len(before) > 1:
            raise NoShape("more than one statement before the loop")
        t = self._text(before[0])
        if len(t) < 5 or t[0] not in ELEMENT_TYPES or t[2] != "=" or t[-1] != ";":
            raise NoShape(f"`{' '.join(t)}` before the loop is not `T acc = init;`")
        init = self._expr(t[3:-1])
        if init.vector:
            raise NoShape("the accumulator's first value reads the loop's data")
        return t[1], t[0], scalar_text(init)

    def _assignment(self, span: tuple[int, int]) -> tuple[list[str], str, list[str]]:
        t = self._text(span)
        if t[-1] != ";":
            raise NoShape("the loop body is not one assignment")
        for j, tok in enumerate(t):
            if tok in ("=", "+=") and j > 0:
                return t[:j], tok, t[j + 1 : -1]
        raise NoShape(f"`{' '.join(t)}` is not an assignment")

    def _map(self, span: tuple[int, int]) -> LoopShape:
        lhs, op, rhs = self._assignment(span)
        out = self._store_target(lhs)
        expr = self._expr(rhs)
        if op == "+=":
            expr = Node("bin", "+", (Node("load", out, (Node("num", "0"),), True), expr), True)
        ctype = self._one_type(expr, out)
        _no_carried_dependence(expr, out)
        return LoopShape("map", ctype, "", "", "", expr, out=out, loads=_loads(expr))

    def _store_target(self, lhs: list[str]) -> str:
        if len(lhs) != 4 or lhs[1] != "[" or lhs[3] != "]" or lhs[2] != self.index or lhs[0] not in self.ptypes:
            raise NoShape(f"`{' '.join(lhs)}` is not a store to out[{self.index}]")
        return lhs[0]

    def _reduction(self, inner: list[tuple[int, int]], acc: tuple[str, str, str], after: list) -> LoopShape:
        name, ctype, init = acc
        if len(inner) != 1:
            raise NoShape("a reduction loop's body must be one update of the accumulator")
        lhs, op, rhs = self._assignment(inner[0])
        if lhs != [name]:
            raise NoShape(f"the loop updates `{' '.join(lhs)}`, not the accumulator {name}")
        how, term = self._update(name, op, self._expr(rhs))
        finish = self._finish(name, after)
        shape = LoopShape("reduction", ctype, "", "", "", term, acc=name, acc_type=ctype, init=init, op=how,
                          finish=finish, loads=_loads(term))  # fmt: skip
        narrow = {self.ptypes[p] for p in shape.loads}
        if ctype in WIDE_ACCUMULATORS and how == "add" and narrow and narrow <= {"int8_t", "int16_t"}:
            if len(narrow) != 1 or not _is_product_of_loads(_uncast(term)):
                raise NoShape("a widening reduction must add products of two loads of one narrow type")
            shape.kind, shape.wide_type, shape.expr = "widening", narrow.pop(), _uncast(term)
        else:
            self._one_type(term, None, ctype)
        return shape

    def _update(self, name: str, op: str, rhs: Node) -> tuple[str, Node]:
        """How `acc op= rhs` combines (add, max, min) and the term it combines with."""
        acc = Node("scalar", name)
        if op == "+=":
            return "add", rhs
        if rhs.kind == "bin" and rhs.text == "+" and acc in rhs.args:
            return "add", rhs.args[1] if rhs.args[0] == acc else rhs.args[0]
        if rhs.kind == "call" and rhs.text in ("max", "min") and acc in rhs.args:
            return rhs.text, rhs.args[1] if rhs.args[0] == acc else rhs.args[0]
        raise NoShape(f"the accumulator {name} is not updated by +, fmaxf/fminf or a max/min select")

    def _finish(self, name: str, after: list[tuple[int, int]]) -> str:
        texts = [self._text(s) for s in after]
        if texts == [["return", name, ";"]]:
            return "return"
        if (
            len(texts) == 1
            and texts[0][:1] == ["*"]
            and texts[0][2:] == ["=", name, ";"]
            and texts[0][1] in self.ptypes
        ):
            return texts[0][1]
        raise NoShape(
            f"after the loop: `{' '.join(t for text in texts for t in text)}`, not `return {name};` or `*out = {name};`"
        )

    def _stencil(self, inner: list[tuple[int, int]]) -> LoopShape:
        if len(inner) != 3:
            raise NoShape("the loop body is neither one store nor `T s = init; for (k...) s += ...; out[i] = s;`")
        acc = self._accumulator(inner[:1])
        assert acc is not None
        name, ctype, init = acc
        loop = next((lp for lp in find_loops(self.toks) if lp.keyword == inner[1][0]), None)
        header = _canonical_header(self.toks, loop) if loop else None
        if loop is None or header is None or not loop.innermost or header[2] != "0":
            raise NoShape("the inner loop is not `for (int k = 0; k < K; k++)`")
        tap, taps = header[1], header[3]
        body = self._statements(loop.body_first, loop.body_last)
        if len(body) == 1 and self.toks[body[0][0]].text == "{":
            body = self._statements(body[0][0] + 1, body[0][1] - 1)
        if len(body) != 1:
            raise NoShape("the inner loop's body must be one update `s += ...`")
        lhs, op, rhs = self._assignment(body[0])
        how, term = self._update(name, op, self._expr(rhs)) if lhs == [name] else ("", None)
        if how != "add" or term is None:
            raise NoShape(f"the inner loop does not add into {name}")
        lhs, op, rhs = self._assignment(inner[2])
        out = self._store_target(lhs)
        if op != "=" or rhs != [name]:
            raise NoShape(f"the loop stores `{' '.join(rhs)}`, not {name}")
        self._one_type(term, out, ctype)
        _no_carried_dependence(term, out)
        return LoopShape("stencil", ctype, "", "", "", term, out=out, acc=name, acc_type=ctype, init=init,
                         tap=tap, taps=taps, loads=_loads(term))  # fmt: skip

    def _one_type(self, expr: Node, out: str | None, want: str | None = None) -> str:
        """The one element type of every load (and the store): mixed types are a conversion, not a shape."""
        types = {self.ptypes[p] for p in _loads(expr)} | ({self.ptypes[out]} if out else set())
        types |= {want} if want else set()
        types = {"int32_t" if t == "int" else t for t in types}
        if len(types) != 1 or next(iter(types)) not in ELEMENT_TYPES:
            raise NoShape(f"element types {sorted(types)}: one of {sorted(set(ELEMENT_TYPES) - {'int'})} is needed")
        if not _loads(expr):
            raise NoShape("the loop reads no vector of the task")
        return next(iter(types))

    # ----------------------------------------------------------------------------------- expressions

    def _expr(self, toks: list[str]) -> Node:
        node, rest = _Expr(self, toks).parse()
        if rest:
            raise NoShape(f"`{' '.join(toks)}`: cannot read from `{rest[0]}`")
        return node

    def load(self, pointer: str, sub: list[str]) -> Node:
        """`p[sub]`: a vector load at an offset when `sub` uses the loop index, else a scalar."""
        if self.index not in sub:
            return Node("scalar", f"{pointer}[{' '.join(sub)}]")
        if sub == [self.index]:
            return Node("load", pointer, (Node("num", "0"),), True)
        rest = None
        if len(sub) >= 3 and sub[0] == self.index and sub[1] in "+-":
            rest = sub[2:] if sub[1] == "+" else ["-", "(", *sub[2:], ")"]
        elif len(sub) >= 3 and sub[-2] == "+" and sub[-1] == self.index:
            rest = sub[:-2]
        if rest is None or self.index in rest or any(t in ("*", "/", "%", "<<", ">>", "?") for t in rest[:1]):
            raise NoShape(f"subscript `{pointer}[{' '.join(sub)}]` is not {self.index} plus an offset")
        offset = self._expr(rest)
        return Node("load", pointer, (offset,), True)


class _Expr:
    """A recursive-descent reader of the expression subset: + - * /, unary -, casts, calls, ?: max/min."""

    def __init__(self, reader: _Reader, toks: list[str]) -> None:
        self.r, self.t, self.i = reader, toks, 0

    def parse(self) -> tuple[Node, list[str]]:
        node = self.select()
        return node, self.t[self.i :]

    def peek(self) -> str:
        return self.t[self.i] if self.i < len(self.t) else ""

    def take(self, want: str | None = None) -> str:
        tok = self.peek()
        if not tok or (want is not None and tok != want):
            raise NoShape(f"`{' '.join(self.t)}`: expected {want or 'more'} at `{tok}`")
        self.i += 1
        return tok

    def select(self) -> Node:
        a = self.additive()
        if self.peek() not in (">", "<", ">=", "<="):
            return a
        cmp = self.take()
        b = self.additive()
        self.take("?")
        x = self.additive()
        self.take(":")
        y = self.additive()
        if (x, y) not in ((a, b), (b, a)):
            raise NoShape("a ?: that is not a max or min of its two operands")
        bigger = (cmp in (">", ">=")) == ((x, y) == (a, b))
        return _combine("call", "max" if bigger else "min", (a, b))

    def additive(self) -> Node:
        node = self.term()
        while self.peek() in ("+", "-"):
            op = self.take()
            node = _combine("bin", op, (node, self.term()))
        return node

    def term(self) -> Node:
        node = self.unary()
        while self.peek() in ("*", "/"):
            op = self.take()
            node = _combine("bin", op, (node, self.unary()))
        return node

    def unary(self) -> Node:
        if self.peek() == "-":
            self.take()
            return _combine("neg", "", (self.unary(),))
        if self.peek() == "+":
            self.take()
            return self.unary()
        if (
            self.peek() == "("
            and self.i + 2 < len(self.t)
            and self.t[self.i + 1] in ELEMENT_TYPES
            and self.t[self.i + 2] == ")"
        ):
            self.i += 3
            return _combine("cast", self.t[self.i - 2], (self.unary(),))
        return self.primary()

    def primary(self) -> Node:
        tok = self.take()
        if tok == "(":
            node = self.select()
            self.take(")")
            return node
        if re.fullmatch(r"\d[\w.]*", tok):
            if re.fullmatch(r"\d+\.\d*(e[-+]?\d+)?|\d+e[-+]?\d+", tok, re.I):
                raise NoShape(f"the double constant {tok} makes the reference compute in double")
            return Node("num", tok)
        if not re.fullmatch(r"[A-Za-z_]\w*", tok):
            raise NoShape(f"`{tok}` in an expression")
        if self.peek() == "[":
            if tok not in self.r.ptypes:
                raise NoShape(f"`{tok}[...]` is not a pointer parameter")
            start = self.i + 1
            depth = 0
            while True:
                t = self.take()
                depth += t == "["
                depth -= t == "]"
                if depth == 0:
                    break
            return self.r.load(tok, self.t[start : self.i - 1])
        if self.peek() == "(":
            if tok not in CALLS:
                raise NoShape(f"a call to {tok}() (only {', '.join(CALLS)} are rewritten)")
            self.take("(")
            args = [self.select()]
            while self.peek() == ",":
                self.take()
                args.append(self.select())
            self.take(")")
            if len(args) != (1 if CALLS[tok] == "abs" else 2):
                raise NoShape(f"{tok}() with {len(args)} arguments")
            return _combine("call", CALLS[tok], tuple(args))
        return Node("scalar", tok, (), tok == self.r.index)


def _no_carried_dependence(expr: Node, out: str) -> None:
    """A strip may read only the elements of the output it writes itself (`out[i] += ...`), else a strip
    would read what an earlier iteration of the scalar loop wrote (a scan, `y[i] = y[i - 1] + x[i]`)."""
    for node in _walk(expr):
        if node.kind == "load" and node.text == out and node.args[0] != Node("num", "0"):
            raise NoShape(f"the loop reads {out} at another index than it writes (a dependence across iterations)")


def _walk(node: Node) -> list[Node]:
    return [node, *(n for a in node.args for n in _walk(a))]


def _combine(kind: str, text: str, args: tuple[Node, ...]) -> Node:
    return Node(kind, text, args, any(a.vector for a in args))


def scalar_text(node: Node) -> str:
    """The C text of a scalar expression."""
    if node.kind in ("num", "scalar"):
        return node.text
    if node.kind == "neg":
        return f"(-{scalar_text(node.args[0])})"
    if node.kind == "cast":
        return f"(({node.text}){scalar_text(node.args[0])})"
    if node.kind == "bin":
        return f"({scalar_text(node.args[0])} {node.text} {scalar_text(node.args[1])})"
    if node.kind == "call":
        fn = {"max": "fmaxf", "min": "fminf", "abs": "fabsf"}[node.text]
        return f"{fn}({', '.join(scalar_text(a) for a in node.args)})"
    raise NoShape(f"{node.kind} in a scalar expression")


def _loads(node: Node) -> list[str]:
    found = [node.text] if node.kind == "load" else []
    for a in node.args if node.kind != "load" else ():
        found += [p for p in _loads(a) if p not in found]
    return list(dict.fromkeys(found))


def _uncast(node: Node) -> Node:
    if node.kind == "cast":
        return _uncast(node.args[0])
    return Node(node.kind, node.text, tuple(_uncast(a) for a in node.args), node.vector)


def _is_product_of_loads(node: Node) -> bool:
    return node.kind == "bin" and node.text == "*" and all(a.kind == "load" for a in node.args)
