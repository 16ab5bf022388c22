"""Issue 24 item 3: a command that may take seconds shows that it is working from its first second.

Each command runs in a pseudo-terminal (as in a person's shell) against a "Neo4j" that accepts the
connection and never answers, so it hangs exactly where a slow or loaded server makes it wait; what the
terminal shows in the first seconds is what a person would see."""

from __future__ import annotations

import os
import pty
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

PROJECT = Path(__file__).resolve().parents[2]
SHOWN_WITHIN_S = 4.0  # Python's start and the CLI's imports take ~0.5 s quiet; the rest is load's margin


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A port that accepts connections and never says a word."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        yield s.getsockname()[1]


def _screen_after(argv: list[str], env: dict[str, str], wanted: str, within_s: float) -> tuple[str, float | None]:
    """What the terminal showed until `wanted` appeared (and when), or all of it after `within_s`."""
    main, child = pty.openpty()
    proc = subprocess.Popen(argv, stdin=child, stdout=child, stderr=child, env=env, cwd=PROJECT, close_fds=True)
    os.close(child)
    shown, began, seen_at = b"", time.monotonic(), None
    try:
        while (left := within_s - (time.monotonic() - began)) > 0:
            if select.select([main], [], [], left)[0]:
                try:
                    shown += os.read(main, 4096)
                except OSError:  # the command ended and closed its terminal
                    break
            if wanted.encode() in shown:
                seen_at = time.monotonic() - began
                break
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        os.close(main)
    return shown.decode(errors="replace"), seen_at


@pytest.mark.parametrize(
    ("args", "wanted"),
    [
        (["db", "status"], "counting the graph"),
        (["cypher", "recent_runs"], "running recent_runs"),
        (["ideas", "show", "thought-x"], "reading thought-x"),
    ],
)
def test_a_command_waiting_on_the_graph_shows_it_is_working(
    silent_server: int, tmp_path: Path, args: list[str], wanted: str
) -> None:
    env = {
        **os.environ,
        "NEO4J_URI": f"bolt://127.0.0.1:{silent_server}",
        "EOK_HOME": str(tmp_path),
        "TERM": "xterm-256color",
        "COLUMNS": "100",
    }
    shown, seen_at = _screen_after([sys.executable, "-m", "service.cli", *args], env, wanted, SHOWN_WITHIN_S)
    assert seen_at is not None, f"nothing said it was working within {SHOWN_WITHIN_S} s: {shown!r}"
