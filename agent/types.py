"""The agent's public shapes: what a caller asks for, what it hears while a run goes, what it gets back."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from knowledge.models import Experience, Run, utcnow

GeneratorChoice = Literal["auto", "llm", "offline"]
RunnerChoice = Literal["qemu", "ssh", "native"]
EventKind = Literal["started", "evaluation", "improved", "finished", "failed", "cancelled"]


class RunRequest(BaseModel):
    task: str = Field(min_length=1, description="suite task name or a task directory path")
    target: str = "k1-x60"
    budget: int = Field(32, ge=1, le=2000, description="evaluations")
    directions: int = Field(4, ge=1, le=16)
    generator: GeneratorChoice = "auto"
    seed: int = 0
    runner: RunnerChoice | None = Field(None, description="qemu | ssh | native; default from settings")


class ProgressEvent(BaseModel):
    run_id: str
    kind: EventKind
    direction: str | None = None
    evaluations: int = 0
    budget: int = 0
    best_speedup: float | None = None  # over the plain baseline (clang -O3)
    best_competent_speedup: float | None = None  # the same kernel over the competent baseline
    status: str | None = None  # status of the candidate just evaluated
    speedup: float | None = None
    competent_speedup: float | None = None
    experience_id: str | None = None
    message: str = ""
    at: datetime = Field(default_factory=utcnow)


class RunOutcome(BaseModel):
    run: Run
    best: Experience | None = None
    lineage: list[dict[str, Any]] = []  # ideas/thoughts/commits behind the best kernel, root first
    history: list[float | None] = []  # best speedup after each evaluation
    evaluated: list[float | None] = []  # each evaluation's own speedup (None: failed)
    candidates: list[dict[str, Any]] = []  # every evaluated candidate: change from parent, cycles, status, reason
    artifacts: dict[str, str] = {}  # code, plot, report -> paths
    seconds: float = 0.0
