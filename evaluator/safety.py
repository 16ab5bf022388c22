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

import re
import struct
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
    r"clang\s+optimize\b|message\b|once$|loop\b|vectorize\b)"
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
_ASM_OPERANDS = re.compile(r"^[\w%\[\]().,+\-\s]*$")

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
    for lineno, line in logical_lines(code):
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
        elif name not in _DIRECTIVES:
            found.append(Violation(lineno, f"#{name} is not allowed" if name else "this directive is not allowed"))
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
    pre: str, kernel: str, extra_headers: frozenset[str] = frozenset(), main_file: str = "candidate.c"
) -> list[Violation]:
    """Checks on `clang -E` output, restricted to lines that come from the candidate file itself."""
    lines, found = _own_lines(pre, main_file, ALLOWED_HEADERS | extra_headers)
    tokens = [(ln, tok) for ln, text in lines for tok in _TOKEN_RE.findall(text)]
    pragmas = [(ln, text.strip()) for ln, text in lines if text.lstrip().startswith("#")]
    code = [(ln, tok) for ln, text in lines if not text.lstrip().startswith("#") for tok in _TOKEN_RE.findall(text)]
    found += _check_pragmas(pragmas)
    found += _check_spellings(code)
    found += _check_asm(code)
    found += _check_attributes(code)
    found += _check_function_pointers(code)
    defined, top = _check_top_level(code, kernel)
    found += top
    found += _check_calls(_outside_attributes(code), defined | {kernel})
    found += _check_static_state(code)
    del tokens
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
    for text in pre.splitlines():
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


def _decode_c_string(body: str) -> str:
    """The bytes a C string literal body stands for (\\n, octal, hex, ... escapes decoded)."""
    out: list[str] = []
    i = 0
    simple = {"n": "\n", "t": "\t", "r": "\r", "v": "\v", "f": "\f", "a": "\a", "b": "\b", "e": "\x1b"}
    while i < len(body):
        c = body[i]
        if c != "\\" or i + 1 >= len(body):
            out.append(c)
            i += 1
            continue
        nxt = body[i + 1]
        if nxt in "01234567":
            m = re.match(r"[0-7]{1,3}", body[i + 1 :])
            out.append(chr(int(m.group(0), 8) & 0xFF))  # type: ignore[union-attr]
            i += 1 + len(m.group(0))  # type: ignore[union-attr]
        elif nxt == "x":
            m = re.match(r"[0-9A-Fa-f]+", body[i + 2 :])
            out.append(chr(int(m.group(0), 16) & 0xFF) if m else "x")
            i += 2 + (len(m.group(0)) if m else 0)
        elif nxt in "uU":
            width = 4 if nxt == "u" else 8
            out.append(chr(int(body[i + 2 : i + 2 + width] or "0", 16) % 0x110000))
            i += 2 + width
        else:
            out.append(simple.get(nxt, nxt))
            i += 2
    return "".join(out)


def _check_asm(tokens: list[tuple[int, str]]) -> list[Violation]:
    """Inline asm may hold vector or IME instructions only (escapes decoded first)."""
    found = []
    for i, (ln, tok) in enumerate(tokens):
        if tok not in _ASM_KEYWORDS:
            continue
        j = i + 1
        while j < len(tokens) and tokens[j][1] in ("volatile", "__volatile__", "__volatile", "goto", "inline"):
            j += 1
        if j >= len(tokens) or tokens[j][1] != "(":
            found.append(Violation(ln, "asm used outside an asm(...) statement"))
            continue
        template = ""
        for _, t in tokens[j + 1 :]:
            if t.startswith('"'):
                template += _decode_c_string(t[1:-1])
            else:
                break
        if not template.strip():
            found.append(Violation(ln, "asm without a literal instruction string (register variables not allowed)"))
        for insn in re.split(r"[\n;]", template):
            insn = insn.replace("\t", " ").strip()
            if not insn:
                continue
            mnemonic = insn.split()[0].lower()
            if ":" in insn or "#" in insn:
                found.append(Violation(ln, f"asm `{insn[:30]}`: labels and comments are not allowed"))
            elif not _ASM_MNEMONIC.match(mnemonic):
                found.append(Violation(ln, f"asm instruction `{mnemonic}` is not a vector/matrix instruction"))
            elif not _ASM_OPERANDS.match(insn[len(mnemonic) :]) or not insn.isascii():
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
            for _, t in tokens[i + 1 :]:
                if t in (";", "=", "{"):
                    break
                decl.append(t)
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
_CSR_NAMES = {0xC00: "cycle", 0xC01: "time", 0xC02: "instret"}
SHF_WRITE, SHF_EXECINSTR, SHT_SYMTAB, SHT_NOBITS, EM_RISCV = 0x1, 0x4, 2, 8, 243


