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
    if original is not None and routine.packed:
        original = unrolled(original, routine, clone, target)
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


_PARAM_UNROLL = r"^[ \t]*#[ \t]*define[ \t]+SGEMM_DEFAULT_UNROLL_{mn}[ \t]+(\d+)"


def param_unrolls(param_h: str, target: str) -> tuple[int, int] | None:
    """SGEMM_DEFAULT_UNROLL_M and _N of `target` in OpenBLAS's param.h: the first definitions after the line
    that opens the target's block (`#ifdef RISCV64_ZVL256B`, `#if defined(RISCV64_ZVL256B)`)."""
    start = re.search(rf"^[ \t]*#[ \t]*if(?:def[ \t]+|[ \t]+.*\bdefined\b.*?){re.escape(target)}\b.*$", param_h, re.M)
    if start is None:
        return None
    rest = param_h[start.end() :]
    found = [re.search(_PARAM_UNROLL.format(mn=mn), rest, re.M) for mn in "MN"]
    return (int(found[0].group(1)), int(found[1].group(1))) if found[0] and found[1] else None


def unrolled(value: str, routine: OpenBlasRoutine, clone: Path, target: str) -> str:
    """The kernel file of an entry that names it by the unrolls (`sgemm_kernel_$(SGEMM_UNROLL_M)x$(SGEMM_UNROLL_N)
    _zvl256b.c`): the make variables come from param.h's SGEMM_DEFAULT_UNROLL_M/N for the target (getarch
    writes them into the build's configuration). ExportRefused when the library packs its panels by other
    unrolls than the run's kernel reads."""
    param = clone / "param.h"
    unrolls = param_unrolls(param.read_text(errors="replace"), target) if param.is_file() else None
    if unrolls is None:
        raise ExportRefused(
            f"{clone}: param.h sets no SGEMM_DEFAULT_UNROLL_M/N for {target}: the panels' packing is unknown",
            "give an OpenBLAS clone whose param.h has the target's block",
        )
    if routine.packed and unrolls != routine.packed:
        raise ExportRefused(
            f"{routine.routine}: the run's kernel reads panels packed {routine.packed[0]} x {routine.packed[1]}, and "
            f"OpenBLAS packs them {unrolls[0]} x {unrolls[1]} for {target} (param.h SGEMM_DEFAULT_UNROLL_M/N)",
            "optimize a micro-kernel task whose reference defines the target's UNROLL_M and UNROLL_N",
        )
    return value.replace("$(SGEMM_UNROLL_M)", str(unrolls[0])).replace("$(SGEMM_UNROLL_N)", str(unrolls[1]))


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
#if {" || ".join(f"defined({m})" for m in routine.not_this)}
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
