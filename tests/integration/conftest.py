"""Fixtures for the HTTP API tests (owner: service/api): a seeded real graph, the real app, a live server.

    api_graph     module: the test Neo4j emptied and seeded with a small, known graph (seed_api_graph)
    api_settings  module: Settings on that Neo4j with the test API keys and a private home
    api_app       module: the real app (create_app) with the real agent.optimizer.Optimizer
    client        module: a TestClient on api_app (no key set: tests pass headers)
    live_api      module: the same kind of app served by uvicorn on 127.0.0.1:<free port>; yields base URL

StandInOptimizer is honestly limited: it implements the agent's Optimizer API (create_run, execute,
unfinished_runs, get_run, outcome) by recording synthetic experiences at a fixed pace, and compiles and
evaluates nothing. Only test_api_runs.py uses it, for what the real agent cannot do on demand: a chosen
pace, a crash, exact speedups. The e2e page test runs the real Optimizer (real clang + qemu evaluation).
"""

from __future__ import annotations

import math
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from agent.types import ProgressEvent, RunOutcome, RunRequest
from core.errors import NotFound
from core.settings import Settings
from knowledge.models import (
    Commit,
    Experience,
    ExperienceStatus,
    Idea,
    Node,
    Relationship,
    RelType,
    Repository,
    Run,
    RunStatus,
    Target,
    Task,
    Thought,
)
from knowledge.store import GraphStore
from service.bootstrap import Container

READER_KEY = "reader-key-0123456789"
ANALYST_KEY = "analyst-key-0123456789"
OPERATOR_KEY = "operator-key-0123456789"
API_KEYS = {READER_KEY: "reader", ANALYST_KEY: "analyst", OPERATOR_KEY: "operator"}
READER = {"X-API-Key": READER_KEY}
ANALYST = {"X-API-Key": ANALYST_KEY}
OPERATOR = {"Authorization": f"Bearer {OPERATOR_KEY}"}
SEED_RUN = "run-seed-1"
PAGED_EXPERIENCES = 25  # sgemm_64 experiences created only to exercise pagination


# -- the seed graph -------------------------------------------------------------------------------------


def _rel(t: RelType, sl: str, sk: str, el: str, ek: str, **props: Any) -> Relationship:
    return Relationship(type=t, start_label=sl, start_key=sk, end_label=el, end_key=ek, props=props)


def _effect(thought: str, target: str, speedups: list[float]) -> Relationship:
    return _rel(
        RelType.EFFECT_ON,
        "Thought",
        thought,
        "Target",
        target,
        trials=len(speedups),
        correct=len(speedups),
        successes=sum(1 for s in speedups if s > 1.0),
        # every seeded trial improved on the reference itself: gain over the parent equals the speedup
        sum_log_speedup=sum(math.log(s) for s in speedups),
        sum_log_gain=sum(math.log(s) for s in speedups),
    )


