"""Static check of candidate code: fast feedback with a line number, not the defense.

A candidate is pure computation: RVV intrinsics, static helpers, a documented set of libm/string/stdlib
functions, read-only tables. The check is an allow-list, applied where the compiler's view is exact:

1. `check_directives` on the source after C translation phases 1-3 as clang does them (line splices,
   also `\\` + spaces + newline, are joined; comments removed): only the directives #include <allowed
   header>, #define/#undef, conditionals, #pragma, #error/#warning; no #line, #embed, #include_next,
   linemarkers, trigraphs, raw strings, `__has_include`/`__has_embed`.
2. `check_preprocessed` on `clang -E` output made with the candidate's own flags (so every macro, -D
   and _Pragma is already expanded), restricted by its line markers to the candidate's own lines:
   every called name is defined in the candidate or on the allow-list (`ALLOWED_FUNCTIONS`, `__riscv_*`
   intrinsics, math/bit builtins); attributes and pragmas from allow-lists; inline asm only vector/IME
   instructions with no labels or directives; no mutable global or static state; no extern objects.
3. `check_object` on the compiled candidate object (the machine code itself, so nothing can be hidden
   from it): only the kernel is a global symbol, undefined symbols only from the allow-list, no
   .init_array/.fini_array/.ctors/.dtors or unknown sections, no writable data, no writable+executable
   section, and in executable sections no ecall/ebreak, no CSR access but the vector/FP state
   (vl, vtype, vlenb, vstart, vxrm, vxsat, vcsr, frm, fflags, fcsr); ecall/ebreak words are also searched
   at every 2-byte offset (RVC), so a jump into the middle of an instruction finds none.

Defense in depth: a candidate that gets past all of this still runs in the sandbox (evaluator/sandbox.py)
and is judged by the trusted side (docs/EVALUATION.md, "Threat model").
"""

from __future__ import annotations

import ast
import operator
import re
import struct
import unicodedata
from dataclasses import dataclass

ALLOWED_HEADERS = frozenset(
    {
        "riscv_vector.h",
        "sifive_vector.h",
        "stdint.h",
        "stddef.h",
        "stdbool.h",
        "string.h",
        "math.h",
        "float.h",
        "limits.h",
        "stdlib.h",
        "assert.h",
        "stdalign.h",
        "inttypes.h",
    }
)
MAX_SOURCE_BYTES = 256 << 10

_LIBM = """
acos asin atan atan2 cos sin tan acosh asinh atanh cosh sinh tanh exp exp2 expm1 log log10 log1p log2 logb
pow sqrt cbrt hypot erf erfc tgamma lgamma ceil floor trunc round lround llround rint lrint llrint nearbyint
fabs fmod remainder remquo fma fmax fmin fdim copysign nan frexp ldexp modf scalbn scalbln ilogb nextafter
"""
# Called names a candidate may use without defining them: libm (float, double, long double spellings),
# memory/string helpers, scratch allocation (the harness wraps it to report the memory limit), integer
# helpers, and what <assert.h> expands to.
ALLOWED_FUNCTIONS = frozenset(
    {f"{name}{suffix}" for name in _LIBM.split() for suffix in ("", "f", "l")}
    | {"memcpy", "memmove", "memset", "memcmp", "strlen", "malloc", "calloc", "realloc", "free"}
    # no qsort/bsearch: a comparator is a function pointer that libc calls, out of the object check's sight
    | {"aligned_alloc", "posix_memalign", "abs", "labs", "llabs", "div", "ldiv", "lldiv"}
    | {"__assert_fail"}
    | {"sincos", "sincosf", "sincosl"}  # what clang makes of sin(x) and cos(x) together on x86-64
)
_BUILTIN_EXTRA = """
expect expect_with_probability assume_aligned assume prefetch unreachable offsetof constant_p
types_compatible_p choose_expr convertvector shufflevector bit_cast clz clzl clzll ctz ctzl ctzll popcount
popcountl popcountll parity parityl parityll bswap16 bswap32 bswap64 ffs ffsl ffsll clrsb inf inff infl
nan nanf nanl huge_val huge_valf huge_vall isnan isinf isinf_sign isfinite isnormal signbit signbitf
fpclassify isless islessequal isgreater isgreaterequal islessgreater isunordered add_overflow sub_overflow
mul_overflow memcpy_inline memset_inline elementwise_abs elementwise_max elementwise_min elementwise_fma
reduce_add reduce_max reduce_min rotateleft32 rotateleft64 rotateright32 rotateright64
"""
ALLOWED_BUILTINS = frozenset(
    {f"__builtin_{n}" for n in _BUILTIN_EXTRA.split()} | {f"__builtin_{n}" for n in ALLOWED_FUNCTIONS}
)
ALLOWED_PREFIXES = ("__riscv_v", "__riscv_sf_", "__riscv_th_", "__builtin_rvv_")  # RVV intrinsics (+ expansion)
# Attributes that only shape code generation; not: constructor, destructor, section, alias, weak, ifunc,
# naked, cleanup, visibility, used, retain, ...
ALLOWED_ATTRIBUTES = frozenset(
    "aligned always_inline noinline unused maybe_unused const pure hot cold flatten vector_size "
    "ext_vector_type may_alias packed nonnull returns_nonnull fallthrough target noreturn "
    "riscv_rvv_vector_bits nodebug artificial warn_unused_result assume_aligned alloc_size malloc "
    "overloadable".split()
)
_PRAGMA_OK = re.compile(
    r"^(clang\s+loop\b|clang\s+fp\b|clang\s+diagnostic\b|GCC\s+diagnostic\b|GCC\s+unroll\b|GCC\s+ivdep\b|"
    r"unroll\b|nounroll\b|unroll_and_jam\b|nounroll_and_jam\b|STDC\s+\w+|pack\b|float_control\b|fp_contract\b|"
    r"clang\s+optimize\b|GCC\s+optimize\b|message\b|once$|loop\b|vectorize\b)"
)
_DIRECTIVES = {"include", "define", "undef", "if", "ifdef", "ifndef", "elif", "elifdef", "elifndef", "else"}
_DIRECTIVES |= {"endif", "pragma", "error", "warning", ""}
_FORBIDDEN_TOKENS = {"__has_include", "__has_include_next", "__has_embed", "__declspec"}

