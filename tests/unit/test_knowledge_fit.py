"""What a task is offered (issue 22 item 4): thoughts that fit its operator, data and ISA; directions that
cover the operator's technique families; example hunks checked against the candidate rules; GPU code never
under a CPU ISA label. Real task files, the evaluator's own static rules, the miner's own distiller."""

from __future__ import annotations

import random

from agent.context import AgentContext, Direction, ThoughtCard, choose_ideas
from agent.examples import example_problems
from agent.generation import GenerationRequest, Parent
from agent.llm import build_prompt
from evaluator.targets import load_target
from evaluator.tasks import load_task
from knowledge.fit import OPERATOR_TECHNIQUES, misfit
from knowledge.taxonomy import Isa, Technique
from miners.classify import Classification
from miners.distill import Evidence, evidence_thoughts

# The shape of the thought the issue found applied to sdot: an iq1_s lookup-table hunk of ggml's x86 kernel.
IQ1S = {
    "operator": "dot",
    "isa": "avx2",
    "title": "ggml : faster iq1_s dot product on AVX2 (vectorize on avx2)",
    "example_code": "// ggml/src/ggml-cpu/arch/x86/quants.c @ 0123abcd (avx2)\n@@ -1 +1 @@\n"
    "+        const __m256i q1b = _mm256_set_epi64x(iq1s_grid[qs[3] | ((qh[ib] >> 3) & 0x700)],\n"
    "+            iq1s_grid[qs[2]]);\n"
    '+        __asm__ __volatile__("" ::: "memory");',
    "rvv_equivalents": ["_mm256_set_epi64x -> __riscv_vmv_v_x_i64m1"],
}
NEON_SDOT = {
    "operator": "dot",
    "isa": "neon",
    "title": "Two accumulators in the NEON sdot kernel (multi_accumulator on neon)",
    "example_code": "+ acc0 = vfmaq_f32(acc0, vld1q_f32(x + i), vld1q_f32(y + i));",
    "rvv_equivalents": ["vfmaq_f32 -> __riscv_vfmacc_vv_f32m1"],
}


def test_a_quantized_thought_is_not_offered_to_an_f32_task_but_to_a_quantized_one() -> None:
    sdot, q8 = load_task("sdot"), load_task("q8_0_q8_0_dot")
    assert sdot.dtype == "f32" and "quantized" in misfit(IQ1S, str(sdot.operator), sdot.dtype, "rvv")
    assert misfit({**IQ1S, "operator": "quant_dot"}, str(q8.operator), q8.dtype, "rvv") == ""
    assert misfit(NEON_SDOT, str(sdot.operator), sdot.dtype, "rvv") == ""
    assert misfit(NEON_SDOT, str(q8.operator), q8.dtype, "rvv") == ""  # float accumulators help a q8 dot too


def test_operator_and_isa_must_fit_too() -> None:
    assert "operator" in misfit({**NEON_SDOT, "operator": "gemm"}, "dot", "f32", "rvv")
    assert misfit({**NEON_SDOT, "operator": "nrm2"}, "dot", "f32", "rvv") == ""  # a neighbour's kernel
    assert misfit({**NEON_SDOT, "operator": "other", "isa": "generic"}, "dot", "f32", "rvv") == ""
    assert "without rvv" in misfit({**NEON_SDOT, "rvv_equivalents": []}, "dot", "f32", "rvv")
    assert misfit({**NEON_SDOT, "rvv_equivalents": []}, "dot", "f32", None) == ""  # a host run takes any ISA


def _card(i: str, idea: str, tech: Technique, relevance: float) -> ThoughtCard:
    return ThoughtCard(i, idea, i, "", tech, "dot", "rvv", relevance=relevance, isa_fit=2)


def test_directions_cover_the_operators_technique_families_before_more_relevant_others() -> None:
    by_idea = {
        "idea:approximation": [_card("a", "idea:approximation", Technique.APPROXIMATION, 0.9)],
        "idea:prefetch": [_card("p", "idea:prefetch", Technique.PREFETCH, 0.8)],
        "idea:alignment": [_card("al", "idea:alignment", Technique.ALIGNMENT, 0.7)],
        "idea:packing": [_card("pk", "idea:packing", Technique.PACKING, 0.6)],
        "idea:multi_accumulator": [_card("m", "idea:multi_accumulator", Technique.MULTI_ACCUMULATOR, 0.1)],
        "idea:vector_length": [_card("v", "idea:vector_length", Technique.VECTOR_LENGTH, 0.05)],
    }
    before = choose_ideas(by_idea, 4)
    assert "idea:multi_accumulator" not in before and "idea:vector_length" not in before
    chosen = choose_ideas(by_idea, 4, OPERATOR_TECHNIQUES["dot"])
    assert chosen[:2] == ["idea:multi_accumulator", "idea:vector_length"]
    assert chosen[2:] == ["idea:approximation", "idea:prefetch"]  # then by relevance, diversified


