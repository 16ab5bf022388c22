"""The agent loop end to end: real Neo4j, real clang-22 + qemu k1-x60, offline generator and a stub LLM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from pydantic import SecretStr

from agent.optimizer import Optimizer
from agent.report import improved, over_baseline
from agent.types import ProgressEvent, RunRequest
from core.errors import InvalidInput, NotFound
from knowledge.models import Run
from knowledge.store import as_vector
from tests.support.openai_stub import OpenAIStub, Reply

ROOT = Path(__file__).resolve().parents[2]


def _optimizer(container, **settings) -> Optimizer:
    container.settings = container.settings.model_copy(update=settings)
    return Optimizer(container)


@pytest.mark.parametrize("task", ["sdot", "softmax", "relu"])
def test_offline_run_records_every_candidate_and_learns(container, task: str) -> None:
    opt = _optimizer(container)
    events: list[ProgressEvent] = []
    run = opt.create_run(RunRequest(task=task, target="k1-x60", budget=6, directions=3, generator="offline"))
    out = opt.execute(run.id, on_event=events.append)

    assert out.run.status == "done"
    assert out.run.evaluations == 6 == len(out.history)
    assert events[0].kind == "started" and events[-1].kind == "finished"
    rows = container.store.read(
        "MATCH (x:Experience {run_id: $run})-[:FOR_TASK]->(:Task {id: $task}) "
        "MATCH (x)-[:ON_TARGET]->(:Target {key: 'k1-x60'}) MATCH (x)-[:IN_RUN]->(:Run {id: $run}) "
        "MATCH (x)-[:APPLIED]->(t:Thought) RETURN x.status AS status, x.speedup AS speedup, x.measurement AS m",
        run=run.id,
        task=task,
    )
    # The first candidate of a cold offline run is the generator's own vector kernel (a seed): it applies no
    # thought, and every other candidate applies the one its direction drew.
    assert len(rows) == 5
    seeded = container.store.read(
        "MATCH (x:Experience {run_id: $run}) WHERE NOT (x)-[:APPLIED]->() RETURN x.variant AS v", run=run.id
    )
    assert len(seeded) == 1 and json.loads(seeded[0]["v"])["family"] != "generic"
    assert all(r["m"] == "modeled" for r in rows if r["status"] == "ok")
    trials = container.store.read("MATCH (:Thought)-[e:EFFECT_ON]->(:Target {key: 'k1-x60'}) RETURN sum(e.trials) AS n")
    assert trials[0]["n"] == 5  # statistics moved once per candidate that applied a thought
    assert out.best is not None and out.run.best_speedup == out.best.speedup
    assert out.run.best_speedup > 1.0, "the offline generator should beat clang -O3 on this task"
    report = Path(out.artifacts["report"]).read_text()
    if improved(over_baseline(out.best)):
        assert Path(out.artifacts["code"]).read_text().count(out.best.code.strip()[:40]) == 1
        assert "Best kernel:" in report and f"--candidate {out.artifacts['candidates']}/{out.best.step:03d}.c" in report
        assert Path(out.artifacts["candidates"], f"{out.best.step:03d}.c").read_text() == out.best.code
    else:  # a few modeled cycles are no reason to replace the reference (relu: 274,300 vs 274,303 cycles)
        assert "code" not in out.artifacts and "No improvement: keep the baseline" in report
    assert Path(out.artifacts["plot"]).stat().st_size > 5000
    assert out.lineage and out.lineage[-1]["experience"] == out.best.id
    # One row per evaluated candidate, each with its status and reason, and the caveat on modeled cycles.
    assert len(out.candidates) == 6 and all(c["reason"] for c in out.candidates)
    assert report.count("\n| ") >= 6 + 1 and "Cycles are modeled, not measured" in report
    assert f"eok optimize {task} --target k1-x60 --budget 6 --directions 3 --generator offline" in report


def test_second_run_starts_from_what_worked(container, worker_embedder, monkeypatch) -> None:
    from evaluator.executor import InProcessExecutor

    opt = _optimizer(container)
    first = opt.execute(opt.create_run(RunRequest(task="sdot", budget=5, directions=2, generator="offline")).id)
    # The second run's evaluation threads embed the summaries as a Ray worker does (docs/SCALE.md).
    head: list[str] = []
    embed = container.embedder.embed
    monkeypatch.setattr(container.embedder, "embed", lambda texts: head.extend(texts) or embed(texts))
    executor = InProcessExecutor(container.settings, opt.evaluator, embedder=worker_embedder)
    opt = Optimizer(container, evaluator=opt.evaluator, executor=executor)
    second_run = opt.create_run(RunRequest(task="sdot", budget=2, directions=2, generator="offline", seed=9))
    second = opt.execute(second_run.id)
    # The first candidate of the second run re-measures the earlier best: it is at least as good immediately.
    assert second.history[0] is not None and second.history[0] >= 0.95 * first.run.best_speedup
    # The driver never called the model for a summary a worker sent; each stored vector is its own summary's.
    rows = container.store.read_values(
        "MATCH (x:Experience {run_id: $run}) RETURN x.summary AS s, x.embedding AS v ORDER BY x.step", run=second_run.id
    )
    assert len(rows) == 2 and rows[0]["s"].startswith("sdot: transfer of earlier experience -> ")
    assert not {r["s"].strip() for r in rows} & set(head), "the driver embedded a summary a worker had sent"
    stored = np.stack([as_vector(r["v"]) for r in rows])
    assert np.abs(stored - embed([r["s"].strip() for r in rows])).max() < 1e-5


def test_bad_requests_name_the_input(container) -> None:
    opt = _optimizer(container)
    with pytest.raises(NotFound, match="no_such_task"):
        opt.create_run(RunRequest(task="no_such_task"))
    with pytest.raises((NotFound, InvalidInput), match="k9"):
        opt.create_run(RunRequest(task="sdot", target="k9"))
    with pytest.raises(InvalidInput, match="llm"):
        opt.create_run(RunRequest(task="sdot", generator="llm"))
    with pytest.raises(NotFound):
        opt.get_run("run-missing")


GOOD = """#include <riscv_vector.h>
float sdot(int n, const float *x, const float *y) {
  size_t vlmax = __riscv_vsetvlmax_e32m4();
  vfloat32m4_t acc = __riscv_vfmv_v_f_f32m4(0.0f, vlmax);
  for (int i = 0; i < n;) {
    size_t vl = __riscv_vsetvl_e32m4(n - i);
    vfloat32m4_t a = __riscv_vle32_v_f32m4(x + i, vl), b = __riscv_vle32_v_f32m4(y + i, vl);
    acc = __riscv_vfmacc_vv_f32m4_tu(acc, a, b, vl);
    i += vl;
  }
  vfloat32m1_t z = __riscv_vfmv_v_f_f32m1(0.0f, 1);
  return __riscv_vfmv_f_s_f32m1_f32(__riscv_vfredusum_vs_f32m4_f32m1(acc, z, vlmax));
}
"""
BROKEN = "float sdot(int n, const float *x, const float *y) { return x[0] +; }"
WRONG = "float sdot(int n, const float *x, const float *y) { return 0.0f; }"


def test_llm_loop_survives_every_kind_of_reply(container) -> None:
    with OpenAIStub() as stub:
        stub.script(
            Reply.json({"code": GOOD, "cflags": [], "explanation": "m4 accumulator, one reduction"}),
            Reply.text("```c\n" + BROKEN + "\n```"),
            Reply.text("<think>zeros are fast</think>```c\n" + WRONG + "\n```"),
            Reply.malformed(),
            Reply.malformed(),
            Reply.malformed(),
            Reply.malformed(),
            Reply.malformed(),
            Reply.truncated("```c\nfloat sdot(int n"),
            Reply.rate_limited(retry_after=0.05),
            Reply.json({"code": GOOD.replace("m4", "m8"), "explanation": "m8"}),
        )
        stub.default = Reply.text("I am sorry, I cannot help with that.")
        opt = _optimizer(
            container,
            openai_base_url=stub.base_url,
            openai_api_key=SecretStr("test"),
            llm_max_retries=4,
            eval_parallelism=1,
        )
        run = opt.create_run(RunRequest(task="sdot", budget=6, directions=1, generator="auto"))
        assert run.generator == "llm"
        out = opt.execute(run.id)
        assert stub.calls >= 11
        first_prompt = stub.requests[0]["messages"][1]["content"]
        assert "float sdot(int n, const float *x, const float *y)" in first_prompt

    rows = container.store.read(
        "MATCH (x:Experience {run_id: $run}) RETURN x.status AS s, x.feedback AS f ORDER BY x.step", run=run.id
    )
    statuses = [r["s"] for r in rows]
    assert statuses[:3] == ["ok", "compile_error", "wrong"]
    assert statuses[3] == "generation_error"  # five malformed bodies exhaust the retries
    assert statuses[4] == "generation_error"  # truncated reply
    assert statuses[5] == "ok", rows[5]["f"]  # after a 429 and a retry
    assert out.run.status == "done" and out.run.best_speedup and out.run.best_speedup > 1
    assert out.run.llm_calls >= 11 and out.run.llm_tokens > 0
    feedback = container.store.read(
        "MATCH (x:Experience {run_id: $run}) WHERE x.status = 'compile_error' RETURN x.feedback AS f", run=run.id
    )
    assert "error" in feedback[0]["f"].lower()


def test_unreachable_llm_is_recorded_not_fatal(container) -> None:
    opt = _optimizer(
        container,
        openai_base_url="http://127.0.0.1:9/v1",
        openai_api_key=SecretStr("x"),
        llm_max_retries=0,
        llm_timeout_s=2.0,
        eval_parallelism=1,
    )
    out = opt.execute(opt.create_run(RunRequest(task="saxpy", budget=2, directions=1, generator="llm")).id)
    assert out.run.status == "done" and out.run.evaluations == 2
    rows = container.store.read("MATCH (x:Experience {run_id: $r}) RETURN x.status AS s, x.feedback AS f", r=out.run.id)
    assert {r["s"] for r in rows} == {"generation_error"}
    assert "unreachable" in rows[0]["f"]


def test_kill_9_then_resume_loses_no_evaluated_candidate(container, neo4j_settings, tmp_path: Path) -> None:
    env = {**os.environ, "EOK_HOME": str(container.settings.home), "EOK_EVAL_PARALLELISM": "1"}
    env["NEO4J_URI"] = container.settings.bolt_uri
    opt = _optimizer(container)
    run = opt.create_run(RunRequest(task="saxpy", budget=8, directions=2, generator="offline"))
    cmd = [sys.executable, "-m", "service.cli", "optimize", "--resume", run.id, "--json"]
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
    )
    deadline = time.monotonic() + 300
    count = 0
    while time.monotonic() < deadline and count < 3:
        time.sleep(0.5)
        count = container.store.read("MATCH (x:Experience {run_id: $r}) RETURN count(x) AS n", r=run.id)[0]["n"]
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    before = container.store.read(
        "MATCH (x:Experience {run_id: $r}) RETURN x.id AS id, x.code_hash AS h ORDER BY id", r=run.id
    )
    assert 3 <= len(before) < 8
    assert container.store.get_node(Run, run.id).status == "running"

    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["run"]["status"] == "done" and result["run"]["evaluations"] == 8
    after = container.store.read(
        "MATCH (x:Experience {run_id: $r}) RETURN x.id AS id, x.code_hash AS h ORDER BY id", r=run.id
    )
    assert len(after) == 8
    assert {(r["id"], r["h"]) for r in before} <= {(r["id"], r["h"]) for r in after}  # nothing lost or rewritten
    assert len({r["h"] for r in after}) == 8  # no candidate evaluated twice


def test_every_llm_request_counts_and_a_repeating_model_is_told(container) -> None:
    """A model that always answers the same kernel: one evaluation, then repeat notices, then the run stops;
    the run's llm_calls equals the requests the endpoint served."""
    with OpenAIStub() as stub:
        stub.default = Reply.json({"code": GOOD, "explanation": "same again"})
        opt = _optimizer(container, openai_base_url=stub.base_url, openai_api_key=SecretStr("t"), eval_parallelism=1)
        out = opt.execute(opt.create_run(RunRequest(task="sdot", budget=4, directions=1, generator="llm")).id)
        served = stub.calls
        requests = list(stub.requests)
    assert out.run.status == "done" and out.run.evaluations == 1
    assert out.run.llm_calls == served
    assert served <= 1 + 4 * 3  # one candidate, then at most MAX_LLM_REPEATS steps of 1 ask + 2 re-asks
    # Re-asked in the same conversation, and told again at the top of the next step's prompt.
    reasked = [r for r in requests if len(r["messages"]) > 2]
    assert reasked and "already evaluated in this run (result: ok" in reasked[0]["messages"][-1]["content"]
    later_first_asks = [r["messages"][1]["content"] for r in requests[1:] if len(r["messages"]) == 2]
    assert later_first_asks and all("already evaluated in this run" in p for p in later_first_asks[1:])