_KEYWORDS = frozenset(
    """auto break case char const continue default do double else enum extern float for goto if inline int long
    register restrict return short signed sizeof static struct switch typedef union unsigned void volatile while
    _Alignas _Alignof _Atomic _Bool _Complex _Generic _Imaginary _Noreturn _Static_assert _Thread_local
    _Float16 __fp16 __bf16 _Float32 _Float64 __int128 __int128_t __uint128_t alignas alignof bool static_assert
    thread_local typeof typeof_unqual __typeof __typeof__ __auto_type __attribute __attribute__ __extension__
    __inline __inline__ __restrict __restrict__ __volatile __volatile__ __const __const__ __signed __signed__
    __alignof __alignof__ asm __asm __asm__ __label__ __builtin_va_list __func__ __FUNCTION__
    __PRETTY_FUNCTION__ __thread __real __imag __real__ __imag__""".split()
)
_ASM_KEYWORDS = {"asm", "__asm", "__asm__"}
# Vector (v*), SpacemiT IME (smt.*) and nop only: no ecall, no CSR access, no labels, no directives.
_ASM_MNEMONIC = re.compile(r"^(v[a-z0-9.]*|smt\.[a-z0-9.]+|nop)$")
_ASM_OPERANDS = re.compile(r"^[\w%\[\]().,+\- ]*$", re.ASCII)

_TOKEN_RE = re.compile(
    r'(?:u8|u|U|L)?"(?:\\.|[^"\\\n])*"|(?:u8|u|U|L)?\'(?:\\.|[^\'\\\n])*\'|[A-Za-z_]\w*|\d[\w.]*|->|\+\+|--|'
    r"<<=|>>=|%:%:|##|<:|:>|<%|%>|%:|&&|\|\||[-+*/%&|^!=<>]=|<<|>>|\S"
)
_LINE_MARKER = re.compile(r'^#\s*(\d+)\s+"((?:\\.|[^"\\])*)"((?:\s+\d)*)\s*$')
_SPLICE = re.compile(r"\\[ \t\v\f]*\r?\n")


@dataclass(frozen=True)
class Violation:
    line: int
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}" if self.line else self.message


# ------------------------------------------------------------------------------------- raw directives


def check_directives(code: str, extra_headers: frozenset[str] = frozenset()) -> list[Violation]:
    """Checks on the logical source lines (splices joined, comments removed): directives, odd spellings."""
    if len(code.encode()) > MAX_SOURCE_BYTES:
        return [Violation(0, f"source is larger than {MAX_SOURCE_BYTES >> 10} KB")]
    found: list[Violation] = []
    allowed = ALLOWED_HEADERS | extra_headers
    if re.search(r"\?\?[=/'()!<>\-]", code):
        found.append(Violation(_line_of(code, code.find("??")), "trigraphs are not allowed"))
    if m := _CONTROL_IN_SOURCE.search(code):
        found.append(Violation(_line_of(code, m.start()), f"{_char_name(m.group(0))} in the source: only tab and "
                               "newline are allowed (an assembler takes \\r, \\v, \\f as line ends)"))  # fmt: skip
    lines = logical_lines(code)
    found += _check_pragma_operators(lines)
    for lineno, line in lines:
        text = line.strip()
        if re.search(r"(?<![\w\"'])(u8|u|U|L)?R\"", text):
            found.append(Violation(lineno, "raw string literals are not allowed"))
        for tok in _FORBIDDEN_TOKENS & set(re.findall(r"[A-Za-z_]\w*", _without_literals(text))):
            found.append(Violation(lineno, f"`{tok}` is not allowed"))
        if text.startswith("%:"):  # the digraph spelling of '#'
            text = "#" + text[2:]
        if not text.startswith("#"):
            continue
        directive = text[1:].strip()
        name = re.match(r"\w*", directive).group(0)  # type: ignore[union-attr]
        if name == "include":
            m = re.match(r"include\s*<([\w./]+)>\s*$", directive)
            if not m or m.group(1) not in allowed:
                found.append(
                    Violation(
                        lineno,
                        f"#include {directive[7:].strip()} is not allowed (allowed: {', '.join(sorted(allowed))})",
                    )
                )
        elif name == "pragma":  # checked here: some pragmas act inside the preprocessor and never reach its output
            found += _check_pragmas([(lineno, "#" + directive)])
        elif name not in _DIRECTIVES:
            found.append(Violation(lineno, f"#{name} is not allowed" if name else "this directive is not allowed"))
    return found


# Control characters other than tab and newline (CR only as part of CRLF): clang's assembler ends a
# statement at \r (and the text check must not split lines where clang does not).
_CONTROL_IN_SOURCE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]|\r(?!\n)")
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")  # in an asm template, after escapes: also \n (split first)
# What `##` could assemble into a token the check must see whole: `_Pra ## gma` is `_Pragma`.
_PASTE_GUARDED = ("_Pragma", "__has_include", "__has_include_next", "__has_embed")


def _char_name(c: str) -> str:
    return f"control character U+{ord(c):04X}"


def _check_pragma_operators(lines: list[tuple[int, str]]) -> list[Violation]:
    """`_Pragma` only as `_Pragma("allowed pragma")` in the source itself, never built by token pasting.

    A pragma the preprocessor acts on (`GCC dependency` tells whether a file exists, `GCC poison`,
    `push_macro`) leaves no line in `clang -E` output, so the allow-list must see it before.
    """
    found: list[Violation] = []
    pasting = any("##" in t or "%:%:" in t for t in (_without_literals(text) for _, text in lines))
    for lineno, text in lines:
        toks = _TOKEN_RE.findall(text)
        for k, tok in enumerate(toks):
            if tok == "_Pragma":
                arg = toks[k + 1 : k + 4]
                if len(arg) < 3 or arg[0] != "(" or not re.match(r'L?"', arg[1]) or arg[2] != ")":
                    found.append(Violation(lineno, '_Pragma takes one string literal here: _Pragma("...")'))
                    continue
                body = arg[1].removeprefix("L")[1:-1].replace('\\"', '"').replace("\\\\", "\\")
                found += _check_pragmas([(lineno, "#pragma " + body)])
            elif pasting and (word := next((w for w in _PASTE_GUARDED if w.startswith(tok) and w != tok), "")):
                found.append(Violation(lineno, f"`{tok}` with token pasting (##) in the file could build `{word}`"))
    return found


def logical_lines(code: str) -> list[tuple[int, str]]:
    """(first physical line, text) per logical line: splices joined as clang does, comments removed."""
    joined: list[tuple[int, str]] = []
    physical = 1
    for chunk in _strip_comments(_SPLICE.sub("\x00", code)).split("\n"):
        joined.append((physical, chunk.replace("\x00", "")))
        physical += chunk.count("\x00") + 1
    return joined


