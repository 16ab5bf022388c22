"""Static check of candidate code before it is compiled.

A candidate is pure computation: RVV intrinsics, static helpers, <math.h>, read-only tables. We reject
what could escape the sandbox, fake a result or cheat the timing: process, file, network and system
calls, non-vector inline asm, includes outside a short list, code that runs before main, the harness's
and reference's symbols, I/O (a candidate could print a forged result record), and mutable static
state (a kernel that caches results between calls). The check runs on the raw text (directives) and on
the preprocessed text of the candidate's own lines, so names rebuilt by macros are caught too.
"""

from __future__ import annotations

import re
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

_FORBIDDEN_NAMES = {
    # processes and the system
    "system", "popen", "pclose", "fork", "vfork", "clone", "clone3", "execl", "execle", "execlp", "execv",
    "execve", "execvp", "execvpe", "fexecve", "execveat", "posix_spawn", "posix_spawnp", "syscall", "ptrace",
    "kill", "killpg", "raise", "signal", "sigaction", "alarm", "setitimer", "setsid", "setpgid", "setuid",
    "setgid", "seteuid", "setrlimit", "prlimit", "daemon", "wait", "waitpid", "chroot", "pthread_create",
    "thrd_create", "sleep", "usleep", "nanosleep", "getpid", "getppid",
    # files, sockets, memory mapping, dynamic loading
    "fopen", "freopen", "fdopen", "open", "openat", "openat2", "creat", "close", "read", "write", "pread",
    "pwrite", "readv", "writev", "lseek", "unlink", "unlinkat", "remove", "rename", "mkdir", "rmdir",
    "chdir", "fchdir", "chmod", "chown", "truncate", "ftruncate", "dup", "dup2", "pipe", "ioctl", "fcntl",
    "socket", "socketpair", "connect", "bind", "listen", "accept", "accept4", "send", "sendto", "sendmsg",
    "recv", "recvfrom", "recvmsg", "getaddrinfo", "gethostbyname", "mmap", "munmap", "mprotect", "mremap",
    "madvise", "brk", "sbrk", "dlopen", "dlsym", "dlclose", "tmpfile", "mkstemp", "getenv", "secure_getenv",
    "setenv", "putenv", "environ", "__environ",
    # output: a candidate could print a forged result record
    "printf", "fprintf", "dprintf", "vprintf", "vfprintf", "puts", "fputs", "putchar", "fputc", "putc",
    "fwrite", "fflush", "perror", "stdout", "stderr", "stdin", "fileno",
    # leaving the harness early or jumping around it
    "exit", "_exit", "_Exit", "quick_exit", "atexit", "at_quick_exit", "abort", "setjmp", "longjmp",
    "_setjmp", "_longjmp", "sigsetjmp", "siglongjmp", "__builtin_setjmp", "__builtin_longjmp",
    "__builtin_frame_address", "__builtin_return_address", "__builtin_extract_return_addr",
    "main",
}  # fmt: skip
_FORBIDDEN_PREFIXES = ("eok_", "__wrap_", "__real_", "__libc_", "__NR_", "SYS_", "_IO_", "__syscall")
# Attributes that run code outside the kernel call or redirect symbols (checked with __x__ spellings too).
_FORBIDDEN_ATTRIBUTES = {"constructor", "destructor", "section", "alias", "ifunc", "weakref", "weak", "naked"}
_ASM_KEYWORDS = {"asm", "__asm", "__asm__"}
# Vector (v*), SpacemiT IME (smt.*) and nop only: no ecall, no CSR access, no data directives.
_ASM_MNEMONIC = re.compile(r"^(v[a-z0-9.]*|smt\.[a-z0-9.]+|nop)$")

_TOKEN_RE = re.compile(
    r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|[A-Za-z_]\w*|\d[\w.]*|->|\+\+|--|<<=|>>=|##|&&|\|\||'
    r"[-+*/%&|^!=<>]=|<<|>>|\S"
)
_LINE_MARKER = re.compile(r'^#\s*(\d+)\s+"([^"]*)"')


