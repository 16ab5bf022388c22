"""A built library's own tests for one routine under qemu-riscv64, and its benchmark under the cost model.

Tests are the library's: OpenBLAS's ctest testers (xscblat1 for level 1; xscblat2/3 given an input that
tests only the routine), ggml's test-quantize-fns (its cases for the routine's quantization type). They
are built in the library's build tree by its own build (make, ninja) and run under qemu-riscv64 with the
target's CPU. The benchmark is a small driver (evaluator/upstream/drivers/) that calls the routine once
between the cost model's markers, linked against the built archives and priced the way every evaluation
is priced (evaluator.costmodel.model_kernel_cycles).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from pydantic import BaseModel

from core.errors import InvalidInput
from evaluator.targets import TargetProfile, load_target
from evaluator.upstream import ggml, openblas
from evaluator.upstream.build import LINK_FLAGS, BuildStep, LibraryBuildError, Progress, cross_cc, run_step
from evaluator.upstream.built import BuiltLibrary

QEMU = "qemu-riscv64"
TEST_TIMEOUT_S = 1800  # a whole tester (xscblat3, test-quantize-fns: every type) under qemu on a busy machine
TAIL_LINES = 20
DRIVERS = Path(__file__).resolve().parent / "drivers"
# A routine's benchmark variant -> (the routine whose tests cover it, the driver's -D defines).
OPENBLAS_BENCH = {
    "sdot": ("sdot", "EOK_SDOT"),
    "saxpy": ("saxpy", "EOK_SAXPY"),
    "sgemv_t": ("sgemv", "EOK_SGEMV_T"),
    "sgemv_n": ("sgemv", "EOK_SGEMV_N"),
    "sgemv": ("sgemv", "EOK_SGEMV_T"),
    "sgemm": ("sgemm", "EOK_SGEMM"),
    # SGEMMKERNEL, the packed micro-kernel: benchmarked inside cblas_sgemm, tested through every routine
    # whose driver calls it (OPENBLAS_CALLERS)
    "sgemm_kernel": ("sgemm", "EOK_SGEMM"),
}
# A kernel the library's interface reaches through several routines -> the routines whose tests cover it:
# the level-3 drivers of all six call GEMM_KERNEL (strmm for its rectangular parts, strsm through the generic
# trsm kernels, ssyrk/ssyr2k through syrk_kernel.c/syr2k_kernel.c).
OPENBLAS_CALLERS = {"sgemm_kernel": ("sgemm", "ssymm", "strmm", "strsm", "ssyrk", "ssyr2k")}
GGML_BENCH = {"ggml_vec_dot_q8_0_q8_0": "EOK_Q8_0", "ggml_vec_dot_q4_0_q8_0": "EOK_Q4_0"}


def _silent(_: str) -> None:
    pass


class LibraryTestResult(BaseModel):
    """What a library's own tests said about one routine."""

    library: str
    routine: str
    passed: int  # test cases that passed
    failed: int  # test cases that failed (a crash of a test program counts as one)
    failed_cases: list[str]  # their names, as the library's test prints them
    command: str  # the command line that ran the tests (qemu included)
    output_tail: str  # the last lines of the test's output

    @property
    def ok(self) -> bool:
        """Every case passed, and there was at least one: a test that tested nothing is not a pass."""
        return self.failed == 0 and self.passed > 0


def library_routines(library: str) -> tuple[str, ...]:
    """The routines of `library` whose own tests and benchmark EoK knows how to run."""
    routines = {"openblas": (*openblas.ROUTINES, "sgemv_t", "sgemv_n", "sgemm_kernel"), "ggml": ggml.ROUTINES}
    return routines.get(library, ())


def run_library_tests(built: BuiltLibrary, routine: str, *, progress: Progress = _silent) -> LibraryTestResult:
    """Build (if needed) and run the library's own tests for `routine` under qemu-riscv64."""
    target = load_target(built.target)
    if built.library == "openblas":
        return _openblas_tests(built, target, routine, progress)
    if built.library == "ggml":
        return _ggml_tests(built, target, routine, progress)
    raise InvalidInput(f"{built.label}: EoK runs no tests of {built.library}", "use openblas or ggml")


