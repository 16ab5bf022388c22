"""OpenBLAS: recognised by its layout, built with its own Makefiles for TARGET=RISCV64_ZVL256B.

The narrowest build that is still OpenBLAS's own: `make libs` (the BLAS library, no shared library, no
LAPACK, no Fortran) with BUILD_SINGLE=1 (the single-precision routines EoK's tasks cover; the other
precisions are three quarters of the compile) and no threading (one core, and the cost model refuses
threads). Its tests are ctest's C testers (xscblat1/2/3, the C translations of the reference BLAS testers
that run without Fortran), given an input that tests only the routine asked for.
"""

from __future__ import annotations

import json
from pathlib import Path

from evaluator.targets import TargetProfile
from evaluator.upstream.build import (
    AR,
    RANLIB,
    BuildOutputs,
    BuildStep,
    LibraryBuildError,
    Progress,
    cross_cc,
    run_step,
)

OPENBLAS_TARGET = {256: "RISCV64_ZVL256B", 128: "RISCV64_ZVL128B"}  # OpenBLAS's TARGET for a VLEN
LINK = "-fuse-ld=lld -static"  # the testers are linked static, like every binary EoK runs under qemu
# Level of each routine EoK knows (which ctest tester covers it); names are OpenBLAS's (cblas_ without prefix).
LEVEL = {
    **dict.fromkeys(("sdot", "saxpy", "sscal", "scopy", "sswap", "snrm2", "sasum", "isamax", "srot", "srotg"), 1),
    **dict.fromkeys(("sgemv", "sger", "ssymv", "strmv", "strsv"), 2),
    **dict.fromkeys(("sgemm", "ssymm", "ssyrk", "ssyr2k", "strmm", "strsm"), 3),
}
ROUTINES = tuple(LEVEL)


class OpenBlas:
    library = "openblas"
    display = "OpenBLAS"
    relocatable = True  # relative paths in its Makefiles
    tools = ("make", "gcc")

    def not_this_library(self, clone: Path) -> str | None:
        for rel in ("Makefile.system", "cblas.h", "interface", "kernel/riscv64"):
            if not (clone / rel).exists():
                return f"no {rel}"
        return None

    def precheck(self, clone: Path, target: TargetProfile) -> None:
        openblas_target(target)

    def build(self, src: Path, target: TargetProfile, progress: Progress, jobs: int) -> BuildOutputs:
        step = BuildStep(
            ["make", f"-j{jobs}", *make_vars(target), "libs"],
            src,
            "compiling",
            _compile_counter(expected_compiles(src, target)),
        )
        progress(f"openblas: make libs TARGET={openblas_target(target)} (single precision, no threads)")
        count = run_step(step, str(src), progress)
        if count:  # a build with nothing left to do says nothing about the next one
            remember_compiles(src, target, count)
        return BuildOutputs(
            archives=[archive(src)],
            include_dirs=[src],
            cflags=[*cross_cc(target)[1:], *_target_flags(src, target)],
            link_flags=["-lm"],
        )


def openblas_target(target: TargetProfile) -> str:
    if target.vlen not in OPENBLAS_TARGET:
        raise LibraryBuildError(f"target {target.key}: OpenBLAS has no RISC-V target for VLEN {target.vlen}")
    return OPENBLAS_TARGET[target.vlen]


def make_vars(target: TargetProfile, *, link: bool = False) -> list[str]:
    """The make variables of the build (and of its testers, which also link: `link`)."""
    cc = " ".join(cross_cc(target))
    out = [
        f"TARGET={openblas_target(target)}",
        f"CC={cc}",
        "HOSTCC=gcc",  # getarch runs on the build machine
        f"AR={AR}",
        f"RANLIB={RANLIB}",
        "NOFORTRAN=1",
        "NO_LAPACK=1",
        "NO_LAPACKE=1",
        "NO_SHARED=1",
        "USE_THREAD=0",
        "USE_OPENMP=0",
        "DYNAMIC_ARCH=0",
        "BUILD_SINGLE=1",
        "CROSS=1",  # do not run what was built on the build machine
    ]
    return [*out, f"CEXTRALIB={LINK}"] if link else out


def archive(src: Path) -> Path:
    """The static library `make libs` left (the real file, not the libopenblas.a link)."""
    found = sorted(p for p in src.glob("libopenblas*.a") if not p.is_symlink())
    if not found:
        raise LibraryBuildError(f"{src}: make libs finished but left no libopenblas*.a", "see eok-compiling.log there")
    return found[0]


def _target_flags(src: Path, target: TargetProfile) -> list[str]:
    """The ISA flags Makefile.riscv64 adds for the TARGET (they follow ours on its compile lines, so they win)."""
    path = src / "Makefile.riscv64"
    lines = path.read_text(errors="replace").splitlines() if path.is_file() else []
    core = f"ifeq ($(CORE), {openblas_target(target)})"
    for i, line in enumerate(lines):
        if line.strip() == core:
            for body in lines[i + 1 :]:
                if body.strip() == "endif":
                    break
                if body.startswith("CCOMMON_OPT"):
                    return body.split("+=", 1)[1].split()
    return []


def _compile_counter(expected: int):
    seen = [0]

    def compiled(line: str) -> str | None:
        words = line.split()
        if not words or not words[0].startswith("clang") or "-c" not in words:
            return None
        source = next((w for w in reversed(words) if w.endswith((".c", ".S", ".cpp"))), "?")
        seen[0] += 1
        total = f"/~{max(expected, seen[0])}" if expected else ""
        return f"{seen[0]}{total} {source.lstrip('./')}"

    return compiled


def _counts_file(src: Path) -> Path:
    return src.parent.parent / "compiles.json"  # beside the builds of every commit of the library


def expected_compiles(src: Path, target: TargetProfile) -> int:
    """How many compiles the last build for this target made (the progress lines' total), else 0."""
    try:
        return int(json.loads(_counts_file(src).read_text()).get(target.key, 0))
    except (OSError, ValueError, AttributeError):
        return 0


def remember_compiles(src: Path, target: TargetProfile, count: int) -> None:
    path = _counts_file(src)
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        data = {}
    data[target.key] = count
    path.write_text(json.dumps(data) + "\n")