def _line_of(code: str, pos: int) -> int:
    return code.count("\n", 0, max(pos, 0)) + 1


def _without_literals(text: str) -> str:
    return re.sub(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'', " ", text)


def _strip_comments(code: str) -> str:
    """Comments become a space (newlines and splice marks kept, so line numbers stay right)."""
    out: list[str] = []
    i, n = 0, len(code)
    while i < n:
        c = code[i]
        if c in "\"'":
            j = i + 1
            while j < n and code[j] != c and code[j] != "\n":
                j += 2 if code[j] == "\\" else 1
            out.append(code[i : j + 1])
            i = j + 1
        elif code.startswith("//", i):
            j = code.find("\n", i)
            j = n if j < 0 else j
            out.append(" " + "".join(ch for ch in code[i:j] if ch == "\x00"))
            i = j
        elif code.startswith("/*", i):
            j = code.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(" " + "".join(ch for ch in code[i:j] if ch in "\n\x00"))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


# ---------------------------------------------------------------------------------- preprocessed text


def check_preprocessed(
    pre: str,
    kernel: str,
    extra_headers: frozenset[str] = frozenset(),
    main_file: str = "candidate.c",
    *,
    asm: bool = True,
) -> list[Violation]:
    """Checks on `clang -E` output, restricted to lines that come from the candidate file itself.

    `asm=False` (the host target) refuses inline asm altogether.
    """
    lines, found = _own_lines(pre, main_file, ALLOWED_HEADERS | extra_headers)
    pragmas = [(ln, text.strip()) for ln, text in lines if text.lstrip().startswith("#")]
    code = [(ln, tok) for ln, text in lines if not text.lstrip().startswith("#") for tok in _TOKEN_RE.findall(text)]
    found += _check_pragmas(pragmas)
    found += _check_raw_strings(lines)
    found += _check_spellings(code)
    found += _check_asm(code, allowed=asm)
    found += _check_attributes(code)
    found += _check_vector_sizes(code)
    found += _check_function_pointers(code)
    defined, top = _check_top_level(code, kernel)
    found += top
    found += _check_calls(_outside_attributes(code), defined | {kernel})
    found += _check_static_state(code)
    # one message per line and rule is plenty for the feedback
    seen: set[tuple[int, str]] = set()
    unique = []
    for v in found:
        if (v.line, v.message) not in seen:
            seen.add((v.line, v.message))
            unique.append(v)
    return sorted(unique, key=lambda v: v.line)


def _own_lines(pre: str, main_file: str, allowed: frozenset[str]) -> tuple[list[tuple[int, str]], list[Violation]]:
    """(line in the candidate, text) for the lines of `main_file`; includes it makes are checked here too."""
    result: list[tuple[int, str]] = []
    found: list[Violation] = []
    current, lineno, last_own = "", 0, 0
    for text in pre.split("\n"):  # not splitlines(): clang ends lines at \n only (\r, \v, \f, U+2028 are not)
        m = _LINE_MARKER.match(text)
        if m:
            name, flags = m.group(2), m.group(3).split()
            if name.startswith("<"):  # <built-in>, <command line>
                pass
            elif current == main_file and "1" in flags:  # the candidate includes a file
                base = name.rsplit("/", 1)[-1]
                if base not in allowed or "3" not in flags:
                    found.append(Violation(last_own, f"#include of {name!r} is not allowed"))
            elif current == main_file and not flags and name != main_file:
                found.append(Violation(last_own, "a #line directive or linemarker renamed the file"))
            lineno, current = int(m.group(1)), name
            continue
        if current == main_file:
            if text.strip():
                result.append((lineno, text))
                last_own = lineno
            lineno += 1
        elif text.strip():
            lineno += 1
    return result, found


def _check_pragmas(pragmas: list[tuple[int, str]]) -> list[Violation]:
    found = []
    for ln, text in pragmas:
        body = re.sub(r"^#\s*pragma\s*", "", text)
        if not text.lstrip("#").lstrip().startswith("pragma") or not _PRAGMA_OK.match(body):
            found.append(Violation(ln, f"#pragma {body.split('(')[0][:40]} is not allowed"))
    return found


def _check_raw_strings(lines: list[tuple[int, str]]) -> list[Violation]:
    """Raw string literals made by macro expansion (`R ## "(...)"`): the tokenizer here reads them as
    ordinary strings, so they are refused wherever they come from."""
    found = []
    for ln, text in lines:
        for m in _TOKEN_RE.finditer(text):
            if m.group(0) in ("R", "LR", "uR", "UR", "u8R") and text[m.end() : m.end() + 1] == '"':
                found.append(Violation(ln, "raw string literals are not allowed"))
    return found


# Generic vectors of this many bytes or elements and more take clang tens of seconds (vector_size(1 << 18):
# 36 s); RVV registers hold 32 bytes at VLEN 256, so honest code stays far below.
MAX_VECTOR_BYTES = 1024
MAX_VECTOR_ELEMENTS = 256
_SIZEOF = {"char": 1, "short": 2, "int": 4, "long": 8, "float": 4, "double": 8, "_Float16": 2, "__fp16": 2,
           "int8_t": 1, "uint8_t": 1, "int16_t": 2, "uint16_t": 2, "int32_t": 4, "uint32_t": 4, "int64_t": 8,
           "uint64_t": 8, "size_t": 8}  # fmt: skip


def _check_vector_sizes(tokens: list[tuple[int, str]]) -> list[Violation]:
    """`vector_size(N)` at most MAX_VECTOR_BYTES, `ext_vector_type(N)` at most MAX_VECTOR_ELEMENTS, where N
    is a constant written with numbers and sizeof(type) (anything else is bounded by the compile limits)."""
    found = []
    for i, (ln, tok) in enumerate(tokens):
        limit = {"vector_size": MAX_VECTOR_BYTES, "ext_vector_type": MAX_VECTOR_ELEMENTS}.get(tok.strip("_"))
        if limit is None or i + 1 >= len(tokens) or tokens[i + 1][1] != "(":
            continue
        depth, k, arg = 0, i + 1, []
        while k < len(tokens):
            depth += {"(": 1, ")": -1}.get(tokens[k][1], 0)
            if depth == 0:
                break
            arg.append(tokens[k][1])
            k += 1
        value = _constant(arg[1:])
        if value is not None and value > limit:
            found.append(Violation(ln, f"{tok}({value}) is larger than {limit} (compiling it takes minutes)"))
    return found


