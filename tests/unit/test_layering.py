"""Arrows run one way: service -> agent -> knowledge/evaluator/miners -> core. Nothing below imports above."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# package -> the packages it must never import
FORBIDDEN = {
    "agent": {"service"},
    "knowledge": {"service", "agent"},
    "evaluator": {"service", "agent"},
    "miners": {"service", "agent"},
    "core": {"service", "agent", "knowledge", "evaluator", "miners"},
}


def imported_packages(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_nothing_below_imports_above(package: str) -> None:
    offenders = {
        str(p.relative_to(ROOT)): sorted(imported_packages(p) & FORBIDDEN[package])
        for p in (ROOT / package).rglob("*.py")
    }
    assert {k: v for k, v in offenders.items() if v} == {}
