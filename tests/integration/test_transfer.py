"""A decision measured on K1 starts a run on K3 A100, rescaled for its VLEN, and the graph says so.

Real Neo4j, clang-22 and qemu (k3-a100: VLEN 1024). The K1 kernel is recorded through the agent's own
recorder (the test's input: an earlier K1 run chose LMUL 8 and 2 accumulators for sdot); the A100 run and
its measurement are real.
"""

from __future__ import annotations

import json

import pytest

from agent.offline import OfflineGenerator
from agent.optimizer import Optimizer
from agent.recorder import Recorder
from agent.transfer import adapt, target_weight
from agent.types import RunRequest
from evaluator.targets import load_target
from evaluator.tasks import load_task
from knowledge.models import Experience, ExperienceStatus


def _blank_container(settings, store, embedder, home):
    """A container on the session's Neo4j, emptied first, with its own home."""
    from service.bootstrap import Container
    from tests.integration.conftest import wipe

    wipe(store)
    c = Container(settings.model_copy(update={"home": home}))
    c.__dict__["store"] = store
    c.__dict__["embedder"] = embedder
    return c


def _record_kernel(c, opt: Optimizer, task: str, target: str, knobs: dict) -> Experience:
    """An earlier run's kernel of the rvv_reduction family, recorded through the agent's own recorder (3.0x)."""
    run = opt.create_run(RunRequest(task=task, target=target, budget=1, generator="offline"))
    v = OfflineGenerator(load_task(task), load_target(target)).render("rvv_reduction", knobs)
    exp = Experience(
        id=f"{run.id}-0000",
        task_id=task,
        target_key=target,
        run_id=run.id,
        code=v.code,
        code_hash=v.key,
        variant=json.dumps({"family": v.family, "knobs": v.knobs}),
        status=ExperienceStatus.OK,
        speedup=3.0,
    )
    Recorder(c.store, c.embedder).record(exp, True, None, True)
    return exp


@pytest.fixture(scope="module")
def warm_run(neo4j_settings, _session_store, embedder, tmp_path_factory):
    """One K1 kernel recorded, then a one-evaluation run of the same task on K3 A100."""
    c = _blank_container(neo4j_settings, _session_store, embedder, tmp_path_factory.mktemp("transfer-home"))
    opt = Optimizer(c)
    source = _record_kernel(c, opt, "sdot", "k1-x60", {"lmul": 8, "accumulators": 2})
    run = opt.create_run(RunRequest(task="sdot", target="k3-a100", budget=1, directions=1, generator="offline"))
    return c, source, opt.execute(run.id)


def test_warm_run_starts_from_the_rescaled_k1_decision(warm_run) -> None:
    c, _source, out = warm_run
    first = c.store.read(
        "MATCH (x:Experience {run_id: $run}) RETURN x.variant AS v, x.status AS st ORDER BY x.step LIMIT 1",
        run=out.run.id,
    )[0]
    knobs = json.loads(first["v"])["knobs"]
    # LMUL 8 at VLEN 256 holds 64 floats; at VLEN 1024 that is LMUL 2. The accumulators carry over as they are.
    assert (json.loads(first["v"])["family"], knobs["lmul"], knobs["accumulators"]) == ("rvv_reduction", 2, 2)
    assert first["st"] == "ok"


def test_the_transfer_is_an_edge_with_both_decisions_and_outcomes(warm_run) -> None:
    c, source, _out = warm_run
    edges = c.store.read(
        "MATCH (s:Experience {id: $src})-[t:TRANSFERS_TO]->(x:Experience) RETURN properties(t) AS t, x.speedup AS s",
        src=source.id,
    )
    assert len(edges) == 1
    t = edges[0]["t"]
    assert t["rescaled"] == "lmul 8 -> 2 for VLEN 256 -> 1024" and t["via"] == "target"
    assert (t["from_target"], t["from_task"], t["from_speedup"], t["from_vlen"]) == ("k1-x60", "sdot", 3.0, 256)
    assert json.loads(t["decision"])["knobs"]["lmul"] == 8 and json.loads(t["applied"])["knobs"]["lmul"] == 2
    assert t["to_status"] == "ok" and t["to_speedup"] == edges[0]["s"] > 0  # measured on the A100, not copied
    weight = c.store.read(
        "MATCH (:Target {key: 'k1-x60'})-[s:SIMILAR_TO]-(:Target {key: 'k3-a100'}) RETURN s.weight AS w"
    )
    assert [r["w"] for r in weight] == [target_weight(256, 1024)] == [0.333]


def test_the_lineage_credits_the_k1_kernel(warm_run) -> None:
    _, source, out = warm_run
    root = out.lineage[0]
    assert root["transfer"]["experience"] == source.id and root["transfer"]["target"] == "k1-x60"
    assert root["thought"] is None  # a seed applies no thought: the credit is the transfer's


def test_a_decision_moves_to_a_related_operator_by_technique() -> None:
    """sgemv_t's 4 columns per pass (register blocking) and unroll 2 become matmulnbits' rows and blocks."""
    k1 = load_target("k1-x60")
    source = OfflineGenerator(load_task("sgemv_t"), k1)
    decision = {"family": "rvv_gemv", "knobs": {"lmul": 2, "cols": 4, "unroll": 2}}
    made = adapt(decision, source.knobs("rvv_gemv"), 256, OfflineGenerator(load_task("matmulnbits_q4_gemv"), k1))
    assert made is not None
    variant, rescaled = made
    assert (variant.family, variant.knobs["rows"], variant.knobs["blocks"], rescaled) == ("quant", 4, 2, "")


def test_a_knob_moves_as_a_related_tasks_best_moved_between_the_targets(
    neo4j_settings, _session_store, embedder, tmp_path_factory
) -> None:
    """sasum's best LMUL went from 1 on K1 to 8 on the X100; sdot's K1 best (LMUL 1) starts the X100 run at 8."""
    c = _blank_container(neo4j_settings, _session_store, embedder, tmp_path_factory.mktemp("shift-home"))
    opt = Optimizer(c)
    for task, target, lmul in (("sasum", "k1-x60", 1), ("sasum", "k3-x100", 8), ("sdot", "k1-x60", 1)):
        _record_kernel(c, opt, task, target, {"lmul": lmul})
    run = opt.create_run(RunRequest(task="sdot", target="k3-x100", budget=1, directions=1, generator="offline"))
    opt.execute(run.id)
    [edge] = c.store.read(
        "MATCH (s:Experience {task_id: 'sdot', target_key: 'k1-x60'})-[t:TRANSFERS_TO]->(x:Experience) "
        "RETURN t.rescaled AS note, x.variant AS v, x.status AS st"
    )
    assert json.loads(edge["v"])["knobs"]["lmul"] == 8 and edge["st"] == "ok"
    assert edge["note"] == "lmul 1 -> 8 as other tasks' best moved (x8: sasum)"