def _constant(toks: list[str]) -> int | None:
    """The value of an integer constant expression of literals, + - * << and sizeof(type), else None."""
    text = []
    k = 0
    while k < len(toks):
        t = toks[k]
        if t == "sizeof" and toks[k + 1 : k + 2] == ["("] and toks[k + 3 : k + 4] == [")"] and toks[k + 2] in _SIZEOF:
            text.append(str(_SIZEOF[toks[k + 2]]))
            k += 4
            continue
        if m := re.fullmatch(r"(0[xX][0-9A-Fa-f]+|0[0-7]*|[1-9]\d*)[uUlL]*", t):
            digits = m.group(1)
            text.append(str(int(digits, 16 if digits[:2].lower() == "0x" else 8 if digits[0] == "0" else 10)))
        elif t in ("+", "-", "*", "<<", "(", ")"):
            text.append(t)
        else:
            return None
        k += 1
    try:
        return _bounded(ast.parse(" ".join(text), mode="eval").body)
    except (SyntaxError, ValueError, RecursionError):
        return None


def _bounded(node: ast.expr) -> int:
    """Evaluate +, -, * and << on integers; values beyond 2**40 stop it (they are far over any limit)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        value = node.value
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = -_bounded(node.operand) if isinstance(node.op, ast.USub) else _bounded(node.operand)
    elif isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.LShift)):
        a, b = _bounded(node.left), _bounded(node.right)
        if isinstance(node.op, ast.LShift) and not 0 <= b < 64:
            raise ValueError("shift out of range")
        ops = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.LShift: operator.lshift}
        value = ops[type(node.op)](a, b)
    else:
        raise ValueError("not a constant")
    if abs(value) > 1 << 40:
        return 1 << 40
    return value


def _check_spellings(tokens: list[tuple[int, str]]) -> list[Violation]:
    """Digraphs, universal character names, `[[attributes]]` and forbidden names, after expansion."""
    found = []
    prev = ""
    for ln, tok in tokens:
        if tok in ("<:", ":>", "<%", "%>", "%:", "%:%:"):
            found.append(Violation(ln, f"digraph `{tok}` is not allowed"))
        elif tok == "\\":
            found.append(Violation(ln, "a backslash outside a literal (universal character name) is not allowed"))
        elif tok == "[" and prev == "[":
            found.append(Violation(ln, "[[attributes]] are not allowed: use __attribute__((...))"))
        elif tok in _FORBIDDEN_TOKENS:
            found.append(Violation(ln, f"`{tok}` is not allowed"))
        elif tok.startswith(("eok_", "__wrap_", "__real_")):
            found.append(Violation(ln, f"uses `{tok}`: harness and reference names are off limits"))
        prev = tok
    return found


_SIMPLE_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "v": "\v", "f": "\f", "a": "\a", "b": "\b", "e": "\x1b",
                   "E": "\x1b", "\\": "\\", "'": "'", '"': '"', "?": "?"}  # fmt: skip
# \x{...}, \o{...}, \u{...} (delimited, a clang extension in C), \N{NAME}, \uXXXX, \UXXXXXXXX, \x.., octal
_ESCAPE = re.compile(r"\\(?:([xou])\{([^}]*)\}|N\{([^}]*)\}|u([0-9A-Fa-f]{4})|U([0-9A-Fa-f]{8})|x([0-9A-Fa-f]+)|"
                     r"([0-7]{1,3})|(.))", re.S)  # fmt: skip
UNDECODABLE = "\ufffd"  # what an escape clang would refuse or read otherwise stands for: never allowed in asm


def _decode_c_string(body: str) -> str:
    """The characters a C string literal body stands for, every escape form clang accepts decoded; an escape
    that cannot be decoded becomes U+FFFD (so a check that wants ASCII refuses it)."""

    def one(m: re.Match[str]) -> str:
        kind, delimited, name, u4, u8, hexa, octal, other = m.groups()
        try:
            if kind:
                return chr(int(delimited, {"x": 16, "o": 8, "u": 16}[kind]))
            if name is not None:
                return unicodedata.lookup(name)
            if u4 or u8:
                return chr(int(u4 or u8, 16))
            if hexa:
                return chr(int(hexa, 16))
            if octal:
                return chr(int(octal, 8))
        except (ValueError, KeyError, OverflowError):
            return UNDECODABLE
        return _SIMPLE_ESCAPES.get(other, UNDECODABLE)

    return _ESCAPE.sub(one, body)


_STRING = re.compile(r'((?:u8|u|U|L)?)"(.*)"$', re.S)


def _asm_template(tokens: list[tuple[int, str]], start: int) -> tuple[str, str | None]:
    """The decoded template of the asm statement whose string literals begin at `start`, and a problem."""
    template = ""
    for k in range(start, len(tokens)):  # by index: a slice per asm statement would be quadratic
        m = _STRING.match(tokens[k][1])
        if not m:
            break
        if m.group(1):
            return template, f'asm template with a {m.group(1)}"..." string: plain string literals only'
        template += _decode_c_string(m.group(2))
    return template, None


def _check_asm(tokens: list[tuple[int, str]], allowed: bool = True) -> list[Violation]:
    """Inline asm may hold vector or IME instructions only (escapes decoded first), and none on the host."""
    found = []
    for i, (ln, tok) in enumerate(tokens):
        if tok not in _ASM_KEYWORDS:
            continue
        if not allowed:
            found.append(Violation(ln, "inline asm is not allowed on the host target (write C or intrinsics)"))
            continue
        j = i + 1
        while j < len(tokens) and tokens[j][1] in ("volatile", "__volatile__", "__volatile", "goto", "inline"):
            j += 1
        if j >= len(tokens) or tokens[j][1] != "(":
            found.append(Violation(ln, "asm used outside an asm(...) statement"))
            continue
        template, problem = _asm_template(tokens, j + 1)
        if problem:
            found.append(Violation(ln, problem))
        if not template.strip():
            found.append(Violation(ln, "asm without a literal instruction string (register variables not allowed)"))
        found += _check_asm_template(ln, template)
    return found


def _check_asm_template(ln: int, template: str) -> list[Violation]:
    """Statements split where the assembler splits them (newline, `;`); any other control character or
    non-ASCII byte is refused, so no statement can hide inside another."""
    for c in template:
        if (_CONTROL.match(c) and c != "\n") or not c.isascii():
            what = _char_name(c) if c.isascii() else f"non-ASCII character U+{ord(c):04X}"
            return [Violation(ln, f"asm template holds {what}: only instructions, spaces, tabs and newlines")]
    found = []
    for insn in re.split(r"[\n;]", template):
        insn = insn.replace("\t", " ").strip()
        if not insn:
            continue
        mnemonic = insn.split()[0].lower()
        if ":" in insn or "#" in insn:
            found.append(Violation(ln, f"asm `{insn[:30]}`: labels and comments are not allowed"))
        elif not _ASM_MNEMONIC.match(mnemonic):
            found.append(Violation(ln, f"asm instruction `{mnemonic}` is not a vector/matrix instruction"))
        elif not _ASM_OPERANDS.match(insn[len(mnemonic) :]):
            found.append(Violation(ln, f"asm operands of `{mnemonic}` hold characters that are not allowed"))
    return found


def _check_attributes(tokens: list[tuple[int, str]]) -> list[Violation]:
    """Every name inside __attribute__((...)) must be on ALLOWED_ATTRIBUTES (any __x__ spelling)."""
    found = []
    toks = [t for _, t in tokens]
    for i, (ln, tok) in enumerate(tokens):
        if tok not in ("__attribute__", "__attribute"):
            continue
        depth, k = 0, i + 1
        while k < len(toks):
            t = toks[k]
            depth += {"(": 1, ")": -1}.get(t, 0)
            if depth == 0 and t == ")":
                break
            # attribute names sit at depth 2, first in the list or after a comma
            if depth == 2 and re.match(r"^[A-Za-z_]\w*$", t) and toks[k - 1] in ("(", ","):
                name = t.strip("_") if t.startswith("__") else t
                if name not in ALLOWED_ATTRIBUTES:
                    found.append(Violation(ln, f"attribute `{t}` is not allowed (it can move code or symbols)"))
            k += 1
    return found


_IDENT = re.compile(r"^[A-Za-z_]\w*$")
_NOT_CALLS = _KEYWORDS | {"defined", "__builtin_offsetof", "__builtin_va_arg", "__builtin_types_compatible_p"}


def _allowed_call(name: str) -> bool:
    return name in ALLOWED_FUNCTIONS or name in ALLOWED_BUILTINS or name.startswith(ALLOWED_PREFIXES)


def _outside_attributes(tokens: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """The tokens without the `__attribute__((...))` groups: `aligned(64)` there is an argument, not a call."""
    return [tokens[i] for i in _outside_attribute_groups([t for _, t in tokens])]


def _check_function_pointers(tokens: list[tuple[int, str]]) -> list[Violation]:
    """No function pointer in any form: declared (`void (*f)(int)`), cast (`(void (*)(void))p`) or called.

    A kernel calls what it defines and the allowed functions, by name. A pointer to code is how a
    candidate reaches code the checks never saw (an address cast from an integer, a table of gadgets).
    """
    found = []
    for i in range(len(tokens) - 3):
        if tokens[i][1] != "(" or tokens[i + 1][1] != "*":
            continue
        j = i + 2
        while j < len(tokens) and (_IDENT.match(tokens[j][1]) or tokens[j][1] in ("*", "const", "restrict")):
            j += 1
        if j + 1 < len(tokens) and tokens[j][1] == ")" and tokens[j + 1][1] == "(":
            found.append(Violation(tokens[i][0], "function pointers are not allowed: call functions by their name"))
    return found


def _check_calls(tokens: list[tuple[int, str]], defined: set[str]) -> list[Violation]:
    """Every `name(` outside declarators calls something defined here or on the allow-list."""
    found = []
    for i in range(len(tokens) - 1):
        ln, tok = tokens[i]
        if tokens[i + 1][1] != "(" or not _IDENT.match(tok) or tok in _NOT_CALLS:
            continue
        if tok in defined or _allowed_call(tok):
            continue
        found.append(
            Violation(
                ln,
                f"calls `{tok}`, which is neither defined in the candidate nor an allowed function "
                "(libm, mem*/str*, malloc/free, RVV __riscv_* intrinsics)",
            )
        )
    return found


def _check_top_level(tokens: list[tuple[int, str]], kernel: str) -> tuple[set[str], list[Violation]]:
    """Functions defined (with a body) and problems at file scope: exported helpers, state, externs."""
    found: list[Violation] = []
    defined: set[str] = set()
    declared: list[tuple[int, str]] = []
    item: list[tuple[int, str]] = []
    depth = 0  # braces entered while still inside a declaration (struct body, initializer)
    body = 0  # braces of a function body being skipped
    for ln, tok in tokens:
        if body:
            body += {"{": 1, "}": -1}.get(tok, 0)
            continue
        if depth == 0 and tok == "{" and _function_name([t for _, t in item]):
            name = _function_name([t for _, t in item]) or ""
            defined.add(name)
            if name != kernel and "static" not in [t for _, t in item]:
                found.append(Violation(item[0][0], f"helper function `{name}` must be static"))
            item, body = [], 1
            continue
        if depth == 0 and tok == ";":
            if item:
                found += _check_declaration(item, declared)
            item = []
            continue
        depth += {"{": 1, "}": -1}.get(tok, 0)
        item.append((ln, tok))
    for ln, name in declared:  # prototypes: of the kernel, a helper defined here, or an allowed function
        if name not in defined and name != kernel and not _allowed_call(name):
            found.append(Violation(ln, f"declares `{name}`, which is neither defined here nor an allowed function"))
    return defined, found


def _strip_attributes(toks: list[str]) -> list[str]:
    return [toks[i] for i in _outside_attribute_groups(toks)]


def _outside_attribute_groups(toks: list[str]) -> list[int]:
    """Indices of the tokens outside `__attribute__((...))`, `__declspec(...)` and `alignas(...)` groups."""
    kept: list[int] = []
    i = 0
    while i < len(toks):
        if toks[i] in _ATTRIBUTE_HEADS and i + 1 < len(toks) and toks[i + 1] == "(":
            depth, i = 0, i + 1
            while i < len(toks):
                depth += {"(": 1, ")": -1}.get(toks[i], 0)
                i += 1
                if depth == 0:
                    break
            continue
        kept.append(i)
        i += 1
    return kept


_ATTRIBUTE_HEADS = ("__attribute__", "__attribute", "__declspec", "_Alignas", "alignas")


def _function_name(toks: list[str]) -> str | None:
    """The name a declaration declares as a function (`f` in `static float f(int)`), else None."""
    toks = _strip_attributes(toks)
    if "=" in toks:
        return None
    depth = 0
    for k, t in enumerate(toks):
        if t == "(":
            prev, nxt = (toks[k - 1] if k else ""), (toks[k + 1] if k + 1 < len(toks) else "")
            if depth == 0 and _IDENT.match(prev) and prev not in _NOT_CALLS and nxt != "*":
                return prev
            depth += 1
        elif t == ")":
            depth -= 1
    return None


def _check_declaration(item: list[tuple[int, str]], declared: list[tuple[int, str]]) -> list[Violation]:
    toks = [t for _, t in item]
    if toks[0] in ("typedef", "_Static_assert", "static_assert"):
        return []
    name = _function_name(toks)
    if name:
        declared.append((item[0][0], name))
        return []
    if toks[0] in ("struct", "union", "enum") and toks[-1] == "}":
        return []  # a type definition without a variable
    if "extern" in toks:
        return [Violation(item[0][0], "extern objects are not allowed: a candidate only computes on its arguments")]
    if "const" in toks:
        return []
    return [Violation(item[0][0], "mutable global state is not allowed: use `static const` tables or locals")]


def _check_static_state(tokens: list[tuple[int, str]]) -> list[Violation]:
    """`static` / thread-local variables inside functions must be const (no caching across calls)."""
    found = []
    depth = 0
    for i, (ln, tok) in enumerate(tokens):
        if tok == "{":
            depth += 1
        elif tok == "}":
            depth -= 1
        elif depth > 0 and tok in ("static", "_Thread_local", "__thread", "thread_local", "extern"):
            decl = []
            for k in range(i + 1, len(tokens)):  # by index: a slice per `static` would be quadratic
                if tokens[k][1] in (";", "=", "{"):
                    break
                decl.append(tokens[k][1])
            if tok == "extern":
                if not (decl and "(" in decl):
                    found.append(Violation(ln, "extern objects are not allowed: a candidate only computes"))
            elif "const" not in decl:
                found.append(Violation(ln, "static variables inside functions must be const (no state between calls)"))
    return found


# ------------------------------------------------------------------------------------ compiled object

_SECTION_OK = re.compile(
    r"^(\.text(\..*)?|\.rodata(\..*)?|\.srodata(\..*)?|\.comment|\.note\.GNU-stack|\.llvm_addrsig|"
    r"\.riscv\.attributes|\.rela?\..*|\.symtab|\.strtab|\.shstrtab|\.group|\.eh_frame|\.data\.rel\.ro(\..*)?|"
    r"\.bss(\..*)?|\.sbss(\..*)?|\.data(\..*)?|\.sdata(\..*)?|\.note\..*|\.llvm\.call-graph-profile|"
    r"\.debug_.*|)$"
)
_ECALL_WORDS = {0x00000073: "ecall", 0x00100073: "ebreak"}
_C_EBREAK = 0x9002
# CSRs honest vector/FP code touches: fflags, frm, fcsr, vstart, vxsat, vxrm, vcsr, vl, vtype, vlenb.
_CSR_OK = {0x001, 0x002, 0x003, 0x008, 0x009, 0x00A, 0x00F, 0xC20, 0xC21, 0xC22}
SHF_WRITE, SHF_ALLOC, SHF_EXECINSTR, SHT_SYMTAB, SHT_NOBITS, EM_RISCV = 0x1, 0x2, 0x4, 2, 8, 243


def check_object(data: bytes, kernel: str) -> list[Violation]:
    """Checks on the candidate's compiled object (ELF64 little-endian); any parse failure rejects."""
    try:
        sections = _elf_sections(data)
        found = _check_sections(sections)
        found += _check_symbols(data, sections, kernel)
        riscv = struct.unpack_from("<H", data, 0x12)[0] == EM_RISCV  # host objects: sections and symbols only
        if not riscv:
            return found
        taken, call_sites, jumps = check_code_addresses(data, sections)
        found += taken
        for index, sec in enumerate(sections):
            if sec["flags"] & SHF_EXECINSTR and sec["type"] != SHT_NOBITS:
                code = data[sec["offset"] : sec["offset"] + sec["size"]]
                found += _check_code(sec["name"], code)
                found += check_indirect_jumps(sec["name"], code, call_sites.get(index, set()))
                found += check_jump_targets(sec["name"], code, jumps.get(index, {}))
        return found
    except (struct.error, IndexError, ValueError, KeyError) as exc:
        return [Violation(0, f"object file could not be checked: {exc}")]


