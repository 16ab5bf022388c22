"""ONNX Runtime's MLAS: recognised, and its riscv64 kernels listed, but not built.

MLAS has no build of its own: it is compiled by onnxruntime's CMake, whose configure step downloads its
dependencies (abseil, protobuf, ...) and so cannot run without the network. Upstream onnxruntime had no
riscv64 kernels in MLAS; some forks add RVV ones under onnxruntime/core/mlas/lib/riscv64/. The build says
in one line which riscv64 kernels the clone has rather than failing obscurely half-way.
"""

from __future__ import annotations

from pathlib import Path

from evaluator.targets import TargetProfile
from evaluator.upstream.build import BuildOutputs, LibraryBuildError, Progress

MLAS_DIR = "onnxruntime/core/mlas"
RISCV_DIR = f"{MLAS_DIR}/lib/riscv64"


class Mlas:
    library = "onnxruntime-mlas"
    display = "ONNX Runtime's MLAS"
    relocatable = False
    tools = ("cmake",)

    def not_this_library(self, clone: Path) -> str | None:
        return None if (clone / MLAS_DIR / "inc" / "mlas.h").is_file() else f"no {MLAS_DIR}/inc/mlas.h"

    def precheck(self, clone: Path, target: TargetProfile) -> None:
        kernels = riscv64_kernels(clone)
        have = ", ".join(kernels) if kernels else "none"
        raise LibraryBuildError(
            f"onnxruntime-mlas: riscv64 kernels in this clone: {have}; MLAS builds only inside onnxruntime's "
            "CMake, which downloads its dependencies, so EoK does not build it",
            "use openblas or ggml as the library for now",
        )

    def build(self, src: Path, target: TargetProfile, progress: Progress, jobs: int) -> BuildOutputs:
        self.precheck(src, target)
        raise AssertionError("unreachable: precheck refuses every MLAS clone")


def riscv64_kernels(tree: Path) -> list[str]:
    """The routines MLAS has riscv64 kernels for, from its file names (sgemm_kernel_rvv.cpp -> sgemm)."""
    folder = tree / RISCV_DIR
    names = (
        {p.stem.removesuffix("_rvv").removesuffix("_kernel") for p in folder.glob("*.cpp")}
        if folder.is_dir()
        else set()
    )
    return sorted(names)
