"""Request and response shapes of the HTTP API (what /openapi.json publishes)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agent.types import EventKind
from knowledge.models import RunStatus
from knowledge.retrieval import SearchHit


class ErrorBody(BaseModel):
    code: str = Field(description="stable machine-readable code, e.g. not_found, write_refused")
    message: str = Field(description="what is wrong, for a person")
    hint: str | None = Field(None, description="how to fix it, when known")


class ErrorResponse(BaseModel):
    error: ErrorBody


# -- health ---------------------------------------------------------------------------------------------


class Health(BaseModel):
    status: Literal["ok"]
    neo4j_uri: str
    neo4j_version: str
    schema_version: int
    index_size: int = Field(description="vectors in the in-memory FAISS index")
    index_generation: int
    nodes: dict[str, int]
    agent: bool = Field(description="whether the agent is installed, so runs can start")
    active_runs: int


class WhoAmI(BaseModel):
    role: Literal["reader", "analyst", "operator"]
    key_id: str = Field(description="key- and 10 hex digits of the key's SHA-256; never the key")


class TechniqueEffect(BaseModel):
    target: str
    technique: str
    trials: int
    mean_competent_speedup: float | None = Field(
        None, description="geometric mean speedup over the competent baseline, where measured"
    )
    mean_speedup: float = Field(description="geometric mean of measured speedups over plain -O3, over the trials")
    thoughts: int


class Overview(BaseModel):
    nodes: dict[str, int]
    recent_runs: list[dict[str, Any]]
    top_techniques: list[TechniqueEffect] = Field(description="per target, up to 5 techniques, best first")


# -- knowledge ------------------------------------------------------------------------------------------


class SearchResponse(BaseModel):
    query: str
    k: int
    filters: dict[str, str]
    hits: list[SearchHit]


class CommitOut(BaseModel):
    sha: str
    repo: str
    title: str
    authored_at: str | None = None
    isas: list[str] = []
    operators: list[str] = []
    perf_claims: list[float] = []
    url: str | None = None


class EffectOut(BaseModel):
    """Measured effect of a thought on one target (the EFFECT_ON relationship)."""

    target: str
    trials: int = Field(description="experiences that applied the thought on the target, any status")
    correct: int = Field(description="those that compiled and passed the checks")
    successes: int = Field(description="correct and faster than their parent")
    mean_competent_speedup: float | None = Field(
        None, description="geometric mean speedup over the competent baseline (what headlines quote)"
    )
    sum_log_speedup: float = Field(description="sum of ln(speedup over the task's plain baseline), correct ones")
    sum_log_gain: float = Field(description="sum of ln(speedup / parent speedup), correct ones")
    mean_speedup: float | None = Field(
        description="geometric mean speedup over plain -O3: exp(sum_log_speedup/correct)"
    )
    mean_gain: float | None = Field(description="geometric mean gain over the parent: exp(sum_log_gain / correct)")
    success_rate: float | None = Field(description="successes / trials")
    pass_rate: float | None = Field(description="correct / trials")
    competent_correct: int = Field(0, description="correct ones with a competent baseline")
    sum_log_competent: float = Field(0.0, description="sum of ln(speedup over the competent baseline)")


class ExperienceSummary(BaseModel):
    model_config = ConfigDict(extra="ignore")
    id: str
    task_id: str
    target_key: str
    run_id: str | None = None
    parent_id: str | None = None
    direction: str | None = None
    step: int = 0
    status: str
    speedup: float | None = Field(None, description="over the plain baseline: the reference at clang -O3")
    competent_speedup: float | None = Field(
        None, description="over the competent baseline: the reference with the FP flags its tolerance allows"
    )
    speedup_over_library: float | None = Field(
        None, description="over a built library's own routine, where one was configured (docs/EVALUATION.md)"
    )
    library_label: str | None = Field(None, description="that library build: library@commit")
    measurement: str = ""
    generator: str = ""
    summary: str = ""
    created_at: str | None = None


class ExperienceDetail(ExperienceSummary):
    code: str = ""
    cflags: list[str] = []
    feedback: str = ""
    thought_ids: list[str] = []
    baseline_cycles: float | None = None
    competent_cycles: float | None = None
    library_cycles: float | None = None
    candidate_cycles: float | None = None
    seconds: float | None = None
    max_error: float | None = None
    thoughts: list[dict[str, Any]] = []


class ExperiencePage(BaseModel):
    items: list[ExperienceSummary]
    next_cursor: str | None = Field(None, description="pass as `cursor` for the next page; null at the end")


class ThoughtSummary(BaseModel):
    id: str
    title: str
    technique: str
    isa: str
    operator: str
    evidence_commits: int = 0
    prior_speedup: float | None = None
    trials: int = 0
    correct: int = 0
    successes: int = 0


class IdeaDetail(BaseModel):
    id: str
    title: str
    principle: str = ""
    techniques: list[str] = []
    source: str = ""
    thoughts: list[ThoughtSummary]


class IdeaRef(BaseModel):
    id: str
    title: str


class ThoughtDetail(BaseModel):
    id: str
    idea_id: str
    title: str
    description: str = ""
    example_code: str = ""
    technique: str
    isa: str
    operator: str
    evidence_commits: int = 0
    prior_speedup: float | None = None
    source: str = ""
    idea: IdeaRef | None = None
    evidence: list[CommitOut]
    effects: list[EffectOut]
    experiences: list[ExperienceSummary]


class TargetOut(BaseModel):
    key: str
    name: str
    description: str
    arch: str
    march: str
    vlen: int
    dlen: int
    clock_ghz: float
    l1d_kb: int
    l2_kb: int
    cost_model: str
    experiences: int = Field(0, description="experiences recorded on this target")


class TaskOut(BaseModel):
    name: str
    category: str
    operator: str
    dtype: str
    description: str
    signature: str
    bench_size: dict[str, int]
    experiences: int = 0
    best_speedup: float | None = Field(None, description="over the plain baseline (clang -O3)")
    best_competent_speedup: float | None = Field(None, description="over the competent baseline")


class Vocabulary(BaseModel):
    kinds: list[str]
    isas: list[str]
    operators: list[str]
    techniques: list[str]
    statuses: list[str]
    run_statuses: list[str]


# -- runs -----------------------------------------------------------------------------------------------


class RunAccepted(BaseModel):
    id: str
    status: RunStatus
    url: str
    events_url: str


class RunBest(BaseModel):
    experience_id: str
    speedup: float | None
    competent_speedup: float | None = None
    speedup_over_library: float | None = None
    library_label: str | None = None
    status: str
    summary: str = ""


class RunDetail(BaseModel):
    id: str
    task_id: str
    target_key: str
    budget: int
    directions: int
    generator: str
    seed: int
    status: RunStatus
    best_experience_id: str | None = None
    best_speedup: float | None = Field(None, description="over the plain baseline (clang -O3)")
    best_competent_speedup: float | None = Field(None, description="over the competent baseline")
    best_speedup_over_library: float | None = Field(
        None, description="over a built library's own routine, where one was configured (docs/EVALUATION.md)"
    )
    library_label: str | None = Field(None, description="that library build: library@commit")
    baseline_note: str | None = Field(None, description="why a speedup over this task's baselines flatters")
    evaluations: int = 0
    llm_calls: int = 0
    error: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    lease_owner: str | None = Field(None, description="the process executing the run (host:pid:nonce), if any")
    started_by: str | None = Field(None, description="key id (a hash prefix, never the key) that started it")
    resumed_by: str | None = Field(None, description="key id that last resumed it")
    cancelled_by: str | None = Field(None, description="key id that cancelled it")
    runner: str | None = Field(None, description="where candidates ran: qemu, ssh or native (from the run's settings)")
    bootstrap_id: str | None = Field(None, description="the bootstrap this run belongs to, if any")
    active: bool = Field(description="executing or queued in this service process")
    history: list[float | None] = Field([], description="best speedup after each evaluation")
    best: RunBest | None = None
    lineage: list[dict[str, Any]] = []


class RunList(BaseModel):
    items: list[RunDetail]


class CancelAccepted(BaseModel):
    id: str
    status: RunStatus
    message: str


class EventOut(BaseModel):
    """One server-sent event's data (agent.types.ProgressEvent)."""

    run_id: str
    kind: EventKind
    direction: str | None = None
    evaluations: int = 0
    budget: int = 0
    best_speedup: float | None = None
    best_competent_speedup: float | None = None
    status: str | None = None
    speedup: float | None = None
    competent_speedup: float | None = None
    experience_id: str | None = None
    message: str = ""
    at: datetime


