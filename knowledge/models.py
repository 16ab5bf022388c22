"""Typed records for every node and relationship of the experience graph (docs/ARCHITECTURE.md, "The graph").

These are the only shapes the store reads and writes. Field names equal Neo4j property names; nested
structures are JSON strings because Neo4j properties cannot hold maps.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any, ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from core.errors import InvalidInput
from knowledge.taxonomy import Isa, Operator, Technique

Key = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=200)]
Sha = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{7,64}$")]


def utcnow() -> datetime:
    return datetime.now(UTC)


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class Node(BaseModel):
    """A graph node. `label` and `key_field` tell the store how to MERGE it."""

    model_config = ConfigDict(extra="forbid", use_enum_values=True)
    label: ClassVar[str]
    key_field: ClassVar[str]
    # Text embedded for retrieval; None means the node is not embedded.
    embed_fields: ClassVar[tuple[str, ...]] = ()

    def key_value(self) -> str:
        return str(getattr(self, self.key_field))

    def embedding_text(self) -> str | None:
        if not self.embed_fields:
            return None
        return "\n".join(str(getattr(self, f) or "") for f in self.embed_fields).strip()

    def properties(self) -> dict[str, Any]:
        return self.model_dump(mode="python")


class Repository(Node):
    label: ClassVar[str] = "Repository"
    key_field: ClassVar[str] = "name"
    name: Key
    url: str | None = None
    library: str | None = None  # openblas | ggml | onnxruntime | generic
    last_mined_head: str | None = None  # the whole history up to this commit is mined
    mined_ranges: list[str] = []  # "<tip>^<base>": ranges mined by --since beyond that history
    mined_at: datetime | None = None
    commits_read: int = Field(0, ge=0)


class Commit(Node):
    label: ClassVar[str] = "Commit"
    key_field: ClassVar[str] = "sha"
    embed_fields: ClassVar[tuple[str, ...]] = ()
    sha: Sha
    repo: Key
    title: str
    message: str = ""
    author: str = ""
    authored_at: datetime | None = None
    files: list[str] = []
    insertions: int = Field(0, ge=0)
    deletions: int = Field(0, ge=0)
    isas: list[Isa] = []
    operators: list[Operator] = []
    techniques: list[Technique] = []
    perf_claims: list[float] = []  # believable speedup factors parsed from the message (1.35 for "+35%")
    claim_spans: list[str] = []  # the message text each perf_claims figure was parsed from (same order)
    flagged_claims: list[str] = []  # figures not believed: "86x from '...' [implausible: ...]"
    score: float = 0.0  # classification score, >= threshold means optimization
    reasons: list[str] = []
    is_optimization: bool = False


class Idea(Node):
    """A general principle, e.g. "keep more independent accumulators in flight"."""

    label: ClassVar[str] = "Idea"
    key_field: ClassVar[str] = "id"
    embed_fields: ClassVar[tuple[str, ...]] = ("title", "principle")
    id: Key
    title: str = Field(min_length=1)
    principle: str = ""  # the statement
    applies_when: str = ""  # operators, ISAs and the evidence it rests on
    techniques: list[Technique] = []
    evidence_changes: int = Field(0, ge=0)  # distinct changes (commits; a mirrored PR once) behind its thoughts
    source: str = "mined"  # mined (grouped from thoughts) | starter (hand-written) | llm


class Thought(Node):
    """An actionable technique under an idea, with its mined prior."""

    label: ClassVar[str] = "Thought"
    key_field: ClassVar[str] = "id"
    embed_fields: ClassVar[tuple[str, ...]] = ("title", "description", "identifiers")
    id: Key
    idea_id: Key
    title: str = Field(min_length=1)
    description: str = ""
    example_code: str = ""
    identifiers: str = ""  # intrinsics and identifiers from the example, for full-text search
    technique: Technique
    isa: Isa = Isa.GENERIC
    operator: Operator = Operator.OTHER
    evidence_commits: int = Field(0, ge=0)
    prior_speedup: float | None = Field(None, gt=0)  # geometric mean of the believable parsed claims, when any
    claims: list[str] = []  # each believable claim with the text it was parsed from and its commit
    rvv_equivalents: list[str] = []  # "vfmaq_f32 -> __riscv_vfmacc_vv_f32m1" for a thought on another ISA
    change: str = ""  # the change it comes from: a commit, or a pull request mirrored across repositories
    repos: list[str] = []  # repositories whose commits evidence it
    source: str = "mined"


class Target(Node):
    label: ClassVar[str] = "Target"
    key_field: ClassVar[str] = "key"
    key: Key
    name: str = ""
    isa: str = ""
    vlen: int | None = Field(None, ge=0)
    dlen: int | None = Field(None, ge=0)
    clock_ghz: float | None = Field(None, gt=0)
    description: str = ""


class Task(Node):
    label: ClassVar[str] = "Task"
    key_field: ClassVar[str] = "id"
    embed_fields: ClassVar[tuple[str, ...]] = ("name", "description")
    id: Key
    name: str
    category: str = ""
    operator: Operator = Operator.OTHER
    dtype: str = ""
    shapes: str = "[]"  # JSON
    description: str = ""


class ExperienceStatus(StrEnum):
    OK = "ok"
    WRONG = "wrong"
    COMPILE_ERROR = "compile_error"
    TIMEOUT = "timeout"
    CRASHED = "crashed"
    REJECTED = "rejected"  # failed the static safety check
    GENERATION_ERROR = "generation_error"  # the generator produced nothing usable
    # Added with the trusted evaluation (docs/EVALUATION.md); stored data with the values above stays valid.
    STATE_ACROSS_CALLS = "state_across_calls"  # right alone, wrong after other calls in the same process
    INVALID_OUTPUT = "invalid_output"  # printed, forged or cut short the result stream
    SANDBOX_VIOLATION = "sandbox_violation"  # touched a guard page or wrote a read-only input
    MEMORY = "memory"  # hit the memory limit
    GENERALIZATION_FAILED = "generalization_failed"  # wrong on held-out sizes and seeds
    # Added with issue 20: what stopped the compile (stored data with the values above stays valid).
    COMPILER_CRASH = "compiler_crash"  # the compiler or linker crashed on the candidate
    COMPILE_TIMEOUT = "compile_timeout"  # compiling took longer than the candidate's compile time limit
    TOO_LARGE = "too_large"  # past a size limit: compile memory, object file, loaded code and data
    MODEL_ERROR = "model_error"  # modeled below the model's own lower bound: the cost model's fault (issue 19)


class Experience(Node):
    """One evaluated candidate kernel."""

    label: ClassVar[str] = "Experience"
    key_field: ClassVar[str] = "id"
    embed_fields: ClassVar[tuple[str, ...]] = ("summary",)
    id: Key
    task_id: Key
    target_key: Key
    run_id: Key | None = None
    parent_id: Key | None = None
    thought_ids: list[str] = []
    direction: str | None = None  # idea id of the direction that produced it
    step: int = Field(0, ge=0)
    code: str = ""
    code_hash: str = ""
    cflags: list[str] = []
    variant: str = "{}"  # JSON: the offline generator's family and knob settings, when it made the code
    status: ExperienceStatus
    speedup: float | None = Field(None, ge=0)  # over the plain baseline (the reference at clang -O3)
    # Over the competent baseline (the reference with the FP flags its tolerance allows; docs/TASKS.md).
    competent_speedup: float | None = Field(None, ge=0)
    # Over a built library's own routine, where one was configured (docs/EVALUATION.md, "The library as a
    # baseline"): the speedup, the library's cycles and which build ("openblas@0123456789").
    speedup_over_library: float | None = Field(None, ge=0)
    library_cycles: float | None = None
    library_label: str | None = None
    baseline_cycles: float | None = None
    competent_cycles: float | None = None
    candidate_cycles: float | None = None
    seconds: float | None = None
    max_error: float | None = None
    measurement: str = "modeled"  # modeled | measured | native
    feedback: str = ""
    generator: str = "offline"
    summary: str = ""  # one line, embedded: what was tried and what happened
    created_at: datetime = Field(default_factory=utcnow)

    @property
    def log_speedup(self) -> float | None:
        return math.log(self.speedup) if self.speedup else None


class RunStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"
    INTERRUPTED = "interrupted"


class Run(Node):
    label: ClassVar[str] = "Run"
    key_field: ClassVar[str] = "id"
    id: Key
    task_id: Key
    target_key: Key
    budget: int = Field(ge=1)
    directions: int = Field(1, ge=1)
    generator: str = "offline"
    seed: int = 0
    settings: str = "{}"  # JSON
    status: RunStatus = RunStatus.QUEUED
    best_experience_id: str | None = None
    best_speedup: float | None = None
    best_competent_speedup: float | None = None
    best_speedup_over_library: float | None = None  # of the best kernel, where a library was configured
    library_label: str | None = None  # that library build, "openblas@0123456789"
    baseline_note: str | None = None  # why a speedup over this task's baselines flatters (libm calls, ...)
    evaluations: int = 0
    llm_calls: int = 0
    llm_tokens: int = 0
    error: str | None = None
    started_at: datetime = Field(default_factory=utcnow)
    finished_at: datetime | None = None
    bootstrap_id: str | None = None  # the bootstrap (suite-wide first pass) this run belongs to
    # Which process executes the run (agent/lease.py): at most one holds an unexpired lease.
    lease_owner: str | None = None
    lease_until: datetime | None = None
    # Audit: the API key ids (never the keys) that started, resumed and cancelled the run.
    started_by: str | None = None
    resumed_by: str | None = None
    cancelled_by: str | None = None


class Bootstrap(Node):
    """A suite-wide first pass: one run per (task, target) pair, resumable by its id."""

    label: ClassVar[str] = "Bootstrap"
    key_field: ClassVar[str] = "id"
    id: Key
    tasks: str  # JSON list of task names, in plan order
    targets: str  # JSON list of target keys
    budget: int = Field(ge=1)
    directions: int = Field(1, ge=1)
    generator: str = "offline"
    runner: str | None = None
    seed: int = 0
    status: RunStatus = RunStatus.QUEUED
    executor: str = ""  # where its evaluations run now (the latest execution), as the executor describes itself
    executors: list[str] = Field(default_factory=list)  # one line per execution: the first, then each resume
    started_at: datetime = Field(default_factory=utcnow)
    finished_at: datetime | None = None


class RelType(StrEnum):
    IN_REPO = "IN_REPO"
    HAS_THOUGHT = "HAS_THOUGHT"
    EVIDENCED_BY = "EVIDENCED_BY"
    APPLIED = "APPLIED"
    FOR_TASK = "FOR_TASK"
    ON_TARGET = "ON_TARGET"
    DERIVED_FROM = "DERIVED_FROM"
    IN_RUN = "IN_RUN"
    SIMILAR_TO = "SIMILAR_TO"
    EFFECT_ON = "EFFECT_ON"  # (Thought)-[:EFFECT_ON {EFFECT_PROPERTIES}]->(Target): see effect_summary
    # (Experience)-[:TRANSFERS_TO {decision, applied, rescaled, via, ...}]->(Experience): a decision measured on
    # one target or task, re-rendered and measured on another (agent/transfer.py, docs/CYPHER.md)
    TRANSFERS_TO = "TRANSFERS_TO"


EFFECT_PROPERTIES = (
    "trials",
    "correct",
    "successes",
    "sum_log_speedup",
    "sum_log_gain",
    "competent_correct",
    "sum_log_competent",
)


def effect_summary(e: dict[str, Any] | None) -> dict[str, Any]:
    """The one meaning of a measured effect (docs/CYPHER.md, "Measured effect"), from EFFECT_ON's counters.

    trials: experiences that applied the thought on the target, whatever their status; correct: those that
    passed; successes: correct and faster than their parent (agent.posterior.is_success). Speedups are
    averaged over the correct ones only (a failure has no speedup): mean_speedup is the geometric mean of
    the speedup over the task's plain baseline, mean_gain that of speedup / parent speedup (what the thought
    itself added), mean_competent_speedup that of the speedup over the competent baseline, over the
    competent_correct ones that have it (the figure surfaces lead with; None on edges recorded before it).
    """
    e = e or {}
    trials, correct, successes = (int(e.get(k) or 0) for k in ("trials", "correct", "successes"))
    competent = int(e.get("competent_correct") or 0)
    return {
        "trials": trials,
        "correct": correct,
        "successes": successes,
        "sum_log_speedup": float(e.get("sum_log_speedup") or 0.0),
        "sum_log_gain": float(e.get("sum_log_gain") or 0.0),
        "mean_speedup": math.exp(float(e.get("sum_log_speedup") or 0.0) / correct) if correct else None,
        "mean_gain": math.exp(float(e.get("sum_log_gain") or 0.0) / correct) if correct else None,
        "competent_correct": competent,
        "sum_log_competent": float(e.get("sum_log_competent") or 0.0),
        "mean_competent_speedup": (
            math.exp(float(e.get("sum_log_competent") or 0.0) / competent) if competent else None
        ),
        "success_rate": successes / trials if trials else None,
        "pass_rate": correct / trials if trials else None,
    }


class Relationship(BaseModel):
    """An edge of the closed set: (start_label {start_key}) -[type {props}]-> (end_label {end_key})."""

    model_config = ConfigDict(extra="forbid", use_enum_values=True)
    type: RelType
    start_label: str
    start_key: Key
    end_label: str
    end_key: Key
    props: dict[str, float | int | str | bool] = {}


ALLOWED_RELATIONSHIPS: dict[RelType, tuple[str, str]] = {
    RelType.IN_REPO: ("Commit", "Repository"),
    RelType.HAS_THOUGHT: ("Idea", "Thought"),
    RelType.EVIDENCED_BY: ("Thought", "Commit"),
    RelType.APPLIED: ("Experience", "Thought"),
    RelType.FOR_TASK: ("Experience", "Task"),
    RelType.ON_TARGET: ("Experience", "Target"),
    RelType.DERIVED_FROM: ("Experience", "Experience"),
    RelType.IN_RUN: ("Experience", "Run"),
    RelType.EFFECT_ON: ("Thought", "Target"),
    RelType.TRANSFERS_TO: ("Experience", "Experience"),
}
SIMILAR_LABELS = {"Target", "Task"}

NODE_TYPES: dict[str, type[Node]] = {
    m.label: m for m in (Repository, Commit, Idea, Thought, Target, Task, Experience, Run, Bootstrap)
}

N = TypeVar("N", bound=BaseModel)


def validate_records(model: type[N], rows: Iterable[dict[str, Any]], source: str) -> list[N]:
    """Validate raw rows, raising one InvalidInput that names the source, the row and the field."""
    out: list[N] = []
    for i, row in enumerate(rows):
        try:
            out.append(model.model_validate(row))
        except ValidationError as e:
            err = e.errors()[0]
            field = ".".join(str(p) for p in err["loc"]) or "<record>"
            raise InvalidInput(
                f"{source}: record {i}: field {field!r}: {err['msg']}",
                f"fix the {model.__name__} record and retry; nothing was written",
            ) from None
    return out
