"""`build_library`, `run_library_tests`, `run_library_benchmark` and `eok upstream` on miniature OpenBLAS and
ggml trees (tests/support/upstream_trees.py): the real clang-22 cross build through each library's own
make/CMake, the real qemu-riscv64 and the real cost model. No network; the real clones are exercised by
scripts/bench_upstream.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from core.errors import InvalidInput
from core.settings import get_settings
from evaluator.targets import load_target
from evaluator.upstream.build import LibraryBuildError, build_library, recipe_for, recipe_key
from evaluator.upstream.built import MANIFEST_NAME, BuiltLibrary, read_manifest
from evaluator.upstream.library_tests import run_library_benchmark, run_library_tests
from service.cli import _register
from service.cli.app import run_cli
from tests.support.upstream_trees import make_ggml_tree, make_openblas_tree

pytestmark = pytest.mark.qemu


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """EOK_HOME for the module: the build cache and the cost model's cache, shared by the CLI tests."""
    path = tmp_path_factory.mktemp("upstream-home")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("EOK_HOME", str(path))
        get_settings.cache_clear()
        _register()
        yield path
    get_settings.cache_clear()


@pytest.fixture(scope="module")
def openblas(home: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, BuiltLibrary, list[str]]:
    clone = make_openblas_tree(tmp_path_factory.mktemp("clones") / "OpenBLAS")
    lines: list[str] = []
    return clone, build_library("openblas", clone, "k1-x60", progress=lines.append), lines


@pytest.fixture(scope="module")
def ggml(home: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, BuiltLibrary, list[str]]:
    clone = make_ggml_tree(tmp_path_factory.mktemp("clones") / "ggml")
    lines: list[str] = []
    return clone, build_library("ggml", clone, "k1-x60", progress=lines.append), lines