# -- analysts' Cypher -----------------------------------------------------------------------------------


class QueryParamOut(BaseModel):
    name: str
    type: Literal["string", "int", "float", "bool"]
    default: Any = None
    required: bool
    description: str


class QueryInfo(BaseModel):
    name: str
    summary: str
    description: str
    params: list[QueryParamOut]
    cypher: str


class QueryList(BaseModel):
    items: list[QueryInfo]


class QueryRunRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    params: dict[str, Any] = Field(default_factory=dict, description="values for the query's @param names")


class CypherRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    query: str = Field(min_length=1, max_length=20_000, description="one read-only Cypher statement")
    params: dict[str, Any] = Field(default_factory=dict)


class QueryResultOut(BaseModel):
    columns: list[str]
    rows: list[dict[str, Any]]
    row_count: int
    truncated: bool = Field(description="true when more rows existed than the row cap or the byte cap allows")
    row_cap: int
    byte_cap: int = Field(description="the answer's rows stop before their JSON exceeds this many bytes")
    elapsed_ms: float


class EdgesRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    ids: list[Annotated[str, Field(min_length=1, max_length=200)]] = Field(
        max_length=300, description="element ids (`_id`) of the nodes an answer returned"
    )
    limit: int = Field(1000, ge=1, le=2000, description="relationships answered at most")


