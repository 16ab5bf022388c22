"""The rough edges a daily user hit (issue 24, item 4), each answered at once in one line, before any work:
no Neo4j, no models, no optimization is started by any of these."""

from __future__ import annotations

import fcntl
import io
import socket
import time
from pathlib import Path

import pytest
from rich.console import Console

from core.settings import get_settings
from service.cli import _register, main_job
from service.cli.app import run_cli
from service.cli.cypher import _print_rows

_register()


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("EOK_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)  # no .env from the work tree
    return tmp_path / "home"


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, float]:
    get_settings.cache_clear()
    t0 = time.monotonic()
    try:
        code = run_cli(argv)
    finally:
        get_settings.cache_clear()
    return code, capsys.readouterr().err, time.monotonic() - t0


def _one_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert "Traceback" not in err and len(lines) <= 2 and lines[0].startswith("error:"), err
    return lines[0]


def test_a_second_eok_up_is_refused_at_once(_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _home.mkdir(parents=True)
    with open(_home / "up.lock", "w") as held:  # what a running `eok up` holds for its whole life
        held.write("4242")
        held.flush()
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        code, err, seconds = _run(["up", "--exit"], capsys)
    assert code != 0 and seconds < 5
    assert "another `eok up` (pid 4242) is running" in _one_line(err)


def test_a_taken_port_names_an_option_eok_up_has(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        try:
            code, err, seconds = _run(["up", "--task", "relu", "--port", str(port)], capsys)
        finally:
            for f in main_job._UP_LOCK:  # this test process is not going to exit: let the next test take it
                f.close()
            main_job._UP_LOCK.clear()
    line = _one_line(err)
    assert code != 0 and seconds < 10
    assert f"cannot listen on 127.0.0.1:{port}" in line and "--port N" in err
    code, err, _ = _run(["up", "--port", "0"], capsys)  # the option exists: only its range is refused
    assert code == 2 and "--port" in _one_line(err) and "No such option" not in err


def test_optimize_honours_eok_default_target(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.setenv("EOK_DEFAULT_TARGET", "nosuch-target")
    code, err, _ = _run(["optimize", "relu"], capsys)
    assert code != 0 and "unknown target 'nosuch-target'" in _one_line(err)


def test_a_huge_candidate_is_refused_by_its_size_before_it_is_read(tmp_path: Path, capsys) -> None:
    import resource

    big = tmp_path / "big.c"
    with open(big, "wb") as f:
        f.truncate(300 << 20)  # 300 MB, sparse: reading it would allocate it
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    code, err, seconds = _run(["eval", "relu", "--candidate", str(big)], capsys)
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert code == 2 and seconds < 5 and grown_mb < 50
    assert "314,572,800 bytes, more than the 256 KB" in _one_line(err)


def test_mine_on_a_folder_that_is_not_git_says_so_at_once(tmp_path: Path, capsys) -> None:
    folder = tmp_path / "not-a-repo"
    folder.mkdir()
    (folder / "kernel.c").write_text("void f(void) {}\n")
    code, err, seconds = _run(["mine", str(folder)], capsys)
    assert code == 2 and seconds < 1.0
    assert f"repository {folder} is not a git repository (not a git repository" in _one_line(err)


def test_cypher_rows_stay_readable_at_80_columns() -> None:
    columns = ["run", "task", "target", "status", "budget", "evaluations", "best_over_competent", "best_over_o3"]
    columns += ["generator", "started_at", "baseline_note"]
    row = {
        "run": "run-20261201-070136-f241bc",
        "task": "softmax",
        "target": "k1-x60",
        "status": "done",
        "budget": 12,
        "evaluations": 12,
        "best_over_competent": 29.483,
        "best_over_o3": 29.136,
        "generator": "offline",
        "started_at": "2026-12-01T07:01:36.123456Z",
        "baseline_note": "weak baseline: its reference calls scalar libm expf, which clang cannot vectorize here",
    }
    buf = io.StringIO()
    _print_rows(columns, [row, row], Console(file=buf, width=80, color_system=None))
    text = buf.getvalue()
    assert max(len(line) for line in text.splitlines()) <= 80
    # Nothing squeezed or cut: every column name and every id appears whole.
    for c in columns:
        assert f"{c}: " in text
    assert text.count("run-20261201-070136-f241bc") == 2 and "2026-12-01T07:01:36.123456Z" in text
    narrow = io.StringIO()  # a few short columns still print as a table
    _print_rows(["task", "best_over_o3"], [{"task": "sdot", "best_over_o3": 6.95}], Console(file=narrow, width=80))
    assert "┃ task" in narrow.getvalue() and "6.95" in narrow.getvalue()


def test_setup_shows_pip_progress_with_the_time_and_honest_figures() -> None:
    import re
    import subprocess

    from core.settings import PROJECT_ROOT

    setup = (PROJECT_ROOT / "scripts" / "setup.sh").read_text()
    assert not re.search(r"pip\" install -q", setup)  # no pip step is silent any more
    assert "3-17 minutes and about 6.5 GB" in setup and 'du -sh "$VENV"' in setup
    function = re.search(r"^_pip_progress\(\) \{.*?^\}", setup, re.M | re.S)
    assert function is not None
    pip_says = "Collecting torch\n  Downloading torch-2.5.1.whl (200.1 MB)\nRequirement already satisfied: numpy\n"
    shown = subprocess.run(
        [
            "bash",
            "-c",
            f"{function.group(0)}\n{{ printf '%s' \"$1\"; sleep 1.1; echo 'Successfully installed torch'; }}"
            " | _pip_progress",
            "-",
            pip_says,
        ],
        capture_output=True,
        text=True,
        timeout=30,
    ).stdout.splitlines()
    assert shown[:2] == ["  [0:00] Collecting torch", "  [0:00] Downloading torch-2.5.1.whl (200.1 MB)"]
    # the elapsed time after a 1.1 s pause: 1 s, or 2 under load (the clock, not the format, is what varies)
    assert re.fullmatch(r"  \[0:0[12]\] Successfully installed torch", shown[2]) and len(shown) == 3


def test_the_drivers_retry_warnings_stay_off_the_screen(caplog: pytest.LogCaptureFixture) -> None:
    """A deadlock the driver retries by itself printed a 6-line warning in the middle of `eok up`'s table."""
    import logging

    _register()
    assert run_cli(["--help"]) == 0
    with caplog.at_level(logging.DEBUG):  # the root's level: only the driver's own logger can drop the retry
        logging.getLogger("neo4j.session").warning("Transaction failed and will be retried in %ss", 0.9)
        logging.getLogger("neo4j.session").error("a failure after the retries is still shown")
    assert [r.getMessage() for r in caplog.records] == ["a failure after the retries is still shown"]
