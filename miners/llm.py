"""`--llm`: an OpenAI-compatible model reads each optimization commit and writes a short lesson as JSON.

The reply is validated by pydantic; invalid or truncated output is retried with the error quoted back,
HTTP 429 waits for Retry-After, and results are cached per commit sha so re-mining costs nothing.
"""

from __future__ import annotations

import json
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError, field_validator

from core.errors import Unavailable
from core.settings import Settings
from knowledge.taxonomy import Operator, Technique
from miners.distill import Evidence

PROMPT_VERSION = "v1"
SYSTEM = (
    "You read one commit from a compute-kernel library and explain the optimization it makes. "
    "Reply with ONLY a JSON object with keys: "
    '"lesson" (2-3 sentences: what was done and why it is faster, general enough to reuse), '
    f'"techniques" (list, each one of: {", ".join(t.value for t in Technique)}), '
    f'"operator" (one of: {", ".join(o.value for o in Operator)}), '
    '"is_optimization" (true if the commit\'s main purpose is speed).'
)


class CommitInsight(BaseModel):
    lesson: str = Field(min_length=10, max_length=1500)
    techniques: list[Technique] = []
    operator: Operator = Operator.OTHER
    is_optimization: bool = True

    @field_validator("techniques", mode="before")
    @classmethod
    def _known_only(cls, v: object) -> object:
        # Models invent near-synonyms; keep the ones in the taxonomy rather than failing the whole reply.
        if isinstance(v, list):
            return [t for t in (str(x).strip().lower() for x in v) if t in Technique._value2member_map_]
        return v


class LlmDistiller:
    def __init__(self, settings: Settings, cache_dir: Path) -> None:
        from openai import OpenAI

        if not settings.llm_configured:
            raise Unavailable(
                "--llm: no LLM endpoint configured", "set OPENAI_BASE_URL (and OPENAI_API_KEY) or drop --llm"
            )
        key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else "none"
        self.client = OpenAI(
            base_url=settings.openai_base_url, api_key=key, timeout=settings.llm_timeout_s, max_retries=0
        )
        self.model = settings.llm_model
        self.retries = max(1, settings.llm_max_retries)
        self.concurrency = max(1, settings.llm_concurrency)
        self.token_budget = settings.llm_token_budget
        self.tokens_used = 0
        self.calls = 0
        self.failures: list[str] = []
        self.cache_dir = cache_dir
        self._lock = threading.Lock()
        self._gate = threading.Semaphore(self.concurrency)

    def insights(self, evidence: list[Evidence]) -> dict[str, CommitInsight]:
        """Lessons for every commit (cached ones first); commits whose replies never validate are skipped."""
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        out: dict[str, CommitInsight] = {}
        todo: list[Evidence] = []
        for ev in evidence:
            cached = self._cached(ev.sha)
            if cached is not None:
                out[ev.sha] = cached
            else:
                todo.append(ev)
        with ThreadPoolExecutor(self.concurrency) as pool:
            for sha, ins in zip((e.sha for e in todo), pool.map(self._one, todo), strict=True):
                if ins is not None:
                    out[sha] = ins
        return out

    def _cache_path(self, sha: str) -> Path:
        return self.cache_dir / f"{sha}.{PROMPT_VERSION}.json"

    def _cached(self, sha: str) -> CommitInsight | None:
        p = self._cache_path(sha)
        if not p.exists():
            return None
        try:
            return CommitInsight.model_validate_json(p.read_text())
        except (ValidationError, OSError):
            return None

    def _one(self, ev: Evidence) -> CommitInsight | None:
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": _commit_prompt(ev)}]
        last_error = ""
        for _attempt in range(self.retries):
            if self.tokens_used >= self.token_budget:
                self._fail(f"{ev.sha[:9]}: token budget {self.token_budget} used up")
                return None
            text, finish, err = self._call(messages)
            if err:
                last_error = err
                continue
            try:
                if finish == "length":
                    raise ValueError("reply truncated (finish_reason=length); answer shorter")
                ins = CommitInsight.model_validate(_extract_json(text))
            except (ValueError, ValidationError) as e:
                last_error = str(e).split("\n")[0][:200]
                messages = [
                    *messages[:2],
                    {"role": "assistant", "content": text[:2000]},
                    {
                        "role": "user",
                        "content": f"That reply was invalid: {last_error}. Reply again with only the JSON object.",
                    },
                ]
                continue
            self._cache_path(ev.sha).write_text(ins.model_dump_json())
            return ins
        self._fail(f"{ev.sha[:9]}: no valid reply after {self.retries} attempts ({last_error})")
        return None

    def _call(self, messages: list[dict[str, str]]) -> tuple[str, str | None, str]:
        from openai import APIConnectionError, APIStatusError, APITimeoutError, RateLimitError

        with self._gate:
            try:
                resp = self.client.chat.completions.create(
                    model=self.model,
                    messages=messages,
                    temperature=0.0,
                    max_tokens=600,  # type: ignore[arg-type]
                )
            except RateLimitError as e:
                time.sleep(_retry_after(e.response.headers.get("retry-after")))
                return "", None, "rate limited (429)"
            except APIStatusError as e:
                time.sleep(0.2)
                return "", None, f"HTTP {e.status_code}"
            except (APIConnectionError, APITimeoutError) as e:
                return "", None, f"endpoint unreachable: {type(e).__name__}"
            except ValueError as e:  # a 200 whose body is not a completion (JSONDecodeError is a ValueError)
                return "", None, f"malformed response body: {type(e).__name__}"
        with self._lock:
            self.calls += 1
            if resp.usage:
                self.tokens_used += resp.usage.total_tokens or 0
        choice = resp.choices[0] if resp.choices else None
        if choice is None:
            return "", None, "empty reply"
        return choice.message.content or "", choice.finish_reason, ""

    def _fail(self, text: str) -> None:
        with self._lock:
            self.failures.append(text)


def _retry_after(value: str | None) -> float:
    try:
        return min(30.0, max(0.0, float(value))) if value else 1.0
    except ValueError:
        return 1.0


def _extract_json(text: str) -> object:
    """The JSON object in a reply: tolerates <think> blocks, code fences and prose around it."""
    text = re.sub(r"<think>.*?</think>", "", text, flags=re.S)
    if m := re.search(r"```(?:json)?\s*(\{.*?\})\s*```", text, re.S):
        text = m.group(1)
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        raise ValueError("no JSON object in the reply")
    try:
        return json.loads(text[start : end + 1])
    except json.JSONDecodeError as e:
        raise ValueError(f"invalid JSON: {e.msg}") from None


def _commit_prompt(ev: Evidence) -> str:
    c = ev.classification
    patch = ev.patch[:6000]
    return (
        f"Commit {ev.sha} in {ev.repo}\nTitle: {ev.title}\n"
        f"Detected ISAs: {', '.join(map(str, c.isas)) or 'none'}; operators: "
        f"{', '.join(map(str, c.operators)) or 'none'}; techniques: {', '.join(map(str, c.techniques)) or 'none'}\n"
        f"Diff (trimmed):\n{patch}"
    )
