"""ggml: recognised by its layout, built with its own CMake (RVV on) for riscv64, statically, by ninja.

Only the libraries a kernel lives in are built (ggml-base, ggml-cpu, and ggml, the backend registry its
tests link); the test programs are built when `run_library_tests` first needs them, in the same build
folder. ggml's CMake adds its own -march for riscv64 (rv64gcv plus the extensions its options enable)
after the target's flags, so the RVV build is ggml's own choice of ISA.
"""

from __future__ import annotations

import re
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

BUILD_DIR = "build-eok"  # inside the copied tree
LIBRARY_TARGETS = ("ggml-base", "ggml-cpu", "ggml")
# Archives in link order (a dependent before what it uses).
ARCHIVES = ("src/libggml.a", "src/libggml-cpu.a", "src/libggml-base.a")
LINK_FLAGS = ["-lstdc++", "-lm", "-lpthread"]
_NINJA_LINE = re.compile(r"^\[(\d+)/(\d+)\] (?:Building \w+ object|Linking \w+ \w+ \w+) (\S+)")
# A kernel routine -> the quantization type whose tests in test-quantize-fns cover it.
QUANT_TYPE = {"ggml_vec_dot_q8_0_q8_0": "q8_0", "ggml_vec_dot_q4_0_q8_0": "q4_0"}
ROUTINES = tuple(QUANT_TYPE)


class Ggml:
    library = "ggml"
    display = "ggml"
    relocatable = False  # CMake writes absolute paths into its build folder
    tools = ("cmake", "ninja", "clang++-22")

    def not_this_library(self, clone: Path) -> str | None:
        for rel in ("CMakeLists.txt", "include/ggml.h", "src/ggml-cpu"):
            if not (clone / rel).exists():
                return f"no {rel}"
        return None

    def precheck(self, clone: Path, target: TargetProfile) -> None:
        if not target.is_riscv:
            raise LibraryBuildError(f"target {target.key}: ggml is built here for riscv64 targets only")

    def build(self, src: Path, target: TargetProfile, progress: Progress, jobs: int) -> BuildOutputs:
        progress("ggml: cmake -G Ninja, GGML_RVV=ON, static, cross to riscv64")
        run_step(BuildStep(configure_argv(src, target), src, "configuring", lambda _: None), str(src), progress)
        build_targets(src, LIBRARY_TARGETS, progress, jobs)
        build = src / BUILD_DIR
        return BuildOutputs(
            archives=[build / a for a in ARCHIVES],
            include_dirs=[src / "include", src / "src", src / "src" / "ggml-cpu"],
            cflags=[*cross_cc(target)[1:], *EMULATOR_FLAGS, *_ggml_march(build)],
            link_flags=LINK_FLAGS,
        )


# qemu-user 7.2 aborts translating clang's auto-vectorized float->int casts (vfncvt.rtz.*, docs/TASKS.md,
# "Emulator caveat"), which -O3 makes of ggml's plain-C reference quantizers (quantize_row_q4_0_ref): its own
# tests could not run. ggml's RVV kernels are intrinsics, which these flags leave as they are.
EMULATOR_FLAGS = ["-fno-vectorize", "-fno-slp-vectorize"]


def configure_argv(src: Path, target: TargetProfile) -> list[str]:
    flags = " ".join([*cross_cc(target)[1:], *EMULATOR_FLAGS])
    return [
        "cmake",
        "-S",
        str(src),
        "-B",
        str(src / BUILD_DIR),
        "-G",
        "Ninja",
        "-DCMAKE_BUILD_TYPE=Release",
        "-DCMAKE_SYSTEM_NAME=Linux",
        "-DCMAKE_SYSTEM_PROCESSOR=riscv64",
        "-DCMAKE_C_COMPILER=clang-22",
        "-DCMAKE_CXX_COMPILER=clang++-22",
        f"-DCMAKE_C_FLAGS={flags}",
        f"-DCMAKE_CXX_FLAGS={flags}",
        "-DCMAKE_EXE_LINKER_FLAGS=-fuse-ld=lld -static",
        f"-DCMAKE_AR=/usr/bin/{AR}",
        f"-DCMAKE_RANLIB=/usr/bin/{RANLIB}",
        "-DBUILD_SHARED_LIBS=OFF",
        "-DGGML_NATIVE=OFF",
        "-DGGML_RVV=ON",
        "-DGGML_OPENMP=OFF",  # one thread: the cost model refuses threads, qemu runs one core
        "-DGGML_BUILD_TESTS=ON",
        "-DGGML_BUILD_EXAMPLES=OFF",
    ]


def build_targets(src: Path, targets: tuple[str, ...], progress: Progress, jobs: int = 2) -> None:
    """Build CMake targets of a configured tree (the libraries, or a test program)."""
    argv = ["ninja", "-C", str(src / BUILD_DIR), f"-j{jobs}", *targets]
    run_step(BuildStep(argv, src, "compiling", _ninja_progress), str(src), progress)


def _ninja_progress(line: str) -> str | None:
    m = _NINJA_LINE.match(line)
    return f"{m.group(1)}/{m.group(2)} {m.group(3)}" if m else None


def _ggml_march(build: Path) -> list[str]:
    """The -march/-mabi ggml's CMake chose for its CPU backend (they follow ours on its compile lines)."""
    ninja = build / "build.ninja"
    edge = ""
    for line in ninja.read_text(errors="replace").splitlines() if ninja.is_file() else []:
        if line.startswith("build "):
            edge = line
        elif "ggml-cpu.dir" in edge and line.strip().startswith("FLAGS ="):
            # the last of each kind is the one the compiler uses
            return [*re.findall(r"-march=\S+", line)[-1:], *re.findall(r"-mabi=\S+", line)[-1:]]
    return []
