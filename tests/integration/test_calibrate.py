"""`eok calibrate`: the fit recovers known figures from a stand-in board, the file it writes is priced with
its own figures, one kernel is timed over SSH, and bad input is one line.

The stand-in board's cycles are the cost model's own (real qemu traces, real llvm-mca) under the k1-x60
target with perturbed figures, so the fit has a known answer.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.settings import get_settings
from evaluator.costmodel import machine_for, model_kernel_cycles
from evaluator.costmodel.calibration.board import ModeledBoard, Pair, SshBoard, Tracer
from evaluator.costmodel.calibration.fit import (
    BANDWIDTHS,
    Figures,
    base_figures,
    calibration_plan,
    class_overrides,
    fit,
    machine_with,
    target_toml,
)
from evaluator.runners import SshRunner
from evaluator.targets import TARGETS_DIR, load_target
from service.cli import _register
from service.cli.app import run_cli
from tests.support.board import stand_in_board

pytestmark = pytest.mark.qemu

PERTURBED = {"l2_mixed_bytes_per_cycle": 0.5, "dram_gbps": 0.8, "dram_write_gbps": 1.25, "dram_rmw_gbps": 1.2}
SCALES = {"segment_stores": 1.5, "strided": 0.7}


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """EOK_HOME of these tests: the command and the fit test share its builds and llvm-mca costs."""
    return tmp_path_factory.mktemp("calibrate-home")


@pytest.fixture(scope="module")
def tracer(home: Path) -> Tracer:
    return Tracer(home / "cache" / "calibrate", load_target("k1-x60"))


def test_the_fit_recovers_known_figures_and_the_file_is_priced_with_them(tracer: Tracer, tmp_path: Path) -> None:
    profile = load_target("k1-x60")
    base, classes = base_figures(profile), class_overrides(profile)
    assert set(SCALES) <= set(classes)  # both classes have prices to scale (overrides or the published table)
    truth = Figures({k: v * PERTURBED[k] for k, v in base.bandwidths.items()}, dict(SCALES))
    board = ModeledBoard(tracer, machine_with(profile, truth, classes))
    plan = calibration_plan(profile)
    measured = {p.key: board.measure(p) for p in plan}

    result = fit(profile, plan, measured, tracer)

    for name in BANDWIDTHS:
        assert result.fitted.bandwidths[name] == pytest.approx(truth.bandwidths[name], rel=0.05), name
    for name, scale in SCALES.items():
        assert result.fitted.scales[name] == pytest.approx(scale, rel=0.05), name
    assert max(r["error_after"] for r in result.pairs) < 1.02
    assert max(r["error_before"] for r in result.pairs) > 1.2  # the perturbation was visible before the fit

    # The written file loads as a target, carries the fitted figures with their annotation, and the cost model
    # prices a kernel with ITS figures (the built-in k1-x60 of the same cost_model name does not).
    out = tmp_path / "my-board.toml"
    out.write_text(target_toml(TARGETS_DIR / "k1-x60.toml", result, "stand-in", "2026-12-02"))
    text = out.read_text()
    assert "# fitted by eok calibrate on stand-in, 2026-12-02, from memcpy/rvv_tail_m8@512Ki" in text
    mine = load_target(str(out))
    assert mine.costmodel and mine.costmodel.dram_gbps == pytest.approx(truth.bandwidths["dram_gbps"], rel=0.05)
    pair = next(p for p in plan if p.isolates == "segment_stores")
    cache = tracer.cache / "model"
    calibrated = model_kernel_cycles(tracer.binary(pair), tracer.argv(pair), cache, mcpu=machine_for(mine))
    builtin = model_kernel_cycles(tracer.binary(pair), tracer.argv(pair), cache, mcpu="spacemit-x60")
    assert calibrated.cycles == pytest.approx(measured[pair.key], rel=0.02)
    assert builtin.cycles == pytest.approx(tracer.cycles(pair, machine_for(profile)), rel=1e-9)  # Tracer = model
    assert calibrated.cycles > 1.2 * builtin.cycles


def test_one_kernel_is_timed_over_ssh(tmp_path_factory: pytest.TempPathFactory) -> None:
    profile = load_target("k1-x60")
    with stand_in_board(tmp_path_factory.mktemp("board"), profile.qemu_cpu) as b:
        runner = SshRunner("127.0.0.1", "root", b.port, b.key, core=1, remote_dir=str(b.remote),
                           known_hosts=b.root / "known_hosts", build_kind="emulator")  # fmt: skip
        board = SshBoard(runner, profile, tmp_path_factory.mktemp("ssh-cache"), repeats=3)
        cycles = board.measure(Pair("memcpy", "rvv_tail_m1", 4096, "L1"))
        assert cycles > 0
        assert (b.root / "last_core").read_text().strip() == "1"  # pinned as asked
        assert list(b.remote.iterdir()) == []  # the copy on the board was removed


@pytest.fixture
def cli_home(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A folder for the command's files, with EOK_HOME set to the module's home."""
    monkeypatch.setenv("EOK_HOME", str(home))
    get_settings.cache_clear()
    _register(["calibrate"])
    yield tmp_path
    get_settings.cache_clear()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--target", "k9-none"], "unknown target 'k9-none'"),
        (["--target", "k1-x60", "--out", "/nonexistent/dir/b.toml"], "cannot be written"),
        (["--target", "host"], "has no cost model"),
        (["--target", "k1-x60", "--port", "PORT"], "cannot create a directory on the board"),
    ],
)
def test_bad_input_is_one_line(cli_home: Path, capsys: pytest.CaptureFixture[str], args: list[str], says: str) -> None:
    args = [a.replace("PORT", str(_free_port())) for a in args]
    out = ["--out", str(cli_home / "b.toml")] if "--out" not in args else []
    code = run_cli(["calibrate", "--board", "127.0.0.1", *out, *args])
    err = " ".join(capsys.readouterr().err.split())
    assert code != 0 and says in err and "Traceback" not in err
    assert not (cli_home / "b.toml").exists()


def test_the_command_writes_a_target_that_loads(
    cli_home: Path, capsys: pytest.CaptureFixture[str], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """End to end over the stand-in SSH board (qemu's rdcycle: the figures are not a K1's, the plumbing is
    real), on a copy of k1-x60 with small caches so every size stays quick to trace."""
    small = cli_home / "small.toml"
    text = (TARGETS_DIR / "k1-x60.toml").read_text().replace("l1d_kb = 32", "l1d_kb = 4")
    small.write_text(text.replace("l2_kb = 512", "l2_kb = 32"))
    out = cli_home / "my-board.toml"
    with stand_in_board(tmp_path_factory.mktemp("board"), load_target("k1-x60").qemu_cpu) as b:
        args = ["--board", "127.0.0.1", "--port", str(b.port), "--user", "root", "--key", str(b.key)]
        code = run_cli(["calibrate", *args, "--target", str(small), "--out", str(out), "--repeats", "3", "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    report = json.loads(captured.out)
    assert set(BANDWIDTHS) <= set(report["parameters"]) and len(report["pairs"]) == 7
    assert all(r["measured_cycles"] > 0 and r["error_after"] >= 1.0 for r in report["pairs"])
    for i in range(1, 8):
        assert f"[{i}/7]" in captured.err  # progress for every kernel/size
    mine = load_target(str(out))
    assert mine.costmodel and mine.costmodel.l2_mixed_bytes_per_cycle == pytest.approx(
        report["parameters"]["l2_mixed_bytes_per_cycle"]["after"], rel=1e-3
    )
    assert "# fitted by eok calibrate on 127.0.0.1" in out.read_text()
