"""Build harness binaries: clang-22 for riscv64-linux-gnu (static, no PIE) or for the host.

Two binaries per evaluation: the trusted one (harness + reference + baseline, linked once per task,
target and compiler and cached) and the candidate's (harness + candidate only). Objects that do not
depend on the candidate are cached on disk by a key of everything that shapes them (sources, flags,
compiler version), so an evaluation compiles only the candidate and links it. Candidate flags are
checked against an allow-list; compiler errors come back as structured diagnostics with line numbers
of the candidate file.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel

from core.errors import InvalidInput, Unavailable
from evaluator import harness
from evaluator.sandbox import Limits, RunOutput, clean_env, run, take
from evaluator.targets import TargetProfile
from evaluator.tasks import KernelTask

if TYPE_CHECKING:
    from evaluator.upstream.baseline import LibraryBaseline

CLANG = os.environ.get("EOK_CLANG", "clang-22")
RISCV_TRIPLE = "riscv64-linux-gnu"
CANDIDATE_FILE = "candidate.c"
TRUSTED_BINARY = "trusted"  # harness + reference + baseline; `harness` is the candidate's binary
TRUSTED_DIR = "trusted.d"  # where it lives in an evaluation's folder, out of the candidate's sight
BuildKind = Literal["emulator", "board", "host"]
# Symbols wrapped so a candidate's failed allocation is reported as hitting the memory limit.
WRAPPED = ("malloc", "calloc", "realloc", "aligned_alloc", "posix_memalign")
C_STANDARD = "-std=gnu11"
COMMON_FLAGS = [
    C_STANDARD,
    "-fno-color-diagnostics",
    "-fno-caret-diagnostics",
    "-ferror-limit=20",
    "-Werror=implicit-function-declaration",
    "-Werror=return-type",
    "-Werror=incompatible-function-pointer-types",
    # A crash is reported, never handled by re-running the compiler to write a reproducer (a second
    # process the compile sandbox refuses), and `#pragma clang __debug crash` and kin do nothing.
    "-fno-crash-diagnostics",
    "-Xclang",
    "-disable-pragma-debug-crash",
]
# Every compiler step runs in the sandbox like a candidate run (fresh uid, no network, secrets hidden,
# seccomp): a hostile source can make the compiler read files (#include, #embed) and print them back.
COMPILE_LIMITS = Limits(wall_s=120, memory_mb=4096, fsize_mb=256, nproc=64, nofile=256, profile="compile")
LINK_LIMITS = Limits(wall_s=120, memory_mb=4096, fsize_mb=256, nproc=64, nofile=256, profile="link")
# A candidate's own compile (docs/EVALUATION.md, "Statuses"): honest kernels compile in a few seconds
# and to objects of kilobytes; past these limits the result is compile_timeout or too_large.
CANDIDATE_COMPILE_S = 60
CANDIDATE_COMPILE_MB = 4096  # address space of clang
MAX_OBJECT_MB = 16  # the object file (RLIMIT_FSIZE of the compile step)
MAX_DATA_BYTES = 8 << 20  # code and data the object asks to be loaded (sections with SHF_ALLOC), at most
CANDIDATE_COMPILE_LIMITS = Limits(
    wall_s=CANDIDATE_COMPILE_S,
    memory_mb=CANDIDATE_COMPILE_MB,
    fsize_mb=MAX_OBJECT_MB,
    nproc=64,
    nofile=256,
    profile="compile",
)
PREPROCESS_LIMITS = Limits(
    wall_s=60,
    memory_mb=4096,
    fsize_mb=16,
    nproc=64,
    nofile=256,
    output_bytes=16 << 20,
    flood_bytes=32 << 20,
    profile="compile",
)


class CompileDiagnostic(BaseModel):
    line: int
    col: int
    message: str
    severity: str = "error"


# What stopped a compiler step: its diagnostics (error), a crash of the compiler, a time limit, or a
# size limit (memory, object file, preprocessed text).
FailureKind = Literal["error", "crash", "timeout", "too_large"]


class CompileFailed(Exception):
    def __init__(self, diagnostics: list[CompileDiagnostic], log: str, kind: FailureKind = "error") -> None:
        super().__init__(log)
        self.diagnostics = diagnostics
        self.log = log
        self.kind = kind


# ------------------------------------------------------------------------------------------- cflags

_O_LEVELS = {"-O0", "-O1", "-O2", "-O3", "-Os", "-Oz", "-Ofast"}
_F_FLAGS = re.compile(
    r"^-f(no-)?(unroll-loops|vectorize|slp-vectorize|fast-math|math-errno|trapping-math|finite-math-only|"
    r"signed-zeros|reciprocal-math|associative-math|honor-nans|honor-infinities|approx-func|"
    r"unsafe-math-optimizations|strict-aliasing|omit-frame-pointer|builtin|inline-functions|"
    r"inline|jump-tables|merge-all-constants)$|^-ffp-contract=(fast|on|off)$"
)
_MLLVM_OPTIONS = re.compile(
    r"^-(force-vector-width|force-vector-interleave|riscv-v-register-bit-width-lmul|unroll-threshold|"
    r"unroll-count|unroll-max-count|unroll-partial-threshold|slp-threshold|riscv-v-vector-bits-min|"
    r"prefer-predicate-over-epilogue|force-tail-folding-style|max-interleave-group-factor|"
    r"small-loop-cost|vectorizer-min-trip-count|inline-threshold)=[\w.-]+$|"
    r"^-(vectorizer-maximize-bandwidth|enable-interleaved-mem-accesses|enable-masked-interleaved-mem-accesses|"
    r"unroll-runtime|enable-loop-distribute|extra-vectorizer-passes|enable-loopinterchange)(=(true|false|0|1))?$"
)
# Numeric LLVM options within these bounds: past them a loop is unrolled or inlined into code that keeps
# the compiler busy for minutes (unroll-count=100000 held the compile step for its whole 120 s). The
# defaults at -O3 are far inside (unroll-threshold 300, inline-threshold 250, interleave <= 8).
_MLLVM_BOUNDS = {
    "force-vector-width": (1, 64),
    "force-vector-interleave": (1, 16),
    "riscv-v-register-bit-width-lmul": (1, 8),
    "unroll-threshold": (0, 2000),
    "unroll-count": (0, 32),
    "unroll-max-count": (0, 32),
    "unroll-partial-threshold": (0, 2000),
    "slp-threshold": (-100, 100),
    "riscv-v-vector-bits-min": (-1, 65536),
    "max-interleave-group-factor": (1, 16),
    "small-loop-cost": (0, 100),
    "vectorizer-min-trip-count": (0, 1 << 20),
    "inline-threshold": (0, 1000),
}


def _mllvm_out_of_bounds(opt: str) -> str | None:
    """Why a numeric LLVM option is refused (not a number, or outside _MLLVM_BOUNDS), else None."""
    name, _, value = opt.lstrip("-").partition("=")
    if name not in _MLLVM_BOUNDS:
        return None
    lo, hi = _MLLVM_BOUNDS[name]
    if not re.fullmatch(r"-?\d+", value) or not lo <= int(value) <= hi:
        return f"-mllvm {opt}: {name} must be a whole number from {lo} to {hi}"
    return None


_LMUL = re.compile(r"^-mrvv-max-lmul=m(1|2|4|8)$")
_WARN = re.compile(r"^-W(no-)?[a-z][a-z0-9-]*$")


def check_cflags(flags: list[str]) -> tuple[list[str], str | None]:
    """Translate allowed candidate flags to clang flags; (flags, None) or ([], reason for rejecting)."""
    out: list[str] = []
    it = iter(flags)
    for flag in it:
        if flag in _O_LEVELS or _F_FLAGS.match(flag) or _WARN.match(flag):
            out.append(flag)
        elif m := _LMUL.match(flag):  # GCC's spelling; clang takes it as an LLVM option
            out += ["-mllvm", f"-riscv-v-register-bit-width-lmul={m.group(1)}"]
        elif flag.startswith("-mrvv-vector-bits=") and re.match(r"^-mrvv-vector-bits=(zvl|\d+|scalable)$", flag):
            out.append(flag)
        elif flag in ("-mllvm", "-mllvm=") or flag.startswith("-mllvm="):
            opt = flag.split("=", 1)[1] if flag.startswith("-mllvm=") and flag != "-mllvm=" else next(it, "")
            if not _MLLVM_OPTIONS.match(opt):
                return [], f"-mllvm {opt}: not an allowed LLVM option (vectorizer, unroll and LMUL options only)"
            if problem := _mllvm_out_of_bounds(opt):
                return [], problem
            out += ["-mllvm", opt]
        else:
            return [], (
                f"flag {flag!r} is not allowed: use -O*, -f[no-]unroll-loops, the -ffast-math family, "
                "-mrvv-max-lmul=mN, -mllvm vectorizer/unroll options (no -D: write macros in the source)"
            )
    return out, None


def split_cflags(text: str) -> list[str]:
    return shlex.split(text)


# ------------------------------------------------------------------------------ competent baseline

# The competent baseline is the reference built the best way the compiler can without new code
# (docs/TASKS.md, "Two baselines"). Which value-changing flags it gets follows from the task's tolerance:
#  - always -fno-math-errno: no kernel reads errno, so it changes no value; it lets clang inline sqrt
#    and vectorize calls such as sqrtf/fabsf;
#  - a float tolerance that is not exact: -ffp-contract=fast (an FMA rounds once instead of twice);
#  - rtol >= 1e-4 (the suite's tolerance for tasks that declare their float sums reorderable, ~800
#    ulps): reassociation, which is what clang needs to vectorize a float reduction. Not -ffast-math
#    whole: -ffinite-math-only would break tasks whose inputs hold inf/NaN, and -fapprox-func /
#    -freciprocal-math change single elements without buying vectorization.
# No vector math library: clang-22 maps -fveclib=SLEEF to SLEEF's RVV entry points (Sleef_expfx_u10rvvm2,
# checked), but SLEEF has RVV only from 3.6 and Debian (the only system package source here) ships 3.5.1,
# not built for riscv64; building it needs its sources, which setup cannot fetch. So calls to expf/tanhf/
# erff stay scalar libm calls in both baselines; docs/TASKS.md lists the tasks this flatters.
REASSOCIATE_RTOL = 1e-4
_NO_ERRNO = ["-fno-math-errno"]
_CONTRACT = ["-ffp-contract=fast"]
_REASSOCIATE = ["-fassociative-math", "-fno-signed-zeros", "-fno-trapping-math"]


def competent_cflags(task: KernelTask) -> list[str]:
    """Flags added to the target's baseline flags for the competent baseline (all candidate-allowed)."""
    tol = task.tolerance
    flags = list(_NO_ERRNO)
    if tol.rtol > 0 or tol.atol > 0:
        flags += _CONTRACT
    if tol.rtol >= REASSOCIATE_RTOL:
        flags += _REASSOCIATE
    return flags