def run_library_benchmark(built: BuiltLibrary, routine: str, size: int, *, progress: Progress = _silent) -> float:
    """Modeled cycles (target's cost model) of one call of `routine` at `size` in the library's build.

    size: n of a vector routine (sdot, saxpy, the ggml dots: elements, a multiple of 32), n of an n x n
    sgemv, n of an n x n x n sgemm.
    """
    from core.settings import get_settings
    from evaluator.costmodel import machine_for, model_kernel_cycles
    from evaluator.runners.qemu import model_cache_dir

    if size <= 0 or (built.library == "ggml" and size % 32):
        need = "a positive multiple of 32 (ggml's block length)" if built.library == "ggml" else "a positive n"
        raise InvalidInput(f"benchmark size {size}: not {need}", "give the elements of a vector, or n of n x n")
    target = load_target(built.target)
    binary = build_benchmark(built, routine, target)
    progress(f"{built.label}: modeling {routine} n={size} under qemu")
    timing = model_kernel_cycles(
        binary,
        qemu_argv(target, binary, [str(size)]),
        model_cache_dir(get_settings().home),
        mcpu=machine_for(target),
        timeout_s=TEST_TIMEOUT_S,
        regions=1,
        cwd=binary.parent,
    )
    return timing.cycles


def qemu_argv(target: TargetProfile, binary: Path, args: list[str]) -> list[str]:
    return [QEMU, "-cpu", target.qemu_cpu, str(binary), *args]


# --------------------------------------------------------------------------------------- OpenBLAS


def _openblas_routine(routine: str) -> str:
    base = OPENBLAS_BENCH.get(routine, (routine, ""))[0]
    if base not in openblas.LEVEL:
        known = ", ".join(library_routines("openblas"))
        raise InvalidInput(f"OpenBLAS routine {routine!r}: EoK runs no test for it", f"one of: {known}")
    return base


def _openblas_tests(built: BuiltLibrary, target: TargetProfile, asked: str, progress: Progress) -> LibraryTestResult:
    """ctest's tester of the routine's level; `asked` may be a variant (sgemv_t) of the routine tested."""
    routine = _openblas_routine(asked)
    names = {f"cblas_{r}" for r in OPENBLAS_CALLERS.get(asked, (routine,))}
    src = Path(built.archives[0]).parent
    level = openblas.LEVEL[routine]
    tester = f"xscblat{level}"
    progress(f"{built.label}: building ctest/{tester}")
    argv = ["make", "-C", "ctest", *openblas.make_vars(target, link=True), tester]
    run_step(BuildStep(argv, src, "compiling tests", lambda _: None), built.clone, progress)
    ctest = src / "ctest"
    stdin = None
    if level > 1:  # the tester's input with every routine but these switched off
        stdin = _only_routines((ctest / f"sin{level}").read_text(), names)
    argv = qemu_argv(target, ctest / tester, [])
    progress(f"{built.label}: running ctest/{tester} for {asked} under qemu")
    out, rc = _run(argv, ctest, stdin)
    cases = _blat1_cases(out) if level == 1 else _blat23_cases(out)
    mine = {name: ok for name, ok in cases.items() if name.split()[0].lower() in names}
    only = f"sin{level} with only {', '.join(sorted(names))}" if stdin else ""
    return _result(built, asked, mine, argv, out, rc, stdin_name=only)


def _only_routines(spec: str, names: set[str]) -> str:
    """A ctest input that tests only `names`: the flag after each other routine's name becomes F."""
    lines = []
    for line in spec.splitlines():
        words = line.split()
        if words and words[0].startswith("cblas_") and len(words) > 1 and words[1] in ("T", "F"):
            flag = "T" if words[0] in names else "F"
            line = f"{words[0]:<12} {flag} {' '.join(words[2:])}"
        lines.append(line)
    return "\n".join(lines) + "\n"


def _blat1_cases(out: str) -> dict[str, bool]:
    """xscblat1: a "Test of subprogram number N NAME" header, then "PASS" or "FAIL" lines."""
    cases: dict[str, bool] = {}
    for chunk in out.split("Test of subprogram number")[1:]:
        words = chunk.split()
        if len(words) >= 2:
            cases[words[1]] = "FAIL" not in chunk and "PASS" in chunk
    return cases


_BLAT23_PASS = re.compile(r"(cblas_\w+)\s+PASSED THE (.*?)TESTS", re.IGNORECASE)
_BLAT23_FAIL = re.compile(r"(cblas_\w+)\s+FAILED", re.IGNORECASE)


def _blat23_cases(out: str) -> dict[str, bool]:
    """xscblat2/3: "NAME PASSED THE ROW-MAJOR COMPUTATIONAL TESTS", "... FAILED ON CALL NUMBER"."""
    cases: dict[str, bool] = {}
    for line in out.splitlines():
        if m := _BLAT23_PASS.search(line):
            cases[f"{m.group(1)} {m.group(2).strip().lower()}"] = True
        elif m := _BLAT23_FAIL.search(line):
            cases[f"{m.group(1)} {line.split('FAILED', 1)[1].strip().lower()}"[:80]] = False
    return cases