@dataclass(frozen=True)
class Violation:
    line: int
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}" if self.line else self.message


def check_directives(code: str, extra_headers: frozenset[str] = frozenset()) -> list[Violation]:
    """Checks on the raw text: size, includes, and directives that would hide code from the later check."""
    if len(code.encode()) > MAX_SOURCE_BYTES:
        return [Violation(0, f"source is larger than {MAX_SOURCE_BYTES >> 10} KB")]
    found: list[Violation] = []
    allowed = ALLOWED_HEADERS | extra_headers
    for lineno, raw in enumerate(_strip_comments(code).splitlines(), 1):
        line = raw.strip()
        if line.startswith("%:"):  # the digraph spelling of '#'
            line = "#" + line[2:]
        if not line.startswith("#"):
            continue
        directive = line[1:].strip()
        word = re.match(r"\w*", directive)
        name = word.group(0) if word else ""
        if name == "include":
            m = re.match(r"include\s*<([\w./]+)>\s*$", directive)
            if not m or m.group(1) not in allowed:
                found.append(
                    Violation(
                        lineno,
                        f"#include {directive[7:].strip()} is not allowed (allowed: {', '.join(sorted(allowed))})",
                    )
                )
        elif name in ("include_next", "import", "line", "embed") or (name.isdigit() and name):
            found.append(Violation(lineno, f"#{name} is not allowed"))
    return found


def check_preprocessed(pre: str, kernel: str) -> list[Violation]:
    """Checks on `clang -E` output, restricted to lines that come from the candidate file itself."""
    lines = _own_lines(pre)
    tokens = [(ln, tok) for ln, text in lines for tok in _TOKEN_RE.findall(text)]
    # pragmas have no `;`: keep them out of the declaration parser (their names are still checked)
    code = [(ln, tok) for ln, text in lines if not text.lstrip().startswith("#") for tok in _TOKEN_RE.findall(text)]
    found: list[Violation] = []
    found += _check_names(tokens)
    found += _check_asm(code)
    found += _check_top_level(code, kernel)
    found += _check_static_state(code)
    # one message per line and rule is plenty for the feedback
    seen: set[tuple[int, str]] = set()
    unique = []
    for v in found:
        if (v.line, v.message) not in seen:
            seen.add((v.line, v.message))
            unique.append(v)
    return sorted(unique, key=lambda v: v.line)


def _strip_comments(code: str) -> str:
    """Comments become spaces (newlines kept, so line numbers stay right); strings are left alone."""
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
            i = n if j < 0 else j
        elif code.startswith("/*", i):
            j = code.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("".join("\n" if ch == "\n" else " " for ch in code[i:j]))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out).replace("\\\n", " \n")


def _own_lines(pre: str) -> list[tuple[int, str]]:
    """(line number in the candidate, text) for every preprocessed line that came from candidate.c."""
    result: list[tuple[int, str]] = []
    current, lineno = "", 0
    main_file = None
    for text in pre.splitlines():
        m = _LINE_MARKER.match(text)
        if m:
            lineno, current = int(m.group(1)), m.group(2)
            if main_file is None:
                main_file = current
            continue
        if current == main_file and text.strip():
            result.append((lineno, text))
        lineno += 1
    return result


def _check_names(tokens: list[tuple[int, str]]) -> list[Violation]:
    found = []
    for ln, tok in tokens:
        if not (tok[0].isalpha() or tok[0] == "_"):
            continue
        if tok in _FORBIDDEN_NAMES:
            found.append(Violation(ln, f"uses `{tok}`: candidates may only compute (no processes, files, I/O, exits)"))
        elif tok.startswith(_FORBIDDEN_PREFIXES):
            found.append(Violation(ln, f"uses `{tok}`: harness, reference and libc-internal names are off limits"))
        elif tok.strip("_") in _FORBIDDEN_ATTRIBUTES:
            found.append(Violation(ln, f"uses `{tok}`: attributes that move code or symbols are not allowed"))
    return found