# libm functions clang-22 leaves as scalar calls on riscv64 at any flags (no vector math library, above).
# sqrt, fabs, fmin/fmax, floor/ceil/trunc/round, copysign and fma become instructions or inline code.
_SCALAR_LIBM = re.compile(
    r"\b((?:exp|expm1|exp2|exp10|log|log1p|log2|log10|pow|tanh|sinh|cosh|erf|erfc|sin|cos|tan|asin|acos|atan"
    r"|atan2|cbrt|hypot|lgamma|tgamma)f?)\s*\("
)
_C_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)


def baseline_note(task: KernelTask) -> str | None:
    """Why a speedup over this task's baselines flatters, for every surface that shows one: the task's own
    `baseline_note`, else the scalar libm calls its reference makes (what docs/TASKS.md's list names)."""
    if task.baseline_note:
        return task.baseline_note
    calls = sorted(set(_SCALAR_LIBM.findall(_C_COMMENT.sub(" ", task.reference_code))))
    if not calls:
        return None
    names = ", ".join(calls)
    return (
        f"weak baseline: its reference calls scalar libm {names}, which clang cannot vectorize here (no "
        "vector math library for RISC-V), so this speedup includes vectorizing that math"
    )


# ------------------------------------------------------------------------------------------- builds


@cache
def compiler_version() -> str:
    if not shutil.which(CLANG):
        raise Unavailable(f"{CLANG} not found", "apt-get install clang-22 lld-22 (Debian bookworm-security)")
    out = subprocess.run([CLANG, "--version"], capture_output=True, text=True, check=True).stdout
    return out.splitlines()[0]


