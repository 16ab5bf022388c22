"""The LLM generator: any OpenAI-compatible endpoint through the `openai` package.

It must survive real models and real endpoints: JSON or fenced code, <think> blocks, truncated replies,
refusals, 429s and timeouts. Every call is accounted (calls, tokens) and bounded (concurrency, token budget).
The prompt is rebuilt for every candidate under a character budget with KOPE-style tiers: hot (task with
sizes and tolerance, reference, rules, target and what its timing models, the candidate to improve, the last
attempt with its own diagnostic, the thought with its mined hunk, RVV translation and measured effect) always;
warm (earlier results on this target), cold (related thoughts, the RVV reference sheet) as room allows.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from dataclasses import dataclass

import openai

from agent.context import ThoughtCard, target_isa
from agent.generation import Generated, GenerationRequest, code_key, repeat_notice
from agent.report import yardstick
from core.settings import Settings
from evaluator.tasks import KernelTask
from evaluator.toolchain import baseline_note, competent_cflags

log = logging.getLogger(__name__)
SYSTEM = (
    "You are an expert in RISC-V Vector (RVV 1.0) kernel optimization for SpacemiT cores (X60, X100, A100). "
    "Reply with one C translation unit that defines exactly the requested function with the same signature, "
    "using <riscv_vector.h> intrinsics where useful. No main(), no I/O, no calls to other kernels. "
    'Answer as JSON: {"code": "<C source>", "cflags": ["optional extra compiler flags"], '
    '"explanation": "<one sentence>"} or as a single ```c fenced block.'
)
PROMPT_BUDGET_CHARS = 24_000
REPEAT_REASKS = 2  # a reply that repeats a tried candidate is answered "already tried" this many times


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
        """One candidate; every HTTP request made for it (retries, re-asks after repeats) is counted on it."""
        if self.usage.tokens >= self.settings.llm_token_budget:
            return Generated(error=f"LLM token budget of {self.settings.llm_token_budget} tokens is used up")
        messages = messages_for(req)
        before = (self.usage.calls, self.usage.tokens)
        gen = Generated()
        for _ in range(REPEAT_REASKS + 1):
            reply, error = self._complete(messages)
            gen = _candidate(reply, error)
            if gen.error or gen.key not in req.tried:
                break
            # The model repeated itself: say so in the same conversation and ask once more.
            messages += [
                {"role": "assistant", "content": reply or ""},
                {"role": "user", "content": repeat_notice(req.outcomes.get(gen.key))},
            ]
        gen.llm_calls, gen.llm_tokens = self.usage.calls - before[0], self.usage.tokens - before[1]
        return gen

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


def _candidate(reply: str | None, error: str | None) -> Generated:
    if error:
        return Generated(error=error)
    code, cflags, explanation, problem = parse_reply(reply or "")
    if problem:
        return Generated(error=problem)
    return Generated(code=code, cflags=cflags, key=code_key(code, cflags), description=explanation)


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


def messages_for(req: GenerationRequest) -> list[dict[str, str]]:
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": build_prompt(req)}]


def build_prompt(req: GenerationRequest, budget: int = PROMPT_BUDGET_CHARS) -> str:
    """Hot tier always (task, rules, target and timing, what to improve, the last attempt with its own
    diagnostic, the thought to apply); warm and cold tiers admitted in order while the budget allows."""
    ctx = req.context
    hot = [f"NOTE: {n}" for n in req.notes]
    hot += [
        _task_section(req.task),
        f"## Reference implementation (plain C)\n```c\n{req.task.reference_code.strip()}\n```",
        f"## Rules (a candidate breaking one is rejected unevaluated)\n{ctx.rules}" if ctx.rules else "",
        f"## Target\n{ctx.target_profile}\n\n## How candidates are timed\n{ctx.timing}",
        _improve_section(req),
        _last_attempt_section(req),
        "## Apply this optimization thought\n" + _thought_text(req.thought, full=True),
    ]
    warm = _warm_sections(req)
    cold = [_other_thoughts(req), ctx.rvv_reference if target_isa(req.target) == "rvv" else ""]
    out, used = [], 0
    for part in hot:
        if part:
            out.append(part)
            used += len(part)
    for part in warm + cold:
        if part and used + len(part) <= budget:
            out.append(part)
            used += len(part)
    out.append(
        "Write the complete optimized C file now: keep every output within the tolerance at every size "
        "(tails included), never read or write out of bounds, and make it different from the candidates above."
    )
    return "\n\n".join(out)


def _task_section(task: KernelTask) -> str:
    sizes = ", ".join(" ".join(f"{k}={v}" for k, v in s.items()) for s in task.sizes)
    bench = " ".join(f"{k}={v}" for k, v in task.bench_size.items())
    flops = task.flops_at()
    return (
        f"# Task: {task.name} ({task.operator}, {task.dtype})\n{task.description.strip()}\n"
        f"Signature: `{task.signature}`.\n"
        f"Checked for correctness at sizes: {sizes}. Timed at the bench size: {bench}"
        + (f" ({flops:,.0f} flop per call)" if flops else "")
        + f".\nTolerance: rtol={task.tolerance.rtol}, atol={task.tolerance.atol} against the reference."
        + "\nSpeedups below are over the competent baseline (the reference at -O3 "
        + " ".join(competent_cflags(task))
        + "), with the one over plain -O3 beside it."
        + (f" Note: {baseline_note(task)}." if baseline_note(task) else "")
        + (f"\nNotes: {_notes(task)}" if _notes(task) else "")
    )


def _notes(task: KernelTask) -> str:
    """The task's notes without their title line (the task name is already the section title)."""
    lines = [ln for ln in task.notes.strip().splitlines() if not ln.startswith("# ")]
    return "\n".join(lines).strip()