def _check_asm(tokens: list[tuple[int, str]]) -> list[Violation]:
    """Inline asm may hold vector or IME instructions only."""
    found = []
    for i, (ln, tok) in enumerate(tokens):
        if tok not in _ASM_KEYWORDS:
            continue
        j = i + 1
        while j < len(tokens) and tokens[j][1] in ("volatile", "__volatile__", "goto", "inline"):
            j += 1
        if j >= len(tokens) or tokens[j][1] != "(":
            found.append(Violation(ln, "asm used outside an asm(...) statement"))
            continue
        template = ""
        for _, t in tokens[j + 1 :]:
            if t.startswith('"'):
                template += t[1:-1]
            else:
                break
        if not template:
            found.append(Violation(ln, "asm without a literal instruction string (register variables not allowed)"))
        for insn in re.split(r"\\n|;|\\t?\n", template):
            insn = re.sub(r"^\s*(\d+|[A-Za-z_.]\w*):", "", insn.replace("\\t", " ")).strip()
            if not insn:
                continue
            mnemonic = insn.split()[0].lower()
            if not _ASM_MNEMONIC.match(mnemonic):
                found.append(Violation(ln, f"asm instruction `{mnemonic}` is not a vector/matrix instruction"))
    return found


_IDENT = re.compile(r"^[A-Za-z_]\w*$")
_NOT_CALLS = {
    "__attribute__", "__declspec", "sizeof", "_Alignof", "alignof", "_Alignas", "alignas", "typeof",
    "__typeof__", "__typeof", "_Static_assert", "static_assert", "__extension__", "_Generic",
}  # fmt: skip


def _check_top_level(tokens: list[tuple[int, str]], kernel: str) -> list[Violation]:
    """Non-static functions other than the kernel, and mutable globals, at file scope."""
    found: list[Violation] = []
    item: list[tuple[int, str]] = []
    depth = 0  # braces entered while still inside a declaration (struct body, initializer)
    body = 0  # braces of a function body being skipped
    for ln, tok in tokens:
        if body:
            body += {"{": 1, "}": -1}.get(tok, 0)
            continue
        if depth == 0 and tok == "{" and _function_name([t for _, t in item]):
            name = _function_name([t for _, t in item])
            if name != kernel and "static" not in [t for _, t in item]:
                found.append(Violation(item[0][0], f"helper function `{name}` must be static"))
            item, body = [], 1
            continue
        if depth == 0 and tok == ";":
            if item:
                found += _check_declaration(item)
            item = []
            continue
        depth += {"{": 1, "}": -1}.get(tok, 0)
        item.append((ln, tok))
    return found


def _strip_attributes(toks: list[str]) -> list[str]:
    out: list[str] = []
    i = 0
    while i < len(toks):
        if (
            toks[i] in ("__attribute__", "__declspec", "_Alignas", "alignas")
            and i + 1 < len(toks)
            and toks[i + 1] == "("
        ):
            depth, i = 0, i + 1
            while i < len(toks):
                depth += {"(": 1, ")": -1}.get(toks[i], 0)
                i += 1
                if depth == 0:
                    break
            continue
        out.append(toks[i])
        i += 1
    return out


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


def _check_declaration(item: list[tuple[int, str]]) -> list[Violation]:
    toks = [t for _, t in item]
    if toks[0] in ("typedef", "_Static_assert", "static_assert", "extern") or _function_name(toks):
        return []  # types, assertions, prototypes
    if toks[0] in ("struct", "union", "enum") and toks[-1] == "}":
        return []  # a type definition without a variable
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
        elif depth > 0 and tok in ("static", "_Thread_local", "__thread", "thread_local"):
            decl = []
            for _, t in tokens[i + 1 :]:
                if t in (";", "=", "{"):
                    break
                decl.append(t)
            if "const" not in decl:
                found.append(Violation(ln, "static variables inside functions must be const (no state between calls)"))
    return found