def object_too_large(data: bytes, limit: int) -> str | None:
    """Why the object asks for more loaded code and data than `limit` bytes (None: it does not)."""
    try:
        sections = _elf_sections(data)
    except (struct.error, IndexError, ValueError) as exc:
        return f"object file could not be read: {exc}"
    loaded = sum(sec["size"] for sec in sections if sec["flags"] & SHF_ALLOC)
    if loaded > limit:
        return f"the object's code and data take {loaded >> 20} MB, more than the {limit >> 20} MB limit"
    return None


def _elf_sections(data: bytes) -> list[dict]:
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ValueError("not a 64-bit little-endian ELF object")
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    raw = []
    for i in range(shnum):
        name, typ, flags, _addr, offset, size, link, info, _align, entsize = struct.unpack_from(
            "<IIQQQQIIQQ", data, shoff + i * shentsize
        )
        raw.append({"name_off": name, "type": typ, "flags": flags, "offset": offset, "size": size, "link": link,
                    "info": info, "entsize": entsize})  # fmt: skip
    strtab = raw[shstrndx]
    for sec in raw:
        sec["name"] = _cstr(data, strtab["offset"] + sec["name_off"])
        if sec["type"] != SHT_NOBITS and sec["offset"] + sec["size"] > len(data):
            raise ValueError(f"section {sec['name']} lies outside the file")
    return raw


