"""What a kernel engineer's query names explicitly, and how a thought's fit to it moves its score."""

from __future__ import annotations

from knowledge.retrieval import INTENT_WEIGHT, Intent, _intent_fit, query_intent


def test_isa_operator_and_technique_are_read_from_engineer_wording() -> None:
    i = query_intent("sgemm micro-kernel register blocking for RISC-V vector")
    assert i.isa == {"rvv"} and i.operator == {"gemm"} and "register_blocking" in i.technique
    assert query_intent("port RVV kernel to xtheadvector 0.7.1").isa == {"rvv", "xtheadvector"}
    assert query_intent("quantize row q8_0").operator == {"quantize", "quant_dot"}
    # "reduce once" is a technique, not the reduce operator; "vfredusum" names RVV
    r = query_intent("reduce once after the loop instead of vfredusum")
    assert r.operator == set() and r.isa == {"rvv"} and r.technique == {"reduction"}
    assert query_intent("make it faster") == Intent()


def test_fit_rewards_named_fields_and_penalises_another_isa_but_not_portable_code() -> None:
    intent = Intent(isa={"rvv"}, operator={"gemm"})
    assert _intent_fit({"isa": "rvv", "operator": "gemm"}, intent) == INTENT_WEIGHT["isa"] + INTENT_WEIGHT["operator"]
    assert _intent_fit({"isa": "neon", "operator": "gemm"}, intent) == INTENT_WEIGHT["operator"] - INTENT_WEIGHT["isa"]
    assert _intent_fit({"isa": "generic", "operator": "dot"}, intent) == 0.0
    assert _intent_fit({"isa": "neon", "operator": "dot"}, Intent()) == 0.0
