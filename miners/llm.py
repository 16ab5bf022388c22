"""`--llm`: an OpenAI-compatible model reads each optimization commit and writes a short lesson as JSON.

The reply is validated by pydantic; invalid or truncated output is retried with the error quoted back,
HTTP 429 waits for Retry-After, and results are cached per commit sha so re-mining costs nothing.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, Field, ValidationError, field_validator

from core.errors import Unavailable
from core.settings import Settings
from knowledge.taxonomy import Operator, Technique
from miners.distill import Evidence

PROMPT_VERSION = "v1"
M = TypeVar("M", bound=BaseModel)
SYSTEM = (
    "You read one commit from a compute-kernel library and explain the optimization it makes. "
    "Reply with ONLY a JSON object with keys: "
    '"lesson" (2-3 sentences: what was done and why it is faster, general enough to reuse), '
    f'"techniques" (list, each one of: {", ".join(t.value for t in Technique)}), '
    f'"operator" (one of: {", ".join(o.value for o in Operator)}), '
    '"is_optimization" (true if the commit\'s main purpose is speed).'
)


IDEA_SYSTEM = (
    "You read a group of optimization changes from compute-kernel libraries that use the same technique, and "
    "state the principle they share, as a kernel engineer would write it down. Reply with ONLY a JSON object "
    'with keys: "title" (under 12 words), "statement" (2-3 sentences: the principle and why it makes kernels '
    'faster, from the evidence only), "applies_when" (1 sentence: operators, data types, ISAs or sizes where it '
    "pays off)."
)


class IdeaStatement(BaseModel):
    title: str = Field(min_length=5, max_length=200)
    statement: str = Field(min_length=20, max_length=1500)
    applies_when: str = Field(min_length=5, max_length=800)


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

    def idea_statements(self, prompts: dict[str, str]) -> dict[str, IdeaStatement]:
        """A statement per group of thoughts (key -> evidence text), cached by the evidence text's hash."""
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        keys = {k: "idea-" + hashlib.sha1(p.encode()).hexdigest()[:20] for k, p in prompts.items()}

        def one(k: str) -> IdeaStatement | None:
            cached = self._cached(keys[k], IdeaStatement)
            return cached or self._ask(keys[k], IDEA_SYSTEM, prompts[k], IdeaStatement, k)

        with ThreadPoolExecutor(self.concurrency) as pool:
            got = dict(zip(prompts, pool.map(one, prompts), strict=True))
        return {k: v for k, v in got.items() if v is not None}

    def _cache_path(self, key: str) -> Path:
        return self.cache_dir / f"{key}.{PROMPT_VERSION}.json"

    def _cached(self, key: str, model: type[M] = CommitInsight) -> M | None:  # type: ignore[assignment]
        p = self._cache_path(key)
        if not p.exists():
            return None
        try:
            return model.model_validate_json(p.read_text())
        except (ValidationError, OSError):
            return None

    def _one(self, ev: Evidence) -> CommitInsight | None:
        return self._ask(ev.sha, SYSTEM, _commit_prompt(ev), CommitInsight, ev.sha[:9])

    def _ask(self, key: str, system: str, prompt: str, model: type[M], label: str) -> M | None:
        """One validated JSON reply (retried with the error quoted back), cached under `key`."""
        messages = [{"role": "system", "content": system}, {"role": "user", "content": prompt}]
        last_error = ""
        for _attempt in range(self.retries):
            if self.tokens_used >= self.token_budget:
                self._fail(f"{label}: token budget {self.token_budget} used up")
                return None
            text, finish, err = self._call(messages)
            if err:
                last_error = err
                continue
            try:
                if finish == "length":
                    raise ValueError("reply truncated (finish_reason=length); answer shorter")
                ins = model.model_validate(_extract_json(text))
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
            self._cache_path(key).write_text(ins.model_dump_json())
            return ins
        self._fail(f"{label}: no valid reply after {self.retries} attempts ({last_error})")
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
