"""What a kernel engineer's query names (or its target implies), and how the ranking rules order thoughts by it.

The rules are applied to small in-memory candidate lists: the order `intent_fit` gives them is the order
retrieval gives thoughts of equal text similarity (`Retriever.search` multiplies by exp(fit)).
"""

from __future__ import annotations

import pytest

from knowledge.intent import (
    INTENT_WEIGHT,
    NEIGHBOUR_OPERATOR,
    NEIGHBOUR_TECHNIQUE,
    OTHER_ISA_COST,
    OTHER_OPERATOR_COST,
    PORTABLE_COST,
    QUANTIZED_COST,
    SAME_FAMILY,
    TRANSLATED_COST,
    Intent,
    intent_fit,
    query_intent,
    target_vector_isa,
)


def ranked(intent: Intent, candidates: dict[str, dict]) -> list[str]:
    return sorted(candidates, key=lambda name: intent_fit(candidates[name], intent), reverse=True)


def test_isa_operator_and_technique_are_read_from_engineer_wording() -> None:
    i = query_intent("sgemm micro-kernel register blocking for RISC-V vector")
    assert i.isa == {"rvv"} and i.operator == {"gemm"} and "register_blocking" in i.technique
    assert query_intent("port RVV kernel to xtheadvector 0.7.1").isa == {"rvv", "xtheadvector"}
    # a ggml block format names quantized data: its dots and its (de)quantization
    assert query_intent("quantize row q8_0").operator == {"quantize", "quant_dot"}
    # "reduce once" is a technique, not the reduce operator; "vfredusum" names RVV
    r = query_intent("reduce once after the loop instead of vfredusum")
    assert r.operator == set() and r.isa == {"rvv"} and r.technique == {"reduction"}
    assert query_intent("make it faster") == Intent()


def test_rvv_is_named_by_its_intrinsics_instructions_types_and_cores() -> None:
    for query in (
        "__riscv_vfwmacc_vv_f32m2 for a half-precision dot",  # a full intrinsic: no word boundary before v
        "vle32.v then vfmacc.vv",
        "vfmacc_vv_f32m1 accumulation",
        "vfloat32m4_t accumulators",
        "e32m8 or e32m2",
        "K3 with VLEN 1024",
        "the SpacemiT X60",
        "zvfh conversions",
    ):
        assert query_intent(query).isa == {"rvv"}, query
    # other ISAs' intrinsic names are theirs, not RVV's
    assert query_intent("vmulq_f32 and vcvtq_f32_s32").isa == {"neon"}
    assert query_intent("_mm256_fmadd_ps sgemm").isa == {"avx2"}
    assert query_intent("svwhilelt_b32 loop").isa == {"sve"}


def test_operators_are_read_in_the_task_suites_words() -> None:
    cases = {
        "layer normalization": {"norm"},
        "matrix multiplication": {"gemm"},
        "matrix-vector product": {"gemv"},
        "histogram of bytes": {"sort"},
        "stream compaction": {"sort"},
        "prefix sum": {"scan"},
        "bilinear resize": {"resize"},
        "fp16 to fp32 conversion": {"quantize"},  # "conversion" is no convolution
        "depthwise 3x3": {"conv"},
        "2x2 max pooling": {"pool"},
        "thread pool for gemm": {"gemm"},
    }
    for query, ops in cases.items():
        assert query_intent(query).operator == ops, query


def test_a_k1_target_implies_rvv_when_the_query_names_no_isa() -> None:
    assert target_vector_isa("k1-x60") == "rvv" and target_vector_isa("k3-a100") == "rvv"
    assert target_vector_isa("host") is None and target_vector_isa("no-such-target") is None
    i = query_intent("unroll the dot product", target_vector_isa("k1-x60"))
    assert i.isa == set() and i.isas == {"rvv"}
    assert query_intent("NEON dot product", "rvv").isas == {"neon"}  # what the query names wins