def _cstr(data: bytes, at: int) -> str:
    end = data.index(b"\0", at)
    return data[at:end].decode("ascii", errors="replace")


def _check_sections(sections: list[dict]) -> list[Violation]:
    found = []
    for sec in sections:
        name = sec["name"]
        if re.match(r"^\.(init_array|fini_array|preinit_array|ctors|dtors|init|fini)\b", name):
            found.append(Violation(0, f"object has a `{name}` section: code that runs outside the kernel call"))
        elif not _SECTION_OK.match(name):
            found.append(Violation(0, f"object has an unexpected section `{name}`"))
        elif sec["flags"] & SHF_WRITE and sec["flags"] & SHF_EXECINSTR:
            found.append(Violation(0, f"section `{name}` is writable and executable"))
        elif sec["flags"] & SHF_WRITE and sec["size"] and not name.startswith(".data.rel.ro"):
            found.append(Violation(0, f"writable data in `{name}`: no mutable global or static state"))
    return found


def _check_symbols(data: bytes, sections: list[dict], kernel: str) -> list[Violation]:
    found = []
    for symtab in (s for s in sections if s["type"] == SHT_SYMTAB):
        names = sections[symtab["link"]]
        for off in range(symtab["offset"], symtab["offset"] + symtab["size"], symtab["entsize"] or 24):
            st_name, st_info, _other, st_shndx, _value, _size = struct.unpack_from("<IBBHQQ", data, off)
            bind, name = st_info >> 4, _cstr(data, names["offset"] + st_name)
            if not name or bind == 0:  # local symbols cannot reach the harness or libc
                continue
            if st_shndx == 0:
                if not _allowed_call(name):
                    found.append(Violation(0, f"object needs `{name}`, which is not an allowed function"))
            elif name != kernel:
                found.append(Violation(0, f"object exports `{name}`: only `{kernel}` may be a global symbol"))
    return found


