"""What an LLM is told (agent/llm.py build_prompt, agent/context.py): everything a strong model needs and
nothing misattributed. Real task and target files; the graph-side choices are checked in
tests/integration/test_agent_prompt_graph.py."""

from __future__ import annotations

import random
import re
from pathlib import Path

from agent.context import AgentContext, Direction, ThoughtCard, _isa_fit, rules_text, timing_text
from agent.generation import GenerationRequest, Parent
from agent.llm import build_prompt
from evaluator.targets import load_target
from evaluator.tasks import load_task
from knowledge.models import effect_summary
from knowledge.taxonomy import Technique

ROOT = Path(__file__).resolve().parents[2]
BEST = "float sdot(int n, const float *x, const float *y) { /* best so far */ return 1.0f; }"
FAILED = "float sdot(int n, const float *x, const float *y) { /* the failed one */ return x[0] +; }"
DIAG = "compile error: candidate.c:1:70: error: expected expression"
HUNK = (
    "+    acc1 = __riscv_vfmacc_vv_f32m2(acc1, va1, vb1, vl);\n+    acc2 = __riscv_vfmacc_vv_f32m2(acc2, va2, vb2, vl);"
)


def _card(**kw) -> ThoughtCard:
    base = dict(
        id="t-neon",
        idea_id="i1",
        title="Two FMA accumulators in the NEON sdot kernel",
        description="split the accumulator to hide FMA latency",
        technique=Technique.MULTI_ACCUMULATOR,
        operator="dot",
        isa="neon",
        example_code=HUNK,
        rvv_equivalents=["vfmaq_f32 -> __riscv_vfmacc_vv_f32m1"],
        claims=['1.8x ("sdot 1.8x faster on A53", abc1234)'],
        effect=effect_summary(
            {"trials": 4, "correct": 3, "successes": 2, "sum_log_speedup": 3 * 0.9, "sum_log_gain": 3 * 0.1}
        ),
    )
    base.update(kw)
    return ThoughtCard(**base)


def _request() -> GenerationRequest:
    task, target = load_task("sdot"), load_target("k1-x60")
    card = _card()
    ctx = AgentContext(
        directions=[Direction("i1", "Accumulators", "hide latency", [card, _card(id="t2", title="Eight sums")], 1.0)],
        same_task=[],
        similar_tasks=[],
        target_profile="SpacemiT K1 (X60 core) VLEN 256",
        timing=timing_text(target, "qemu"),
        rules=rules_text(task, target),
    )
    parent = Parent(BEST, ["-O3"], speedup=2.41, feedback="ok: max error 1e-7", experience_id="x-best", status="ok")
    failed = Parent(FAILED, [], feedback=DIAG, experience_id="x-fail", status="compile_error")
    return GenerationRequest(task, target, card, parent, ctx, set(), random.Random(0), last_attempt=failed)


def test_prompt_has_task_sizes_tolerance_rules_and_timing() -> None:
    p = build_prompt(_request())
    assert "n=1, n=3, n=17, n=1000, n=4099, n=16384" in p and "bench size: n=16384" in p
    assert "rtol=0.0001, atol=0.001" in p
    assert "NOT modeled: caches" in p and "spacemit-x60" in p
    assert "Includes only:" in p and "<riscv_vector.h>" in p and "mutable global or static state" in p
    assert "-mrvv-max-lmul=mN" in p
    assert "# sdot" not in p  # the notes' title line is dropped, not shown as a second task heading


def test_prompt_shows_best_code_with_numbers_and_the_failed_code_with_its_own_diagnostic() -> None:
    p = build_prompt(_request())
    assert BEST in p and "2.41x" in p
    # the diagnostic follows the failed code, not the best one
    failed_at, diag_at, best_at = p.index(FAILED), p.index(DIAG), p.index(BEST)
    assert best_at < failed_at < diag_at
    assert "compile_error" in p[best_at:diag_at]
    between = p[best_at + len(BEST) : failed_at]
    assert DIAG not in between


def test_prompt_carries_the_thought_hunk_translation_claim_and_measured_effect() -> None:
    p = build_prompt(_request())
    assert HUNK in p
    assert "vfmaq_f32 -> __riscv_vfmacc_vv_f32m1" in p
    assert "1.8x" in p and "A53" in p
    assert "tried 4 times, 3 correct, 2 improved" in p
    assert f"{__import__('math').exp(0.9):.2f}x" in p  # mean speedup over the reference
    assert "Eight sums" in p  # a related thought of the same idea (cold tier, fits the default budget)


def test_isa_fit_prefers_the_targets_isa_then_translated_or_portable() -> None:
    assert _isa_fit(_card(isa="rvv", rvv_equivalents=[]), "rvv") == 2
    assert _isa_fit(_card(isa="neon"), "rvv") == 1  # carries RVV equivalents
    assert _isa_fit(_card(isa="generic", rvv_equivalents=[]), "rvv") == 1
    assert _isa_fit(_card(isa="avx2", rvv_equivalents=[]), "rvv") == 0
    assert _isa_fit(_card(isa="avx2", rvv_equivalents=[]), None) == 2  # the host: any ISA


def test_rvv_reference_load_costs_agree_with_the_cost_model_doc() -> None:
    doc = (ROOT / "docs" / "COSTMODEL.md").read_text()
    sheet = (ROOT / "agent" / "rvv_reference.md").read_text()
    occ = re.search(r"load occupancy (\d+)/(\d+)/(\d+)/(\d+)\s+cycles for 8/16/32/64 elements at M1/M2/M4/M8", doc)
    assert occ, "docs/COSTMODEL.md no longer states the vle32 occupancy"
    assert " / ".join(occ.groups()) + " cycles at m1 / m2 / m4 / m8" in sheet
    bound = re.search(r"load-bound at ([\d.]+) cycle/element at M1 and ([\d.]+) at", doc)
    assert bound and f"load-bound at {bound.group(1)} cycle/element at m1 and {bound.group(2)} at" in sheet


def test_prompt_leads_with_the_competent_speedup_and_names_a_weak_baseline() -> None:
    req = _request()
    req.parent.competent_speedup = 1.12
    p = build_prompt(req)
    assert "Improve this candidate (1.12x over competent, 2.41x over -O3 at the bench size)" in p
    assert "competent baseline (the reference at -O3 -fno-math-errno -ffp-contract=fast" in p
    assert "weak baseline" not in p  # sdot's reference calls no libm
    req.task = load_task("softmax")
    assert "Note: weak baseline: its reference calls scalar libm expf" in build_prompt(req)