def target_flags(target: TargetProfile, kind: BuildKind) -> list[str]:
    if kind == "host":
        return target.isa_flags("host")
    return [f"--target={RISCV_TRIPLE}", *target.isa_flags(kind)]


def link_flags(kind: BuildKind) -> list[str]:
    wrap = "-Wl," + ",".join(f"--wrap={s}" for s in WRAPPED)
    # Static and position-dependent: fixed addresses for the cost model; no target sysroot needed at run time.
    return ["-fuse-ld=lld", "-static", *(["-no-pie"] if kind != "host" else []), wrap, "-lm"]


def candidate_build_flags(target: TargetProfile, kind: BuildKind, cflags: list[str]) -> list[str]:
    """The flags that shape a candidate's code besides COMMON_FLAGS (`cflags` as check_cflags translated them)."""
    # No jump tables: every jalr in a candidate is then a return or a relocated call (safety.check_object).
    return [*target_flags(target, kind), *target.baseline_cflags, *cflags, "-fno-jump-tables"]


def measured_build_flags(target: TargetProfile, kind: BuildKind, cflags: list[str]) -> list[str]:
    """What a kernel needs outside EoK to compile to the code that was measured (best.c's build line)."""
    checked, problem = check_cflags(cflags)
    if problem:
        raise InvalidInput(f"flags {' '.join(cflags)!r}: {problem}", "give the flags the run recorded")
    return [C_STANDARD, *candidate_build_flags(target, kind, checked)]


