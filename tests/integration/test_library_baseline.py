"""The library as a baseline (issue 21, item 2): a built library's routine timed beside the two baselines.

The library here is built by the test, exactly as `eok upstream build` leaves one: a static riscv64
archive and its eok-library.json. Its `cblas_sdot` is a plain scalar loop with BLAS's interface; its
`cblas_snrm2` sums squares in float, so inputs whose squares overflow (snrm2's contract) make it wrong.
Real clang, real qemu, the real cost model; the library is linked into the trusted binary only.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from core.settings import Settings
from evaluator.evaluate import Candidate, EvalResult, Evaluator
from evaluator.targets import load_target
from evaluator.tasks import SUITE_DIR, KernelTask, load_task
from evaluator.toolchain import CLANG, target_flags
from evaluator.upstream.baseline import configured_libraries, library_baseline
from evaluator.upstream.built import BuiltLibrary

COMMIT = "0123456789abcdef0123456789abcdef01234567"
LIBRARY_C = """
float cblas_sdot(int n, const float *x, int incx, const float *y, int incy) {
    float s = 0.0f;
    if (n <= 0) return 0.0f;
    const float *px = incx < 0 ? x + (long)(1 - n) * incx : x;
    const float *py = incy < 0 ? y + (long)(1 - n) * incy : y;
    for (int i = 0; i < n; i++) s += px[(long)i * incx] * py[(long)i * incy];
    return s;
}
float cblas_snrm2(int n, const float *x, int incx) {  /* naive: squares overflow in float */
    float s = 0.0f;
    for (int i = 0; i < n; i++) s += x[(long)i * incx] * x[(long)i * incx];
    return __builtin_sqrtf(s);
}
"""


def _build_library(folder: Path, source: str) -> Path:
    """A static archive for k1-x60 and its manifest, as a library build leaves them; the manifest's path."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tinyblas.c").write_text(source)
    flags = [*target_flags(load_target("k1-x60"), "emulator"), "-O2"]
    subprocess.run([CLANG, *flags, "-c", "tinyblas.c", "-o", "tinyblas.o"], cwd=folder, check=True)
    subprocess.run(["llvm-ar-22", "rcs", "libtinyblas.a", "tinyblas.o"], cwd=folder, check=True)
    built = BuiltLibrary(
        library="openblas",
        commit=COMMIT,
        target="k1-x60",
        clone=str(folder),
        archives=[str(folder / "libtinyblas.a")],
        include_dirs=[],
        cflags=flags,
    )
    return built.write(folder)


@pytest.fixture(scope="module")
def tasks(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """sdot and snrm2 as the suite has them, [[library]] included, timed at n = 2048: the same contract,
    a quarter or less of the modeled work (the test stays lean)."""
    root = tmp_path_factory.mktemp("tasks")
    for name, bench in (("sdot", "{ n = 16384, bench = true }"), ("snrm2", "{ n = 100000, bench = true }")):
        shutil.copytree(SUITE_DIR / name, root / name)
        spec = root / name / "task.toml"
        text = spec.read_text()
        assert bench in text
        spec.write_text(text.replace(bench, "{ n = 2048, bench = true }"))
    return {name: root / name for name in ("sdot", "snrm2")}


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _build_library(tmp_path_factory.mktemp("tinyblas"), LIBRARY_C)


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("home")


@pytest.fixture(scope="module")
def with_library(home: Path, library: Path) -> Evaluator:
    return Evaluator(Settings(home=home, eval_timeout_s=60, eval_memory_mb=512, library=[library]))


def _eval(evaluator: Evaluator, task: Path, cflags: list[str] | None = None) -> EvalResult:
    spec: KernelTask = load_task(task)
    cand = Candidate(code=spec.reference_code, cflags=cflags or [], label="reference")
    return evaluator.evaluate(spec, load_target("k1-x60"), cand, "qemu")


def test_sdot_reports_its_speedup_over_the_library_beside_both_baselines(
    with_library: Evaluator, tasks: dict[str, Path]
) -> None:
    r = _eval(with_library, tasks["sdot"])
    assert r.ok, r.feedback
    assert r.library_label == "openblas@0123456789" and r.library_routine == "cblas_sdot"
    assert r.library_problem is None
    assert r.library_cycles and r.candidate_cycles and r.competent_cycles
    assert r.speedup_over_library == pytest.approx(r.library_cycles / r.candidate_cycles)
    assert "openblas@0123456789's cblas_sdot" in r.feedback
    # Held out: the ranking over the library is the ranking over the competent baseline (same candidate time,
    # one denominator per task): the vectorized build of the same C ranks above the scalar one on both.
    fast = _eval(with_library, tasks["sdot"], ["-ffast-math"])
    assert fast.ok, fast.feedback
    assert fast.library_cycles == r.library_cycles  # cached per library build, on fixed inputs
    assert (fast.speedup_over_library > r.speedup_over_library) == (fast.competent_speedup > r.competent_speedup)
    assert fast.speedup_over_library > r.speedup_over_library


def test_without_a_configured_library_there_is_no_library_figure(home: Path, tasks: dict[str, Path]) -> None:
    r = _eval(Evaluator(Settings(home=home, eval_timeout_s=60, eval_memory_mb=512)), tasks["sdot"])
    assert r.ok, r.feedback
    assert (r.library_label, r.library_cycles, r.speedup_over_library, r.library_problem) == (None,) * 4


def test_a_library_kernel_that_fails_the_task_s_check_is_reported(
    with_library: Evaluator, tasks: dict[str, Path]
) -> None:
    r = _eval(with_library, tasks["snrm2"])
    assert r.ok, r.feedback  # the candidate is judged as ever; the library's failure is a finding beside it
    assert r.library_label == "openblas@0123456789" and r.speedup_over_library is None
    assert r.library_problem and r.library_problem.startswith("fails the task's check: at size n=")
    assert "no time for openblas@0123456789's cblas_snrm2: fails the task's check" in r.feedback


def test_the_cache_key_changes_with_the_archive(tmp_path: Path) -> None:
    manifest = _build_library(tmp_path / "lib", LIBRARY_C)
    task = load_task("sdot")
    before = library_baseline(task, "k1-x60", configured_libraries([manifest]))
    _build_library(tmp_path / "lib", LIBRARY_C.replace("float s = 0.0f;", "float s = -0.0f;", 1))
    after = library_baseline(task, "k1-x60", configured_libraries([manifest.parent]))
    assert before is not None and after is not None and before.key != after.key
    assert library_baseline(task, "k3-x100", configured_libraries([manifest])) is None  # built for k1-x60 only
    assert library_baseline(load_task("relu"), "k1-x60", configured_libraries([manifest])) is None  # no mapping
