"""The FastAPI application: `create_app()` builds it; its lifespan assembles the parts once per process.

At startup: connect to Neo4j (which applies pending schema migrations once), load the API keys and the
saved queries, warm the retrieval index and embedding model, then resume (or mark interrupted) runs an
earlier process left unfinished. At shutdown: running runs are stopped and recorded as interrupted.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from functools import partial
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles
from starlette.concurrency import run_in_threadpool

from core.errors import EokError
from core.settings import Settings, get_settings
from knowledge import local_neo4j
from service.api.cypher import ReadOnlyCypher, load_saved_queries
from service.api.deps import ServiceState
from service.api.errors import BodySizeLimit, install_error_handlers
from service.api.routes import bootstraps, catalog, experiences, graph, health, ideas, queries, runs, web
from service.api.run_manager import RunExecutor, RunManager
from service.api.security import KeyRing
from service.bootstrap import Container

log = logging.getLogger("eok.api")
MAX_BODY_BYTES = 64 * 1024  # the largest legitimate body is an analyst's query with its parameters
OptimizerFactory = Callable[[Container], RunExecutor | None]


def default_optimizer(container: Container) -> RunExecutor | None:
    """The agent's Optimizer, or None when the agent package is not installed (runs answer 503)."""
    try:
        from agent.optimizer import Optimizer
    except ModuleNotFoundError as e:
        if e.name not in ("agent.optimizer", "agent"):
            raise
        log.warning("agent.optimizer is not installed: run endpoints will answer 503")
        return None
    return Optimizer(container)


def create_app(
    settings: Settings | None = None,
    *,
    container: Container | None = None,
    optimizer_factory: OptimizerFactory = default_optimizer,
    resume_runs: bool = True,
    warm: bool = True,
    max_body_bytes: int = MAX_BODY_BYTES,
) -> FastAPI:
    """The app. `container` and `optimizer_factory` let tests and the main job share parts they built."""
    settings = settings or (container.settings if container else get_settings())

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        state = await run_in_threadpool(_assemble, settings, container, optimizer_factory, resume_runs, warm)
        app.state.eok = state
        stop_sync = _start_vector_sync(state.container)
        stop_watch = _supervise_local_neo4j(settings)
        restore = _stop_runs_on_signal(state.runs)
        try:
            yield
        finally:
            restore()
            stop_sync.set()
            stop_watch.set()
            if (boots := getattr(app.state, "eok_bootstraps", None)) is not None:
                await run_in_threadpool(boots.shutdown)
            await run_in_threadpool(state.runs.shutdown)
            if container is None:  # we built it, we close it
                state.container.close()

    app = FastAPI(
        title="EoK",
        summary="Experience-driven kernel optimizer for SpacemiT K1/K3 (RISC-V)",
        description=(
            "Optimization ideas mined from kernel libraries, experiences measured on RISC-V targets, the agent "
            "as a service, and read-only Cypher for analysts. Authenticate with an API key in `X-API-Key` or "
            "`Authorization: Bearer`; roles: reader < analyst < operator."
        ),
        version=_version(),
        lifespan=lifespan,
        docs_url=None,  # served below from local assets: no CDN
        redoc_url=None,
        responses={
            413: {"description": "request body over the size limit (JSON error)"},
            500: {"description": "unexpected error (generic message; details in the server log)"},
        },
    )
    install_error_handlers(app)
    app.add_middleware(BodySizeLimit, max_bytes=max_body_bytes)
    for module in (health, ideas, experiences, catalog, runs, bootstraps, queries, graph, web):
        app.include_router(module.router)
    _mount_assets(app)
    return app


def _assemble(
    settings: Settings,
    container: Container | None,
    optimizer_factory: OptimizerFactory,
    resume_runs: bool,
    warm: bool,
) -> ServiceState:
    container = container or Container(settings)
    store = container.store  # connects and applies pending migrations, once for this process
    keys = KeyRing(settings.api_keys)
    if not len(keys):
        log.warning("no API keys configured (EOK_API_KEYS): every endpoint but /health and the page answers 401")
    if warm:
        container.index.ensure_fresh()
        container.embedder.embed(["warm up the embedding model"])
    manager = RunManager(optimizer_factory(container), store, settings.api_workers)
    manager.recover(resume=resume_runs)
    return ServiceState(
        settings=settings,
        container=container,
        keys=keys,
        queries=load_saved_queries(),
        cypher=ReadOnlyCypher(
            store,
            settings.cypher_timeout_s,
            settings.cypher_row_cap,
            settings.cypher_byte_cap,
            on_stuck=partial(_end_local_neo4j, settings) if settings.uses_local_neo4j else None,
        ),
        runs=manager,
    )


