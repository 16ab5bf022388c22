"""The offline RVV rewrite of a new task's loop, without qemu: shapes, reasons, the unroll guard, mined structure.

Shapes are read from real task directories (tests/support/loop_tasks.py); the rewrites are checked by
clang-22 -fsyntax-only for the X60 at every knob extreme. Evaluations on qemu are in
tests/integration/test_loop_rewrite_eval.py.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from agent.offline.base import ThoughtRef
from agent.offline.generator import OfflineGenerator
from agent.offline.generic import GenericFamily, insert_loop_pragmas
from agent.offline.hints import code_hints
from agent.offline.loop_rewrite import why_not
from agent.offline.loop_shapes import classify
from evaluator.targets import load_target
from knowledge.taxonomy import Technique
from tests.support.loop_tasks import SHAPES, example, shape_task, write_task

TARGET = load_target("k1-x60")
CLANG = shutil.which("clang-22") or "clang-22"


@pytest.fixture(scope="module")
def tasks(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("loop-tasks")
    found = {name: shape_task(root, name) for name in SHAPES}
    return found | {"fir5": example("fir5"), "i8dot": example("i8dot"), "root": root}


def _task(tasks: dict, body: str, signature: str = "float f(int n, const float *x, float *y)"):
    args = '[args.x]\nkind = "in"\ncount = "n + 2"\n[args.y]\nkind = "out"\ncount = "n"\n'
    name = f"t{abs(hash(body)) % 10**8}"
    return write_task(tasks["root"], name, signature.replace(" f(", f" {name}("), body, args, "{ rtol = 1e-5 }")


def test_each_shape_is_read_from_the_reference(tasks: dict) -> None:
    names = ("map_i8", "l1_dist", "max_i32", "i16dot", "fir5", "fir_taps", "i8dot")
    kinds = {name: classify(tasks[name]) for name in names}
    assert {n: s.kind for n, s in kinds.items()} == {
        "map_i8": "map", "l1_dist": "reduction", "max_i32": "reduction", "i16dot": "widening",
        "fir5": "stencil", "fir_taps": "stencil", "i8dot": "widening",
    }  # fmt: skip
    assert kinds["fir_taps"].taps == "t"
    assert kinds["max_i32"].op == "max" and kinds["l1_dist"].op == "add"
    assert kinds["i8dot"].wide_type == "int8_t" and kinds["i16dot"].wide_type == "int16_t"
    assert (kinds["fir5"].tap, kinds["fir5"].taps, kinds["fir5"].loads) == ("k", "5", ["x"])
    assert sorted(kinds["map_i8"].loads) == ["x", "y"]


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ("for (int i = 0; i < n; i++) y[i] = x[2 * i];", "not i plus an offset"),
        ("for (int i = 0; i < n; i++) y[i] = expf(x[i]);", "expf"),
        ("for (int i = 0; i < n; i++) y[i] = x[i] * 0.5;", "double constant"),
        ("for (int i = 0; i < n; i++) y[i] = x[i];\n  for (int i = 0; i < n; i++) y[i] += 1.0f;", "2 top-level"),
    ],
)
def test_a_loop_of_no_known_shape_gets_no_rewrite_and_a_reason(tasks: dict, body: str, reason: str) -> None:
    task = _task(tasks, body, "void f(int n, const float *x, float *y)")
    why = why_not(task)
    assert why is not None and reason in why, why
    assert "rvv_loop" not in OfflineGenerator(task, TARGET).families()


def test_a_scan_is_not_taken_for_a_map(tasks: dict) -> None:
    task = _task(
        tasks, "for (int i = 1; i < n; i++) y[i] = y[i - 1] + x[i];", "void f(int n, const float *x, float *y)"
    )
    assert "dependence across iterations" in (why_not(task) or "")


def test_a_float_sum_is_reordered_only_where_the_tolerance_allows(tasks: dict) -> None:
    exact = write_task(tasks["root"], "sum_exact", "float sum_exact(int n, const float *x)",
                       "float s = 0.0f;\n  for (int i = 0; i < n; i++) s += x[i];\n  return s;",
                       '[args.x]\nkind = "in"\ncount = "n"\n', "{ rtol = 1e-6, atol = 1e-6 }")  # fmt: skip
    assert "rtol >= 0.0001" in (why_not(exact) or "")
    assert why_not(tasks["l1_dist"]) is None


def _syntax(code: str, tmp_path: Path) -> str:
    src = tmp_path / "k.c"
    src.write_text(code)
    argv = [CLANG, "--target=riscv64-linux-gnu", "-mcpu=spacemit-x60", "-O3", "-fsyntax-only", "-Werror", str(src)]
    res = subprocess.run(argv, capture_output=True, text=True)
    return "" if res.returncode == 0 else res.stderr


@pytest.mark.parametrize("name", ["map_i8", "l1_dist", "max_i32", "i16dot", "fir5", "fir_taps", "i8dot"])
def test_the_rewrite_compiles_plain_default_and_widest(tasks: dict, name: str, tmp_path: Path) -> None:
    gen = OfflineGenerator(tasks[name], TARGET)
    assert gen.families()[0] == "rvv_loop"
    space = next(s for s in gen.spaces if s.name == "rvv_loop")
    widest = {
        k.name: next(v for v in reversed(k.values) if space.valid({**space.plain(), k.name: v})) for k in space.knobs
    }
    for setting in ({}, space.plain(), widest):
        v = gen.render("rvv_loop", setting)
        assert "__riscv_vsetvl" in v.code and f"{tasks[name].function_name}(int n" in v.code
        assert not _syntax(v.code, tmp_path), f"{setting}:\n{_syntax(v.code, tmp_path)}\n{v.code}"


def test_register_budget_bounds_lmul_and_accumulators(tasks: dict) -> None:
    gen = OfflineGenerator(tasks["i8dot"], TARGET)
    space = next(s for s in gen.spaces if s.name == "rvv_loop")
    assert [k.values for k in space.knobs if k.name == "lmul"] == [[1, 2]]  # int32 accumulators at m4, m8
    assert space.valid({"lmul": 2, "accumulators": 2, "reduce_at": "after", "widen": "wadd"})
    assert not space.valid({"lmul": 2, "accumulators": 4, "reduce_at": "after", "widen": "wadd"})


# ------------------------------------------------------------------------------------- unroll guard


def test_no_unroll_wider_than_a_visible_trip_count() -> None:
    code = (
        "void f(int n, int m, float *y) {\n"
        "  for (int i = 0; i < n; i++) y[i] = 0;\n"
        "  for (int i = 0; i < m; i++) y[i] = 1;\n"
        "  for (int k = 0; k < 5; k++) y[k] = 2;\n"
        "  for (int k = 0; k < 64; k++) y[k] = 3;\n}\n"
    )
    out = insert_loop_pragmas(code, ["vectorize(enable)", "unroll_count(8)"], {"n": 4096, "m": 4})
    lines = out.splitlines()
    assert lines[1].endswith("unroll_count(8)") and "for (int i = 0; i < n" in lines[2]
    assert lines[3].endswith("vectorize(enable) unroll_count(4)")  # m is at most 4 over the task's sizes
    assert "for (int k = 0; k < 5" in lines[5] and "for (int i = 0; i < m" in lines[4]  # clang unrolls it fully
    assert lines[6].endswith("unroll_count(8)") and "k < 64" in lines[7]


def test_fir5_generic_variants_leave_the_tap_loop_to_clang(tasks: dict) -> None:
    fam = GenericFamily()
    names = {k.name for k in fam.knobs(tasks["fir5"], TARGET) if len(k.values) > 1}
    assert "unroll" not in names and "interleave" not in names  # its only innermost loop has 5 trips
    assert "#pragma clang loop" not in fam.render(tasks["fir5"], TARGET, {"vectorize": "pragma"}).code
    assert {"unroll", "interleave"} <= {k.name for k in fam.knobs(tasks["i8dot"], TARGET) if len(k.values) > 1}


# ------------------------------------------------------------------------ mined structure and credit

WMACC_M2 = """
+  vint32m8_t acc = __riscv_vmv_v_x_i32m8(0, vlmax);
+  for (size_t i = 0; i < n; i += vl) {
+    vl = __riscv_vsetvl_e8m2(n - i);
+    vint16m4_t a = __riscv_vsext_vf2_i16m4(__riscv_vle8_v_i8m2(x + i, vl), vl);
+    vint16m4_t b = __riscv_vsext_vf2_i16m4(__riscv_vle8_v_i8m2(y + i, vl), vl);
+    acc = __riscv_vwmacc_vv_i32m8_tu(acc, a, b, vl);
+  }
+  return __riscv_vmv_x_s_i32m1_i32(__riscv_vredsum_vs_i32m8_i32m1(acc, zero, vlmax));
"""
GGML_Q8_0 = """
+    for (; ib < nb; ++ib) {
+        size_t vl = __riscv_vsetvl_e8m1(qk);
+        vint8m1_t bx = __riscv_vle8_v_i8m1(x[ib].qs, vl), by = __riscv_vle8_v_i8m1(y[ib].qs, vl);
+        vint16m2_t vw_mul = __riscv_vwmul_vv_i16m2(bx, by, vl);
+        vint32m1_t v_sum = __riscv_vwredsum_vs_i16m2_i32m1(vw_mul, v_zero, vl);
+    }
"""


def test_structure_is_read_from_mined_rvv_code() -> None:
    assert code_hints(WMACC_M2, "rvv") == {"lmul": 2, "reduce_at": "after", "widen": "wmacc"}
    assert code_hints(GGML_Q8_0, "rvv") == {"lmul": 1, "reduce_at": "inloop"}
    assert code_hints(WMACC_M2, "neon") == {}  # another ISA's code says nothing about RVV structure


def test_a_mined_kernel_that_moves_the_start_is_credited_and_one_that_does_not_is_not(tasks: dict) -> None:
    gen = OfflineGenerator(tasks["i8dot"], TARGET, start="plain")
    plain = next(s for s in gen.spaces if s.name == "rvv_loop").plain()
    assert plain == {"lmul": 1, "accumulators": 1, "reduce_at": "after", "widen": "wadd"}

    def propose(code: str):
        ref = ThoughtRef(id="t", technique=Technique.WIDENING, isa="rvv", hints=code_hints(code, "rvv"))
        return gen.propose(ref, None, random.Random(0), set())

    shaped = propose(WMACC_M2)
    assert shaped is not None and shaped.variant.knobs["lmul"] == 2 and shaped.variant.knobs["widen"] == "wmacc"
    assert shaped.variant.from_code == {"lmul": 2, "widen": "wmacc"}
    assert "__riscv_vwmacc_vv_i32m8" in shaped.variant.code
    same = propose((tasks["i8dot"].directory / "plain_rvv.c").read_text())  # LMUL 1, vwmul + vwadd.wv, after
    assert same is not None and same.variant.knobs == plain and same.variant.from_code == {}


def test_every_suite_reference_reads_as_a_shape_or_a_reason() -> None:
    from evaluator.tasks import list_tasks

    found = {t.name: why_not(t) for t in list_tasks()}
    assert all(isinstance(w, str) and w for n, w in found.items() if n not in {"saxpy", "sdot", "sscal", "reduce_max"})
    assert {n for n, w in found.items() if w is None} == {"saxpy", "sdot", "sscal", "reduce_max"}


def test_the_lineage_credits_a_thought_whose_code_set_the_start_and_no_other() -> None:
    from agent.report import _shaped

    def step(variant: dict, parent: dict) -> dict:
        return {"generator": "offline", "variant": json.dumps(variant), "parent": json.dumps(parent),
                "task": "sdot", "target": "k1-x60"}  # fmt: skip

    knobs = {"lmul": 4, "accumulators": 2, "unroll": 1, "reduce": "tree"}
    shaped = {"family": "rvv_reduction", "knobs": knobs, "from_code": {"lmul": 4}}
    assert _shaped(step(shaped, {}), "reduction")  # its code set LMUL 4: credited whatever the technique
    same = {"family": "rvv_reduction", "knobs": knobs}
    moved = {"family": "rvv_reduction", "knobs": knobs | {"lmul": 2}}
    assert not _shaped(step(same, moved), "prefetch")  # the knob that moved (lmul) does not serve prefetch
