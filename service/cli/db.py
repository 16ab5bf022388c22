"""`eok db start|stop|status`: the local Neo4j (or, with NEO4J_URI, a check of the server named there)."""

from __future__ import annotations

import time
from typing import Any

import typer
from rich.table import Table

from core.errors import Unavailable
from core.settings import Settings, get_settings
from service.cli.app import JsonOpt, app, console, err_console, print_json, working

db_app = typer.Typer(help="Start, stop and inspect the Neo4j that holds the experience graph.", no_args_is_help=True)
app.add_typer(db_app, name="db")


def _where(settings: Settings) -> dict[str, Any]:
    from knowledge import local_neo4j

    local = settings.uses_local_neo4j
    return {
        "uri": settings.bolt_uri,
        "managed": "local" if local else "remote",
        "pid": local_neo4j.pid(settings),
        "data_dir": str(local_neo4j.data_dir(settings)) if local else None,
    }


@db_app.command()
def start(json_out: bool = JsonOpt) -> None:
    """Start the local Neo4j (building it on first use) and print its Bolt URI; no-op if it runs."""
    from knowledge import local_neo4j  # imported per command: the driver costs every `eok` call ~0.3 s

    settings = get_settings()
    began = time.monotonic()
    if json_out or not settings.uses_local_neo4j or local_neo4j.pid(settings):
        uri = local_neo4j.start(settings)
    else:  # a cold start takes 10 s to 2 min (JVM, store recovery, first build): show that it is working
        with working("starting the local Neo4j"):
            uri = local_neo4j.start(settings)
    info = {**_where(settings), "uri": uri, "seconds": round(time.monotonic() - began, 2)}
    if json_out:
        print_json(info)
        return
    console.print(uri, highlight=False)


@db_app.command()
def stop(json_out: bool = JsonOpt) -> None:
    """Stop the local Neo4j cleanly (SIGTERM; it checkpoints before exiting)."""
    from knowledge import local_neo4j

    settings = get_settings()
    was_running = local_neo4j.stop(settings)
    clean = local_neo4j.stopped_cleanly(settings) if was_running else None
    if json_out:
        print_json({"uri": settings.bolt_uri, "stopped": was_running, "clean": clean})
        return
    if not was_running:
        console.print(f"the local Neo4j ({settings.bolt_uri}) was not running", highlight=False)
    elif clean:
        console.print(f"stopped the local Neo4j ({settings.bolt_uri})", highlight=False)
    else:
        console.print(
            f"[yellow]stopped the local Neo4j ({settings.bolt_uri}), but it had to be killed; "
            "it recovers on the next start[/]",
            highlight=False,
        )


@db_app.command()
def status(json_out: bool = JsonOpt) -> None:
    """Server version and edition, node counts per label, relationship counts per type."""
    from knowledge.store import GraphStore  # the driver import is only paid by commands that need it

    settings = get_settings()
    try:
        counting = working(f"counting the graph at {settings.bolt_uri}")
        # GraphStore.connect raises Unavailable naming the URI and the fix
        with counting, GraphStore.connect(settings, migrate=False) as store:
            stats = store.stats()
            stats["vector_index_pending"] = store.vector_index_pending()
    except Unavailable as e:
        if not json_out:
            raise
        # A monitor reading stdout gets the state, not just an exit code; the line on stderr says why.
        print_json({**_where(settings), "reachable": False, "error": e.message, "fix": e.hint})
        err_console.print(f"[bold red]error:[/] {e.message}", highlight=False)
        raise typer.Exit(e.exit_code) from None
    info = {**_where(settings), "reachable": True, **stats}
    if json_out:
        print_json(info)
        return
    _print_status(info)


@db_app.command()
def sync(json_out: bool = JsonOpt) -> None:
    """Copy new embeddings into the Neo4j vector indexes now (the service and every `eok` command that
    wrote embeddings do it on their own; a bulk load may leave it to this)."""
    from knowledge.store import GraphStore

    settings = get_settings()
    began = time.monotonic()
    with (
        working(f"copying embeddings into the vector indexes at {settings.bolt_uri}"),
        GraphStore.connect(settings) as store,
    ):
        copied = store.sync_vector_index()
        pending = store.vector_index_pending()
    info = {
        "uri": settings.bolt_uri,
        "synced": copied,
        "pending": pending,
        "seconds": round(time.monotonic() - began, 2),
    }
    if json_out:
        print_json(info)
        return
    console.print(f"synced {copied:,} vectors into the Neo4j vector indexes; {pending:,} pending", highlight=False)


def _print_status(info: dict[str, Any]) -> None:
    where = f"pid {info['pid']}, data {info['data_dir']}" if info["managed"] == "local" else "not managed by eok"
    console.print(
        f"Neo4j {info['version']} {info['edition']} at {info['uri']} ({where})", highlight=False, soft_wrap=True
    )
    if info.get("vector_index_pending"):
        console.print(f"{info['vector_index_pending']:,} embeddings not yet in the vector indexes: `eok db sync`")
    for title, counts in (("label", info["labels"]), ("relationship type", info["relationships"])):
        table = Table(title=None, show_edge=False, pad_edge=False)
        table.add_column(title)
        table.add_column("count", justify="right")
        for name, n in sorted(counts.items()):
            table.add_row(name, f"{n:,}")
        if not counts:
            table.add_row("(none)", "0")
        console.print(table)
