"""`eok serve [--host] [--port]`: the HTTP API and the web page (uvicorn, one process)."""

from __future__ import annotations

import logging
import socket
from enum import StrEnum

import typer

from core.errors import Unavailable
from core.settings import get_settings
from service.cli.app import JsonOpt, app, console, print_json


class LogLevel(StrEnum):
    critical = "critical"
    error = "error"
    warning = "warning"
    info = "info"
    debug = "debug"


def check_port_free(host: str, port: int) -> None:
    """A taken port is one line naming it, before anything starts (uvicorn would log and exit later)."""
    reserve_port(host, port).close()


def reserve_port(host: str, port: int) -> socket.socket:
    """Listen on host:port now and keep it (uvicorn serves on this socket later): a command that serves only
    after minutes of work (`eok up`) holds its port from the start, so a second one is refused at once."""
    s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds: TIME_WAIT does not block it
    try:
        s.bind((host, port))
        s.listen(2048)
    except OSError as e:
        s.close()
        raise Unavailable(
            f"cannot listen on {host}:{port}: {e.strerror}", "stop what uses that port or pass --port N"
        ) from None
    return s


GRACEFUL_SHUTDOWN_S = 10  # open event streams are closed after this; running runs are recorded as interrupted


@app.command("serve")
def serve_command(
    host: str = typer.Option(None, "--host", help="address to bind (default: settings.api_host, 127.0.0.1)"),
    port: int = typer.Option(None, "--port", min=1, max=65535, help="port to bind (default: settings.api_port, 8000)"),
    resume: bool = typer.Option(
        True, "--resume/--no-resume", help="resume runs an earlier process left unfinished, or mark them interrupted"
    ),
    start_db: bool = typer.Option(
        True, "--start-db/--no-start-db", help="start the local Neo4j first when NEO4J_URI is not set"
    ),
    log_level: LogLevel = typer.Option(LogLevel.info, "--log-level", help="uvicorn log level"),
    json_out: bool = JsonOpt,
) -> None:
    """Serve the API (OpenAPI docs at /docs) and the web page (/) until interrupted."""
    import uvicorn

    from service.api.app import create_app
    from service.bootstrap import Container

    settings = get_settings()
    host = host or settings.api_host
    port = port or settings.api_port
    check_port_free(host, port)  # before starting anything or saying "serving on"
    if start_db and settings.uses_local_neo4j:
        from knowledge import local_neo4j

        local_neo4j.start(settings)
    container = Container(settings)
    _ = container.store  # connect now: an unreachable Neo4j is one clear error line, not a startup traceback
    logging.basicConfig(level=log_level.value.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if not settings.api_keys:
        hint = 'set EOK_API_KEYS=\'{"<key>": "operator"}\''
        console.print(f"[yellow]no API keys configured[/]: {hint}", highlight=False)
    url = f"http://{host}:{port}"
    if json_out:  # one JSON line a supervisor can read; uvicorn's own log goes to stderr
        print_json({"serving": url, "page": f"{url}/", "docs": f"{url}/docs", "neo4j": settings.bolt_uri})
    else:
        console.print(f"serving on {url}  (page /, API docs /docs)", highlight=False)
    try:
        uvicorn.run(
            create_app(settings, container=container, resume_runs=resume),
            host=host,
            port=port,
            workers=1,
            log_level=log_level.value,
            timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
        )
    finally:
        container.close()
