"""The run's kernel as text that can live inside a library's file: its file-scope names under a prefix.

A library file already has its own statics, macros and helpers (ggml's quants.c holds every format's dot
product; an OpenBLAS wrapper compiles the library's kernel beside ours). Renaming every name the kernel
declares at file scope (functions, variables, typedefs, macros) to `eok_<task>_<name>`, and its entry to
`eok_<task>`, keeps two kernels and the library apart without reading C's grammar in full.
"""

from __future__ import annotations

import re

_IDENT = re.compile(r"[A-Za-z_]\w*")
_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)", re.M)
# Words that can stand where a declared name does ("sizeof(x)" in an array bound, "__attribute__((...))").
_KEYWORDS = frozenset(
    "auto break case char const continue default do double else enum extern float for goto if inline int long "
    "register restrict return short signed sizeof static struct switch typedef union unsigned void volatile "
    "while _Bool _Complex _Alignas _Alignof _Atomic _Generic _Noreturn _Static_assert _Thread_local "
    "asm typeof _Pragma".split()
)


def mask(code: str) -> str:
    """`code` with comments and string/char literals blanked (newlines and offsets kept)."""
    out = list(code)
    i, n = 0, len(code)
    while i < n:
        two = code[i : i + 2]
        if two == "//":
            j = code.find("\n", i)
            j = n if j < 0 else j
        elif two == "/*":
            j = code.find("*/", i + 2)
            j = n if j < 0 else j + 2
        elif code[i] in "\"'":
            j = i + 1
            while j < n and code[j] != code[i] and code[j] != "\n":
                j += 2 if code[j] == "\\" else 1
            j = min(j + 1, n)
        else:
            i += 1
            continue
        for k in range(i, j):
            if out[k] != "\n":
                out[k] = " "
        i = j
    return "".join(out)


def file_scope_names(code: str) -> list[str]:
    """Names `code` declares at file scope: macros, functions, variables and typedefs (in order, once)."""
    masked = mask(code)
    names = list(dict.fromkeys(_DEFINE.findall(masked)))
    body = re.sub(r"^[ \t]*#.*(?:\\\n.*)*$", lambda m: re.sub(r"[^\n]", " ", m.group(0)), masked, flags=re.M)
    depth, initializer = 0, False
    for m in re.finditer(r"[A-Za-z_]\w*|[()\[\]{}=;,]", body):
        tok = m.group(0)
        if tok in "([{":
            depth += 1
        elif tok in ")]}":
            depth -= 1
        elif depth == 0 and tok == "=":
            initializer = True  # what follows names things declared elsewhere
        elif depth == 0 and tok in ";,":
            initializer = False
        elif depth == 0 and not initializer and tok not in _KEYWORDS and not tok.startswith("__"):
            nxt = re.match(r"\s*(.)", body[m.end() :], re.S)
            if nxt and nxt.group(1) in "([=;,":
                names.append(tok)
    return list(dict.fromkeys(names))


def prefixed(code: str, entry: str, prefix: str) -> tuple[str, str]:
    """`code` with its file-scope names prefixed; returns (new code, the entry's new name).

    `entry` (the task's function) becomes `prefix`; every other name `prefix_name`. Comments and strings
    are left alone; names from headers (uint8_t, __riscv_vle8_v_i8m1) are never declared here, so they stay."""
    renames = {n: (prefix if n == entry else f"{prefix}_{n}") for n in file_scope_names(code)}
    renames.setdefault(entry, prefix)
    masked = mask(code)
    out, last = [], 0
    for m in _IDENT.finditer(masked):
        new = renames.get(m.group(0))
        if new is None:
            continue
        out += [code[last : m.start()], new]
        last = m.end()
    out.append(code[last:])
    return "".join(out), prefix


def comment(*paragraphs: str, width: int = 100) -> str:
    """A C block comment of wrapped paragraphs, blank comment lines between them."""
    import textwrap

    lines: list[str] = []
    for para in paragraphs:
        if lines:
            lines.append(" *")
        lines += [f" * {line}" for line in textwrap.wrap(para.replace("*/", "* /"), width - 3)]
    return "/*\n" + "\n".join(lines) + "\n */"
