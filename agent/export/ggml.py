"""ggml: the run's kernel as the RVV branch of a CPU function in ggml-cpu's RISC-V quants.c.

The function keeps its signature (n, s, bs, vx, bx, vy, by, nrc) and its scalar fallback (the #else
branch); only the lines of its `#if defined(__riscv_v)` branch change: they call the run's kernel, which is
placed just before the function under the same condition, its file-scope names prefixed eok_<task>.
"""

from __future__ import annotations

import re
from pathlib import Path

from agent.export.csource import comment, mask, prefixed
from agent.export.routines import ExportRefused, GgmlRoutine
from agent.export.runfolder import RunRecord

# ggml's own repository keeps the CPU backend under src/, llama.cpp's copy under ggml/src/.
QUANTS = (Path("src/ggml-cpu/arch/riscv/quants.c"), Path("ggml/src/ggml-cpu/arch/riscv/quants.c"))
_RVV_IF = re.compile(r"^[ \t]*#[ \t]*if[ \t]+(?:defined[ \t]*\(?[ \t]*__riscv_v(?:_intrinsic)?\b[^\n]*)$", re.M)


def quants_file(clone: Path) -> Path:
    for rel in QUANTS:
        if (clone / rel).is_file():
            return rel
    raise ExportRefused(
        f"{clone}: no RISC-V quants.c ({' or '.join(map(str, QUANTS))})", "give a ggml (or llama.cpp) clone"
    )


def plan(record: RunRecord, routine: GgmlRoutine, clone: Path) -> dict[Path, str]:
    """quants.c (relative to the clone) -> its new text; ExportRefused when the function or its RVV branch
    is not where ggml keeps it."""
    rel = quants_file(clone)
    text = (clone / rel).read_text()
    return {rel: replace_branch(text, record, routine, rel)}


def replace_branch(text: str, record: RunRecord, routine: GgmlRoutine, rel: Path) -> str:
    start, body_open, end = _function(text, routine.routine, rel)
    body = text[body_open:end]
    m = _RVV_IF.search(body)
    if m is None:
        raise ExportRefused(
            f"{rel}: {routine.routine} has no `#if defined(__riscv_v)` branch to replace",
            "export to a ggml version whose RISC-V quants.c has an RVV branch for it",
        )
    branch_end = _branch_end(body, m.end(), rel, routine.routine)
    condition = m.group(0).strip()
    prologue = body[1 : m.start()]  # declarations before the #if (ggml's q8_0 dot declares x, y, sumf there)
    eok = f"eok_{record.task}"
    new_branch = _branch(record, routine, eok, _declared(prologue))
    new_body = body[: m.end()] + "\n" + new_branch + body[branch_end:]
    kernel, _ = prefixed(record.kernel_source(), record.entry, eok)
    about = comment(
        f"{routine.routine}'s RVV branch: {record.task} from EoK run {record.run} (eok export); its file-scope "
        f"names prefixed {eok}.",
        record.headline(),
        f"The run's kernel was measured as built by: clang-22 {' '.join(record.flags)}",
    )
    block = f"{condition}\n{about}\n#include <assert.h>\n{kernel.strip()}\n#endif\n\n"
    return text[:start] + block + text[start:body_open] + new_body + text[end:]


def _function(text: str, name: str, rel: Path) -> tuple[int, int, int]:
    """(start of the definition's line, offset of its `{`, offset just past its `}`)."""
    masked = mask(text)
    m = re.search(rf"^[^\n;]*\b{re.escape(name)}[ \t]*\([^;{{]*\)[ \t\n]*\{{", masked, re.M)
    if m is None:
        raise ExportRefused(f"{rel}: no definition of {name}", "give a ggml clone whose RISC-V quants.c defines it")
    depth = 0
    for i in range(m.end() - 1, len(masked)):
        if masked[i] == "{":
            depth += 1
        elif masked[i] == "}":
            depth -= 1
            if depth == 0:
                return m.start(), m.end() - 1, i + 1
    raise ExportRefused(f"{rel}: {name}'s body never closes", "give a clone that compiles")


def _branch_end(body: str, after: int, rel: Path, name: str) -> int:
    """Offset of the #else/#elif/#endif line that ends the branch opened before `after`."""
    depth = 0
    for m in re.finditer(r"^[ \t]*#[ \t]*(if|ifdef|ifndef|elif|else|endif)\b", body[after:], re.M):
        kind = m.group(1)
        if kind.startswith("if"):
            depth += 1
        elif depth == 0:
            return after + m.start()
        elif kind == "endif":
            depth -= 1
    raise ExportRefused(f"{rel}: {name}'s RVV branch never ends", "give a clone that compiles")


def _declared(prologue: str) -> list[str]:
    """Names the function declares before its RVV branch (each then needs a use in the new branch)."""
    names = re.findall(r"^[ \t]*(?:const[ \t]+)?[A-Za-z_][\w \t*]*?\b([A-Za-z_]\w*)[ \t]*=", mask(prologue), re.M)
    return list(dict.fromkeys(names))


def _branch(record: RunRecord, routine: GgmlRoutine, eok: str, declared: list[str]) -> str:
    unused = " ".join(f"(void) {n};" for n in ["bs", "bx", "by", *declared])
    return (
        f"    /* EoK run {record.run}: {routine.contract}. */\n"
        "    assert(n % QK8_0 == 0);\n"
        "    assert(nrc == 1);\n"
        "    (void) nrc;\n"
        f"    {unused}\n"
        f"    {routine.call_with(eok)}\n"
    )