def test_an_rvv_query_prefers_rvv_then_translated_or_portable_then_foreign_code() -> None:
    intent = query_intent("RVV dot product")
    candidates = {
        "avx2": {"isa": "avx2", "operator": "dot"},
        "rvv": {"isa": "rvv", "operator": "dot"},
        "neon+translation": {"isa": "neon", "operator": "dot", "rvv_equivalents": ["vfmaq_f32 -> __riscv_vfmacc"]},
        "xthead": {"isa": "xtheadvector", "operator": "dot"},
    }
    assert ranked(intent, candidates) == ["rvv", "xthead", "neon+translation", "avx2"]
    generic = intent_fit({"isa": "generic", "operator": "dot"}, intent)
    assert generic == intent_fit(candidates["neon+translation"], intent)  # both: the idea without RVV code
    # a foreign thought without a translation loses even when it matches the operator and an RVV one does not
    assert intent_fit(candidates["avx2"], intent) < intent_fit({"isa": "rvv", "operator": "sort"}, intent)
    assert INTENT_WEIGHT["isa"] > SAME_FAMILY > 0 > -PORTABLE_COST == -TRANSLATED_COST > -OTHER_ISA_COST


def test_an_isa_implied_by_the_target_weighs_half_of_a_named_one() -> None:
    named, implied = query_intent("RVV unroll"), query_intent("unroll", "rvv")
    rvv, avx2 = {"isa": "rvv", "technique": "unroll"}, {"isa": "avx2", "technique": "unroll"}
    assert (
        intent_fit(rvv, implied) - intent_fit(avx2, implied) == (intent_fit(rvv, named) - intent_fit(avx2, named)) / 2
    )
    assert intent_fit(avx2, implied) < intent_fit({"isa": "generic", "technique": "unroll"}, implied)


def test_another_operator_is_demoted_unless_a_neighbour_portable_advice_or_an_operator_generic_technique() -> None:
    intent = query_intent("RVV gemm")
    candidates = {
        "gemm": {"isa": "rvv", "operator": "gemm", "technique": "unroll"},
        "gemv (neighbour)": {"isa": "rvv", "operator": "gemv", "technique": "unroll"},
        "other (portable advice)": {"isa": "rvv", "operator": "other", "technique": "unroll"},
        "softmax tail handling": {"isa": "rvv", "operator": "softmax", "technique": "tail_handling"},
        "softmax unroll": {"isa": "rvv", "operator": "softmax", "technique": "unroll"},
    }
    order = ranked(intent, candidates)
    assert order[:2] == ["gemm", "gemv (neighbour)"] and order[-1] == "softmax unroll"
    assert intent_fit(candidates["softmax tail handling"], intent) == INTENT_WEIGHT["isa"]
    assert intent_fit(candidates["softmax unroll"], intent) == INTENT_WEIGHT["isa"] - OTHER_OPERATOR_COST
    assert intent_fit(candidates["gemv (neighbour)"], intent) == INTENT_WEIGHT["isa"] + NEIGHBOUR_OPERATOR


def test_neighbouring_operators_count_either_way_round() -> None:
    # the taxonomy lists elementwise among quantize's neighbours, not quantize among elementwise's
    conversion = {"isa": "rvv", "operator": "elementwise", "technique": "vectorize"}
    assert intent_fit(conversion, query_intent("fp16 to fp32 conversion on RVV")) == 1.0 + NEIGHBOUR_OPERATOR


def test_a_named_technique_ranks_its_thoughts_first_then_close_techniques() -> None:
    intent = query_intent("several accumulators for the RVV dot product")
    candidates = {
        "accumulators": {"isa": "rvv", "operator": "dot", "technique": "multi_accumulator"},
        "unrolled (close)": {"isa": "rvv", "operator": "dot", "technique": "unroll"},
        "prefetch": {"isa": "rvv", "operator": "dot", "technique": "prefetch"},
    }
    assert ranked(intent, candidates) == ["accumulators", "unrolled (close)", "prefetch"]
    fit = {name: intent_fit(c, intent) for name, c in candidates.items()}
    assert fit["accumulators"] - fit["prefetch"] == pytest.approx(INTENT_WEIGHT["technique"])
    assert fit["unrolled (close)"] - fit["prefetch"] == pytest.approx(NEIGHBOUR_TECHNIQUE)


