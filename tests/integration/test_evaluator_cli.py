"""`eok tasks ...` and `eok eval ...` end to end, in process, with the real evaluator behind them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.settings import get_settings
from service.cli import _register
from service.cli.app import run_cli

pytestmark = pytest.mark.qemu


@pytest.fixture(autouse=True)
def cli_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    home = tmp_path_factory.getbasetemp() / "eok-evaluator-home"
    monkeypatch.setenv("EOK_HOME", str(home))
    get_settings.cache_clear()
    _register()
    yield home
    get_settings.cache_clear()


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = run_cli(list(argv))
    out = capsys.readouterr()
    return code, out.out, " ".join(out.err.split())  # rich wraps long lines at the terminal width


def test_tasks_list_and_show(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(capsys, "tasks", "list", "--json")
    assert code == 0
    names = {t["name"] for t in json.loads(out)}
    assert {"saxpy", "sdot", "sgemm_64", "softmax", "q4_0_q8_0_dot", "stream_compaction"} <= names
    code, out, _ = cli(capsys, "tasks", "show", "sgemm_64", "--json")
    shown = json.loads(out)
    assert code == 0 and shown["signature"].startswith("void sgemm_64(int m, int n, int k")
    assert shown["sizes"][shown["bench_index"]] == {"m": 64, "n": 64, "k": 64}
    code, out, _ = cli(capsys, "tasks", "show", "softmax")
    assert code == 0 and "reference.c" in out and "expf" in out and "<- bench" in out


def test_eval_of_the_reference_is_ok_and_modeled(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(capsys, "eval", "saxpy", "--target", "k1-x60", "--json")
    result = json.loads(out)
    assert code == 0 and result["status"] == "ok" and result["measurement"] == "modeled"
    assert result["speedup"] == pytest.approx(1.0, abs=0.05)  # the reference against itself
    # The roofline of the modeled run: a bound, and achieved rates under the target's ceilings.
    assert result["bound"] in ("compute", "L2", "DRAM")
    assert 0 < result["flops_per_cycle"] <= result["peak_flops_per_cycle"]
    assert 0 <= result["dram_bytes_per_cycle"] <= result["peak_dram_bytes_per_cycle"] * 1.01
    code, out, _ = cli(capsys, "eval", "saxpy")
    assert code == 0 and "ok" in out and "modeled cycles" in out and "speedup" in out
    assert "-bound:" in out and "FLOP/cycle" in out


def test_eval_of_a_wrong_candidate_file_fails(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    cand = tmp_path / "wrong.c"
    cand.write_text("void saxpy(int n, float a, const float *x, float *y) { for (int i = 0; i < n; i++) y[i] = a; }")
    code, out, _ = cli(capsys, "eval", "saxpy", "--candidate", str(cand), "--cflags", "-O2 -funroll-loops")
    assert code == 1 and "wrong" in out and "expected" in out


def test_eval_input_errors_are_one_clear_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = cli(capsys, "eval", "no_such_task")
    assert code == 1 and "unknown task 'no_such_task'" in err and "Traceback" not in err
    code, _, err = cli(capsys, "eval", "saxpy", "--target", "k9")
    assert code == 1 and "unknown target 'k9'" in err
    code, _, err = cli(capsys, "eval", "saxpy", "--candidate", str(tmp_path / "missing.c"))
    assert code == 2 and "does not exist" in err  # a usage error, as for any bad option
    bad = tmp_path / "broken"
    bad.mkdir()
    (bad / "task.toml").write_text('name = "broken"\n')
    code, _, err = cli(capsys, "tasks", "show", str(bad))
    assert code == 2 and "broken/task.toml: field 'category'" in err