# ------------------------------------------------------------------------------------------- ggml


def _ggml_tests(built: BuiltLibrary, target: TargetProfile, routine: str, progress: Progress) -> LibraryTestResult:
    if routine not in ggml.QUANT_TYPE:
        known = ", ".join(ggml.ROUTINES)
        raise InvalidInput(f"ggml routine {routine!r}: EoK runs no test for it", f"one of: {known}")
    qtype = ggml.QUANT_TYPE[routine]
    src = Path(built.include_dirs[0]).parent
    progress(f"{built.label}: building tests/test-quantize-fns")
    ggml.build_targets(src, ("test-quantize-fns",), progress)
    binary = src / ggml.BUILD_DIR / "bin" / "test-quantize-fns"
    argv = qemu_argv(target, binary, ["-v"])
    # One run tests every type: its output is kept beside this build of the program for the other routines.
    record = binary.with_name(f"{binary.name}.{binary.stat().st_mtime_ns}.out")
    if record.is_file():
        rc_text, _, out = record.read_text().partition("\n")
        rc = int(rc_text)
    else:
        progress(f"{built.label}: running test-quantize-fns under qemu")
        out, rc = _run(argv, binary.parent, None)
        record.write_text(f"{rc}\n{out}")
    # "q8_0 dot product error:   ok (0.000123)": the type, the case, ok or FAILED
    cases = {}
    for line in out.splitlines():
        words = line.split()
        if words and words[0] == qtype and ":" in line:
            name, _, verdict = line.partition(":")
            cases[" ".join(name.split())] = verdict.split()[0] == "ok" if verdict.split() else False
    return _result(built, routine, cases, argv, out, rc)


# ----------------------------------------------------------------------------------------- shared


def _run(argv: list[str], cwd: Path, stdin: str | None) -> tuple[str, int]:
    try:
        r = subprocess.run(
            argv, cwd=cwd, input=stdin, capture_output=True, text=True, errors="replace", timeout=TEST_TIMEOUT_S
        )
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        return out + f"\n(timed out after {TEST_TIMEOUT_S} s)", -1
    return r.stdout + r.stderr, r.returncode


def _result(
    built: BuiltLibrary, routine: str, cases: dict[str, bool], argv: list[str], out: str, rc: int, stdin_name: str = ""
) -> LibraryTestResult:
    failed = [name for name, ok in cases.items() if not ok]
    # A program killed by a signal, or one that failed before printing this routine's cases, is a failure too;
    # a tester's non-zero exit for another routine's failure is not this routine's.
    if (rc < 0 or (rc != 0 and not cases)) and not failed:
        failed.append(f"{Path(argv[3]).name} exited with code {rc}")
    command = " ".join(argv) + (f" < ({stdin_name})" if stdin_name else "")
    return LibraryTestResult(
        library=built.library,
        routine=routine,
        passed=sum(cases.values()),
        failed=len(failed),
        failed_cases=failed,
        command=command,
        output_tail="\n".join(out.rstrip().splitlines()[-TAIL_LINES:]),
    )


# -------------------------------------------------------------------------------------- benchmark


def build_benchmark(built: BuiltLibrary, routine: str, target: TargetProfile) -> Path:
    """The benchmark driver for `routine`, linked static against the built archives (in the build's folder)."""
    if built.library == "openblas" and routine in OPENBLAS_BENCH:
        driver, define = DRIVERS / "openblas_bench.c", OPENBLAS_BENCH[routine][1]
    elif built.library == "ggml" and routine in GGML_BENCH:
        driver, define = DRIVERS / "ggml_bench.c", GGML_BENCH[routine]
    else:
        known = ", ".join([*OPENBLAS_BENCH, *GGML_BENCH])
        raise InvalidInput(f"{built.label}: no benchmark for {routine!r}", f"one of: {known}")
    out = Path(built.archives[0]).parent / f"eok-bench-{routine}"
    argv = [*cross_cc(target), "-O2", f"-D{define}=1", *[f"-I{d}" for d in built.include_dirs], str(driver)]
    argv += [*built.archives, *built.link_flags, *LINK_FLAGS, "-o", str(out)]
    r = subprocess.run(argv, capture_output=True, text=True)
    if r.returncode != 0:
        last = next((ln for ln in reversed(r.stderr.splitlines()) if "error" in ln), r.stderr.strip()[-200:])
        raise LibraryBuildError(f"{built.label}: the benchmark driver for {routine} did not link: {last}")
    return out
