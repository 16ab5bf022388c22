"""`eok export`: a run's best kernel into miniature OpenBLAS and ggml clones, built with clang-22, tested by
the miniatures' own testers under qemu-riscv64 and benchmarked under the cost model (evaluator.upstream).

The run folders are written by the project's own writer (agent.report.write_artifacts) around kernels the
offline generator renders for the task; the figures they cite are the test's inputs, not results."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from agent.export import ExportRefused, export_run
from agent.offline import OfflineGenerator
from agent.report import write_artifacts
from agent.types import RunOutcome
from core.settings import get_settings
from evaluator.targets import load_target
from evaluator.tasks import load_task
from knowledge.models import Experience, Run, RunStatus
from service.cli import _register
from service.cli.app import run_cli
from tests.support.upstream_trees import make_ggml_tree, make_openblas_tree

pytestmark = pytest.mark.qemu

LINEAGE = [
    {"depth": 0, "experience": "x-0", "thought": "th-acc", "thought_title": "Split the sum into accumulators",
     "technique": "accumulators", "idea_title": "accumulators", "speedup": 1.4, "competent_speedup": 1.1},
    {"depth": 1, "experience": "x-1", "thought": "th-lmul", "thought_title": "Grow LMUL to 4",
     "technique": "lmul", "idea_title": "LMUL", "speedup": 2.5, "competent_speedup": 2.0},
]  # fmt: skip

# A sum that drops the last product: right for nothing, caught by any dot product test of length >= 1.
WRONG_SDOT = "float sdot(int n, const float *x, const float *y) {\n    float s = 0.0f;\n" + (
    "    for (int i = 0; i + 1 < n; i++) s += x[i] * y[i];\n    return s;\n}\n"
)


def write_run(home: Path, task: str, code: str | None = None, *, name: str | None = None, task_path: str = "") -> Path:
    """A finished run folder whose best is `code` (default: the offline generator's kernel for the task)."""
    run_id = f"run-test-{name or task}"
    spec = load_task(task_path or task)
    code = code or OfflineGenerator(spec, load_target("k1-x60")).default().code
    settings = json.dumps({"task_path": task_path} if task_path else {})
    run = Run(id=run_id, task_id=spec.name, target_key="k1-x60", budget=8, status=RunStatus.DONE, settings=settings)
    best = Experience(
        id="x-1", task_id=spec.name, target_key="k1-x60", run_id=run_id, step=5, code=code, status="ok",
        speedup=2.5, competent_speedup=2.0, baseline_cycles=10_000, candidate_cycles=4_000, measurement="modeled",
    )  # fmt: skip
    row = {"step": 5, "code": code, "parent_step": None, "change": "-", "reason": "faster", "status": "ok",
           "speedup": 2.5, "competent_speedup": 2.0}  # fmt: skip
    write_artifacts(home / "runs" / run_id, RunOutcome(run=run, best=best, lineage=LINEAGE, candidates=[row]))
    return home / "runs" / run_id


def _commit_all(root: Path, message: str) -> None:
    git = ["git", "-C", str(root), "-c", "user.name=EoK tests", "-c", "user.email=tests@eok.invalid"]
    subprocess.run([*git, "commit", "-qam", message], check=True)


def _openblas_conventions(root: Path) -> Path:
    """The miniature's sdot slot as OpenBLAS's own kernels have it: compiled with CNAME from the build, the
    kernel's real argument list in FLOAT and BLASLONG (the export's wrapper depends on exactly that)."""
    common = root / "common.h"
    common.write_text(
        common.read_text()
        .replace("#include \"config.h\"\n", "#include \"config.h\"\n#define FLOAT float\n#define BLASLONG long\n")
        .replace("float sdot_k(long n, const float *x, long incx, const float *y, long incy);",
                 "FLOAT sdot_k(BLASLONG n, FLOAT *x, BLASLONG incx, FLOAT *y, BLASLONG incy);")
    )  # fmt: skip
    make = root / "kernel/Makefile"
    make.write_text(make.read_text().replace("-c riscv64/$(SDOTKERNEL)", "-DCNAME=sdot_k -c riscv64/$(SDOTKERNEL)"))
    (root / "kernel/riscv64/dot_rvv.c").write_text(
        '#include "common.h"\n'
        "FLOAT CNAME(BLASLONG n, FLOAT *x, BLASLONG inc_x, FLOAT *y, BLASLONG inc_y)\n{\n"
        "    double s = 0.0;\n"
        "    for (BLASLONG i = 0; i < n; i++) s += (double)x[i * inc_x] * y[i * inc_y];\n"
        "    return (FLOAT)s;\n}\n"
    )
    _commit_all(root, "sdot kernel in OpenBLAS's conventions")
    return root


_GGML_RVV = """\
#include "ggml-common.h"
#include "quants.h"
#if defined(__riscv_v)
#include <riscv_vector.h>
#endif

void ggml_vec_dot_q8_0_q8_0(int n, float *s, size_t bs, const void *vx, size_t bx, const void *vy, size_t by, int nrc) {
    const int nb = n / QK8_0;
    const block_q8_0 *x = vx;
    const block_q8_0 *y = vy;
    float sumf = 0.0f;
#if defined(__riscv_v)
    size_t vl = __riscv_vsetvl_e8m1(QK8_0);
    for (int b = 0; b < nb; b++) {
        vint16m2_t p = __riscv_vwmul_vv_i16m2(__riscv_vle8_v_i8m1(x[b].qs, vl), __riscv_vle8_v_i8m1(y[b].qs, vl), vl);
        vint32m1_t r = __riscv_vwredsum_vs_i16m2_i32m1(p, __riscv_vmv_v_x_i32m1(0, 1), vl);
        sumf += (float)x[b].d * (float)y[b].d * (float)__riscv_vmv_x_s_i32m1_i32(r);
    }
    *s = sumf;
#else
    (void)bs; (void)bx; (void)by; (void)nrc;
    for (int b = 0; b < nb; b++) {
        int acc = 0;
        for (int i = 0; i < QK8_0; i++) acc += x[b].qs[i] * y[b].qs[i];
        sumf += (float)x[b].d * (float)y[b].d * (float)acc;
    }
    *s = sumf;
#endif
}
"""


def _ggml_conventions(root: Path) -> Path:
    """The miniature's RISC-V quants.c laid out as ggml's: the function's RVV branch and its scalar fallback."""
    (root / "src/ggml-cpu/arch/riscv/quants.c").write_text(_GGML_RVV)
    _commit_all(root, "q8_0 dot with an RVV branch, as ggml's RISC-V quants.c")
    return root


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("export-home")


@pytest.fixture(scope="module")
def openblas(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _openblas_conventions(make_openblas_tree(tmp_path_factory.mktemp("openblas") / "OpenBLAS"))


def _state(clone: Path) -> tuple[str, str, str]:
    def git(*a: str) -> str:
        return subprocess.run(["git", "-C", str(clone), *a], capture_output=True, text=True, check=True).stdout

    return git("rev-parse", "HEAD"), git("status", "--porcelain"), git("branch", "--show-current")


def _show(clone: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(clone), "show", *args], capture_output=True, text=True, check=True).stdout


def test_sdot_export_into_openblas(home: Path, openblas: Path) -> None:
    before = _state(openblas)
    write_run(home, "sdot")
    r = export_run("run-test-sdot", "openblas", openblas, home=home)

    assert r.good, (r.problem, r.tests)
    assert r.tests["passed"] >= 1 and r.tests["failed"] == 0
    assert r.cycles_before and r.cycles_after  # the library's benchmark, modeled, at HEAD and on the branch
    assert _state(openblas) == before  # the user's checkout is untouched: one branch more, nothing else
    branch = "eok/sdot-run-test-sdot"
    kernel = _show(openblas, f"{branch}:kernel/riscv64/sdot_eok.c")
    assert "eok_sdot(" in kernel and '#include "dot_rvv.c"' in kernel and "inc_x == 1 && inc_y == 1" in kernel
    assert re.search(
        r"^SDOTKERNEL\s*=\s*sdot_eok\.c$", _show(openblas, f"{branch}:kernel/riscv64/KERNEL.RISCV64_ZVL256B"), re.M
    )
    message = _show(openblas, branch, "--format=%B", "--no-patch")
    for cited in ("run-test-sdot", "2.000x over the competent baseline", "2.500x over the plain", "model error",
                  "th-acc: Split the sum into accumulators", "th-lmul: Grow LMUL to 4", "CNAME redefined"):  # fmt: skip
        assert cited in message


def test_export_whose_kernel_fails_a_library_test_is_not_good(
    home: Path, openblas: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    write_run(home, "sdot", WRONG_SDOT, name="wrong")
    monkeypatch.setenv("EOK_HOME", str(home))
    get_settings.cache_clear()
    _register(["export"])
    try:
        code = run_cli(["export", "run-test-wrong", str(openblas), "--to", "openblas", "--json"])
    finally:
        get_settings.cache_clear()
    out = json.loads(capsys.readouterr().out)
    assert code == 1 and out["good"] is False
    assert out["tests"]["failed"] >= 1 and "cblas_sdot" in out["problem"].lower()
    assert "at HEAD they pass" in out["problem"]  # the library's own kernel passes the same tests
    assert out["cycles_after"] is None  # no benchmark figure for a kernel the library's tests reject
    assert out["delete"] == f"git -C {openblas} branch -D eok/sdot-run-test-wrong"  # left for inspection
    assert (
        "eok/sdot-run-test-wrong"
        in subprocess.run(["git", "-C", str(openblas), "branch"], capture_output=True, text=True, check=True).stdout
    )


def test_refusals_write_nothing(home: Path, openblas: Path, tmp_path: Path) -> None:
    head = _state(openblas)
    # A narrow snrm2 (inputs in [-1, 1]) never checks what the library promises: no overflow, no underflow.
    narrow = tmp_path / "snrm2_narrow"
    shutil.copytree(load_task("snrm2").directory, narrow)
    for f in (narrow / "task.toml", narrow / "reference.c"):
        f.write_text(re.sub(r"(?m)^scales = .*$", "", f.read_text()).replace("snrm2", "snrm2_narrow"))
    write_run(home, "snrm2", name="snrm2-narrow", task_path=str(narrow))
    with pytest.raises(ExportRefused, match="overflow or underflow over the full float range"):
        export_run("run-test-snrm2-narrow", "openblas", openblas, home=home)
    write_run(home, "sgemm_64")
    with pytest.raises(ExportRefused, match="packed micro-kernel"):
        export_run("run-test-sgemm_64", "openblas", openblas, home=home)
    # A dirty clone: the 'before' would not be HEAD.
    write_run(home, "sdot", name="dirty")
    listing = openblas / "kernel/riscv64/KERNEL.RISCV64_ZVL256B"
    listing.write_text(listing.read_text() + "# local edit\n")
    try:
        with pytest.raises(ExportRefused, match=r"uncommitted changes.*stash"):
            export_run("run-test-dirty", "openblas", openblas, home=home)
    finally:
        subprocess.run(["git", "-C", str(openblas), "checkout", "--", str(listing)], check=True)
    # A branch of the export's name already there: refused with the line that deletes it.
    write_run(home, "sdot", name="again")
    subprocess.run(["git", "-C", str(openblas), "branch", "eok/sdot-run-test-again"], check=True)
    with pytest.raises(ExportRefused, match=r"already has a branch eok/sdot-run-test-again.*branch -D"):
        export_run("run-test-again", "openblas", openblas, home=home)
    subprocess.run(["git", "-C", str(openblas), "branch", "-D", "eok/sdot-run-test-again"], check=True)
    assert _state(openblas) == head
    branches = subprocess.run(["git", "-C", str(openblas), "branch"], capture_output=True, text=True).stdout
    assert "snrm2" not in branches and "sgemm" not in branches and "dirty" not in branches


def test_q8_0_dot_export_into_ggml(home: Path, tmp_path: Path) -> None:
    clone = _ggml_conventions(make_ggml_tree(tmp_path / "ggml"))
    write_run(home, "q8_0_q8_0_dot")
    r = export_run("run-test-q8_0_q8_0_dot", "ggml", clone, home=home)

    assert r.good, (r.problem, r.tests)
    assert r.cycles_before and r.cycles_after
    quants = _show(clone, "eok/q8_0_q8_0_dot-run-test-q8_0_q8_0_dot:src/ggml-cpu/arch/riscv/quants.c")
    rvv, fallback = quants.split("void ggml_vec_dot_q8_0_q8_0(", 1)[1].split("#else", 1)
    assert "eok_q8_0_q8_0_dot(n / QK8_0" in rvv and "__riscv_vwmul_vv_i16m2" not in rvv  # the branch replaced
    assert "acc += x[b].qs[i] * y[b].qs[i]" in fallback  # the scalar fallback kept