def check_object(data: bytes, kernel: str) -> list[Violation]:
    """Checks on the candidate's compiled object (ELF64 little-endian); any parse failure rejects."""
    try:
        sections = _elf_sections(data)
        found = _check_sections(sections)
        found += _check_symbols(data, sections, kernel)
        riscv = struct.unpack_from("<H", data, 0x12)[0] == EM_RISCV  # host objects: sections and symbols only
        if not riscv:
            return found
        taken, call_sites = check_code_addresses(data, sections)
        found += taken
        for index, sec in enumerate(sections):
            if sec["flags"] & SHF_EXECINSTR and sec["type"] != SHT_NOBITS:
                code = data[sec["offset"] : sec["offset"] + sec["size"]]
                found += _check_code(sec["name"], code)
                found += check_indirect_jumps(sec["name"], code, call_sites.get(index, set()))
        return found
    except (struct.error, IndexError, ValueError, KeyError) as exc:
        return [Violation(0, f"object file could not be checked: {exc}")]


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
                    f"access to CSR {_CSR_NAMES.get(csr, hex(csr))}" if funct3 not in (0, 4) else "a system instruction"
                )
                found.append(Violation(0, f"{what} in {section} at offset {i:#x}"))
        i += 4
    for j in range(0, len(code) - 3, 2):  # what a jump into the middle of an instruction would find
        word = int.from_bytes(code[j : j + 4], "little")
        if word in _ECALL_WORDS:
            found.append(Violation(0, f"{_ECALL_WORDS[word]} hidden in {section} at offset {j:#x}"))
    unique = list(dict.fromkeys(found))
    return unique[:10]


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


def _symbols(data: bytes, symtab: dict) -> list[tuple[str, int, int]]:
    """(name, type, section index) of every symbol of `symtab`."""
    out = []
    for off in range(symtab["offset"], symtab["offset"] + symtab["size"], symtab["entsize"] or 24):
        st_name, st_info, _other, st_shndx, _value, _size = struct.unpack_from("<IBBHQQ", data, off)
        out.append((st_name, st_info & 0xF, st_shndx))
    return out


def check_code_addresses(data: bytes, sections: list[dict]) -> tuple[list[Violation], dict[int, set[int]]]:
    """Relocations that take the address of code, and the call sites (by section) whose jalr is a call."""
    found: list[Violation] = []
    call_sites: dict[int, set[int]] = {}
    for rela in (s for s in sections if s["type"] == SHT_RELA):
        target = sections[rela["info"]]
        in_code = bool(target["flags"] & SHF_EXECINSTR)
        if not in_code and not _CHECKED_DATA.match(target["name"]):
            continue  # unwind and debug tables describe code; nothing jumps through them
        symtab = sections[rela["link"]]
        names = sections[symtab["link"]]
        symbols = _symbols(data, symtab)
        for off in range(rela["offset"], rela["offset"] + rela["size"], rela["entsize"] or 24):
            r_offset, r_info, _addend = struct.unpack_from("<QQq", data, off)
            sym, rtype = r_info >> 32, r_info & 0xFFFFFFFF
            if rtype in _CALLS:
                call_sites.setdefault(rela["info"], set()).add(r_offset)
            if sym == 0 or sym >= len(symbols):
                continue
            st_name, st_type, st_shndx = symbols[sym]
            external = st_shndx == 0
            code = st_type == STT_FUNC or (0 < st_shndx < len(sections) and sections[st_shndx]["flags"] & SHF_EXECINSTR)
            if (external or code) and not (in_code and rtype in _TO_CODE_OK):
                name = _cstr(data, names["offset"] + st_name) or sections[st_shndx]["name"]
                found.append(
                    Violation(
                        0, f"takes the address of `{name}`: a kernel may call functions, never take their address"
                    )
                )
    return list(dict.fromkeys(found))[:10], call_sites


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
