"""agent/export's text work: file-scope names prefixed, a KERNEL entry switched, ggml's RVV branch found."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from agent.export import openblas
from agent.export.csource import file_scope_names, prefixed
from agent.export.openblas import entry_value, switch_entry
from agent.export.routines import ExportRefused, openblas_routine
from agent.export.runfolder import RunRecord
from agent.offline import OfflineGenerator
from evaluator.targets import load_target
from evaluator.tasks import load_task
from tests.support.upstream_trees import make_openblas_tree

CLANG = shutil.which("clang-22") or "clang-22"

KERNEL = """\
#include <stdint.h>
#define LANES 8  /* a macro of the kernel's own */
typedef struct { float d; } blk_t;
static const int8_t table[4] = {1, 2, INT8_MAX, sizeof(blk_t)};
static float half_at(const uint8_t *p) { return (float)p[0] * LANES; } // "half_at" in a string stays
float q8_dot(int nb, const uint8_t *x, const uint8_t *y)
{
    float s = 0.0f;  /* half_at in a comment stays */
    for (int b = 0; b < nb; b++) s += half_at(x + b) * half_at(y + b) * table[b & 3];
    return s;
}
"""


def test_file_scope_names_are_prefixed_and_nothing_else() -> None:
    assert file_scope_names(KERNEL) == ["LANES", "blk_t", "table", "half_at", "q8_dot"]
    code, entry = prefixed(KERNEL, "q8_dot", "eok_q8")
    assert entry == "eok_q8"
    assert "float eok_q8(int nb" in code and "#define eok_q8_LANES 8" in code
    assert "eok_q8_half_at(x + b) * eok_q8_half_at(y + b) * eok_q8_table[b & 3]" in code
    # Names from headers and the initializer's uses are not declarations of the kernel's.
    assert "INT8_MAX, sizeof(eok_q8_blk_t)" in code and "uint8_t" in code
    assert '"half_at" in a string' in code and "half_at in a comment" in code


def test_kernel_entry_switch_keeps_the_rest_of_the_listing() -> None:
    listing = "SAXPYKERNEL  = axpy_vector.c\nSDOTKERNEL   = dot.c\nSDOTKERNEL   = dot_vector.c  # last wins\n"
    assert entry_value(listing, "SDOTKERNEL") == "dot_vector.c"
    new = switch_entry(listing, "SDOTKERNEL", "sdot_eok.c")
    assert new == listing.replace("dot_vector.c  #", "sdot_eok.c  #")
    assert entry_value(listing, "SNRM2KERNEL") is None


def test_a_packed_gemm_micro_kernel_run_becomes_openblas_s_sgemmkernel(tmp_path: Path) -> None:
    """sgemm_kernel_blas's run, written into the miniature OpenBLAS (its SGEMMKERNEL named by param.h's unrolls):
    the new file and entry, a file that compiles for both of Makefile.L3's uses, and a refusal where the
    library packs its panels by other unrolls than the run's kernel reads."""
    tree = make_openblas_tree(tmp_path / "OpenBLAS")
    task = load_task("sgemm_kernel_blas")
    code = OfflineGenerator(task, load_target("k1-x60")).default().code
    best = {"step": 3, "experience": "x-3", "speedup": 8.8, "competent_speedup": 8.8, "measurement": "modeled"}
    record = RunRecord(tmp_path, "run-sgk", task.name, None, "k1-x60", code, best)
    routine = openblas_routine(task)
    files = openblas.plan(record, routine, tree)

    listing = files[Path("kernel/riscv64/KERNEL.RISCV64_ZVL256B")]
    assert entry_value(listing, "SGEMMKERNEL") == "sgemm_kernel_eok.c"
    assert entry_value(listing, "SDOTKERNEL") == "dot_rvv.c"  # the other entries untouched
    kernel = files[Path("kernel/riscv64/sgemm_kernel_eok.c")]
    assert set(files) == {Path("kernel/riscv64/KERNEL.RISCV64_ZVL256B"), Path("kernel/riscv64/sgemm_kernel_eok.c")}
    assert '#include "sgemm_kernel_16x8_zvl256b.c"' in kernel  # $(SGEMM_UNROLL_M)x$(SGEMM_UNROLL_N) from param.h
    assert "eok_sgemm_kernel_blas(bm, bn, bk, alpha, ba, bb, C, ldc);" in kernel
    (tree / "kernel/riscv64/sgemm_kernel_eok.c").write_text(kernel)
    (tree / "config.h").write_text('#define CORE_NAME "RISCV64_ZVL256B"\n')  # what the build's getarch writes
    for use in ("-DCNAME=sgemm_kernel", "-DCNAME=strmm_kernel_LN -DTRMMKERNEL -DLEFT"):
        r = subprocess.run(
            [CLANG, "--target=riscv64-linux-gnu", "-march=rv64gcv_zvl256b", "-O2", "-Wall", "-Werror",
             "-fsyntax-only", f"-I{tree}", *use.split(), str(tree / "kernel/riscv64/sgemm_kernel_eok.c")],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert r.returncode == 0, r.stderr

    param = tree / "param.h"
    param.write_text(param.read_text().replace("UNROLL_M 16", "UNROLL_M 8"))
    with pytest.raises(ExportRefused, match="packed 16 x 8, and OpenBLAS packs them 8 x 8"):
        openblas.plan(record, routine, tree)
