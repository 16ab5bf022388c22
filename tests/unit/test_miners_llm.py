"""The --llm distiller against a real local OpenAI-compatible HTTP server (tests/support/openai_stub.py)."""

from __future__ import annotations

from pathlib import Path

from core.settings import Settings
from miners.classify import Classification
from miners.distill import Evidence
from miners.llm import LlmDistiller
from tests.support.openai_stub import OpenAIStub, Reply

GOOD = {
    "lesson": "Accumulate in vector registers and reduce once.",
    "techniques": ["reduction", "bogus"],
    "operator": "dot",
    "is_optimization": True,
}


def _evidence(sha: str) -> Evidence:
    return Evidence(sha, "r", "Optimize dot", Classification(3.0, True, [], isas=["rvv"]), "+vfredusum")


def _distiller(stub: OpenAIStub, home: Path, retries: int = 4) -> LlmDistiller:
    s = Settings(
        home=home, OPENAI_BASE_URL=stub.base_url, OPENAI_API_KEY="k", llm_max_retries=retries, llm_concurrency=2
    )
    return LlmDistiller(s, home / "llm")


def test_retries_invalid_output_then_caches(tmp_path: Path) -> None:
    with OpenAIStub() as stub:
        stub.script(
            Reply.malformed(),
            Reply.truncated('{"lesson": "Acc'),
            Reply.rate_limited(0.05),
            Reply.server_error(),
            Reply.text("<think>hmm</think>```json\n" + __import__("json").dumps(GOOD) + "\n```"),
        )
        d = _distiller(stub, tmp_path, retries=6)
        out = d.insights([_evidence("a" * 40)])
        assert out["a" * 40].lesson == GOOD["lesson"]
        assert [str(t) for t in out["a" * 40].techniques] == ["reduction"]  # unknown names dropped
        assert stub.calls == 5
        # Cached per sha: a second run asks nothing.
        again = _distiller(stub, tmp_path).insights([_evidence("a" * 40)])
        assert again["a" * 40].lesson == GOOD["lesson"] and stub.calls == 5
        assert "invalid" in stub.requests[2]["messages"][-1]["content"]  # the error was quoted back


def test_gives_up_and_reports(tmp_path: Path) -> None:
    with OpenAIStub() as stub:
        stub.default = Reply.text("no json here")
        d = _distiller(stub, tmp_path, retries=2)
        assert d.insights([_evidence("b" * 40)]) == {}
        assert stub.calls == 2 and "no valid reply" in d.failures[0]


def test_idea_statements_are_validated_and_cached_by_their_evidence(tmp_path: Path) -> None:
    from knowledge.taxonomy import Technique
    from miners.distill import IdeaGroup, ThoughtFacts, idea_prompt

    facts = {
        f"t{i}": ThoughtFacts(
            f"t{i}", Technique.MULTI_ACCUMULATOR, "dot", isa, f"c{i}", "r", "idea:multi_accumulator", why, "", what
        )
        for i, (isa, why, what) in enumerate(
            [
                ("rvv", "Four chains hide the vfmacc latency.", "ggml abc: faster q8_0 dot"),
                ("neon", "Two accumulators halve the dependency chain.", "OpenBLAS def: sdot on A64FX"),
            ]
        )
    }
    group = IdeaGroup("idea:multi_accumulator:c0", Technique.MULTI_ACCUMULATOR, ["t0", "t1"], changed=True)
    prompt = idea_prompt(group, facts)
    assert "ggml abc: faster q8_0 dot [dot, rvv] Why: Four chains hide the vfmacc latency." in prompt
    good = {
        "title": "Independent accumulators hide FMA latency",
        "statement": "Several independent accumulator chains keep the FMA pipeline busy.",
        "applies_when": "Reductions such as dot products on in-order vector cores.",
    }
    with OpenAIStub() as stub:
        stub.script(Reply.json({"title": "x"}), Reply.json(good))  # the first misses fields: asked again
        out = _distiller(stub, tmp_path).idea_statements({group.id: prompt})
        assert out[group.id].title == good["title"] and stub.calls == 2
        assert "Changes:" in stub.requests[0]["messages"][1]["content"]
        again = _distiller(stub, tmp_path).idea_statements({group.id: prompt})
        assert again[group.id].statement == good["statement"] and stub.calls == 2  # cached
