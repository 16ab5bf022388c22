"""The LLM generator: any OpenAI-compatible endpoint through the `openai` package.

It must survive real models and real endpoints: JSON or fenced code, <think> blocks, truncated replies,
refusals, 429s and timeouts. Every call is accounted (calls, tokens) and bounded (concurrency, token budget).
The prompt is rebuilt for every candidate under a character budget with KOPE-style tiers: hot (task,
reference, parent, last feedback, target) always; warm (the thought and its example, measured results);
cold (RVV reference, other ideas) as room allows.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from dataclasses import dataclass

import openai

from agent.generation import Generated, GenerationRequest, code_key
from core.settings import Settings

log = logging.getLogger(__name__)
SYSTEM = (
    "You are an expert in RISC-V Vector (RVV 1.0) kernel optimization for the SpacemiT X60 core. "
    "Reply with one C translation unit that defines exactly the requested function with the same signature, "
    "using <riscv_vector.h> intrinsics where useful. No main(), no I/O, no calls to other kernels. "
    'Answer as JSON: {"code": "<C source>", "cflags": ["optional extra compiler flags"], '
    '"explanation": "<one sentence>"} or as a single ```c fenced block.'
)
PROMPT_BUDGET_CHARS = 24_000


@dataclass
class LlmUsage:
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    errors: int = 0

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class LlmGenerator:
    name = "llm"

    def __init__(self, settings: Settings, client: openai.OpenAI | None = None) -> None:
        self.settings = settings
        self.model = settings.llm_model
        self.client = client or openai.OpenAI(
            base_url=settings.openai_base_url,
            api_key=settings.openai_api_key.get_secret_value() if settings.openai_api_key else "not-needed",
            timeout=settings.llm_timeout_s,
            max_retries=0,  # retries are ours: we honour Retry-After and count every attempt
        )
        self.usage = LlmUsage()
        self._slots = threading.BoundedSemaphore(max(1, settings.llm_concurrency))
        self._lock = threading.Lock()

    @property
    def label(self) -> str:
        return f"llm:{self.model}"

    def generate(self, req: GenerationRequest) -> Generated:
        if self.usage.tokens >= self.settings.llm_token_budget:
            return Generated(error=f"LLM token budget of {self.settings.llm_token_budget} tokens is used up")
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": build_prompt(req)}]
        before = (self.usage.calls, self.usage.tokens)
        reply, error = self._complete(messages)
        calls, tokens = self.usage.calls - before[0], self.usage.tokens - before[1]
        if error:
            return Generated(error=error, llm_calls=calls, llm_tokens=tokens)
        code, cflags, explanation, problem = parse_reply(reply or "")
        if problem:
            return Generated(error=problem, llm_calls=calls, llm_tokens=tokens)
        return Generated(
            code=code,
            cflags=cflags,
            key=code_key(code, cflags),
            description=explanation,
            llm_calls=calls,
            llm_tokens=tokens,
        )

    def _complete(self, messages: list[dict]) -> tuple[str | None, str | None]:
        """One completion with retries; returns (text, None) or (None, what went wrong)."""
        delay = 1.0
        last = "no attempt made"
        for attempt in range(self.settings.llm_max_retries + 1):
            try:
                with self._slots:
                    resp = self.client.chat.completions.create(
                        model=self.model, messages=messages, temperature=0.7, max_tokens=4096
                    )
                self._account(resp)
                choice = resp.choices[0]
                text = choice.message.content or ""
                if choice.finish_reason == "length":
                    return None, "the reply was truncated (finish_reason=length): ask for shorter code"
                if getattr(choice.message, "refusal", None):
                    return None, f"the model refused: {choice.message.refusal}"
                return text, None
            except openai.RateLimitError as e:
                last = "rate limited (HTTP 429)"
                delay = _retry_after(e, delay)
            except (openai.APITimeoutError, openai.APIConnectionError) as e:
                last = f"endpoint unreachable or slow: {type(e).__name__}"
            except openai.APIStatusError as e:
                if e.status_code < 500:
                    self._count_error()
                    return None, f"endpoint rejected the request: HTTP {e.status_code}"
                last = f"server error HTTP {e.status_code}"
            except (ValueError, json.JSONDecodeError, AttributeError, IndexError, TypeError) as e:
                last = f"malformed response: {e}"
            self._count_error()
            if attempt < self.settings.llm_max_retries:
                time.sleep(delay)
                delay = min(delay * 2, 30.0)
        return None, f"LLM call failed after {self.settings.llm_max_retries + 1} attempts: {last}"

    def _account(self, resp: object) -> None:
        usage = getattr(resp, "usage", None)
        with self._lock:
            self.usage.calls += 1
            if usage is not None:
                self.usage.prompt_tokens += int(getattr(usage, "prompt_tokens", 0) or 0)
                self.usage.completion_tokens += int(getattr(usage, "completion_tokens", 0) or 0)

    def _count_error(self) -> None:
        with self._lock:
            self.usage.calls += 1
            self.usage.errors += 1


def _retry_after(err: openai.RateLimitError, fallback: float) -> float:
    try:
        value = float(err.response.headers.get("retry-after", fallback))
    except (AttributeError, TypeError, ValueError):
        value = fallback
    return max(0.0, min(value, 30.0))


_THINK = re.compile(r"<think>.*?(</think>|$)", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"```(?:c|C|cpp|c\+\+)?\s*\n(.*?)```", re.DOTALL)


def parse_reply(text: str) -> tuple[str, list[str], str, str | None]:
    """(code, cflags, explanation, problem). Accepts JSON (possibly fenced) or a fenced C block."""
    text = _THINK.sub("", text).strip()
    if not text:
        return "", [], "", "empty reply (after removing <think> blocks)"
    data = _json_object(text)
    if isinstance(data, dict) and isinstance(data.get("code"), str) and data["code"].strip():
        flags = data.get("cflags") or []
        if not isinstance(flags, list) or not all(isinstance(f, str) for f in flags):
            return "", [], "", "JSON reply: 'cflags' must be a list of strings"
        return data["code"].strip() + "\n", flags, str(data.get("explanation") or ""), None
    blocks = [b for b in _FENCE.findall(text) if b.strip()]
    if blocks:
        code = max(blocks, key=len)
        if "{" not in code:
            return "", [], "", "the fenced block holds no function body"
        return code.strip() + "\n", [], "", None
    if text.count("```") % 2 == 1:
        return "", [], "", "unterminated code block: the reply looks truncated"
    return "", [], "", 'no code found: reply with JSON {"code": ...} or a ```c block'


def _json_object(text: str) -> object:
    candidates = [text]
    m = re.search(r"```(?:json)?\s*\n(\{.*\})\s*```", text, re.DOTALL)
    if m:
        candidates.insert(0, m.group(1))
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        candidates.append(text[start : end + 1])
    for c in candidates:
        try:
            return json.loads(c)
        except json.JSONDecodeError:
            continue
    return None


def build_prompt(req: GenerationRequest, budget: int = PROMPT_BUDGET_CHARS) -> str:
    """Hot tier always; warm and cold tiers admitted in order while the budget allows."""
    t, task = req.thought, req.task
    hot = [
        f"# Task: {task.name} ({task.operator}, {task.dtype})\n{task.description}\n"
        f"Signature: `{task.signature}`. Tolerance rtol={task.tolerance.rtol}, atol={task.tolerance.atol}.",
        f"## Reference implementation (plain C)\n```c\n{task.reference_code}\n```",
        f"## Target\n{req.context.target_profile}",
    ]
    if req.parent.code:
        hot.append(
            f"## Current best candidate (speedup {req.parent.speedup or 0:.2f}x over clang -O3)\n"
            f"```c\n{req.parent.code}\n```\nflags: {' '.join(req.parent.cflags) or '(none)'}"
        )
    if req.parent.feedback:
        hot.append(f"## Feedback on the last attempt\n{req.parent.feedback}")
    hot.append(
        f"## Apply this optimization thought ({t.technique.value})\n{t.title}: {t.description}"
        + (f"\nExample:\n```c\n{t.example_code}\n```" if t.example_code else "")
    )
    warm = [f"Measured on this target: thought '{t.title}' tried {t.stats.trials} times, {t.stats.successes} improved."]
    warm += [
        f"Earlier best for {p.task_id} on this target: {p.speedup:.2f}x with flags {' '.join(p.cflags)}"
        for p in (req.context.same_task + req.context.similar_tasks)[:3]
    ]
    cold = [req.context.rvv_reference]
    out, used = [], 0
    for part in hot:
        out.append(part)
        used += len(part)
    for part in warm + cold:
        if used + len(part) > budget:
            continue
        out.append(part)
        used += len(part)
    out.append(
        "Write the complete optimized C file now. Keep every output element exact within the tolerance, "
        "handle all sizes (tails), never read or write out of bounds."
    )
    return "\n\n".join(out)
