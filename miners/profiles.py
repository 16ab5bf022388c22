"""Library profiles: where a library keeps its kernels, which trees are vendored, how to tell one repo from another.

Facts from the libraries' own trees (see shared reference riscv-k1-k3.md section 4): OpenBLAS keeps kernels in
kernel/<arch>/ with blocking in param.h; ggml in src/ggml-cpu/arch/<arch>/ (older: ggml.c, ggml-quants.c,
ggml-cpu-quants.c); ONNX Runtime in onnxruntime/core/mlas/lib/<arch>/.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from knowledge.taxonomy import Isa

SOURCE_SUFFIXES = frozenset(
    [
        ".c",
        ".h",
        ".cc",
        ".cpp",
        ".cxx",
        ".hpp",
        ".hh",
        ".inc",
        ".s",
        ".S",
        ".asm",
        ".f",
        ".f90",
        ".cu",
        ".cuh",
        ".cl",
        ".metal",
        ".comp",
        ".glsl",
        ".wgsl",
        ".rs",
        ".py",
        ".m",
        ".mm",
    ]
)
NON_KERNEL_SOURCE = frozenset({".py"})  # scripts: kernel generators count, build helpers do not

# Trees that are somebody else's code or not code at all: their changes say nothing about this library.
VENDORED_RE = re.compile(
    r"(^|/)(third[_-]?party|3rdparty|vendor(ed)?|external|extern|deps|submodules?|lapack-netlib|relapack|"
    r"node_modules|cmake/external)(/|$)",
    re.I,
)
TEST_RE = re.compile(
    r"(^|/)(tests?|ctest|utest|unittests?|testing|benchmarks?|bench|perf_tests?|examples?)(/|$)|"
    r"(^|/)test_[^/]*$|_test\.\w+$",
    re.I,
)
DOC_RE = re.compile(
    r"(^|/)(docs?|documentation)(/|$)|\.(md|rst|txt|html|pdf|png|jpg|svg|ya?ml|json)$|"
    r"(^|/)(readme|changelog|license|copying|authors|contributors|news)[^/]*$",
    re.I,
)
BUILD_RE = re.compile(
    r"(^|/)(cmakelists\.txt|makefile[^/]*|[^/]*\.cmake|configure[^/]*|build\.\w+|"
    r"[^/]*\.mk|\.github/.*|\.ci/.*|ci/.*|\.travis\.yml|appveyor\.yml|azure-pipelines.*|"
    r"getarch[^/]*|c_check|f_check|Makefile\.[^/]*|[^/]*\.gradle|setup\.py|pyproject\.toml)$",
    re.I,
)
GPU_RE = re.compile(
    r"(^|/)ggml-(cuda|metal|vulkan|sycl|opencl|kompute|cann|musa|hip|webgpu|hexagon|zdnn|rpc)|\.(cu|cuh|metal|"
    r"comp|glsl|wgsl|cl)$|(core/providers|contrib_ops)/(cuda|rocm|webgpu|js|dml)/",
    re.I,
)

# Architecture folder names -> the ISA family they imply (the diff decides the exact ISA).
ARCH_DIR_ISA: dict[str, Isa] = {
    "riscv64": Isa.RVV,
    "riscv": Isa.RVV,
    "rvv": Isa.RVV,
    "x86_64": Isa.SSE,
    "x86": Isa.SSE,
    "amd64": Isa.SSE,
    "arm64": Isa.NEON,
    "aarch64": Isa.NEON,
    "arm": Isa.NEON,
    "neon": Isa.NEON,
    "power": Isa.VSX,
    "powerpc": Isa.VSX,
    "ppc64": Isa.VSX,
    "ppc": Isa.VSX,
    "loongarch64": Isa.LSX,
    "loongarch": Isa.LSX,
    "wasm": Isa.WASM_SIMD,
}


@dataclass(frozen=True)
class LibraryProfile:
    name: str
    kernel_patterns: tuple[re.Pattern[str], ...]  # group "arch" names the architecture folder when present
    hot_files: tuple[re.Pattern[str], ...] = ()  # files that are kernels without an arch folder
    marker_paths: tuple[str, ...] = ()  # paths whose presence identifies the library
    extra_vendored: tuple[re.Pattern[str], ...] = field(default_factory=tuple)

    def kernel_arch(self, path: str) -> str | None:
        """'' for a kernel file without an arch folder, the folder name for one with, None for non-kernel."""
        for pat in self.kernel_patterns:
            if m := pat.search(path):
                return (m.groupdict().get("arch") or "").lower()
        for pat in self.hot_files:
            if pat.search(path):
                return ""
        return None


OPENBLAS = LibraryProfile(
    name="openblas",
    kernel_patterns=(re.compile(r"^kernel/(?P<arch>[^/]+)/"),),
    hot_files=(re.compile(r"^param\.h$"), re.compile(r"^driver/level[23]/"), re.compile(r"^driver/others/blas_server")),
    marker_paths=("kernel", "param.h", "driver/level3"),
)
GGML = LibraryProfile(
    name="ggml",
    kernel_patterns=(
        re.compile(r"ggml-cpu/arch/(?P<arch>[^/]+)/"),
        re.compile(r"ggml-cpu/(?P<arch>spacemit|kleidiai|amx|llamafile)/"),
    ),
    hot_files=(
        re.compile(r"(^|/)ggml(-cpu)?(-quants)?\.(c|cpp|h)$"),
        re.compile(r"(^|/)ggml-cpu/(vec|ops|repack|simd-mappings|ggml-cpu-impl|quants|ggml-cpu-quants)\.\w+$"),
        re.compile(r"(^|/)k_quants\.(c|h)$"),
        re.compile(r"(^|/)sgemm\.(cpp|h)$"),
        # every compute backend whose kernels GPU_RE recognises (rpc only moves data)
        re.compile(r"(^|/)ggml-(cuda|metal|vulkan|sycl|opencl|cann|musa|hip|webgpu|kompute|hexagon|zdnn)"),
    ),
    marker_paths=("src/ggml.c", "ggml/src/ggml.c", "ggml.c", "include/ggml.h", "ggml/include/ggml.h"),
)
ONNXRUNTIME = LibraryProfile(
    name="onnxruntime",
    kernel_patterns=(re.compile(r"core/mlas/lib/(?P<arch>[^/]+)/"),),
    hot_files=(
        re.compile(r"core/mlas/lib/[^/]+\.(c|cpp|h|S|asm)$"),
        re.compile(r"core/providers/cpu/"),
        # GPU kernels: CUDA/ROCm/WebGPU/JS execution providers and the contrib ops' GPU kernels
        re.compile(r"(core/providers|contrib_ops)/(cuda|rocm|webgpu|js|dml)/.*\.(cu|cuh|cc|cpp|h|wgsl|ts)$"),
    ),
    marker_paths=("onnxruntime/core/mlas", "onnxruntime"),
    extra_vendored=(re.compile(r"^(cmake/external|js|java|csharp|winml|orttraining)/"),),
)
GENERIC = LibraryProfile(
    name="generic",
    kernel_patterns=(
        re.compile(
            r"(^|/)(arch|kernels?|simd|isa)/(?P<arch>riscv64|riscv|rvv|x86_64|x86|amd64|arm64|aarch64|arm|"
            r"neon|power|powerpc|ppc64|loongarch64|loongarch|wasm)/",
            re.I,
        ),
        re.compile(r"(^|/)(?P<arch>riscv64|riscv|rvv|x86_64|x86|arm64|aarch64|neon|loongarch64|wasm)/", re.I),
    ),
    hot_files=(
        re.compile(r"(^|/)(kernels?|simd|microkernels?)/", re.I),
        re.compile(r"(gemm|gemv|conv|dot|softmax|norm|matmul)[^/]*\.(c|cc|cpp|h|hpp|S|s)$", re.I),
    ),
)

PROFILES: dict[str, LibraryProfile] = {p.name: p for p in (OPENBLAS, GGML, ONNXRUNTIME, GENERIC)}


def detect_library(name: str, top_paths: set[str]) -> LibraryProfile:
    """Pick a profile from the repository name, then from marker paths in the head tree."""
    low = name.lower()
    for key in ("openblas", "onnxruntime", "ggml", "llama.cpp", "whisper.cpp"):
        if key in low:
            return GGML if key in ("llama.cpp", "whisper.cpp") else PROFILES[key]
    for prof in (OPENBLAS, ONNXRUNTIME, GGML):
        if all(any(p == m or p.startswith(m + "/") for p in top_paths) for m in prof.marker_paths[:2]):
            return prof
    return GENERIC


def suffix(path: str) -> str:
    """The file extension as PurePosixPath.suffix gives it (string ops: this runs for every changed file)."""
    name = path.rsplit("/", 1)[-1]
    i = name.rfind(".")
    s = name[i:] if 0 < i < len(name) - 1 else ""
    return s if s in (".S", ".s") else s.lower()


def is_source(path: str) -> bool:
    return suffix(path) in SOURCE_SUFFIXES


def is_kernel_file(path: str) -> bool:
    """A file a kernel can be written in (C, C++, assembly, Fortran, GPU languages, Rust...), outside
    vendored trees: a repository without one has no kernel code to learn from, whatever its commits say."""
    return is_source(path) and suffix(path) not in NON_KERNEL_SOURCE and not VENDORED_RE.search(path)


def is_vendored(path: str, profile: LibraryProfile) -> bool:
    return bool(VENDORED_RE.search(path)) or any(p.search(path) for p in profile.extra_vendored)


def file_kind(path: str, profile: LibraryProfile) -> str:
    """One of: vendored, test, doc, build, kernel, source, other."""
    # The same paths change again and again over a history: remember each one's kind.
    cache = _KIND_CACHE.setdefault(profile.name, {})
    kind = cache.get(path)
    if kind is None:
        kind = cache[path] = _file_kind(path, profile)
    return kind


_KIND_CACHE: dict[str, dict[str, str]] = {}


def _file_kind(path: str, profile: LibraryProfile) -> str:
    if is_vendored(path, profile):
        return "vendored"
    if TEST_RE.search(path):
        return "test"
    if BUILD_RE.search(path) or path.rsplit("/", 1)[-1].startswith("KERNEL"):
        return "build"
    if profile.kernel_arch(path) is not None and is_source(path):
        return "kernel"
    if DOC_RE.search(path):
        return "doc"
    if is_source(path):
        return "source"
    return "other"