def _speed(competent: float | None, plain: float | None) -> str:
    """The run's yardstick (agent.report.yardstick): over the competent baseline first, plain -O3 beside it."""
    return yardstick(competent, plain or 1.0)


def _improve_section(req: GenerationRequest) -> str:
    p, best = req.parent, req.run_best
    parts = []
    if p.code:
        parts.append(
            f"## Improve this candidate ({_speed(p.competent_speedup, p.speedup)} at the bench size)\n"
            f"```c\n{p.code.strip()}\n```\ncflags: {' '.join(p.cflags) or '(none)'}"
            + (f"\nEvaluator's report on this code: {p.feedback.strip()}" if p.feedback.strip() else "")
        )
    else:
        parts.append("## Improve on the reference above (1.00x over -O3 by definition)")
    if best and best.code and best.experience_id != p.experience_id:
        parts.append(
            f"Best of this run so far (another direction): {_speed(best.competent_speedup, best.speedup)}\n"
            f"```c\n{best.code.strip()}\n```\n"
            f"cflags: {' '.join(best.cflags) or '(none)'}"
        )
    return "\n\n".join(parts)


def _last_attempt_section(req: GenerationRequest) -> str:
    """The latest attempt in this direction when it is not the candidate shown above, with ITS diagnostic."""
    last = req.last_attempt
    if last is None or not last.code or last.experience_id == req.parent.experience_id:
        return ""
    result = (
        f"{_speed(last.competent_speedup, last.speedup)}, not better" if last.speedup else (last.status or "failed")
    )
    return (
        f"## Your last attempt in this direction ({result})\n```c\n{last.code.strip()}\n```\n"
        f"cflags: {' '.join(last.cflags) or '(none)'}\nDiagnostic for this code:\n{last.feedback.strip() or '(none)'}"
    )


def _thought_text(t: ThoughtCard, full: bool) -> str:
    head = f"{t.title} [{t.technique.value}, {t.operator}, {t.isa}]"
    if not full:
        return f"- {head}: {t.description[:200]}"
    lines = [head, t.description.strip()]
    if t.example_code.strip():
        label = "The change that carries it (from the mined commit)"
        if t.example_problems:  # the evaluator would reject these lines: the idea transfers, the text does not
            label += ", NOT allowed as written in a candidate (" + "; ".join(t.example_problems) + ")"
        lines.append(f"{label}:\n```\n{t.example_code.strip()}\n```")
    if t.rvv_equivalents:
        lines.append("RVV equivalents of its intrinsics: " + "; ".join(t.rvv_equivalents[:12]))
    if t.claims:
        lines.append("Claimed by its commits: " + "; ".join(t.claims[:3]))
    lines.append(_effect_text(t))
    return "\n".join(lines)


def _effect_text(t: ThoughtCard) -> str:
    e = t.effect
    if not e or not e.get("trials"):
        return "Measured on this target: not tried yet."
    if not e["correct"]:
        return f"Measured on this target: tried {e['trials']} times, none correct."
    return (
        f"Measured on this target: tried {e['trials']} times, {e['correct']} correct, {e['successes']} improved "
        f"on their parent; mean speedup over plain -O3 {e['mean_speedup']:.2f}x, mean gain over the parent "
        f"{e['mean_gain']:.2f}x."
    )


def _warm_sections(req: GenerationRequest) -> list[str]:
    ctx = req.context
    out = []
    if ctx.same_task and ctx.same_task[0].code and ctx.same_task[0].id != req.parent.experience_id:
        p = ctx.same_task[0]
        out.append(
            f"## Best earlier result for this task on this target: {_speed(p.competent_speedup, p.speedup)}\n"
            f"```c\n{p.code.strip()}\n```\n"
            f"cflags: {' '.join(p.cflags) or '(none)'}"
        )
    for p in ctx.similar_tasks[:3]:
        out.append(f"Best earlier result for task {p.task_id} on this target: {_speed(p.competent_speedup, p.speedup)}")
    return out


def _other_thoughts(req: GenerationRequest) -> str:
    for d in req.context.directions:
        if any(t.id == req.thought.id for t in d.thoughts):
            others = [_thought_text(t, full=False) for t in d.thoughts if t.id != req.thought.id][:5]
            if others:
                return f"## Related thoughts under the idea '{d.title}'\n{d.principle}\n" + "\n".join(others)
    return ""