@dataclass
class Build:
    binary: Path
    workdir: Path
    kind: BuildKind
    compile_s: float
    trusted: Path | None = None  # the trusted binary (reference, baseline), copied next to `binary`

    def trusted_build(self) -> Build:
        """The trusted binary as a Build of its own, for the runners."""
        assert self.trusted is not None
        return Build(binary=self.trusted, workdir=self.workdir, kind=self.kind, compile_s=0.0)

    @property
    def program(self) -> str:
        """The binary as the runners start it from the work folder (`./harness`, `./trusted.d/trusted`)."""
        return "./" + str(self.binary.relative_to(self.workdir))

    @property
    def hidden(self) -> list[Path]:
        """Folders a run of this binary must not see: the candidate's runs never see the trusted binary."""
        return [self.trusted.parent] if self.trusted is not None else []


class Toolchain:
    """Compiles and links harness binaries, caching candidate-independent objects under `cache_dir`."""

    def __init__(self, cache_dir: Path) -> None:
        self.cache_dir = cache_dir
        cache_dir.mkdir(parents=True, exist_ok=True)

    def build(
        self,
        task: KernelTask,
        target: TargetProfile,
        kind: BuildKind,
        code: str,
        cflags: list[str],
        workdir: Path,
        library: LibraryBaseline | None = None,
    ) -> Build:
        """Compile the candidate `code` and link it with the harness alone; set up the trusted binary beside it
        (with the built library's routine in it when `library` is given)."""
        t0 = time.monotonic()
        tflags = target_flags(target, kind)
        hflags = [*tflags, "-O2", "-ffp-contract=off"]
        # Its own folder: runs of the candidate's binary see it covered by an empty tmpfs (Build.hidden).
        (workdir / TRUSTED_DIR).mkdir(mode=0o755)
        trusted = workdir / TRUSTED_DIR / TRUSTED_BINARY
        shutil.copyfile(self._trusted_binary(task, target, kind, library), trusted)
        trusted.chmod(0o755)
        harness_obj = self._cached(task, "harness", harness.generate(task), hflags)
        (workdir / CANDIDATE_FILE).write_text(code)
        (workdir / "eok_prototype.h").write_text(harness.candidate_prelude(task))
        cand_flags = [*candidate_build_flags(target, kind, cflags), "-include", "eok_prototype.h"]
        self._compile(workdir, CANDIDATE_FILE, "candidate.o", cand_flags, CANDIDATE_COMPILE_LIMITS)
        binary = workdir / "harness"
        self._link(workdir, [*tflags, str(harness_obj), "candidate.o", *link_flags(kind), "-o", binary.name])
        return Build(binary=binary, workdir=workdir, kind=kind, compile_s=time.monotonic() - t0, trusted=trusted)

    def _trusted_binary(
        self, task: KernelTask, target: TargetProfile, kind: BuildKind, library: LibraryBaseline | None = None
    ) -> Path:
        """Harness + reference + both baselines (+ a built library's routine), never candidate code: linked once
        per task, target, compiler and library build."""
        tflags = target_flags(target, kind)
        hflags = [*tflags, "-O2", "-ffp-contract=off"]
        lib_flags = ["-DEOK_LIBRARY"] if library else []
        objs = [
            self._cached(task, "trusted", harness.generate(task), [*hflags, "-DEOK_TRUSTED", *lib_flags]),
            self._cached(
                task,
                "reference",
                task.reference_code,
                [*tflags, "-O2", "-ffp-contract=off", f"-D{task.function_name}={harness.ref_name(task)}"],
            ),
            self._cached(
                task,
                "baseline",
                task.reference_code,
                [*tflags, *target.baseline_cflags, f"-D{task.function_name}={harness.base_name(task)}"],
            ),
            self._cached(
                task,
                "competent",
                task.reference_code,
                [
                    *tflags,
                    *target.baseline_cflags,
                    *competent_cflags(task),
                    f"-D{task.function_name}={harness.comp_name(task)}",
                ],
            ),
        ]
        extra: list[str] = []
        if library is not None:
            objs.append(self._cached(task, "adapter", library.adapter_source, [*tflags, "-O2"]))
            extra = [*map(str, self._library_archives(library)), *library.library.built.link_flags]
        args = [*tflags, *map(str, objs), *extra, *link_flags(kind)]
        key = hashlib.sha256("\0".join([compiler_version(), *args]).encode()).hexdigest()[:24]
        path = self.cache_dir / f"{task.name}-{TRUSTED_BINARY}-{key}"
        if path.exists():
            return path
        with tempfile.TemporaryDirectory(prefix="eok-link-") as tmp:
            self._link(Path(tmp), [*args, "-o", TRUSTED_BINARY])
            tmp_bin = path.with_suffix(f".{os.getpid()}.{secrets.token_hex(4)}.tmp")
            shutil.copyfile(Path(tmp) / TRUSTED_BINARY, tmp_bin)
            os.replace(tmp_bin, path)
        return path

    def library_link_problem(
        self, task: KernelTask, target: TargetProfile, kind: BuildKind, library: LibraryBaseline
    ) -> str | None:
        """Why the trusted binary with the library's routine does not link (None: it links, and is cached)."""
        try:
            self._trusted_binary(task, target, kind, library)
        except CompileFailed as e:
            return "; ".join(d.message for d in e.diagnostics[:3])[:400]
        return None

    def _library_archives(self, library: LibraryBaseline) -> list[Path]:
        """The library's archives, copied into the object cache: the link's sandbox sees only that folder
        (and the toolchain), never the library's build tree. Named by the build's fingerprint."""
        copies = []
        for i, archive in enumerate(library.library.built.archives):
            src = Path(archive)
            copy = self.cache_dir / f"lib-{library.library.fingerprint}-{i}-{src.name}"
            if not copy.exists():
                tmp = copy.with_suffix(f".{os.getpid()}.{secrets.token_hex(4)}.tmp")
                shutil.copyfile(src, tmp)
                os.replace(tmp, copy)
            copies.append(copy)
        return copies

    def preprocess(
        self,
        code: str,
        target: TargetProfile,
        kind: BuildKind,
        workdir: Path,
        cflags: list[str] | None = None,
        prelude: str | None = None,
    ) -> str:
        """clang -E of the candidate with the flags it is compiled with (the static check reads this)."""
        (workdir / CANDIDATE_FILE).write_text(code)
        flags = [*target_flags(target, kind), *target.baseline_cflags, *(cflags or [])]
        if prelude is not None:
            (workdir / "eok_prototype.h").write_text(prelude)
            flags += ["-include", "eok_prototype.h"]
        argv = [CLANG, *COMMON_FLAGS, *flags, "-E", CANDIDATE_FILE]
        res = run(argv, workdir, PREPROCESS_LIMITS, env=compile_env(workdir))
        if res.truncated or res.flooded:
            mb = PREPROCESS_LIMITS.output_bytes >> 20
            raise CompileFailed([_note(f"the preprocessed source is larger than {mb} MB")], res.stderr, "too_large")
        _raise_on_failure(res, "the preprocessor", PREPROCESS_LIMITS)
        return res.stdout

    def _cached(self, task: KernelTask, role: str, source: str, flags: list[str]) -> Path:
        key = hashlib.sha256(
            "\0".join([harness.HARNESS_VERSION, compiler_version(), role, source, *flags]).encode()
        ).hexdigest()[:24]
        obj = self.cache_dir / f"{task.name}-{role}-{key}.o"
        if obj.exists():
            return obj
        with tempfile.TemporaryDirectory(prefix="eok-obj-") as tmp:
            src = Path(tmp) / f"{role}.c"
            src.write_text(source)
            try:
                self._compile(Path(tmp), src.name, f"{role}.o", flags)
            except CompileFailed as e:  # the task's code, never the candidate's: a task error
                first = e.diagnostics[0] if e.diagnostics else None
                where = f":{first.line}:{first.col}" if first and first.line else ""
                origin = {
                    "harness": "the generated harness",
                    "adapter": f"{task.directory / 'task.toml'} [[library]] adapter",
                }.get(role, str(task.directory / "reference.c"))
                raise InvalidInput(
                    f"task {task.name}: {origin}{where} does not compile ({role} build): "
                    f"{first.message if first else 'compiler failed'}",
                    "fix the task's "
                    + ("[[library]] header or adapter" if role == "adapter" else "reference.c")
                    + " (the candidate was not judged)",
                ) from None
            # Atomic publish: concurrent evaluations may build the same object.
            tmp_obj = obj.with_suffix(f".{os.getpid()}.{secrets.token_hex(4)}.tmp")
            shutil.copyfile(Path(tmp) / f"{role}.o", tmp_obj)
            os.replace(tmp_obj, obj)
        return obj

    def _compile(self, cwd: Path, src: str, out: str, flags: list[str], limits: Limits = COMPILE_LIMITS) -> None:
        """Compile in the sandbox: `cwd` read-only, the object written to a scratch folder, then taken."""
        scratch = cwd / f"compile-{secrets.token_hex(4)}"
        argv = [CLANG, *COMMON_FLAGS, *flags, "-c", src, "-o", f"{scratch.name}/{out}"]
        res = run(argv, cwd, limits, env=compile_env(scratch), scratch=scratch)
        _raise_on_failure(res, "the compiler", limits, src)
        take(scratch, out, cwd / out)

    def _link(self, cwd: Path, args: list[str]) -> None:
        """Link in the sandbox (`args` end in `-o name`); the object cache is readable, not writable."""
        scratch = cwd / f"link-{secrets.token_hex(4)}"
        out = args[args.index("-o") + 1]
        args = [*args[: args.index("-o")], "-o", f"{scratch.name}/{out}", *args[args.index("-o") + 2 :]]
        res = run([CLANG, *args], cwd, LINK_LIMITS, scratch=scratch, readable=[self.cache_dir])
        if res.returncode != 0 and not res.timed_out and not _stopped(res, LINK_LIMITS):
            raise CompileFailed(parse_link_errors(res.stderr), res.stderr)
        _raise_on_failure(res, "the linker", LINK_LIMITS)
        take(scratch, out, cwd / out)


