"""Generic variants of any task: the reference C with loop pragmas, `restrict` and compiler options.

Only as much C is parsed as the transformations need: a tokenizer that ignores comments, strings and
preprocessor lines, and a statement-extent parser that finds every `for` statement, its header, its
body and whether it is innermost. Pragmas go before innermost loops (where the vectorizer works);
`restrict` goes on the pointer parameters of the task's function definition; prefetches go at the
top of innermost loop bodies, a fixed number of bytes ahead of the loop's first subscripts.

Every flag used here was checked with clang-22 --target=riscv64-linux-gnu -mcpu=spacemit-x60 (and the
emulator's -march/-mtune pair); fast-math flags are offered only when the task's tolerance admits
reassociated float arithmetic (rtol >= 1e-5, /work/notes/offline_api.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agent.offline.base import Knob, KnobValue, Variant
from evaluator.targets import TargetProfile
from evaluator.tasks import KernelTask
from knowledge.taxonomy import Technique

FAST_MATH_MIN_RTOL = 1e-5
LLVM_DEFAULT_LMUL = 2  # clang-22's -riscv-v-register-bit-width-lmul default (e32 loops use m2)
MAX_PREFETCHED_STREAMS = 2  # per loop: more prefetches per block cost more than they hide
PREFETCH_BLOCK = 64  # iterations per strip-mined block (64 floats = 4 lines of 64 B, the X60's line size)
PREFETCH_LINES = 4  # lines prefetched per stream and block

_TOKEN_RE = re.compile(
    r"[A-Za-z_]\w*|\d[\w.]*(?:[eEpP][-+]\d+)?\w*|->|\+\+|--|<<=|>>=|&&|\|\||[-+*/%&|^!=<>]=|<<|>>|\S"
)
_LOOP_KEYWORDS = {"for", "while", "do"}
_OPEN = {"(": ")", "[": "]", "{": "}"}

FAST_MATH_FLAGS: dict[str, list[str]] = {
    "off": [],
    # Reassociation only: enough for the vectorizer to split float reductions into several accumulators;
    # clang applies -fassociative-math only together with no-signed-zeros and no-trapping-math.
    "reassoc": ["-fassociative-math", "-fno-signed-zeros", "-fno-trapping-math"],
    "fast": ["-ffast-math"],
}


# ------------------------------------------------------------------------------------------- lexing


@dataclass(frozen=True)
class Token:
    text: str
    start: int  # offset in the source
    end: int


def _mask(code: str) -> str:
    """The source with comments, string/char literals and preprocessor lines blanked (same offsets)."""
    out = list(code)
    i, n = 0, len(code)
    line_start = True
    while i < n:
        c = code[i]
        if line_start and c == "#":
            j = i
            while j < n and code[j] != "\n":
                j += 2 if code[j] == "\\" and j + 1 < n else 1
            for k in range(i, min(j, n)):
                if out[k] != "\n":
                    out[k] = " "
            i = j
            continue
        if c == "/" and code.startswith("//", i):
            j = code.find("\n", i)
            j = n if j < 0 else j
            out[i:j] = " " * (j - i)
            i = j
            continue
        if c == "/" and code.startswith("/*", i):
            j = code.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out[i:j] = [ch if ch == "\n" else " " for ch in code[i:j]]
            i = j
            continue
        if c in "\"'":
            j = i + 1
            while j < n and code[j] != c and code[j] != "\n":
                j += 2 if code[j] == "\\" else 1
            out[i + 1 : j] = " " * (j - i - 1)
            i = j + 1
            line_start = False
            continue
        if c == "\n":
            line_start = True
        elif not c.isspace():
            line_start = False
        i += 1
    return "".join(out)


def tokenize(code: str) -> list[Token]:
    return [Token(m.group(0), m.start(), m.end()) for m in _TOKEN_RE.finditer(_mask(code))]


# ------------------------------------------------------------------------------------------ parsing


@dataclass(frozen=True)
class Loop:
    """One `for` statement: token indices of `for`, of its header's `)`, and of its body's span."""

    keyword: int
    header_close: int
    body_first: int
    body_last: int
    innermost: bool
    index_var: str | None


class CParseError(ValueError):
    pass


def _match(toks: list[Token], i: int) -> int:
    """Index of the bracket closing the one at `i`."""
    close = _OPEN[toks[i].text]
    depth = 0
    for j in range(i, len(toks)):
        t = toks[j].text
        if t in _OPEN:
            depth += 1
        elif t in (")", "]", "}"):
            depth -= 1
            if depth == 0:
                if t != close:
                    raise CParseError(f"unbalanced {toks[i].text!r} at offset {toks[i].start}")
                return j
    raise CParseError(f"unclosed {toks[i].text!r} at offset {toks[i].start}")


def _expect_paren(toks: list[Token], i: int) -> int:
    if i >= len(toks) or toks[i].text != "(":
        raise CParseError(f"expected '(' at token {i}")
    return _match(toks, i)


def statement_end(toks: list[Token], i: int) -> int:
    """Index of the last token of the statement starting at token `i`."""
    if i >= len(toks):
        raise CParseError("statement expected at end of input")
    t = toks[i].text
    if t == "{":
        return _match(toks, i)
    if t in ("for", "while", "switch"):
        return statement_end(toks, _expect_paren(toks, i + 1) + 1)
    if t == "if":
        end = statement_end(toks, _expect_paren(toks, i + 1) + 1)
        if end + 1 < len(toks) and toks[end + 1].text == "else":
            return statement_end(toks, end + 2)
        return end
    if t == "do":
        end = statement_end(toks, i + 1)
        if end + 1 >= len(toks) or toks[end + 1].text != "while":
            raise CParseError("do without while")
        close = _expect_paren(toks, end + 2)
        return close + 1
    j = i
    while j < len(toks):  # expression or declaration statement: up to `;` outside brackets
        t = toks[j].text
        if t == ";":
            return j
        if t in _OPEN:
            j = _match(toks, j)
        elif t == "}":
            raise CParseError(f"unexpected '}}' at offset {toks[j].start}")
        j += 1
    raise CParseError("missing ';'")


def find_loops(toks: list[Token]) -> list[Loop]:
    loops = []
    for i, tok in enumerate(toks):
        if tok.text != "for":
            continue
        close = _expect_paren(toks, i + 1)
        last = statement_end(toks, close + 1)
        body = toks[close + 1 : last + 1]
        innermost = not any(t.text in _LOOP_KEYWORDS for t in body)
        loops.append(Loop(i, close, close + 1, last, innermost, _index_var(toks[i + 2 : close])))
    return loops


def _index_var(header: list[Token]) -> str | None:
    """The variable the init clause assigns (`int i = 0` -> i), if the init clause is that simple."""
    for j, t in enumerate(header):
        if t.text == ";":
            return None
        if t.text == "=" and j > 0 and re.fullmatch(r"[A-Za-z_]\w*", header[j - 1].text):
            return header[j - 1].text
    return None


# ------------------------------------------------------------------------------------ transformations


def _line_indent(code: str, offset: int) -> tuple[int, str, bool]:
    """(start of the line, its indentation, whether only whitespace precedes `offset` on it)."""
    start = code.rfind("\n", 0, offset) + 1
    prefix = code[start:offset]
    indent = prefix[: len(prefix) - len(prefix.lstrip())]
    return start, indent, prefix.strip() == ""


def _has_loop_pragma(code: str, line_start: int) -> bool:
    prev_end = line_start - 1
    prev_start = code.rfind("\n", 0, max(prev_end, 0)) + 1
    return prev_end > 0 and code[prev_start:prev_end].strip().startswith("#pragma clang loop")


def insert_loop_pragmas(code: str, hints: list[str], sizes: dict[str, int] | None = None) -> str:
    """`#pragma clang loop <hints>` before every innermost `for` that has no loop pragma yet.

    With `sizes` (each size parameter's largest value), a loop whose trip count is visible gets no count
    wider than it (see `visible_trip`), and a loop with a small constant trip count gets no pragma at all.
    """
    if not hints:
        return code
    toks = tokenize(code)
    edits: list[tuple[int, str]] = []
    for loop in find_loops(toks):
        if not loop.innermost:
            continue
        fitted = _fit_hints(hints, visible_trip(toks, loop, sizes)) if sizes is not None else hints
        if not fitted:
            continue
        at = toks[loop.keyword].start
        line_start, indent, alone = _line_indent(code, at)
        pragma = f"#pragma clang loop {' '.join(fitted)}"
        if alone:
            if not _has_loop_pragma(code, line_start):
                edits.append((line_start, f"{indent}{pragma}\n"))
        else:  # `if (c) for (...)`: the pragma needs a line of its own
            edits.append((at, f"\n{indent}{pragma}\n{indent}"))
    return _apply(code, edits)


# clang unrolls a loop of a constant trip count this small completely by itself; a partial unroll_count or
# a vectorize pragma would stop that (fir5's 5-tap loop under unroll_count(4) ran at 0.87x of the reference).
FULL_UNROLL_TRIP = 32
_COUNT_HINT = re.compile(r"(unroll_count|interleave_count)\((\d+)\)")


def _fit_hints(hints: list[str], trip: tuple[int, bool] | None) -> list[str]:
    """The hints a loop of this trip count takes: counts no wider than it, none for a small constant one."""
    if trip is None:
        return hints
    count, constant = trip
    if constant and count <= FULL_UNROLL_TRIP:
        return []
    out = []
    for hint in hints:
        m = _COUNT_HINT.fullmatch(hint)
        if m and int(m.group(2)) > count:
            if count > 1:
                out.append(f"{m.group(1)}({count})")
            continue
        out.append(hint)
    return out


def visible_trip(toks: list[Token], loop: Loop, sizes: dict[str, int] | None) -> tuple[int, bool] | None:
    """(largest trip count, whether it is a constant) of `for (T i = a; i < b; i++)` where a is a literal and
    b a literal or a size parameter (its largest value over the task's sizes); None when it is not visible."""
    header = _canonical_header(toks, loop)
    if header is None or not header[2].isdigit():
        return None
    bound = header[3]
    if bound.isdigit():
        return max(int(bound) - int(header[2]), 0), True
    if sizes and bound in sizes:
        return max(sizes[bound] - int(header[2]), 0), False
    return None


def innermost_trips(code: str, sizes: dict[str, int]) -> list[tuple[int, bool] | None]:
    """`visible_trip` of every innermost `for` loop of the code."""
    toks = tokenize(code)
    return [visible_trip(toks, lp, sizes) for lp in find_loops(toks) if lp.innermost]


def size_maxima(task: KernelTask) -> dict[str, int]:
    """Each size parameter's largest value over the task's sizes."""
    return {name: max(int(s[name]) for s in task.sizes if name in s) for name in task.size_params}


def add_restrict(code: str, function: str) -> str:
    """`restrict` on every pointer parameter of the definition of `function`."""
    toks = tokenize(code)
    depth = 0
    for i, tok in enumerate(toks):
        if tok.text == "{":
            depth += 1
        elif tok.text == "}":
            depth -= 1
        if depth or tok.text != function or i + 1 >= len(toks) or toks[i + 1].text != "(":
            continue
        close = _match(toks, i + 1)
        if close + 1 < len(toks) and toks[close + 1].text == "{":
            return _apply(code, _restrict_edits(toks[i + 2 : close]))
    raise CParseError(f"no definition of {function}() found")


def _restrict_edits(params: list[Token]) -> list[tuple[int, str]]:
    edits = []
    groups: list[list[Token]] = [[]]
    depth = 0
    for t in params:
        if t.text in _OPEN:
            depth += 1
        elif t.text in (")", "]", "}"):
            depth -= 1
        if t.text == "," and depth == 0:
            groups.append([])
        else:
            groups[-1].append(t)
    for group in groups:
        stars = [t for t in group if t.text == "*"]
        if stars and not any(t.text in ("restrict", "__restrict", "__restrict__", "(") for t in group):
            edits.append((stars[-1].end, "restrict "))
    return edits


def insert_prefetch(code: str, distance_bytes: int, pointers: set[str], sizes: dict[str, int] | None = None) -> str:
    """Strip-mine canonical innermost loops into blocks with prefetches `distance_bytes` ahead.

    `for (T i = A; i < B; i++) S` becomes a loop over blocks of PREFETCH_BLOCK iterations that first
    prefetches PREFETCH_LINES cache lines of each stream at `&p[subscript at block start] + distance`
    and then runs S over the block. A prefetch inside the loop body would stop the vectorizer (clang-22
    reports "loop not vectorized" for a body with __builtin_prefetch); the block loop stays vectorizable.
    With `sizes`, a loop whose visible trip count is one block or less is left alone: there is nothing
    ahead to fetch (fir5's 5-tap loop strip-mined this way ran 17x slower).
    """
    if distance_bytes <= 0:
        return code
    toks = tokenize(code)
    edits: list[tuple[int, str]] = []
    for n, loop in enumerate(find_loops(toks)):
        header = _canonical_header(toks, loop)
        if not loop.innermost or header is None:
            continue
        trip = visible_trip(toks, loop, sizes) if sizes is not None else None
        if trip is not None and trip[0] <= PREFETCH_BLOCK:
            continue
        ctype, var, init, bound = header
        exprs = _streams(code, toks, loop, pointers)
        if not exprs:
            continue
        blk, end = f"{var}_blk{n}", f"{var}_end{n}"
        prefetches = " ".join(
            f"__builtin_prefetch((const char *)&{_substitute(e, var, blk)} + {distance_bytes + line * 64});"
            for e in exprs
            for line in range(PREFETCH_LINES)
        )
        outer = (
            f"for ({ctype} {blk} = {init}; {blk} < {bound}; {blk} += {PREFETCH_BLOCK}) {{ {prefetches} "
            f"const {ctype} {end} = {bound} - {blk} > {PREFETCH_BLOCK} ? {blk} + {PREFETCH_BLOCK} : {bound}; "
        )
        inner = f"for ({ctype} {var} = {blk}; {var} < {end}; {var}++)"
        edits.append((toks[loop.keyword].start, outer + inner + "\x00" + str(toks[loop.header_close].end)))
        edits.append((toks[loop.body_last].end, " }"))
    return _apply_replacing(code, edits)


def _canonical_header(toks: list[Token], loop: Loop) -> tuple[str, str, str, str] | None:
    """(type, var, init, bound) of `for (T var = init; var < bound; var++)` with a side-effect-free bound."""
    parts = [t.text for t in toks[loop.keyword + 2 : loop.header_close]]
    if ";" not in parts:
        return None
    first = parts.index(";")
    second = first + 1 + parts[first + 1 :].index(";") if ";" in parts[first + 1 :] else -1
    if second < 0:
        return None
    decl, cond, step = parts[:first], parts[first + 1 : second], parts[second + 1 :]
    types = {"int", "long", "size_t", "unsigned", "ptrdiff_t", "int64_t", "int32_t", "uint32_t", "uint64_t"}
    # `long long i` or `unsigned int i` (two-word types) are left alone
    if len(decl) < 4 or decl[0] not in types or decl[1] in types or decl[2] != "=":
        return None
    var = decl[1]
    if len(cond) < 3 or cond[0] != var or cond[1] != "<":
        return None
    if step not in ([var, "++"], ["++", var], [var, "+=", "1"]):
        return None
    bound = cond[2:]
    if any(not re.fullmatch(r"[A-Za-z_]\w*|\d+|[-+*()]", t) or t == var for t in bound):
        return None
    init = decl[3:]
    if any(not re.fullmatch(r"[A-Za-z_]\w*|\d+|[-+*()]", t) for t in init):
        return None
    return decl[0], var, " ".join(init), " ".join(bound)


def _substitute(expr: str, var: str, value: str) -> str:
    return re.sub(rf"\b{re.escape(var)}\b", f"({value})", expr)


def _apply_replacing(code: str, edits: list[tuple[int, str]]) -> str:
    """Like _apply, but an edit `text\\x00END` replaces code[at:END] with text."""
    for at, text in sorted(edits, key=lambda e: e[0], reverse=True):
        if "\x00" in text:
            text, stop = text.split("\x00")
            code = code[:at] + text + code[int(stop) :]
        else:
            code = code[:at] + text + code[at:]
    return code


def _streams(code: str, toks: list[Token], loop: Loop, pointers: set[str]) -> list[str]:
    """`p[expr]` texts for distinct pointers whose subscript uses the loop's index variable."""
    found: dict[str, str] = {}
    j = loop.body_first
    while j < loop.body_last and len(found) < MAX_PREFETCHED_STREAMS:
        t = toks[j]
        if t.text in pointers and t.text not in found and toks[j + 1].text == "[":
            close = _match(toks, j + 1)
            if any(x.text == loop.index_var for x in toks[j + 2 : close]):
                found[t.text] = code[t.start : toks[close].end]
            j = close
        j += 1
    return list(found.values())


def pointer_names(code: str, task: KernelTask) -> set[str]:
    """Pointer parameters of the task plus local pointers declared as `T *name =` in the code."""
    names = {p.name for p in task.params if p.pointer}
    names |= set(re.findall(r"\*\s*(?:const\s+)?(?:restrict\s+)?([A-Za-z_]\w*)\s*=", _mask(code)))
    return names


def _apply(code: str, edits: list[tuple[int, str]]) -> str:
    for at, text in sorted(edits, key=lambda e: e[0], reverse=True):
        code = code[:at] + text + code[at:]
    return code


# ----------------------------------------------------------------------------------------- family


def fast_math_allowed(task: KernelTask) -> bool:
    return task.tolerance.rtol >= FAST_MATH_MIN_RTOL


class GenericFamily:
    """The reference with compiler-level transformations; applies to every task."""

    name = "generic"

    def applies(self, task: KernelTask) -> bool:
        return True

    def knobs(self, task: KernelTask, target: TargetProfile) -> list[Knob]:
        fast = ["off", "reassoc", "fast"] if fast_math_allowed(task) else ["off"]
        lmuls = [1, 2, 4, 8] if target.is_riscv else [LLVM_DEFAULT_LMUL]
        widest = _widest_count(task)  # no count wider than any loop's visible trip (one value: no knob)
        unrolls = [v for v in (1, 2, 4, 8) if v <= widest] or [1]
        interleaves = [v for v in (0, 2, 4, 8) if v <= widest]
        return [
            Knob(name="restrict", values=[0, 1], technique=Technique.ALIGNMENT, default=1,
                 also=[Technique.MEMORY_ACCESS]),
            Knob(name="vectorize", values=["auto", "pragma", "vls"], technique=Technique.VECTORIZE, default="auto"),
            Knob(name="lmul", values=lmuls, technique=Technique.VECTOR_LENGTH, default=LLVM_DEFAULT_LMUL),
            Knob(name="fast_math", values=fast, technique=Technique.REDUCTION,
                 default="reassoc" if len(fast) > 1 else "off", also=[Technique.MULTI_ACCUMULATOR]),
            Knob(name="interleave", values=interleaves, technique=Technique.MULTI_ACCUMULATOR, default=0),
            # unroll_count(4) on innermost loops: never worse on the generic-only tasks of the suite on the
            # modeled X60, up to 2.6x on scalar loops (prefix_scan); scripts/bench_offline_space.py
            Knob(name="unroll", values=unrolls, technique=Technique.UNROLL, default=min(4, max(unrolls))),
            Knob(name="fp_contract", values=["on", "fast"], technique=Technique.FUSION, default="on"),
            Knob(name="prefetch", values=[0, 128, 256, 512] if _prefetchable(task) else [0],
                 technique=Technique.PREFETCH, default=0),
        ]  # fmt: skip

    def render(self, task: KernelTask, target: TargetProfile, knobs: dict[str, KnobValue]) -> Variant:
        k = {kn.name: kn.default for kn in self.knobs(task, target)} | knobs
        code = task.reference_code
        if k["restrict"]:
            code = add_restrict(code, task.function_name)
        if int(k["prefetch"]):
            code = insert_prefetch(code, int(k["prefetch"]), pointer_names(code, task), size_maxima(task))
        hints = []
        if k["vectorize"] != "auto":
            hints.append("vectorize(enable)")
        if int(k["interleave"]):
            hints.append(f"interleave_count({int(k['interleave'])})")
        if int(k["unroll"]) > 1:
            hints.append(f"unroll_count({int(k['unroll'])})")
        code = insert_loop_pragmas(code, hints, size_maxima(task))
        flags = self._flags(k, target)
        return Variant(
            family=self.name,
            knobs=k,
            code=code,
            cflags=flags,
            techniques=self._techniques(k),
            description=_describe(k),
        )

    @staticmethod
    def _flags(k: dict[str, KnobValue], target: TargetProfile) -> list[str]:
        flags: list[str] = []
        if k["vectorize"] == "vls" and target.is_riscv:
            flags.append("-mrvv-vector-bits=zvl")  # fixed-length vectors of the target's Zvl256b
        if int(k["lmul"]) != LLVM_DEFAULT_LMUL:
            flags += ["-mllvm", f"-riscv-v-register-bit-width-lmul={int(k['lmul'])}"]
        flags += FAST_MATH_FLAGS[str(k["fast_math"])]
        if k["fp_contract"] == "fast":
            flags.append("-ffp-contract=fast")
        return flags

    @staticmethod
    def _techniques(k: dict[str, KnobValue]) -> list[Technique]:
        used = []
        if k["vectorize"] != "auto":
            used.append(Technique.VECTORIZE)
        if int(k["lmul"]) != LLVM_DEFAULT_LMUL:
            used.append(Technique.VECTOR_LENGTH)
        if k["fast_math"] != "off":
            used.append(Technique.REDUCTION)
        if int(k["interleave"]):
            used.append(Technique.MULTI_ACCUMULATOR)
        if int(k["unroll"]) > 1:
            used.append(Technique.UNROLL)
        if k["fp_contract"] == "fast":
            used.append(Technique.FUSION)
        if k["restrict"]:
            used.append(Technique.ALIGNMENT)
        if int(k["prefetch"]):
            used.append(Technique.PREFETCH)
        return used


def _widest_count(task: KernelTask) -> int:
    """The widest unroll or interleave count any innermost loop of the reference can take."""
    try:
        trips = innermost_trips(task.reference_code, size_maxima(task))
    except CParseError:
        return 8
    widths = [8 if t is None else (0 if t[1] and t[0] <= FULL_UNROLL_TRIP else t[0]) for t in trips]
    return max(widths, default=0)


def _prefetchable(task: KernelTask) -> bool:
    """Whether any loop of the reference takes prefetches (one that runs longer than a block)."""
    code = task.reference_code
    try:
        return insert_prefetch(code, 128, pointer_names(code, task), size_maxima(task)) != code
    except CParseError:
        return False


def _describe(k: dict[str, KnobValue]) -> str:
    return "reference C, " + ", ".join(f"{name}={value}" for name, value in k.items())