def _check_code(section: str, code: bytes) -> list[Violation]:
    """ecall/ebreak/CSR access in a decoded sweep, and ecall/ebreak words at every 2-byte offset."""
    found: list[Violation] = []
    i = 0
    while i + 2 <= len(code):
        half = code[i] | code[i + 1] << 8
        if half & 0b11 != 0b11:  # 16-bit (RVC)
            if half == _C_EBREAK:
                found.append(Violation(0, f"`c.ebreak` in {section} at offset {i:#x}"))
            i += 2
            continue
        if i + 4 > len(code):
            break
        word = int.from_bytes(code[i : i + 4], "little")
        if word & 0x1F == 0x1F:
            found.append(Violation(0, f"an instruction longer than 32 bits in {section} at offset {i:#x}"))
        elif word & 0x7F == 0x73:  # SYSTEM: ecall, ebreak, CSR access, privileged instructions
            funct3, csr = (word >> 12) & 7, word >> 20
            if funct3 in (1, 2, 3, 5, 6, 7) and csr in _CSR_OK:
                pass
            else:
                what = _ECALL_WORDS.get(word) or (
                    f"access to CSR {_csr_name(csr)}" if funct3 not in (0, 4) else "a system instruction"
                )
                found.append(Violation(0, f"{what} in {section} at offset {i:#x}"))
        i += 4
    found += _hidden_in(section, code)
    unique = list(dict.fromkeys(found))
    return unique[:10]


def _hidden_in(section: str, code: bytes) -> list[Violation]:
    """What a jump into the middle of an instruction would find, at every 2-byte offset: ecall, ebreak and
    counter reads. Not jalr: a `jalr x0` other than ret sits inside other instructions of 190 of 877
    honest RISC-V objects (c.jr in 7; scripts/honest_checks.py --measure); check_jump_targets keeps every
    jump on instruction starts instead, so only a corrupted return address could reach them."""
    found = []
    for j in range(0, len(code) - 3, 2):
        word = int.from_bytes(code[j : j + 4], "little")
        if word in _ECALL_WORDS:
            found.append(Violation(0, f"{_ECALL_WORDS[word]} hidden in {section} at offset {j:#x}"))
        elif word & 0x7F == 0x73 and (word >> 12) & 7 not in (0, 4) and _is_counter(word >> 20):
            found.append(Violation(0, f"a read of CSR {_csr_name(word >> 20)} in {section} at offset {j:#x}"))
    return found


def _is_counter(csr: int) -> bool:
    """cycle, time, instret, hpmcounter3..31 and their RV32 high halves (user, machine)."""
    return any(base <= csr < base + 32 for base in (0xC00, 0xC80, 0xB00, 0xB80))


def _csr_name(csr: int) -> str:
    names = {0: "cycle", 1: "time", 2: "instret"}
    low, high = csr & 0x1F, csr & 0x80
    if csr >> 8 in (0xC, 0xB) and low in names | {k: "" for k in range(3, 32)}:
        name = names.get(low, f"hpmcounter{low}")
        return ("m" if csr >> 8 == 0xB else "") + name + ("h" if high else "")
    return hex(csr)


# -- control flow out of the candidate (red team: `(fn)((char *)&free + off)` reached libc's write/_exit and
# the harness's region markers). A kernel only calls: every transfer out of its own code must be a direct
# call of an allowed function, so no address of code is ever taken and no jump goes through a register.
SHT_RELA = 4
STT_FUNC, STT_SECTION = 2, 3
R_RISCV_CALL, R_RISCV_CALL_PLT, R_RISCV_RELAX, R_RISCV_ALIGN = 18, 19, 51, 43
R_RISCV_BRANCH, R_RISCV_JAL, R_RISCV_RVC_BRANCH, R_RISCV_RVC_JUMP = 16, 17, 44, 45
R_RISCV_PCREL_LO12_I, R_RISCV_PCREL_LO12_S = 24, 25
_CALLS = {R_RISCV_CALL, R_RISCV_CALL_PLT}
_TO_CODE_OK = _CALLS | {R_RISCV_BRANCH, R_RISCV_JAL, R_RISCV_RVC_BRANCH, R_RISCV_RVC_JUMP, R_RISCV_RELAX,
                        R_RISCV_ALIGN, R_RISCV_PCREL_LO12_I, R_RISCV_PCREL_LO12_S}  # fmt: skip
_CHECKED_DATA = re.compile(r"^\.(rodata|data|sdata|srodata|data\.rel\.ro)")  # where a code-pointer table would live


def _symbols(data: bytes, symtab: dict) -> list[tuple[int, int, int, int]]:
    """(name offset, type, section index, value) of every symbol of `symtab`."""
    out = []
    for off in range(symtab["offset"], symtab["offset"] + symtab["size"], symtab["entsize"] or 24):
        st_name, st_info, _other, st_shndx, value, _size = struct.unpack_from("<IBBHQQ", data, off)
        out.append((st_name, st_info & 0xF, st_shndx, value))
    return out


_JUMPS = {R_RISCV_BRANCH, R_RISCV_JAL, R_RISCV_RVC_BRANCH, R_RISCV_RVC_JUMP}
Jumps = dict[int, dict[int, int | None]]  # section -> jump offset -> target offset in it (None: elsewhere)


