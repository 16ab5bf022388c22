"""Scale-out on a real Ray cluster on 127.0.0.1: a head, a worker with a (stand-in) K1 board, kills.

Every node is an `eok worker` process; the board is a real sshd whose `taskset` runs the binary under
qemu (tests/support/board.py). The graph is the session's real Neo4j.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.settings import Settings
from evaluator.evaluate import Candidate, EvalStatus
from evaluator.executor import EvalJob
from evaluator.targets import load_target
from evaluator.tasks import load_task
from knowledge.store import GraphStore
from tests.support.board import StandInBoard, stand_in_board
from tests.support.raycluster import PROJECT, Cluster, eok_env, free_port

pytestmark = [pytest.mark.qemu, pytest.mark.slow]


@pytest.fixture(scope="module")
def board(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandInBoard]:
    with stand_in_board(tmp_path_factory.mktemp("board"), load_target("k1-x60").qemu_cpu) as b:
        yield b


def _board_env(board: StandInBoard, home: Path) -> dict[str, str]:
    return {
        "EOK_HOME": str(home),
        "EOK_SSH_USER": "root",
        "EOK_SSH_KEY": str(board.key),
        "EOK_SSH_BOARD_IS_EMULATOR": "1",
    }


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, board: StandInBoard) -> Iterator[Cluster]:
    folder = tmp_path_factory.mktemp("ray")
    c = Cluster(port=free_port(), folder=folder)
    try:
        c.start_head(num_cpus=1)
        c.wait_for({"CPU": 1})
        c.start_worker(
            "board-node", num_cpus=1, boards=(f"k1-x60=127.0.0.1:{board.port}",), **_board_env(board, folder / "w")
        )
        c.wait_for({"CPU": 2, "k1-x60": 1})
        yield c
    finally:
        c.stop()


def _driver(cluster: Cluster, code: str, home: Path, timeout: float = 600) -> dict:
    """Run `code` in a fresh driver process joined to the cluster; it prints one JSON line."""
    script = f"from evaluator.cluster import RayExecutor\nex = RayExecutor.connect({cluster.address!r})\n{code}"
    out = subprocess.run(
        [sys.executable, "-c", script],
        cwd=PROJECT,
        env=eok_env(EOK_HOME=str(home)),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_evaluations_land_on_the_node_their_runner_needs(cluster: Cluster, board: StandInBoard, tmp_path: Path):
    code = (
        "import json, ray\n"
        "from evaluator.executor import EvalJob\n"
        "from evaluator.evaluate import Candidate\n"
        "from evaluator.targets import load_target\n"
        "from evaluator.tasks import load_task\n"
        "task, target = load_task('saxpy'), load_target('k1-x60')\n"
        "board = EvalJob(task, target, 'ssh', Candidate(code=task.reference_code))\n"
        "qemu = EvalJob(task, target, 'qemu', Candidate(code=task.reference_code))\n"
        "b, q = ex.submit(board).result(), ex.submit(qemu).result()\n"
        "nodes = {n['NodeID'][:12]: sorted(n['Resources']) for n in ray.nodes() if n['Alive']}\n"
        "print(json.dumps({'board': b.model_dump(mode='json'), 'qemu': q.model_dump(mode='json'), 'nodes': nodes,\n"
        "  'slots_qemu': ex.slots('qemu', target), 'slots_board': ex.slots('ssh', target)}))\n"
    )
    got = _driver(cluster, code, tmp_path / "home")
    b, q, nodes = got["board"], got["qemu"], got["nodes"]
    assert b["status"] == "ok", b["feedback"]
    assert b["runner"] == "ssh" and b["measurement"] == "measured"
    assert "k1-x60" in nodes[b["worker"]], "the board job ran on a node without the board"
    assert (board.root / "last_core").exists(), "the board never ran the binary"
    assert q["status"] == "ok" and q["measurement"] == "modeled" and q["worker"] in nodes
    assert got["slots_qemu"] == 2 and got["slots_board"] == 1


def test_a_job_for_a_board_nobody_has_is_a_clear_error(cluster: Cluster, tmp_path: Path):
    code = (
        "import json\n"
        "from core.errors import Unavailable\n"
        "from evaluator.executor import EvalJob\n"
        "from evaluator.evaluate import Candidate\n"
        "from evaluator.targets import load_target\n"
        "from evaluator.tasks import load_task\n"
        "task = load_task('saxpy')\n"
        "try:\n"
        "    ex.submit(EvalJob(task, load_target('k3-x100'), 'ssh', Candidate(code=task.reference_code)))\n"
        "    print(json.dumps({'error': None}))\n"
        "except Unavailable as e:\n"
        "    print(json.dumps({'error': e.message, 'hint': e.hint}))\n"
    )
    got = _driver(cluster, code, tmp_path / "home", timeout=120)
    assert got["error"] and "k3-x100" in got["error"] and "--board k3-x100=" in got["hint"]


def _experiences(store: GraphStore, run_prefix: str) -> list[dict]:
    return store.read(
        "MATCH (x:Experience) WHERE x.run_id STARTS WITH $p RETURN x.id AS id, x.run_id AS run, x.step AS step",
        p=run_prefix,
    )


def _eok(home: Path, neo4j: Settings, *args: str) -> subprocess.Popen:
    env = eok_env(EOK_HOME=str(home), NEO4J_URI=neo4j.bolt_uri, NEO4J_PASSWORD=neo4j.neo4j_password.get_secret_value())
    return subprocess.Popen(
        [sys.executable, "-m", "service.cli", *args],
        cwd=PROJECT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _wait_until(predicate, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.5)
    raise TimeoutError(what)


def test_bootstrap_survives_a_dead_worker_and_a_dead_head(
    tmp_path_factory: pytest.TempPathFactory, board: StandInBoard, store: GraphStore, neo4j_settings: Settings
):
    """kill -9 of a worker mid-evaluation, then of the head mid-bootstrap; --resume completes, nothing twice."""
    folder = tmp_path_factory.mktemp("ray-kill")
    c = Cluster(port=free_port(), folder=folder)
    home = folder / "driver"
    try:
        c.start_head(num_cpus=1)
        c.wait_for({"CPU": 1})
        worker = c.start_worker("cpu-node", num_cpus=1, EOK_HOME=str(folder / "w"))
        c.wait_for({"CPU": 2})
        budget = 3
        proc = _eok(
            home,
            neo4j_settings,
            "bootstrap",
            "--tasks=relu,saxpy",
            "--targets=k1-x60",
            f"--budget={budget}",
            "--directions=2",
            f"--cluster={c.address}",
            "--json",
        )
        _wait_until(lambda: len(_experiences(store, "boot-")) >= 1, 600, "no experience recorded")
        worker.kill()  # an evaluation may be in flight there: Ray runs it again on the head
        _wait_until(lambda: len(_experiences(store, "boot-")) >= 3, 600, "no progress after the worker died")
        c.nodes[0].kill()  # the head: the bootstrap loses its cluster
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()  # (kill -9 of the driver is the other way to stop it; the resume is the same)
            proc.wait()
        boot_id = store.read("MATCH (b:Bootstrap) RETURN b.id AS id")[0]["id"]
        before = _experiences(store, boot_id)

        c.nodes.clear()
        c.start_head(num_cpus=1)
        c.start_worker("cpu-node-2", num_cpus=1, EOK_HOME=str(folder / "w2"))
        c.wait_for({"CPU": 2})
        resumed = _eok(home, neo4j_settings, "bootstrap", f"--resume={boot_id}", f"--cluster={c.address}", "--json")
        out, err = resumed.communicate(timeout=900)
        assert resumed.returncode == 0, err[-3000:]
        summary = json.loads(out)
        assert {r["task"] for r in summary["rows"]} == {"relu", "saxpy"}
        assert all(r["status"] == "done" for r in summary["rows"]), summary["rows"]
    finally:
        c.stop()

    after = _experiences(store, boot_id)
    keys = [(x["run"], x["step"]) for x in after]
    assert len(keys) == len(set(keys)), "an evaluation was recorded twice"
    assert {x["id"] for x in before} <= {x["id"] for x in after}, "the resume lost recorded experiences"
    runs = store.read("MATCH (r:Run {bootstrap_id: $b}) RETURN r.id AS id, r.evaluations AS n", b=boot_id)
    assert len(runs) == 2
    for r in runs:
        recorded = sum(1 for x in after if x["run"] == r["id"])
        assert recorded == r["n"], "the run's counter disagrees with its experiences"
        assert 1 <= recorded <= budget


def test_in_process_and_ray_executors_answer_the_same(cluster: Cluster, tmp_path: Path):
    """The executor changes where a job runs, never its verdict."""
    from evaluator.evaluate import Evaluator
    from evaluator.executor import InProcessExecutor

    task, target = load_task("relu"), load_target("k1-x60")
    wrong = "void relu(int n, const float *x, float *y) { for (int i = 0; i < n; i++) y[i] = x[i]; }"
    local = InProcessExecutor(Settings(home=tmp_path / "local"), Evaluator(Settings(home=tmp_path / "local")))
    try:
        here = local.submit(EvalJob(task, target, "qemu", Candidate(code=wrong))).result()
    finally:
        local.close()
    code = (
        "import json\n"
        "from evaluator.executor import EvalJob\n"
        "from evaluator.evaluate import Candidate\n"
        "from evaluator.targets import load_target\n"
        "from evaluator.tasks import load_task\n"
        f"job = EvalJob(load_task('relu'), load_target('k1-x60'), 'qemu', Candidate(code={wrong!r}))\n"
        "print(json.dumps(ex.submit(job).result().model_dump(mode='json')))\n"
    )
    there = _driver(cluster, code, tmp_path / "home")
    assert here.status == EvalStatus.WRONG
    assert there["status"] == here.status.value and there["worker"]


def test_a_head_port_in_rays_worker_range_is_one_clear_line(tmp_path: Path) -> None:
    """`ray start` hands its worker processes the ports 10002-19999 and used to end `eok worker --head
    --port 16380` in "unexpected ValueError ... report the traceback"; now one line says why and what to use."""
    out = subprocess.run(
        [sys.executable, "-m", "service.cli", "worker", "--head", "--port", "16380"],
        cwd=PROJECT,
        env=eok_env(EOK_HOME=str(tmp_path / "home")),
        capture_output=True,
        text=True,
        timeout=120,
    )
    said = (out.stdout + out.stderr).strip()
    assert out.returncode == 2, said
    assert "16380" in said and "10002-19999" in said and "--port 6380" in said, said
    assert "Traceback" not in said and "unexpected" not in said, said
    assert len(said.splitlines()) <= 2, said  # the error and its hint