def test_a_query_naming_nothing_changes_nothing() -> None:
    assert intent_fit({"isa": "neon", "operator": "dot", "technique": "unroll"}, Intent()) == 0.0


def test_a_float_question_demotes_quantized_kernels_as_the_agents_fit_does() -> None:
    intent = query_intent("sdot on RVV")
    assert intent.float_data and not query_intent("q4_0 dequantize to f32").float_data
    float_dot = {"isa": "rvv", "operator": "dot", "technique": "unroll", "title": "sdot unrolled"}
    iq_dot = {"isa": "rvv", "operator": "dot", "technique": "unroll", "title": "iq1_s lookup table dot"}
    assert intent_fit(float_dot, intent) - intent_fit(iq_dot, intent) == QUANTIZED_COST
    assert intent_fit(iq_dot, query_intent("RVV dot")) == intent_fit(float_dot, query_intent("RVV dot"))


def test_a_product_of_quantized_data_is_a_quantized_dot_however_it_is_worded() -> None:
    described = query_intent("int8 times int8 block dot product with per-block fp16 scales")
    # not an f32 dot, not an fp16 conversion: the scales' type is not something to do
    assert described.operator == {"quant_dot"} and not described.float_data
    assert query_intent("4-bit weights matrix-vector product").operator == {"gemv", "quant_dot"}
    # a conversion named as an action stays asked for
    assert query_intent("dequantize q4_0 blocks and dot with q8_0").operator == {"quant_dot", "quantize"}
    # float data and no product: unchanged
    assert query_intent("sdot on f32 vectors").operator == {"dot"}
    assert query_intent("fp16 to fp32 conversion").operator == {"quantize"}
    # ranked: the quantized dot thought above the f32 dot and the conversion
    candidates = {
        "q8 dot": {"isa": "rvv", "operator": "quant_dot", "technique": "widening"},
        "f32 dot": {"isa": "rvv", "operator": "dot", "technique": "widening"},
        "fp16 convert": {"isa": "rvv", "operator": "quantize", "technique": "widening"},
    }
    assert ranked(described, candidates)[0] == "q8 dot"


def test_the_words_engineers_use_for_rvv_instructions_and_data() -> None:
    assert query_intent("unpack 4-bit nibbles with vand and vsrl").isa == {"rvv"}
    assert query_intent("sasum with vfabs").isa == {"rvv"}
    assert query_intent("vmulq_f32 vaddq_f32").isa == {"neon"}  # NEON's forms are not RVV's bare names
    # exp inside a softmax is the softmax; "f32 activations" is data
    assert query_intent("softmax row: vfredmax, exp, vfredusum").operator == {"softmax"}
    assert query_intent("gelu then softmax").operator == {"activation", "softmax"}
    assert query_intent("gemv with f32 activations").operator == {"gemv"}
    assert "gemm" in query_intent("row-major linear-layer weight").operator
    assert query_intent("reuse x across several rows").technique == {"register_blocking"}
    assert query_intent("bf16 dot product").float_data


def test_portable_code_is_an_isa_the_asker_can_name() -> None:
    assert query_intent("portable C fallback for the q8_0 block dot product", "rvv").isas == {"generic"}
    assert query_intent("plain C loop the compiler can auto-vectorize").isa == {"generic"}
    # a scalar tail or operand is RVV vocabulary, not a request for scalar code
    assert query_intent("vsetvl tail handling without a scalar epilogue").isa == {"rvv"}
    assert query_intent("broadcast B scalars with vfmacc.vf").isa == {"rvv"}
    portable = {"isa": "generic", "operator": "quant_dot", "technique": "unroll"}
    rvv = {"isa": "rvv", "operator": "quant_dot", "technique": "unroll"}
    intent = query_intent("scalar q8_0 dot reference")
    assert intent_fit(portable, intent) > intent_fit(rvv, intent)


