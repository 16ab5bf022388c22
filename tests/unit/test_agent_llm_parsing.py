"""Replies of real models: JSON, fenced code, <think> blocks, truncation; prompt tiers under a budget."""

from __future__ import annotations

import json
import random

from agent.context import AgentContext, ThoughtCard
from agent.generation import GenerationRequest, Parent
from agent.llm import build_prompt, parse_reply
from agent.posterior import ThoughtStats, is_success, thompson_pick
from evaluator.targets import load_target
from evaluator.tasks import load_task
from knowledge.taxonomy import Technique

CODE = "float sdot(int n, const float *x, const float *y) { return 0; }"


def test_json_reply_with_flags() -> None:
    code, flags, expl, problem = parse_reply(json.dumps({"code": CODE, "cflags": ["-O3"], "explanation": "x"}))
    assert problem is None and code.strip() == CODE and flags == ["-O3"] and expl == "x"


def test_think_block_is_stripped_and_fenced_code_found() -> None:
    reply = "<think>I should use vfmacc... {not code}</think>\nHere:\n```c\n" + CODE + "\n```\nDone."
    code, flags, _, problem = parse_reply(reply)
    assert problem is None and code.strip() == CODE and flags == []


def test_json_inside_a_fence() -> None:
    reply = '```json\n{"code": "' + CODE + '"}\n```'
    assert parse_reply(reply)[0].strip() == CODE


def test_unterminated_think_and_no_code_are_problems() -> None:
    assert parse_reply("<think>thinking forever")[3] is not None
    assert "truncated" in (parse_reply("```c\nfloat sdot(int n) {")[3] or "")
    assert "no code" in (parse_reply("I cannot help with that.")[3] or "")


def test_bad_cflags_type_is_a_problem() -> None:
    assert "cflags" in (parse_reply(json.dumps({"code": CODE, "cflags": "-O3"}))[3] or "")


def _request(parent_code: str = "") -> GenerationRequest:
    task, target = load_task("sdot"), load_target("k1-x60")
    card = ThoughtCard(
        "t1",
        "i1",
        "Four accumulators",
        "use 4 partial sums",
        Technique.MULTI_ACCUMULATOR,
        "dot",
        "rvv",
        example_code="acc0 = __riscv_vfmacc_vv_f32m2(acc0, a, b, vl);",
    )
    ctx = AgentContext(directions=[], same_task=[], similar_tasks=[], target_profile="K1 X60 VLEN 256")
    return GenerationRequest(
        task, target, card, Parent(parent_code, [], speedup=1.5, feedback="wrong at n=17"), ctx, set(), random.Random(0)
    )


def test_prompt_keeps_hot_tier_and_drops_cold_tier_under_a_small_budget() -> None:
    req = _request(parent_code=CODE)
    full = build_prompt(req)
    small = build_prompt(req, budget=100)
    for hot in (
        "float sdot(int n, const float *x, const float *y)",
        "wrong at n=17",
        "Four accumulators",
        "K1 X60 VLEN 256",
        CODE,
    ):
        assert hot in full and hot in small
    assert "RVV 1.0 intrinsics" in full and "RVV 1.0 intrinsics" not in small


def test_posterior_prefers_measured_success_and_counts_success_correctly() -> None:
    good, bad = ThoughtStats("good", trials=10, successes=9), ThoughtStats("bad", trials=10, successes=0)
    rng = random.Random(1)
    assert sum(thompson_pick([good, bad], rng) is good for _ in range(200)) > 190
    mined = ThoughtStats("mined", evidence_commits=50, prior_speedup=2.0)
    assert mined.mean() > ThoughtStats("none").mean()
    assert is_success(True, 1.5, 1.2) and not is_success(True, 1.21, 1.2) and not is_success(False, 3.0, 1.0)
