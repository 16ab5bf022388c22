"""`eok tasks list`'s table: 80 columns when piped, nothing lost, names never broken."""

from __future__ import annotations

import importlib
import io

import pytest
from rich.console import Console

from service.cli.app import _wrap, print_plain_table

cli_app = importlib.import_module("service.cli.app")  # `service.cli.app` as a name is the Typer app, not the module


def test_a_table_fits_80_columns_and_keeps_every_character(monkeypatch: pytest.MonkeyPatch) -> None:
    out = io.StringIO()
    monkeypatch.setattr(cli_app, "console", Console(file=out, width=80))
    rows = [
        ["a_rather_long_task_name_x", "normalization", "quant_dot", "f32", "m=1, n=4096, k=4096, block=32, extra=1"],
        ["relu", "nn", "act", "f32", "n=1048576"],
        ["[bold]x[/]", "nn", "act", "f32", "n=" + "9" * 40],  # no markup; a word past the column is cut
    ]
    print_plain_table("3 tasks", ["name", "category", "operator", "dtype", "bench size"], rows, wrap=4)
    lines = out.getvalue().splitlines()
    assert max(len(line) for line in lines) <= 80 and lines[0].strip() == "3 tasks"
    body = [line for line in lines if line.startswith("│")]
    cells = [[c.strip() for c in line.split("│")[1:-1]] for line in body]
    assert [c[0] for c in cells if c[0]] == [r[0] for r in rows]  # names whole, one line each
    first = [c[4] for c in cells[: next(i for i, c in enumerate(cells[1:], 1) if c[0])]]
    assert " ".join(first) == rows[0][4] and len(first) > 1  # wrapped, nothing lost
    last = [c[4] for c in cells[next(i for i, c in enumerate(cells) if c[0] == rows[2][0]) :]]
    assert "".join(last) == rows[2][4] and len(last) > 1  # a word past the column: split, not lost


def test_wrapping_breaks_after_commas_and_splits_only_overlong_words() -> None:
    assert _wrap("c=48, h=64, w=64", 16) == ["c=48, h=64, w=64"]
    assert _wrap("heads=8, seq_len=256, head_dim=64", 16) == ["heads=8,", "seq_len=256,", "head_dim=64"]
    assert "".join(_wrap("n=" + "9" * 40, 16)) == "n=" + "9" * 40
    assert all(len(part) <= 16 for part in _wrap("n=" + "9" * 40, 16))