def test_an_operator_named_with_its_inner_steps_is_asked_for_whole() -> None:
    assert query_intent("riscv softmax row: max reduction, exp, sum").operator == {"softmax"}
    assert query_intent("rvv sgemv transposed: each output is a dot of a column with x").operator == {"gemv"}
    assert query_intent("y = A*x as axpy updates over columns").operator == {"gemv"}
    assert query_intent("C = A*B^T: several dot products at once").operator == {"gemm"}
    assert query_intent("sscal x = a*x").operator == {"elementwise"}  # a scalar times a vector is no GEMV
    assert query_intent("sdot and saxpy").operator == {"dot", "axpy"}  # neither is inside the other


def test_operators_described_by_what_they_compute() -> None:
    assert query_intent("subtract the row max before exponentiating then divide by the sum").operator == {"softmax"}
    assert query_intent("log of the sum of exponentials for each row").operator == {"softmax"}
    assert query_intent("sum of squares then multiply by gamma over the root mean square").operator == {"norm"}
    assert query_intent("absolute max of each block, divide by 127, round to int8").operator == {"quantize"}
    assert query_intent("average over all spatial positions of each channel").operator == {"pool"}
    assert query_intent("unfold image patches into columns").operator == {"conv", "copy"}
    assert {"dot", "axpy", "nrm2"} <= query_intent("strided loads in level-1 BLAS kernels").operator


def test_a_conversion_is_of_numbers_and_a_type_alone_is_data() -> None:
    assert query_intent("half precision bit pattern to float conversion").operator == {"quantize"}
    assert query_intent("fp16 to fp32 with vfwcvt").operator == {"quantize"}
    assert query_intent("widening fp16 accumulation into fp32 with vfwmacc").operator == set()
    assert "quantize" not in query_intent("convert a planar channel-first tensor into interleaved records").operator
    assert query_intent("int8 x int8 products per block with a per-block fp16 scale").operator == {"quant_dot"}


def test_techniques_in_the_words_of_in_order_cores_and_strip_mining() -> None:
    assert "unroll" in query_intent("interleave vector loads with vfmacc so the FMA never waits").technique
    assert "vector_length" in query_intent("strip-mining that is vector-length agnostic").technique
    assert "reduction" in query_intent("q8_0 dot: accumulate blocks in vector registers").technique
    assert "reduction" not in query_intent("exp with range reduction").technique


def test_the_third_rounds_words() -> None:
    assert query_intent("maxpool 2x2 stride 2").operator == {"pool"}
    assert query_intent("q4_K q6_K vec_dot rvv").operator == {"quant_dot"}  # a dot of block formats, no quantize
    assert "widening" in query_intent("u8s8 int8 GEMM with int32 accumulation").technique
    blas1 = query_intent("BLAS level-1 with non-unit increments (incx, incy)")
    assert {"dot", "axpy"} <= blas1.operator and blas1.technique == {"memory_access"}
    assert query_intent("split sgemm across the 4 cores of one cluster").technique == {"threading"}
    assert query_intent("fast exp for softmax").technique == {"approximation"}
    assert query_intent("reduce max with several running maxima").technique == {"multi_accumulator"}
    assert query_intent("winograd F(2x2,3x3) convolution").technique == {"algorithmic"}
    assert query_intent("fold inference batchnorm into a per-channel scale").technique == {"fusion"}


def test_what_a_task_description_states_is_not_asked_for() -> None:
    # the agent's own queries carry the task's description: its layout and BLAS level are facts, not requests
    assert query_intent("sgemm: C = A*B, row-major, NCHW input").technique == set()
    assert query_intent("sgemm: C = A*B, row-major, NCHW input").operator == {"gemm"}
    assert query_intent("saxpy, a level-1 BLAS routine").operator == {"axpy"}
