"""Knob settings read from a thought's mined code (agent.offline.hints) and how the generator uses them."""

from __future__ import annotations

import random

from agent.offline.base import ThoughtRef
from agent.offline.generator import OfflineGenerator
from agent.offline.hints import code_hints
from evaluator.targets import load_target
from evaluator.tasks import load_task
from knowledge.taxonomy import Technique

TARGET = load_target("k1-x60")

RVV_DOT_M8_X4 = """// kernel/riscv64/dot_rvv.c @ abc (rvv)
@@
+    vfloat32m8_t acc0 = __riscv_vfmv_v_f_f32m8(0.0f, vlmax);
+    vfloat32m8_t acc1 = acc0, acc2 = acc0, acc3 = acc0;
+    for (; i + 4 * vlmax <= n; i += 4 * vlmax) {
+        acc0 = __riscv_vfmacc_vv_f32m8(acc0, __riscv_vle32_v_f32m8(x + i, vlmax), yv0, vlmax);
+        acc1 = __riscv_vfmacc_vv_f32m8(acc1, __riscv_vle32_v_f32m8(x + i + vlmax, vlmax), yv1, vlmax);
+        acc2 = __riscv_vfmacc_vv_f32m8(acc2, xv2, yv2, vlmax);
+        acc3 = __riscv_vfmacc_vv_f32m8(acc3, xv3, yv3, vlmax);
+    }
+    vfloat32m1_t s = __riscv_vfredusum_vs_f32m8_f32m1(acc0, __riscv_vfmv_v_f_f32m1(0.0f, 1), vlmax);
+    return __riscv_vfmv_f_s_f32m1_f32(s);
"""

OLD_RVV_M4 = """+    size_t vl = vsetvl_e32m4(n);
+    vfloat32m4_t vx = vle32_v_f32m4(x, vl);
+    vy = vfmacc_vf_f32m4(vy, alpha, vx, vl);
"""

AVX2_TWO_SUMS = """+    sum0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), sum0);
+    sum1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8), _mm256_loadu_ps(y + i + 8), sum1);
"""


def test_rvv_code_gives_its_lmul_and_accumulator_count() -> None:
    # It reduces once, after its loop: the structure the loop rewrite starts from (agent/offline/hints.py).
    assert code_hints(RVV_DOT_M8_X4, "rvv") == {"lmul": 8, "accumulators": 4, "reduce_at": "after"}
    assert code_hints(OLD_RVV_M4, "xtheadvector") == {"lmul": 4}  # one accumulator: no hint


def test_other_isas_give_accumulators_but_never_an_lmul() -> None:
    assert code_hints(AVX2_TWO_SUMS, "avx2") == {"accumulators": 2}
    assert code_hints(RVV_DOT_M8_X4, "neon") == {"accumulators": 4}


def test_no_code_gives_no_hint() -> None:
    assert code_hints("", "rvv") == {}
    assert code_hints("+    return a + b;\n", "rvv") == {}


def _propose(technique: Technique, hints: dict, parent=None, tried=None):  # type: ignore[no-untyped-def]
    gen = OfflineGenerator(load_task("sdot"), TARGET, start="plain")
    ref = ThoughtRef(id="t", technique=technique, isa="rvv", hints=hints)
    return gen.propose(ref, parent, random.Random(0), tried or set())


def test_a_family_is_entered_at_the_thoughts_settings() -> None:
    plain = _propose(Technique.VECTORIZE, {})
    hinted = _propose(Technique.VECTORIZE, {"lmul": 4, "accumulators": 2})
    assert plain is not None and hinted is not None
    assert plain.variant.knobs["lmul"] == 1 and plain.variant.knobs["accumulators"] == 1
    assert hinted.variant.knobs["lmul"] == 4 and hinted.variant.knobs["accumulators"] == 2
    assert "as in the thought's code" in hinted.mutation
    # 4 accumulators of m8 registers plus two m8 loads do not fit 32 registers: the most that fits
    clamped = _propose(Technique.VECTORIZE, {"lmul": 8, "accumulators": 4})
    assert clamped is not None
    assert clamped.variant.knobs["lmul"] == 8 and clamped.variant.knobs["accumulators"] == 2


def test_a_tuning_move_jumps_to_the_value_the_code_shows() -> None:
    start = _propose(Technique.VECTORIZE, {})
    assert start is not None
    tried = {start.variant.key}
    walk = _propose(Technique.VECTOR_LENGTH, {}, start.variant, tried)
    jump = _propose(Technique.VECTOR_LENGTH, {"lmul": 8, "accumulators": 4}, start.variant, tried)
    assert walk is not None and jump is not None
    assert walk.variant.knobs["lmul"] == 2  # nearest first without knowledge
    assert jump.variant.knobs["lmul"] == 8  # the thought's value first
    assert jump.variant.knobs["accumulators"] == 1  # a vector-length thought turns only the LMUL knob
    again = _propose(Technique.VECTOR_LENGTH, {"lmul": 8}, start.variant, tried | {jump.variant.key})
    assert again is not None and again.variant.knobs["lmul"] != 8  # tried: back to the grid walk