def _head(clone: Path) -> str:
    return subprocess.run(["git", "-C", str(clone), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()


def _members(archive: str) -> set[str]:
    return set(subprocess.run(["llvm-ar-22", "t", archive], capture_output=True, text=True).stdout.split())


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = run_cli(list(argv))
    out = capsys.readouterr()
    return code, out.out, " ".join(out.err.split())


# ------------------------------------------------------------------------------------------ OpenBLAS


def test_openblas_is_built_by_its_own_make_for_the_target(openblas, home: Path) -> None:
    clone, built, lines = openblas
    assert built.library == "openblas" and built.commit == _head(clone) and built.target == "k1-x60"
    key = recipe_key(recipe_for("openblas"), load_target("k1-x60"))
    folder = home / "upstream" / "openblas" / f"{built.commit}-k1-x60-b{key}"
    assert read_manifest(folder) == built and (folder / MANIFEST_NAME).is_file()
    (archive,) = built.archives
    assert Path(archive).name == "libopenblas_riscv64_zvl256b-r0.0.1.a"  # LIBNAME from its Makefile.system
    assert {"sdot_k.o", "cblas_sdot.o", "cblas_sgemv.o"} <= _members(archive)
    # Our ISA flags on CC, and the ones its Makefile.riscv64 adds for the TARGET after them.
    assert "-mtune=spacemit-x60" in built.cflags and "-march=rv64imafdcv_zvl256b" in built.cflags
    assert lines[0].startswith("openblas: copying the tree")
    assert any(line.startswith("compiling 1 ") and "dot_rvv.c" in line for line in lines)
    assert not (clone / "kernel" / "sdot_k.o").exists()  # the clone itself is never written to


def test_a_second_build_answers_from_the_cache(openblas) -> None:
    clone, built, _ = openblas
    lines: list[str] = []
    began = time.monotonic()
    again = build_library("openblas", clone, "k1-x60", progress=lines.append)
    assert again == built and time.monotonic() - began < 2.0
    assert lines == [f"openblas: cached build of {built.commit[:10]} in {Path(built.archives[0]).parent.parent}"]


def test_openblas_own_testers_pass_for_sdot_and_sgemv(openblas) -> None:
    _, built, _ = openblas
    dot = run_library_tests(built, "sdot")
    assert dot.ok and dot.passed == 1 and dot.failed_cases == []
    assert dot.command.startswith("qemu-riscv64 -cpu rv64,v=true,vlen=256") and "xscblat1" in dot.command
    gemv = run_library_tests(built, "sgemv_t")
    assert gemv.ok and gemv.routine == "sgemv_t" and "xscblat2" in gemv.command
    assert "sin2 with only cblas_sgemv" in gemv.command and "cblas_sger   WAS NOT TESTED" in gemv.output_tail


def test_openblas_benchmark_is_priced_by_the_cost_model(openblas) -> None:
    _, built, _ = openblas
    small, large = (run_library_benchmark(built, "sdot", n) for n in (512, 4096))
    # The RVV dot at VLEN 256 with LMUL 4 handles 32 floats per iteration: 8x the elements, ~8x the cycles.
    assert 0 < small < large and 4 < large / small < 10


def test_a_changed_tree_is_rebuilt_and_its_failing_test_named(openblas) -> None:
    clone, built, _ = openblas
    kernel = clone / "kernel" / "riscv64" / "dot_rvv.c"
    kept = kernel.read_text()
    kernel.write_text(
        kept.replace("return __riscv_vfmv_f_s_f32m1_f32(sum);", "return __riscv_vfmv_f_s_f32m1_f32(sum) + 1;")
    )
    lines: list[str] = []
    try:
        changed = build_library("openblas", clone, "k1-x60", progress=lines.append)
        assert changed.commit == built.commit and changed.archives != built.archives  # another cache folder
        src = Path(changed.archives[0]).parent
        assert "-dirty" in src.parent.name
        # Only the changed kernel was compiled again, in a copy of the clean build.
        assert any(line.startswith("openblas: reusing the build in ") for line in lines)
        compiles = [ln for ln in (src / "eok-compiling.log").read_text().splitlines() if ln.startswith("clang")]
        assert len(compiles) == 1 and "dot_rvv.c" in compiles[0]
        result = run_library_tests(changed, "sdot")
        assert not result.ok and result.failed_cases == ["CBLAS_SDOT"]
        assert run_library_tests(changed, "saxpy").ok  # the other routine's test still passes
    finally:
        kernel.write_text(kept)
    assert build_library("openblas", clone, "k1-x60") == built  # the clean tree: the first build again


def test_two_builds_of_one_tree_at_once_build_it_once(openblas) -> None:
    clone, built, _ = openblas
    axpy = clone / "kernel" / "riscv64" / "axpy.c"
    kept = axpy.read_text()
    axpy.write_text(kept + "/* a change both builds see */\n")
    logs: list[list[str]] = [[], []]
    try:
        with ThreadPoolExecutor(2) as pool:
            jobs = [pool.submit(build_library, "openblas", clone, "k1-x60", progress=log.append) for log in logs]
            first, second = (job.result() for job in jobs)
    finally:
        axpy.write_text(kept)
    assert first == second and first.archives != built.archives
    built_once = [log for log in logs if any(line.startswith("openblas: built in") for line in log)]
    assert len(built_once) == 1 and any("cached build" in line for log in logs for line in log)


def test_a_changed_header_gets_a_clean_build(openblas) -> None:
    clone, built, _ = openblas
    header = clone / "common.h"
    kept = header.read_text()
    header.write_text(kept + "/* make does not see this header change in the objects that include it */\n")
    lines: list[str] = []
    try:
        changed = build_library("openblas", clone, "k1-x60", progress=lines.append)
    finally:
        header.write_text(kept)
    assert lines[0].startswith("openblas: comparing the tree") and lines[1].startswith("openblas: copying the tree")
    assert changed.archives != built.archives
    assert run_library_tests(changed, "sdot").ok


def test_a_build_failure_is_one_line_with_the_compiler_error(tmp_path: Path, home: Path) -> None:
    clone = make_openblas_tree(tmp_path / "OpenBLAS")
    axpy = clone / "kernel" / "riscv64" / "axpy.c"
    axpy.write_text(axpy.read_text().replace("y[i * incy] +=", "y[i * incy] +== "))
    with pytest.raises(LibraryBuildError) as e:
        build_library("openblas", clone, "k1-x60")
    message = str(e.value)
    assert "the build failed while compiling" in message and "axpy.c" in message and "error:" in message
    assert "\n" not in e.value.message and "eok-compiling.log" in (e.value.hint or "")


# --------------------------------------------------------------------------------------------- ggml


def test_ggml_is_built_by_its_own_cmake_with_rvv(ggml) -> None:
    clone, built, lines = ggml
    assert built.library == "ggml" and built.commit == _head(clone)
    assert [Path(a).name for a in built.archives] == ["libggml.a", "libggml-cpu.a", "libggml-base.a"]
    assert all(Path(a).is_file() for a in built.archives)
    assert (
        "ggml_vec_dot_q8_0_q8_0"
        in subprocess.run(["llvm-nm-22", built.archives[1]], capture_output=True, text=True).stdout
    )
    assert "-march=rv64gcv_zfh" in built.cflags  # the ISA ggml's CMake chose for its CPU backend
    assert "-lstdc++" in built.link_flags
    assert any(line.startswith("compiling 1/") for line in lines)


def test_ggml_own_quantize_tests_pass_for_both_dots(ggml) -> None:
    _, built, _ = ggml
    q8 = run_library_tests(built, "ggml_vec_dot_q8_0_q8_0")
    assert q8.ok and q8.passed == 1 and "test-quantize-fns -v" in q8.command
    assert "q8_0 dot product error" in q8.output_tail
    q4 = run_library_tests(built, "ggml_vec_dot_q4_0_q8_0")
    assert q4.ok and q4.passed == 1


def test_ggml_benchmark_is_priced_by_the_cost_model(ggml) -> None:
    _, built, _ = ggml
    assert run_library_benchmark(built, "ggml_vec_dot_q8_0_q8_0", 1024) > 0
    with pytest.raises(InvalidInput, match="benchmark size 1000: not a positive multiple of 32"):
        run_library_benchmark(built, "ggml_vec_dot_q8_0_q8_0", 1000)


# ---------------------------------------------------------------------------------------------- CLI


def test_cli_build_and_test_in_json(openblas, capsys: pytest.CaptureFixture[str]) -> None:
    clone, built, _ = openblas
    code, out, err = cli(capsys, "upstream", "build", "openblas", str(clone), "--json")
    assert code == 0 and BuiltLibrary.model_validate(json.loads(out)) == built and "cached build" in err
    code, out, _ = cli(capsys, "upstream", "test", "openblas", str(clone), "saxpy", "--json", "--bench", "256")
    result = json.loads(out)
    assert code == 0 and result["ok"] and result["passed"] == 1 and result["modeled_cycles"] > 0


def test_cli_refuses_what_it_cannot_build_in_one_line(
    ggml, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    ggml_clone = ggml[0]
    code, _, err = cli(capsys, "upstream", "build", "openblas", str(tmp_path))
    assert code == 1 and f"{tmp_path}: not a git clone" in err
    code, _, err = cli(capsys, "upstream", "build", "openblas", str(ggml_clone))
    assert code == 1 and "not a clone of OpenBLAS (no Makefile.system)" in err
    mlas = tmp_path / "onnxruntime"
    for rel in ("onnxruntime/core/mlas/inc/mlas.h", "onnxruntime/core/mlas/lib/riscv64/sgemm_kernel_rvv.cpp"):
        (mlas / rel).parent.mkdir(parents=True, exist_ok=True)
        (mlas / rel).write_text("// placeholder\n")
    subprocess.run(["git", "init", "-q", str(mlas)], check=True)
    code, _, err = cli(capsys, "upstream", "build", "onnxruntime-mlas", str(mlas))
    assert code == 1 and "riscv64 kernels in this clone: sgemm" in err
    # A machine without the cross toolchain: only git on PATH.
    bare = tmp_path / "bin"
    bare.mkdir()
    (bare / "git").symlink_to(subprocess.run(["which", "git"], capture_output=True, text=True).stdout.strip())
    monkeypatch.setenv("PATH", str(bare))
    (ggml_clone / "NEW.txt").write_text("a change, so the cache does not answer\n")
    try:
        code, _, err = cli(capsys, "upstream", "build", "ggml", str(ggml_clone))
    finally:
        os.remove(ggml_clone / "NEW.txt")
    assert code == 3 and "clang-22 not found: it is needed to build ggml" in err and "apt-get install" in err
