"""Versioned, idempotent schema migrations read from cypher/schema.cypher and recorded in the graph."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from core.settings import PROJECT_ROOT

SCHEMA_FILE = PROJECT_ROOT / "cypher" / "schema.cypher"
_HEADER = re.compile(r"^//\s*migration\s+(\d+):\s*(.+)$")


@dataclass(frozen=True)
class Migration:
    version: int
    title: str
    statements: tuple[str, ...]


def load_migrations(path: Path = SCHEMA_FILE) -> list[Migration]:
    """Split the schema file into its versioned steps; statements end with ';'."""
    steps: list[Migration] = []
    version, title, buf = None, "", []

    def flush() -> None:
        if version is not None:
            text = "\n".join(buf)
            stmts = tuple(s.strip() for s in text.split(";") if s.strip())
            steps.append(Migration(version, title, stmts))

    for line in path.read_text().splitlines():
        m = _HEADER.match(line.strip())
        if m:
            flush()
            version, title, buf = int(m.group(1)), m.group(2).strip(), []
        elif not line.strip().startswith("//"):
            buf.append(line)
    flush()
    versions = [s.version for s in steps]
    if versions != sorted(set(versions)):
        raise ValueError(f"{path}: migration versions must be unique and increasing, got {versions}")
    return steps