def test_an_example_the_evaluator_would_reject_is_marked_in_the_prompt() -> None:
    problems = example_problems(IQ1S["example_code"])
    assert problems and "asm" in problems[0]
    assert example_problems(NEON_SDOT["example_code"]) == []
    assert any("immintrin.h" in p for p in example_problems("+#include <immintrin.h>\n+int x;"))
    task, target = load_task("sdot"), load_target("k1-x60")
    card = ThoughtCard("t", "i", IQ1S["title"], "", Technique.VECTORIZE, "dot", "avx2", IQ1S["example_code"])
    card.example_problems = problems
    ctx = AgentContext([Direction("i", "x", "", [card], 1.0)], [], [], "K1")
    prompt = build_prompt(GenerationRequest(task, target, card, Parent("", []), ctx, set(), random.Random(0)))
    assert "NOT allowed as written in a candidate (asm without a literal instruction string" in prompt


GPU_AND_CPU_PATCH = """diff --git a/ggml/src/ggml-cuda/mmvq.cu b/ggml/src/ggml-cuda/mmvq.cu
--- a/ggml/src/ggml-cuda/mmvq.cu
+++ b/ggml/src/ggml-cuda/mmvq.cu
@@ -1,2 +1,6 @@
+static __global__ void mul_mat_vec_q(const void * vx, float * dst) {
+    const int row = blockIdx.x * blockDim.y + threadIdx.y;
+    float acc0 = 0.0f, acc1 = 0.0f;
+    dst[row] = acc0 + acc1;
+}
diff --git a/ggml/src/ggml-cpu/ggml-cpu.cpp b/ggml/src/ggml-cpu/ggml-cpu.cpp
--- a/ggml/src/ggml-cpu/ggml-cpu.cpp
+++ b/ggml/src/ggml-cpu/ggml-cpu.cpp
@@ -1,2 +1,6 @@
+const char * kernel_src = "__kernel void k(__global float * x) { x[get_global_id(0)] = 0; }";
+static cl_program build(void) { return compile(kernel_src); }
+int n_kernels = 1;
+int n_programs = 2;
"""


def _gpu_evidence(patch: str) -> Evidence:
    c = Classification(3.0, True, [], isas=[Isa.AVX2], operators=[], techniques=[Technique.MULTI_ACCUMULATOR])
    return Evidence("f" * 40, "ggml", "CUDA: faster mmvq, like the AVX2 path", c, patch)


def test_gpu_code_gives_no_cpu_thought_whatever_isa_the_message_names() -> None:
    ev = _gpu_evidence(GPU_AND_CPU_PATCH)
    assert evidence_thoughts(ev) == [] and ev.gpu_hunks == 2  # a .cu file, and an OpenCL kernel in a .cpp
    cpu = GPU_AND_CPU_PATCH + (
        "diff --git a/ggml/src/ggml-cpu/arch/x86/quants.c b/ggml/src/ggml-cpu/arch/x86/quants.c\n"
        "--- a/ggml/src/ggml-cpu/arch/x86/quants.c\n+++ b/ggml/src/ggml-cpu/arch/x86/quants.c\n@@ -1,2 +1,4 @@\n"
        "+    __m256 acc0 = _mm256_fmadd_ps(a0, b0, acc0);\n+    __m256 acc1 = _mm256_fmadd_ps(a1, b1, acc1);\n"
        "+    __m256 acc2 = _mm256_fmadd_ps(a2, b2, acc2);\n"
    )
    thoughts = evidence_thoughts(_gpu_evidence(cpu))
    assert thoughts and all("_mm256_fmadd_ps" in t.example_code for t in thoughts)
    assert not any("threadIdx" in t.example_code or "__kernel" in t.example_code for t in thoughts)


def test_a_float_conversion_task_takes_conversion_thoughts_but_not_block_quantization() -> None:
    f16 = load_task("fp16_to_fp32")
    convert = {"operator": "quantize", "isa": "rvv", "title": "fp16 to fp32 with vfwcvt", "example_code": ""}
    q8 = {**convert, "title": "quantize_row_q8_0 on RVV"}
    assert misfit(convert, str(f16.operator), f16.dtype, "rvv") == ""
    assert "quantized" in misfit(q8, str(f16.operator), f16.dtype, "rvv")