class Subgraph(BaseModel):
    nodes: list[dict[str, Any]] = Field(description="nodes as /cypher answers them (`_id`, `_labels`, properties)")
    relationships: list[dict[str, Any]] = Field(description="`_id`, `_type`, `_start`, `_end` and properties")
    truncated: bool = Field(description="true when more relationships existed than the limit")


class GraphSchema(BaseModel):
    labels: dict[str, int] = Field(description="label -> number of nodes")
    relationship_types: dict[str, int] = Field(description="type -> number of relationships")
    property_keys: list[str] = Field(description="every property key in use (embeddings left out), at most 1000")


class PlanRequest(CypherRequest):
    profile: bool = Field(
        False,
        description="run the statement under PROFILE (after the same guard and within the same limits as POST "
        "/cypher) and answer the measured plan; false: EXPLAIN, nothing runs",
    )


class PlanOut(BaseModel):
    plan: dict[str, Any] = Field(
        description="the root operator: `operator`, `details`, `estimated_rows`, `identifiers`, `children`; "
        "profiled, also `rows`, `db_hits`, `page_cache_hits`, `page_cache_misses`, `memory_bytes`, `time_ms` "
        "(null where Neo4j does not report them) and `slowest: true` on the operator with the most db hits"
    )
    profiled: bool = Field(False, description="true when the statement ran under PROFILE")
    row_count: int | None = Field(None, description="profiled: the rows the statement answered")
    elapsed_ms: float | None = Field(None, description="profiled: the guarded run's wall time, plan check included")


class Artefact(BaseModel):
    name: str = Field(description="report.md, best.c, speedup.png or run.json")
    bytes: int
    url: str


class ArtefactList(BaseModel):
    run_id: str
    items: list[Artefact]
    candidates: int = Field(description="candidate files kept under candidates/ (GET .../artefacts/candidates/NNN.c)")