def compile_env(scratch: Path) -> dict[str, str]:
    """The step's minimal environment; LLVM's crash handler then prints no symbolized trace (it would start
    llvm-symbolizer, a process the compile sandbox refuses)."""
    return {**clean_env(scratch), "LLVM_DISABLE_SYMBOLIZATION": "1"}


def _note(message: str) -> CompileDiagnostic:
    return CompileDiagnostic(line=0, col=0, message=message)


_OUT_OF_MEMORY = ("out of memory", "Allocation failed", "bad_alloc", "Cannot allocate memory")
_CRASH_TEXT = ("PLEASE submit a bug report", "failed due to signal", "Stack dump:")


def _stopped(res: RunOutput, limits: Limits) -> str | None:
    """Why a compiler step was stopped rather than failing on its own: 'timeout', 'too_large', 'crash'."""
    signal_number = res.signal or (res.returncode - 128 if (res.returncode or 0) > 128 else 0)
    if res.timed_out or signal_number == signal.SIGXCPU:
        return "timeout"
    if res.flooded or signal_number == signal.SIGXFSZ or any(text in res.stderr for text in _OUT_OF_MEMORY):
        return "too_large"
    if signal_number or any(text in res.stderr for text in _CRASH_TEXT):
        return "crash"  # a signal (SIGSYS too: the sandbox stopped it) or LLVM's crash report
    return None


