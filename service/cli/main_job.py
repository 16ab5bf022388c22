"""`eok up`: the main job. Local Neo4j, knowledge, one optimization on the emulated K1, then the service."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from core.settings import get_settings
from service.cli.app import JsonOpt, app, console, err_console, print_json

DEFAULT_TASK = "softmax"  # exercises retrieval, several directions and a clear win over clang -O3


@app.command()
def up(
    task: Annotated[str, typer.Option(help="suite task to optimize")] = DEFAULT_TASK,
    target: Annotated[str | None, typer.Option(help="target key (default: EOK_DEFAULT_TARGET, k1-x60)")] = None,
    budget: Annotated[int, typer.Option(min=1, max=2000, help="evaluations for the demonstration run")] = 16,
    exit_after: Annotated[bool, typer.Option("--exit", help="stop after printing the result")] = False,
    host: Annotated[str | None, typer.Option(help="address to serve on (default: EOK_API_HOST, 127.0.0.1)")] = None,
    port: Annotated[
        int | None, typer.Option(min=1, max=65535, help="port to serve on (default: EOK_API_PORT, 8000)")
    ] = None,
    json_out: bool = JsonOpt,
) -> None:
    """Run the main job end to end on the embedded defaults, then serve the API and the page."""
    from agent.optimizer import Optimizer
    from agent.types import RunRequest
    from knowledge import local_neo4j
    from service.bootstrap import Container
    from service.cli.optimize import _check_up_front, _execute, _outcome_json, _print_outcome
    from service.cli.serve import reserve_port

    settings = get_settings()
    settings = settings.model_copy(
        update={"api_host": host or settings.api_host, "api_port": port or settings.api_port}
    )
    target = target or settings.default_target
    _hold_up_lock(settings.home)
    _check_up_front(task, target, None)
    # Held from now until uvicorn serves on it: a second `eok up` on the same port is refused at once.
    listener = None if exit_after else reserve_port(settings.api_host, settings.api_port)
    uri = local_neo4j.start(settings)
    log = err_console if json_out else console
    log.print(f"[bold]1/4[/] Neo4j at {uri}")
    container = Container(settings)
    loaded = _load_knowledge(container, log)
    log.print(f"[bold]2/4[/] knowledge: {loaded}")
    opt = Optimizer(container)
    run = opt.create_run(RunRequest(task=task, target=target, budget=budget, directions=4))
    log.print(f"[bold]3/4[/] optimizing {task} on {target} (budget {budget}, generator {run.generator})")
    outcome = _execute(opt, run.id, run.budget, quiet=json_out)
    if json_out:
        print_json(_outcome_json(outcome))
    else:
        _print_outcome(outcome)
    if exit_after:
        container.close()
        log.print(f"[bold]4/4[/] done (--exit: not serving). {_neo4j_note(settings)}", highlight=False)
        return
    log.print(f"      {_neo4j_note(settings)}", highlight=False)
    _serve(container, settings, log, listener)


_UP_LOCK: list = []  # the open lock file, held for the life of this process


def _hold_up_lock(home: Path) -> None:
    """One `eok up` per EOK_HOME at a time: a second one (same graph, same port, same run folder) is refused
    in a line instead of running the whole optimization again and failing at the end."""
    import fcntl
    import os

    from core.errors import Unavailable

    home.mkdir(parents=True, exist_ok=True)
    f = open(home / "up.lock", "a+")  # noqa: SIM115 - held open until the process ends
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.seek(0)
        pid = f.read().strip() or "?"
        f.close()
        raise Unavailable(
            f"another `eok up` (pid {pid}) is running on {home}",
            "wait for it, stop it (Ctrl-C), or give this one its own EOK_HOME and --port",
        ) from None
    f.truncate(0)
    f.write(str(os.getpid()))
    f.flush()
    _UP_LOCK.append(f)


def _neo4j_note(settings) -> str:
    """The local Neo4j outlives this command (the next one starts in seconds): say so and how to stop it."""
    from knowledge import local_neo4j

    if not settings.uses_local_neo4j:
        return f"Neo4j at {settings.bolt_uri} is not managed by eok."
    return (
        f"The local Neo4j (pid {local_neo4j.pid(settings)}, heap {settings.local_neo4j_heap} + page cache "
        f"{settings.local_neo4j_pagecache}) keeps running for the next command; stop it with `eok db stop`."
    )


def _load_knowledge(container, log) -> str:
    """Mine the repositories named in settings when present; otherwise ship the starter ideas."""
    from miners.pipeline import MineOptions, Miner

    mined = []
    for repo in container.settings.mine_repos:
        if not (repo.startswith(("http://", "https://", "git@")) or Path(repo).exists()):
            log.print(f"  skipping {repo}: not found")
            continue
        report = Miner(container.store, lambda: container.embedder, container.settings).mine(repo, MineOptions())
        mined.append(f"{report.repository}: {report.optimization_commits} optimization commits")
    if mined:
        return "; ".join(mined)
    from knowledge.starter import starter_knowledge

    nodes, rels = starter_knowledge()
    container.ingestor.ingest(nodes, rels)
    return f"starter set ({sum(1 for n in nodes if n.label == 'Thought')} thoughts; set EOK_MINE_REPOS to mine)"


def _serve(container, settings, log, listener) -> None:
    import secrets

    import uvicorn

    from service.api.app import create_app

    if not settings.api_keys:
        # Every endpoint but /health needs a key: make one for this session so the page is usable at once.
        key = f"eok-{secrets.token_urlsafe(18)}"
        settings = settings.model_copy(update={"api_keys": {key: "operator"}})
        container.settings = settings
        log.print(f"      no EOK_API_KEYS set: this session's operator key is [bold]{key}[/]")
    url = f"http://{settings.api_host}:{settings.api_port}"
    log.print(f"[bold]4/4[/] serving the API on {url}/docs and the page on {url}/ (Ctrl-C stops)")
    app = create_app(settings, container=container)
    config = uvicorn.Config(
        app, host=settings.api_host, port=settings.api_port, log_level="warning", timeout_graceful_shutdown=10
    )
    uvicorn.Server(config).run(sockets=[listener])