def _stop_runs_on_signal(runs: RunManager) -> Callable[[], None]:
    """SIGTERM/SIGINT: ask runs to stop first, then let the server's own handler begin its shutdown.

    The server waits for open connections before the lifespan's shutdown; a page watching a run keeps its
    event stream open, so without this the run went on and the watcher never saw a terminal event.
    Returns a function restoring the previous handlers. Only possible in the main thread (not in tests
    that serve from a thread, where the lifespan's shutdown still stops the runs).
    """
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}

    def handler(signum: int, frame: Any) -> None:
        log.info("signal %d: stopping runs after their current evaluation", signum)
        runs.begin_shutdown()
        chained = previous.get(signal.Signals(signum))
        if callable(chained):
            chained(signum, frame)
        elif chained == signal.SIG_DFL:
            raise KeyboardInterrupt

    for sig in previous:
        signal.signal(sig, handler)

    def restore() -> None:
        for sig, old in previous.items():
            with suppress(ValueError, TypeError):
                signal.signal(sig, old)

    return restore


VECTOR_SYNC_INTERVAL_S = 10.0
NEO4J_WATCH_INTERVAL_S = 2.0


def _end_local_neo4j(settings: Settings) -> None:
    """End every transaction of the local Neo4j at once and start it again: SIGKILL (a statement it cannot
    stop also holds up a graceful stop), then start (Neo4j recovers its store). Done here rather than left to
    the supervisor below, which may already have stopped with the service."""
    if (pid := local_neo4j.pid(settings)) is not None:
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while local_neo4j.pid(settings) == pid and time.monotonic() < deadline:
            time.sleep(0.1)
    _start_local_neo4j_again(settings)


def _start_local_neo4j_again(settings: Settings) -> None:
    try:
        local_neo4j.start(settings)
        log.warning("the local Neo4j is back on %s", settings.bolt_uri)
    except EokError as e:
        log.error("could not start the local Neo4j again: %s", e.message)


def _supervise_local_neo4j(settings: Settings) -> threading.Event:
    """Start the local Neo4j again when it died under the service (its JVM exits on an out-of-memory error:
    one analyst expression building a gigabyte string did that). A deliberate `eok db stop` is left alone."""
    stop = threading.Event()
    if not settings.uses_local_neo4j:
        return stop

    first = local_neo4j.pid(settings) is not None  # now: the server the service started with

    def loop() -> None:
        was_running = first
        while not stop.wait(NEO4J_WATCH_INTERVAL_S):
            running = local_neo4j.pid(settings) is not None
            if running or not was_running or local_neo4j.stopped_on_purpose(settings):
                was_running = running
                continue
            where = local_neo4j.log_file(settings)
            log.warning("the local Neo4j stopped unexpectedly (see %s): starting it again", where)
            _start_local_neo4j_again(settings)

    threading.Thread(target=loop, name="eok-neo4j-watch", daemon=True).start()
    return stop


def _start_vector_sync(container: Container) -> threading.Event:
    """Keep the Neo4j vector indexes (analysts' Cypher) caught up with embeddings written by runs and by other
    processes; a check is one small read when nothing changed."""
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(VECTOR_SYNC_INTERVAL_S):
            try:
                container.store.sync_vector_index()
            except Exception:  # a lost connection must not kill the loop; the next round retries
                log.exception("vector index sync failed")

    threading.Thread(target=loop, name="eok-vector-sync", daemon=True).start()
    return stop


def _mount_assets(app: FastAPI) -> None:
    app.mount("/static", StaticFiles(directory=web.WEB_DIR), name="static")
    swagger = _swagger_dir()
    if swagger is not None:
        app.mount("/docs-assets", StaticFiles(directory=swagger), name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    def docs() -> HTMLResponse:
        if swagger is None:
            return HTMLResponse(
                "<p>The interactive docs need the swagger-ui-bundle-v2 package. The schema is at "
                '<a href="/openapi.json">/openapi.json</a>.</p>'
            )
        return get_swagger_ui_html(
            openapi_url="/openapi.json",
            title="EoK API",
            swagger_js_url="/docs-assets/swagger-ui-bundle.js",
            swagger_css_url="/docs-assets/swagger-ui.css",
            swagger_favicon_url="/docs-assets/favicon-32x32.png",
        )


def _swagger_dir() -> Any:
    try:
        import swagger_ui_bundle
    except ImportError:
        return None
    return swagger_ui_bundle.swagger_ui_path


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("eok")
    except PackageNotFoundError:
        return "0"