def _raise_on_failure(res: RunOutput, step: str, limits: Limits, src: str = CANDIDATE_FILE) -> None:
    """CompileFailed of the right kind when a compiler step did not succeed."""
    if res.returncode == 0 and not res.timed_out:
        return
    kind = _stopped(res, limits)
    if kind is None:
        raise CompileFailed(parse_diagnostics(res.stderr, src), res.stderr)
    message = {
        "timeout": f"{step} took longer than the {limits.wall_s:.0f} s limit",
        "too_large": f"{step} went past the {limits.fsize_mb} MB output or {limits.memory_mb} MB memory limit",
        "crash": f"{step} crashed ({_crash_line(res)})",
    }[kind]
    raise CompileFailed([_note(message)], res.stderr, kind)


def _crash_line(res: RunOutput) -> str:
    """A short name of the crash: the signal, or LLVM's first error line."""
    if res.violation:
        return "stopped by the sandbox making a forbidden system call"
    if res.signal:
        return signal.Signals(res.signal).name if res.signal in signal.Signals._value2member_map_ else str(res.signal)
    line = next((ln for ln in res.stderr.splitlines() if "error" in ln.lower() or "LLVM" in ln), "")
    return line.strip()[:160] or f"exit code {res.returncode}"


_DIAG_RE = re.compile(
    r"^(?P<file>[^:\n]+):(?P<line>\d+):(?P<col>\d+): (?P<sev>fatal error|error|warning): (?P<msg>.*)$"
)


def parse_diagnostics(stderr: str, source: str = CANDIDATE_FILE, limit: int = 5) -> list[CompileDiagnostic]:
    """The first errors clang reported in `source`, or anywhere if none is in it."""
    found: list[CompileDiagnostic] = []
    other: list[CompileDiagnostic] = []
    for line in stderr.splitlines():
        m = _DIAG_RE.match(line.strip())
        if not m or m["sev"] == "warning":
            continue
        diag = CompileDiagnostic(line=int(m["line"]), col=int(m["col"]), message=m["msg"], severity="error")
        (found if Path(m["file"]).name == source else other).append(diag)
    if found or other:
        return (found or other)[:limit]
    first = next((ln for ln in stderr.splitlines() if ln.strip()), "compilation failed")
    return [CompileDiagnostic(line=0, col=0, message=first[:300])]


def parse_link_errors(stderr: str, limit: int = 5) -> list[CompileDiagnostic]:
    diags = []
    for line in stderr.splitlines():
        if "error:" in line:
            msg = line.split("error:", 1)[1].strip()
            diags.append(CompileDiagnostic(line=0, col=0, message=f"link: {msg}"))
    return diags[:limit] or [CompileDiagnostic(line=0, col=0, message="link failed")]