def seed_nodes() -> tuple[list[Node], list[Relationship]]:
    """A small graph whose answers the tests know: ideas, thoughts, commits, targets, tasks, a run."""
    nodes: list[Node] = [
        Repository(name="OpenBLAS", url="https://github.com/OpenMathLib/OpenBLAS", library="openblas"),
        Repository(name="ggml", url="https://github.com/ggml-org/ggml", library="ggml"),
        Commit(
            sha="a1" * 20,
            repo="OpenBLAS",
            title="RISC-V: sgemv_n with LMUL=4 RVV kernel, 1.6x",
            isas=["rvv"],
            operators=["gemv"],
            perf_claims=[1.6],
            authored_at=datetime(2023, 5, 2, tzinfo=UTC),
            is_optimization=True,
            score=0.9,
        ),
        Commit(
            sha="b2" * 20,
            repo="OpenBLAS",
            title="RISC-V: dot kernel with four vector accumulators",
            isas=["rvv"],
            operators=["dot"],
            perf_claims=[1.3],
            authored_at=datetime(2024, 1, 9, tzinfo=UTC),
            is_optimization=True,
            score=0.8,
        ),
        Commit(
            sha="c3" * 20,
            repo="OpenBLAS",
            title="Haswell: sgemm 8x6 register blocking",
            isas=["avx2"],
            operators=["gemm"],
            perf_claims=[2.0],
            authored_at=datetime(2016, 3, 1, tzinfo=UTC),
            is_optimization=True,
            score=0.9,
        ),
        Commit(
            sha="d4" * 20,
            repo="ggml",
            title="ggml: rvv q4_0 dot with widening multiply",
            isas=["rvv"],
            operators=["quant_dot"],
            perf_claims=[],
            authored_at=datetime(2024, 6, 1, tzinfo=UTC),
            is_optimization=True,
            score=0.7,
        ),
        Idea(
            id="idea-accumulators",
            title="Keep more independent accumulators in flight",
            principle="Break the loop-carried dependency of a reduction so FMA latency is hidden",
            techniques=["multi_accumulator"],
        ),
        Idea(
            id="idea-lmul",
            title="Match the vector register grouping to the machine",
            principle="Choose LMUL so each instruction covers enough elements without spilling",
            techniques=["vector_length"],
        ),
        Idea(
            id="idea-blocking",
            title="Block the computation in registers",
            principle="Reuse loaded values from registers across several outputs",
            techniques=["register_blocking"],
        ),
        Thought(
            id="t-multi-acc-dot",
            idea_id="idea-accumulators",
            title="Four vfmacc accumulators for dot products",
            description="Accumulate into four vector registers and reduce once with vfredusum at the end",
            example_code="acc0 = __riscv_vfmacc_vv_f32m1(acc0, a0, b0, vl);",
            identifiers="vfmacc vfredusum",
            technique="multi_accumulator",
            isa="rvv",
            operator="dot",
            evidence_commits=1,
            prior_speedup=1.3,
        ),
        Thought(
            id="t-lmul-gemv",
            idea_id="idea-lmul",
            title="LMUL=4 row sweep for gemv",
            description="Process a column block with e32m4 loads and vfmacc.vf so each row pass moves 32 floats",
            example_code="vfloat32m4_t y = __riscv_vle32_v_f32m4(py, vl);",
            identifiers="vle32 vfmacc_vf m4",
            technique="vector_length",
            isa="rvv",
            operator="gemv",
            evidence_commits=1,
            prior_speedup=1.6,
        ),
        Thought(
            id="t-unroll-gemv",
            idea_id="idea-accumulators",
            title="Unroll the gemv column loop by four",
            description="Four columns per iteration give the in-order core independent FMAs",
            technique="unroll",
            isa="generic",
            operator="gemv",
            evidence_commits=0,
        ),
        Thought(
            id="t-tail-vl",
            idea_id="idea-lmul",
            title="Let vsetvl handle the gemv tail",
            description="No scalar epilogue: the last strip runs with a shorter vl",
            identifiers="vsetvl",
            technique="tail_handling",
            isa="rvv",
            operator="gemv",
            evidence_commits=0,
        ),
        Thought(
            id="t-blocking-gemm",
            idea_id="idea-blocking",
            title="8x6 register block for sgemm",
            description="Keep a 8x6 tile of C in registers while streaming packed A and B",
            technique="register_blocking",
            isa="avx2",
            operator="gemm",
            evidence_commits=1,
            prior_speedup=2.0,
        ),
        Target(key="k1-x60", name="SpacemiT K1 (X60)", isa="rv64gcv", vlen=256, dlen=128),
        Target(key="k3-x100", name="SpacemiT K3 (X100)", isa="rva23", vlen=256, dlen=256),
        Task(id="sgemv_n", name="sgemv_n", operator="gemv", dtype="f32", description="y = A x, row-major"),
        Task(id="sgemv_t", name="sgemv_t", operator="gemv", dtype="f32", description="y = A^T x"),
        Task(id="sdot", name="sdot", operator="dot", dtype="f32", description="dot product"),
        Task(id="sgemm_64", name="sgemm_64", operator="gemm", dtype="f32", description="64x64 matrix product"),
        Run(
            id=SEED_RUN,
            task_id="sgemv_n",
            target_key="k1-x60",
            budget=3,
            status=RunStatus.DONE,
            best_experience_id="exp-3",
            best_speedup=1.8,
            best_competent_speedup=1.2,
            evaluations=3,
        ),
    ]
    t0 = datetime(2025, 1, 1, tzinfo=UTC)
    experiences = [
        Experience(
            id="exp-1",
            task_id="sgemv_n",
            target_key="k1-x60",
            run_id=SEED_RUN,
            step=0,
            direction="idea-lmul",
            status=ExperienceStatus.OK,
            speedup=1.0,
            summary="baseline reference",
            created_at=t0,
            code="/*1*/",
        ),
        Experience(
            id="exp-2",
            task_id="sgemv_n",
            target_key="k1-x60",
            run_id=SEED_RUN,
            parent_id="exp-1",
            step=1,
            direction="idea-accumulators",
            status=ExperienceStatus.COMPILE_ERROR,
            thought_ids=["t-unroll-gemv"],
            feedback="kernel.c:12:5: error: use of undeclared identifier 'vfmacc'\n1 error generated.",
            summary="unroll by four: compile error",
            created_at=t0 + timedelta(minutes=1),
        ),
        Experience(
            id="exp-3",
            task_id="sgemv_n",
            target_key="k1-x60",
            run_id=SEED_RUN,
            parent_id="exp-1",
            step=2,
            direction="idea-lmul",
            status=ExperienceStatus.OK,
            speedup=1.8,
            competent_speedup=1.2,  # the competent baseline is 1.5x the plain one for this task
            thought_ids=["t-lmul-gemv"],
            generator="llm:stub",  # the thought was in the LLM's prompt: the lineage credits it
            summary="LMUL=4 row sweep: 1.8x",
            created_at=t0 + timedelta(minutes=2),
            code="void sgemv_n(int m, int n, const float *a, const float *x, float *y) { /* m4 */ }",
        ),
        Experience(
            id="exp-4",
            task_id="sgemv_n",
            target_key="k3-x100",
            status=ExperienceStatus.OK,
            speedup=0.9,
            thought_ids=["t-lmul-gemv"],
            summary="LMUL=4 on X100: slower",
            created_at=t0 + timedelta(minutes=3),
        ),
        Experience(
            id="exp-5",
            task_id="sdot",
            target_key="k1-x60",
            status=ExperienceStatus.WRONG,
            thought_ids=["t-multi-acc-dot"],
            feedback="max error 3.1e-2 above tolerance at n=37",
            summary="four accumulators, wrong tail",
            created_at=t0 + timedelta(minutes=4),
        ),
        Experience(
            id="exp-6",
            task_id="sdot",
            target_key="k1-x60",
            status=ExperienceStatus.OK,
            speedup=1.4,
            thought_ids=["t-multi-acc-dot"],
            summary="four accumulators: 1.4x",
            created_at=t0 + timedelta(minutes=5),
        ),
    ]
    for i in range(PAGED_EXPERIENCES):
        experiences.append(
            Experience(
                id=f"exp-gemm-{i:02d}",
                task_id="sgemm_64",
                target_key="k1-x60",
                status=ExperienceStatus.OK if i % 3 else ExperienceStatus.TIMEOUT,
                speedup=1.0 + i / 10 if i % 3 else None,
                summary=f"gemm attempt {i}",
                created_at=t0 + timedelta(hours=1, seconds=i // 2),
            )  # pairs share a timestamp
        )
    nodes += experiences
    rels = [
        _rel(RelType.IN_REPO, "Commit", "a1" * 20, "Repository", "OpenBLAS"),
        _rel(RelType.IN_REPO, "Commit", "b2" * 20, "Repository", "OpenBLAS"),
        _rel(RelType.IN_REPO, "Commit", "c3" * 20, "Repository", "OpenBLAS"),
        _rel(RelType.IN_REPO, "Commit", "d4" * 20, "Repository", "ggml"),
        _rel(RelType.EVIDENCED_BY, "Thought", "t-lmul-gemv", "Commit", "a1" * 20),
        _rel(RelType.EVIDENCED_BY, "Thought", "t-multi-acc-dot", "Commit", "b2" * 20),
        _rel(RelType.EVIDENCED_BY, "Thought", "t-blocking-gemm", "Commit", "c3" * 20),
        _rel(RelType.SIMILAR_TO, "Target", "k1-x60", "Target", "k3-x100", weight=0.6),
        _rel(RelType.SIMILAR_TO, "Task", "sgemv_n", "Task", "sgemv_t", weight=0.9),
        _effect("t-lmul-gemv", "k1-x60", [1.6, 1.6, 1.6]),
        _effect("t-lmul-gemv", "k3-x100", [0.9, 0.9]),
        _effect("t-multi-acc-dot", "k1-x60", [1.4, 1.3, 1.2, 0.95]),
        _effect("t-blocking-gemm", "k1-x60", [0.95, 0.95, 0.95]),
    ]
    for t in nodes:
        if isinstance(t, Thought):
            rels.append(_rel(RelType.HAS_THOUGHT, "Idea", t.idea_id, "Thought", t.id))
    for x in experiences:
        rels.append(_rel(RelType.FOR_TASK, "Experience", x.id, "Task", x.task_id))
        rels.append(_rel(RelType.ON_TARGET, "Experience", x.id, "Target", x.target_key))
        rels += [_rel(RelType.APPLIED, "Experience", x.id, "Thought", t) for t in x.thought_ids]
        if x.run_id:
            rels.append(_rel(RelType.IN_RUN, "Experience", x.id, "Run", x.run_id))
        if x.parent_id:
            rels.append(_rel(RelType.DERIVED_FROM, "Experience", x.id, "Experience", x.parent_id))
    return nodes, rels


def wipe(store: GraphStore) -> None:
    with store.session() as s:
        s.run("MATCH (n) WHERE NOT n:Migration CALL { WITH n DETACH DELETE n } IN TRANSACTIONS OF 10000 ROWS").consume()


def seed_api_graph(container: Container) -> None:
    wipe(container.store)
    nodes, rels = seed_nodes()
    container.ingestor.ingest(nodes, rels)


def node_count(store: GraphStore) -> int:
    """Nodes in the graph, except the IndexState records the service's own vector-sync loop may create at any
    moment in the background (an analyst's refused write must change nothing else)."""
    return store.read("MATCH (n) WHERE NOT n:IndexState RETURN count(n) AS n")[0]["n"]


# -- the stand-in optimizer -----------------------------------------------------------------------------


class StandInOptimizer:
    """Implements the Optimizer API over the real graph, without generating or evaluating kernels."""

    def __init__(self, container: Container, step_s: float = 0.05, crash_after: int | None = None) -> None:
        self.store = container.store
        self.step_s = step_s
        self.crash_after = crash_after  # raise an unexpected error after this many evaluations (a bug)
        self.executed: list[str] = []
        self.running = 0
        self.max_running = 0
        self._lock = threading.Lock()

    def create_run(self, req: RunRequest) -> Run:
        from evaluator.targets import load_target
        from evaluator.tasks import load_task

        task, target = load_task(req.task), load_target(req.target)  # NotFound naming them, like the agent
        run = Run(
            id=f"run-{uuid.uuid4().hex[:10]}",
            task_id=task.name,
            target_key=target.key,
            budget=req.budget,
            directions=req.directions,
            generator="stand-in",
            seed=req.seed,
        )
        self.store.upsert_nodes([run, Task(id=task.name, name=task.name), Target(key=target.key)])
        return run

    def execute(
        self,
        run_id: str,
        on_event: Callable[[ProgressEvent], None] | None = None,
        cancel: threading.Event | None = None,
    ) -> RunOutcome:
        with self._lock:
            self.executed.append(run_id)
            self.running += 1
            self.max_running = max(self.max_running, self.running)
        try:
            return self._execute(run_id, on_event or (lambda e: None), cancel)
        finally:
            with self._lock:
                self.running -= 1

    def _execute(
        self, run_id: str, emit: Callable[[ProgressEvent], None], cancel: threading.Event | None
    ) -> RunOutcome:
        run = self.get_run(run_id)
        done = self.store.read("MATCH (x:Experience)-[:IN_RUN]->(:Run {id: $id}) RETURN count(x) AS n", id=run_id)
        start, best = done[0]["n"], run.best_speedup
        self._save(run, status=RunStatus.RUNNING)
        emit(ProgressEvent(run_id=run_id, kind="started", budget=run.budget, evaluations=start))
        for step in range(start, run.budget):
            if cancel is not None and cancel.is_set():
                self._save(run, status=RunStatus.CANCELLED, finished_at=datetime.now(UTC))
                emit(ProgressEvent(run_id=run_id, kind="cancelled", evaluations=step, budget=run.budget))
                return self.outcome(run_id)
            if self.crash_after is not None and step >= self.crash_after:
                raise RuntimeError("stand-in agent bug: secret internal detail")
            time.sleep(self.step_s)
            speedup = 1.0 + 0.1 * step
            exp = Experience(
                id=f"{run_id}-x{step}",
                task_id=run.task_id,
                target_key=run.target_key,
                run_id=run_id,
                step=step,
                status=ExperienceStatus.OK,
                speedup=speedup,
                generator="stand-in",
                summary=f"stand-in step {step}",
            )
            self.store.upsert_nodes([exp])
            self.store.upsert_relationships([_rel(RelType.IN_RUN, "Experience", exp.id, "Run", run_id)])
            improved = speedup > (best or 0.0)
            best = max(best or 0.0, speedup)
            self._save(run, best_speedup=best, best_experience_id=exp.id, evaluations=step + 1)
            emit(
                ProgressEvent(
                    run_id=run_id,
                    kind="improved" if improved else "evaluation",
                    evaluations=step + 1,
                    budget=run.budget,
                    best_speedup=best,
                    status="ok",
                    speedup=speedup,
                    experience_id=exp.id,
                )
            )
        self._save(run, status=RunStatus.DONE, finished_at=datetime.now(UTC))
        emit(
            ProgressEvent(run_id=run_id, kind="finished", evaluations=run.budget, budget=run.budget, best_speedup=best)
        )
        return self.outcome(run_id)

    def _save(self, run: Run, **changes: Any) -> None:
        fresh = self.get_run(run.id).model_copy(update=changes)
        self.store.upsert_nodes([fresh])

    def unfinished_runs(self) -> list[Run]:
        rows = self.store.read("MATCH (r:Run) WHERE r.status IN ['queued', 'running'] RETURN r.id AS id")
        return [self.get_run(r["id"]) for r in rows]

    def get_run(self, run_id: str) -> Run:
        run = self.store.get_node(Run, run_id)
        if run is None:
            raise NotFound(f"no run with id {run_id!r}")
        return run

    def outcome(self, run_id: str) -> RunOutcome:
        run = self.get_run(run_id)
        best = self.store.get_node(Experience, run.best_experience_id) if run.best_experience_id else None
        return RunOutcome(run=run, best=best, history=[])


# -- fixtures -------------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def api_settings_for(neo4j_settings: Settings, home: Path, **overrides: Any) -> Settings:
    values = {
        "home": home,
        "api_keys": API_KEYS,
        "cypher_timeout_s": 5.0,  # planning counts too: a loaded 2-core machine needs the headroom
        "cypher_row_cap": 20,
        "api_workers": 2,
        **overrides,
    }
    return neo4j_settings.model_copy(update=values)


def build_container(settings: Settings, store: GraphStore, embedder: Any) -> Container:
    container = Container(settings)
    container.__dict__["store"] = store  # the session's connection to the test Neo4j
    container.__dict__["embedder"] = embedder  # the session's model: loaded once
    return container


@pytest.fixture(scope="module")
def api_settings(neo4j_settings: Settings, tmp_path_factory: pytest.TempPathFactory) -> Settings:
    return api_settings_for(neo4j_settings, tmp_path_factory.mktemp("api-home"))


@pytest.fixture(scope="module")
def api_container(api_settings: Settings, _session_store: GraphStore, embedder: Any) -> Container:
    return build_container(api_settings, _session_store, embedder)


@pytest.fixture(scope="module")
def api_graph(api_container: Container) -> Container:
    seed_api_graph(api_container)
    return api_container


@pytest.fixture(scope="module")
def api_app(api_graph: Container) -> Iterator[FastAPI]:
    from service.api.app import create_app

    yield create_app(container=api_graph)  # the real agent.optimizer.Optimizer


@pytest.fixture(scope="module")
def client(api_app: FastAPI) -> Iterator[TestClient]:
    with TestClient(api_app, raise_server_exceptions=False) as c:  # `with`: runs the lifespan
        yield c


def serve_in_thread(app: FastAPI, port: int) -> tuple[Any, threading.Thread]:
    import uvicorn

    server = uvicorn.Server(
        uvicorn.Config(
            app, host="127.0.0.1", port=port, log_level="warning", lifespan="on", timeout_graceful_shutdown=3
        )
    )
    thread = threading.Thread(target=server.run, name="uvicorn-test", daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test API server did not start (see the log above)")
        time.sleep(0.05)
    return server, thread


@pytest.fixture(scope="module")
def live_api(api_graph: Container) -> Iterator[str]:
    from service.api.app import create_app

    app = create_app(container=api_graph)  # the real agent.optimizer.Optimizer
    port = free_port()
    server, thread = serve_in_thread(app, port)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
