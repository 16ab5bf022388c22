"""OpenBLAS: the run's kernel as kernel/riscv64/<routine>_eok.c, named by the KERNEL.<TARGET> entry.

The file follows OpenBLAS's kernel conventions (compiled once per routine with CNAME, FLOAT and BLASLONG
from its build, the kernel's own argument list). The run's kernel comes first, before any OpenBLAS
header, so no library macro reaches its names; then the library's existing kernel for that entry, under
another name (its file #included with CNAME redefined); then CNAME itself, which sends the calls the
task's contract covers to the run's kernel and all others to the library's.
"""

from __future__ import annotations

import re
from pathlib import Path

from agent.export.csource import comment, prefixed
from agent.export.routines import ExportRefused, OpenBlasRoutine
from agent.export.runfolder import RunRecord
from evaluator.targets import load_target

KERNEL_DIR = Path("kernel/riscv64")


def openblas_target(target_key: str) -> str:
    """OpenBLAS's TARGET for an EoK target: the one the build uses (its kernels are chosen by VLEN)."""
    from evaluator.upstream.openblas import OPENBLAS_TARGET

    vlen = load_target(target_key).vlen
    if vlen not in OPENBLAS_TARGET:
        raise ExportRefused(
            f"target {target_key} (VLEN {vlen}) has no OpenBLAS RISC-V target",
            f"OpenBLAS targets exist for VLEN {', '.join(map(str, OPENBLAS_TARGET))}",
        )
    return OPENBLAS_TARGET[vlen]


def plan(record: RunRecord, routine: OpenBlasRoutine, clone: Path) -> dict[Path, str]:
    """The files to write (paths relative to the clone) -> their new text; ExportRefused when the clone
    lacks what the export needs (the KERNEL file or entry, a C kernel to keep for the other calls)."""
    target = openblas_target(record.target)
    kernel_list = KERNEL_DIR / f"KERNEL.{target}"
    if not (clone / kernel_list).is_file():
        raise ExportRefused(f"{clone}: no {kernel_list}", "give an OpenBLAS clone with RISC-V kernels")
    listing = (clone / kernel_list).read_text()
    original = entry_value(listing, routine.entry)
    if original is None:
        raise ExportRefused(
            f"{clone / kernel_list} sets no {routine.entry}: the library's default kernel for it is not a C file "
            "the export could keep for the calls outside the task's contract",
            "add the entry to the KERNEL file first",
        )
    if not original.endswith(".c") or "$(" in original:
        raise ExportRefused(
            f"{routine.entry} = {original} in {kernel_list} is not one C file: the export keeps the library's kernel "
            "for the other calls by #including it",
            "export to a target whose entry names a C kernel",
        )
    name = f"{routine.routine}_eok.c"  # sdot_eok.c beside dot_vector.c
    if original == name:
        raise ExportRefused(f"{routine.entry} already names {name}", "export from the clone's upstream branch")
    return {
        KERNEL_DIR / name: kernel_file(record, routine, original),
        kernel_list: switch_entry(listing, routine.entry, name),
    }


_ENTRY = r"^(?P<head>[ \t]*{name}[ \t]*=[ \t]*)(?P<value>[^\s#]+)(?P<tail>.*)$"


def entry_value(listing: str, entry: str) -> str | None:
    """The file a KERNEL.<TARGET> entry names (its last assignment wins, as in make), or None."""
    found = re.findall(_ENTRY.format(name=re.escape(entry)), listing, re.M)
    return found[-1][1] if found else None


def switch_entry(listing: str, entry: str, new: str) -> str:
    """The listing with the entry's last assignment naming `new` (the rest of the line kept)."""
    matches = list(re.finditer(_ENTRY.format(name=re.escape(entry)), listing, re.M))
    m = matches[-1]
    return listing[: m.start("value")] + new + listing[m.end("value") :]


# BLAS's convention (the task's) for a negative increment: the vector starts at the array's far end;
# OpenBLAS's interface moved the pointer there, the task's kernel wants the array's start.
_START = """
static inline FLOAT *eok_start(FLOAT *v, BLASLONG n, BLASLONG inc)
{
    return inc < 0 && n > 0 ? v + (n - 1) * inc : v;
}
"""


def kernel_file(record: RunRecord, routine: OpenBlasRoutine, original: str) -> str:
    """kernel/riscv64/<task>_eok.c: the run's kernel, the library's kernel for other calls, and CNAME."""
    eok = f"eok_{record.task}"
    kernel, _ = prefixed(record.kernel_source(), record.entry, eok)
    library = f"eok_library_{record.task}"
    call = routine.call_with(eok)
    about = comment(
        f"{routine.entry} for single precision: {record.task} from EoK run {record.run}.",
        record.headline(),
        f"The calls the task's contract covers ({routine.contract}) run the kernel the run found; every other "
        f"call runs the library's previous kernel, {original}, compiled below under another name.",
        f"The run's kernel was measured as built by: clang-22 {' '.join(record.flags)}",
    )
    return f"""{about}
#if defined(DOUBLE) || defined(COMPLEX) || defined(DSDOT)
/* Not the single-precision real routine the run optimized: the library's kernel, unchanged. */
#include "{original}"
#else

/* ---- the run's kernel (file-scope names prefixed {eok}), before any OpenBLAS header ---- */
{kernel.strip()}

/* ---- the library's kernel for the calls outside the task's contract ---- */
#pragma push_macro("CNAME")
#undef CNAME
#define CNAME {library}
#include "{original}"
#undef CNAME
#pragma pop_macro("CNAME")

#include <limits.h>
{_START if routine.full else ""}
{routine.returns} CNAME({routine.params})
{{
    if ({routine.covered}) {{
        {call}
    }}
    return {library}({routine.args});
}}

#endif
"""