def check_code_addresses(data: bytes, sections: list[dict]) -> tuple[list[Violation], dict[int, set[int]], Jumps]:
    """Relocations that take the address of code, the call sites (by section) whose jalr is a call, and the
    targets of relocated branches and jumps (by section)."""
    found: list[Violation] = []
    call_sites: dict[int, set[int]] = {}
    jumps: Jumps = {}
    for rela in (s for s in sections if s["type"] == SHT_RELA):
        target = sections[rela["info"]]
        in_code = bool(target["flags"] & SHF_EXECINSTR)
        if not in_code and not _CHECKED_DATA.match(target["name"]):
            continue  # unwind and debug tables describe code; nothing jumps through them
        symtab = sections[rela["link"]]
        names = sections[symtab["link"]]
        symbols = _symbols(data, symtab)
        for off in range(rela["offset"], rela["offset"] + rela["size"], rela["entsize"] or 24):
            r_offset, r_info, addend = struct.unpack_from("<QQq", data, off)
            sym, rtype = r_info >> 32, r_info & 0xFFFFFFFF
            if rtype in _CALLS:
                call_sites.setdefault(rela["info"], set()).add(r_offset)
            if sym == 0 or sym >= len(symbols):
                continue
            st_name, st_type, st_shndx, value = symbols[sym]
            if in_code and rtype in _JUMPS:
                local = st_shndx == rela["info"]
                jumps.setdefault(rela["info"], {})[r_offset] = value + addend if local else None
            external = st_shndx == 0
            code = st_type == STT_FUNC or (0 < st_shndx < len(sections) and sections[st_shndx]["flags"] & SHF_EXECINSTR)
            if (external or code) and not (in_code and rtype in _TO_CODE_OK):
                name = _cstr(data, names["offset"] + st_name) or sections[st_shndx]["name"]
                found.append(
                    Violation(
                        0, f"takes the address of `{name}`: a kernel may call functions, never take their address"
                    )
                )
    return list(dict.fromkeys(found))[:10], call_sites, jumps


def instruction_starts(code: bytes) -> list[int]:
    """Offsets of the instructions of a decoded sweep (16- and 32-bit)."""
    starts, i = [], 0
    while i + 2 <= len(code):
        starts.append(i)
        i += 2 if code[i] & 0b11 != 0b11 else 4
    return starts


def _jump_offset(code: bytes, i: int) -> int | None:
    """The pc-relative offset of the branch or jump at `i` as encoded (None: not a direct jump)."""
    h = code[i] | code[i + 1] << 8
    if h & 0b11 == 0b01 and h >> 13 == 0b101:  # c.j: imm[11|4|9:8|10|6|7|3:1|5] in bits 12..2
        imm = _bits(h, 3, 5) << 1 | _bits(h, 11, 11) << 4 | _bits(h, 2, 2) << 5 | _bits(h, 7, 7) << 6
        imm |= _bits(h, 6, 6) << 7 | _bits(h, 9, 10) << 8 | _bits(h, 8, 8) << 10 | _bits(h, 12, 12) << 11
        return _signed(imm, 12)
    if h & 0b11 == 0b01 and h >> 13 in (0b110, 0b111):  # c.beqz, c.bnez: imm[8|4:3] 12..10, imm[7:6|2:1|5] 6..2
        imm = _bits(h, 3, 4) << 1 | _bits(h, 10, 11) << 3 | _bits(h, 2, 2) << 5 | _bits(h, 5, 6) << 6
        return _signed(imm | _bits(h, 12, 12) << 8, 9)
    if h & 0b11 != 0b11 or i + 4 > len(code):
        return None
    w = int.from_bytes(code[i : i + 4], "little")
    if w & 0x7F == 0x6F:  # jal: imm[20|10:1|11|19:12] in bits 31..12
        imm = _bits(w, 21, 30) << 1 | _bits(w, 20, 20) << 11 | _bits(w, 12, 19) << 12 | _bits(w, 31, 31) << 20
        return _signed(imm, 21)
    if w & 0x7F == 0x63:  # beq .. bgeu: imm[12|10:5] in 31..25, imm[4:1|11] in 11..7
        imm = _bits(w, 8, 11) << 1 | _bits(w, 25, 30) << 5 | _bits(w, 7, 7) << 11 | _bits(w, 31, 31) << 12
        return _signed(imm, 13)
    return None


def _bits(value: int, lo: int, hi: int) -> int:
    return (value >> lo) & ((1 << (hi - lo + 1)) - 1)


def _signed(value: int, bits: int) -> int:
    return value - (1 << bits) if value >> (bits - 1) else value


def check_jump_targets(section: str, code: bytes, relocated: dict[int, int | None]) -> list[Violation]:
    """Every branch and jump lands on an instruction of the sweep: no path of the kernel's own control flow
    reaches the middle of an instruction (where bytes of another could hide an instruction the sweep
    never saw). Relocated ones are read from their relocation; others from their encoding."""
    starts = instruction_starts(code)
    known = set(starts) | {len(code)}
    found = []
    for i in starts:
        offset = _jump_offset(code, i)
        if offset is None:
            continue
        target = relocated[i] if i in relocated else i + offset
        if target is not None and target not in known:
            found.append(Violation(0, f"a jump into the middle of an instruction in {section} at offset {i:#x}"))
    return found[:10]


def check_indirect_jumps(section: str, code: bytes, call_sites: set[int]) -> list[Violation]:
    """Every jalr is a return or the second half of a relocated call (auipc at the call site): no jump
    through a computed address."""
    found = []
    i = 0
    while i + 2 <= len(code):
        half = code[i] | code[i + 1] << 8
        if half & 0b11 != 0b11:
            funct4, rs1, rs2 = half >> 12, (half >> 7) & 0x1F, (half >> 2) & 0x1F
            indirect = half & 0b11 == 0b10 and funct4 in (0b1000, 0b1001) and rs1 and not rs2
            if indirect and not (funct4 == 0b1000 and rs1 == 1):  # c.jr ra is a return
                found.append(Violation(0, f"an indirect jump or call in {section} at offset {i:#x}"))
            i += 2
            continue
        word = int.from_bytes(code[i : i + 4], "little")
        if word & 0x7F == 0x67:  # jalr
            rd, rs1, imm = (word >> 7) & 0x1F, (word >> 15) & 0x1F, word >> 20
            is_return = rd == 0 and rs1 == 1 and imm == 0
            if not is_return and (i - 4) not in call_sites:
                found.append(Violation(0, f"an indirect jump or call in {section} at offset {i:#x}"))
        i += 4
    return found[:10]