def test_llm_is_shown_best_code_and_the_failed_code_with_its_own_diagnostic(container) -> None:
    with OpenAIStub() as stub:
        stub.script(Reply.json({"code": GOOD}), Reply.text("```c\n" + BROKEN + "\n```"))
        stub.default = Reply.json({"code": GOOD.replace("m4", "m8")})
        opt = _optimizer(container, openai_base_url=stub.base_url, openai_api_key=SecretStr("t"), eval_parallelism=1)
        out = opt.execute(opt.create_run(RunRequest(task="sdot", budget=3, directions=1, generator="llm")).id)
        third = stub.requests[2]["messages"][1]["content"]
    assert out.run.evaluations == 3
    best = out.run.best_speedup
    assert GOOD.strip() in third and f"{best:.2f}x over -O3" in third  # one yardstick: competent first
    at_broken = third.index(BROKEN)
    diag = third[at_broken:]
    assert "compile_error" in third[third.index("Your last attempt") : at_broken]
    assert "Diagnostic for this code:" in diag and "error" in diag.lower()
    assert third.index(GOOD.strip()) < at_broken  # the diagnostic is not printed under the best code


def test_show_prompt_prints_the_first_prompt_and_runs_nothing(container) -> None:
    env = {**os.environ, "EOK_HOME": str(container.settings.home), "NEO4J_URI": container.settings.bolt_uri}
    env.pop("OPENAI_BASE_URL", None)
    cmd = [sys.executable, "-m", "service.cli", "optimize", "sdot", "--show-prompt", "--json"]
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    messages = json.loads(done.stdout)["messages"]
    assert [m["role"] for m in messages] == ["system", "user"]
    user = messages[1]["content"]
    assert "bench size: n=16384" in user and "## Apply this optimization thought" in user
    assert container.store.read("MATCH (r:Run) RETURN count(r) AS n")[0]["n"] == 0
    assert container.store.read("MATCH (x:Experience) RETURN count(x) AS n")[0]["n"] == 0
    bad = subprocess.run([*cmd[:4], "no_such_task", "--show-prompt"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert bad.returncode != 0 and "no_such_task" in bad.stderr + bad.stdout and "Traceback" not in bad.stderr
