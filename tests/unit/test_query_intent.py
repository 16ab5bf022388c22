"""What a kernel engineer's query names explicitly, and how a thought's fit to it moves its score."""

from __future__ import annotations

from knowledge.retrieval import (
    INTENT_WEIGHT,
    NEIGHBOUR_OPERATOR,
    OTHER_ISA_COST,
    PORTABLE_COST,
    Intent,
    _intent_fit,
    query_intent,
)


def test_isa_operator_and_technique_are_read_from_engineer_wording() -> None:
    i = query_intent("sgemm micro-kernel register blocking for RISC-V vector")
    assert i.isa == {"rvv"} and i.operator == {"gemm"} and "register_blocking" in i.technique
    assert query_intent("port RVV kernel to xtheadvector 0.7.1").isa == {"rvv", "xtheadvector"}
    assert query_intent("quantize row q8_0").operator == {"quantize", "quant_dot"}
    # "reduce once" is a technique, not the reduce operator; "vfredusum" names RVV
    r = query_intent("reduce once after the loop instead of vfredusum")
    assert r.operator == set() and r.isa == {"rvv"} and r.technique == {"reduction"}
    assert query_intent("make it faster") == Intent()


def test_fit_rewards_named_fields_and_neighbours_and_penalises_other_isas_more_than_portable_code() -> None:
    intent = Intent(isa={"rvv"}, operator={"gemm"})
    assert _intent_fit({"isa": "rvv", "operator": "gemm"}, intent) == INTENT_WEIGHT["isa"] + INTENT_WEIGHT["operator"]
    assert _intent_fit({"isa": "neon", "operator": "gemm"}, intent) == INTENT_WEIGHT["operator"] - OTHER_ISA_COST
    assert _intent_fit({"isa": "generic", "operator": "gemm"}, intent) == INTENT_WEIGHT["operator"] - PORTABLE_COST
    # gemv is a neighbour of gemm (its kernels share the shape), sort is not
    assert _intent_fit({"isa": "rvv", "operator": "gemv"}, intent) == INTENT_WEIGHT["isa"] + NEIGHBOUR_OPERATOR
    assert _intent_fit({"isa": "rvv", "operator": "sort"}, intent) == INTENT_WEIGHT["isa"]
    assert PORTABLE_COST < OTHER_ISA_COST
    assert _intent_fit({"isa": "neon", "operator": "dot"}, Intent()) == 0.0
