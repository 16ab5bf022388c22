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
