"""`eok cypher NAME [--param k=v ...] [--json]` and `eok cypher --list`: the analysts' saved queries."""

from __future__ import annotations

import json
from typing import Any

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from core.errors import InvalidInput
from core.settings import get_settings
from service.api.cypher import ReadOnlyCypher, get_saved_query, load_saved_queries
from service.cli.app import JsonOpt, app, console, print_json, working


@app.command("cypher")
def cypher_command(
    name: str = typer.Argument(None, help="saved query name (file stem in cypher/queries/)"),
    param: list[str] = typer.Option([], "--param", "-p", help="a parameter as key=value; repeat for more"),
    list_queries: bool = typer.Option(False, "--list", "-l", help="list the saved queries and their parameters"),
    json_out: bool = JsonOpt,
) -> None:
    """Run a saved Cypher query read-only (with the API's timeout and row cap), or list them."""
    queries = load_saved_queries()
    if list_queries or not name:
        _print_list([q.describe() for q in queries.values()], json_out)
        return
    query = get_saved_query(queries, name)
    params = query.bind(parse_params(param))
    settings = get_settings()
    from knowledge.store import GraphStore

    with working(f"running {name} on {settings.bolt_uri}"), GraphStore.connect(settings) as store:
        guard = ReadOnlyCypher(store, settings.cypher_timeout_s, settings.cypher_row_cap, settings.cypher_byte_cap)
        result = guard.run(query.text, params)
    if json_out:
        print_json({"query": name, "params": params, **result.as_dict()})
        return
    _print_rows(result.columns, result.rows)
    more = f", truncated at {result.row_cap}" if result.truncated else ""
    console.print(f"[dim]{len(result.rows)} rows in {result.elapsed_ms:.0f} ms{more}[/]")


def parse_params(items: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InvalidInput(f"--param {item!r} is not key=value", "write e.g. --param target=k1-x60")
        out[key.strip()] = value
    return out


def _print_list(items: list[dict[str, Any]], json_out: bool) -> None:
    if json_out:
        print_json([{k: v for k, v in q.items() if k != "cypher"} for q in items])
        return
    table = Table()
    table.add_column("name", no_wrap=True)  # typed by users: never cut with an ellipsis
    table.add_column("summary", ratio=2)
    table.add_column("parameters (default)", ratio=1)
    for q in items:
        params = ", ".join(
            f"{p['name']}: {p['type']}" + (" (required)" if p["required"] else f" = {json.dumps(p['default'])}")
            for p in q["params"]
        )
        table.add_row(q["name"], q["summary"], params or "-")
    console.print(table)


# A column narrower than this (or than its name) is unreadable: rich would squeeze ids to two characters.
MIN_COLUMN = 10
MAX_COLUMN = 40  # cells longer than this wrap within the column when the table fits


def _print_rows(columns: list[str], rows: list[dict[str, Any]], out: Console | None = None) -> None:
    """A table when every column fits the terminal at a readable width, else one record per row
    (`column: value` lines, like psql's expanded mode): nothing is cut and nothing squeezed."""
    out = out or console
    cells = [[_cell(row.get(c)) for c in columns] for row in rows]
    widths = [
        max(len(c), min(MAX_COLUMN, max([MIN_COLUMN, *(len(r[i]) for r in cells)]))) for i, c in enumerate(columns)
    ]
    if sum(widths) + 3 * len(columns) + 1 <= out.width:
        table = Table(*columns)
        for col in table.columns:
            col.overflow = "fold"
        for r in cells:
            table.add_row(*r)
        out.print(table)
        return
    name_width = max(len(c) for c in columns)
    for n, r in enumerate(cells, 1):
        out.print(f"[bold]-- row {n}[/]", highlight=False)
        for c, value in zip(columns, r, strict=True):
            text = Text(f"{c:>{name_width}}: ", style="dim")
            text.append(value)
            out.print(text, overflow="fold")


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, default=str)
