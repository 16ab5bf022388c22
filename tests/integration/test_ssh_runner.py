"""The ssh runner against a real sshd on 127.0.0.1 standing in for a K1 board.

The "board" is this machine: an sshd we start on a free port with its own host key and authorized key,
whose sessions find a `taskset` shim first on PATH. The runner's command is unchanged
(`taskset -c <core> ./harness ...`); the shim pins as asked and runs the riscv64 binary through
qemu-riscv64, an honest stand-in for the board's CPU. Binaries are built with the emulator ISA subset
(`build_kind="emulator"`), since qemu 7.2 lacks Zicond that a real X60 has.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.settings import Settings
from evaluator.evaluate import Candidate, EvalStatus, Evaluator
from evaluator.runners import SshRunner, get_runner
from evaluator.targets import load_target
from evaluator.tasks import load_task
from tests.support.board import StandInBoard, stand_in_board

pytestmark = pytest.mark.qemu


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def board(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandInBoard]:
    with stand_in_board(tmp_path_factory.mktemp("board"), load_target("k1-x60").qemu_cpu) as b:
        yield b


@pytest.fixture(scope="module")
def evaluator(tmp_path_factory: pytest.TempPathFactory) -> Evaluator:
    home = tmp_path_factory.getbasetemp() / "eok-evaluator-home"
    return Evaluator(Settings(home=home, eval_timeout_s=20))


def runner_for(board: StandInBoard, core: int = 1) -> SshRunner:
    return SshRunner(
        "127.0.0.1",
        "root",
        board.port,
        board.key,
        core=core,
        remote_dir=str(board.remote),
        known_hosts=board.root / "known_hosts",
        build_kind="emulator",
    )


def test_the_reference_is_correct_and_measured_on_the_board(board: StandInBoard, evaluator: Evaluator) -> None:
    task = load_task("saxpy")
    r = evaluator.evaluate(task, load_target("k1-x60"), Candidate(code=task.reference_code), runner_for(board))
    assert r.status == EvalStatus.OK, r.feedback
    assert r.runner == "ssh" and r.measurement == "measured"
    assert (
        r.baseline_seconds
        and r.candidate_seconds
        and r.speedup == pytest.approx(r.baseline_seconds / r.candidate_seconds)
    )
    assert (board.root / "last_core").read_text().strip() == "1"  # pinned as configured
    assert list(board.remote.iterdir()) == []  # the copy on the board was removed


def test_a_wrong_candidate_fails_on_the_board(board: StandInBoard, evaluator: Evaluator) -> None:
    code = "void saxpy(int n, float a, const float *x, float *y) { for (int i = 0; i < n; i++) y[i] = a * x[i]; }"
    r = evaluator.evaluate(load_task("saxpy"), load_target("k1-x60"), Candidate(code=code), runner_for(board))
    assert r.status == EvalStatus.WRONG and "expected" in r.feedback


def test_an_infinite_loop_is_killed_on_the_board(board: StandInBoard, tmp_path: Path) -> None:
    evaluator = Evaluator(Settings(home=tmp_path / "home", eval_timeout_s=3))
    code = "void saxpy(int n, float a, const float *x, float *y) { volatile int s = 1; while (s) { } }"
    t0 = time.monotonic()
    r = evaluator.evaluate(load_task("saxpy"), load_target("k1-x60"), Candidate(code=code), runner_for(board))
    assert r.status == EvalStatus.TIMEOUT, r.feedback
    assert time.monotonic() - t0 < 40


def test_settings_configure_the_runner_and_a_missing_board_is_a_clear_error(board: StandInBoard) -> None:
    from core.errors import InvalidInput

    with pytest.raises(InvalidInput, match="EOK_SSH_HOST"):
        get_runner("ssh", Settings(ssh_host=None))
    r = get_runner("ssh", Settings(ssh_host="127.0.0.1", ssh_port=board.port, ssh_user="root"))
    assert isinstance(r, SshRunner) and r.destination == "root@127.0.0.1" and r.build_kind == "board"


def test_an_unreachable_board_is_unavailable_not_a_crash(tmp_path: Path) -> None:
    from core.errors import Unavailable

    evaluator = Evaluator(Settings(home=tmp_path / "home", eval_timeout_s=5))
    port = free_port()
    dead = SshRunner("127.0.0.1", "root", port, None, known_hosts=tmp_path / "kh", build_kind="emulator")
    task = load_task("saxpy")
    with pytest.raises(Unavailable, match=f"127.0.0.1:{port}"):
        evaluator.evaluate(task, load_target("k1-x60"), Candidate(code=task.reference_code), dead)
