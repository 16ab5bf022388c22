"""Evaluations as Ray tasks: a board farm and a CPU pool behind the same executor interface.

Each evaluation is one Ray task that asks for what its runner needs: a qemu evaluation one CPU, a board
evaluation the board's custom resource (`k1-x60`, `k3-x100`: one unit per board, declared by the node the
board is attached to with `eok worker --board k1-x60=HOST`), so Ray places it on that node. The worker
runs the same Evaluator as the in-process executor (same sandbox, same checks); it never touches the
graph: results come back to the submitting process, which records them (docs/SCALE.md).

Loopback clusters: Ray replaces a node address of 127.0.0.1 with the machine's routable address. For a
cluster that lives on one machine (tests, a laptop) EoK keeps loopback addresses as given, so nothing
advertises or dials another interface; any other address is left to Ray.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from core.errors import InvalidInput, Unavailable
from core.settings import Settings, get_settings
from evaluator.evaluate import EvalResult, Evaluator
from evaluator.executor import EvalJob, run_job
from evaluator.runners import RUNNER_NAMES
from evaluator.targets import TargetProfile

if TYPE_CHECKING:
    from knowledge.embeddings import Embedder

log = logging.getLogger(__name__)
BOARDS_ENV = "EOK_BOARDS"  # on a worker node: {"k1-x60": "[user@]host[:port]", ...}
NAMESPACE = "eok"
RESOURCES_TTL_S = 5.0  # how long a read of the cluster's resources is trusted (nodes come and go slowly)
TASK_RETRIES = 3  # a job whose worker or node died is run again (elsewhere when the node is gone)


@dataclass(frozen=True)
class Board:
    target: str
    host: str
    user: str | None = None
    port: int = 22

    @classmethod
    def parse(cls, spec: str) -> Board:
        """`k1-x60=[user@]host[:port]` as given to `eok worker --board`."""
        target, sep, where = spec.partition("=")
        if not sep or not target.strip() or not where.strip():
            raise InvalidInput(f"--board {spec!r} is not TARGET=HOST", "write e.g. --board k1-x60=bianbu@10.0.0.7:22")
        user, _, hostport = where.strip().rpartition("@")
        host, _, port = hostport.partition(":")
        if not host or (port and not port.isdigit()):
            raise InvalidInput(f"--board {spec!r}: bad host or port", "write e.g. --board k1-x60=bianbu@10.0.0.7:22")
        return cls(target.strip(), host, user or None, int(port) if port else 22)

    def address(self) -> str:
        return f"{self.user + '@' if self.user else ''}{self.host}:{self.port}"


def keep_loopback_addresses() -> None:
    """Make Ray keep 127.x addresses instead of swapping in the routable one (see the module docstring)."""
    from ray._private import services

    if getattr(services.resolve_ip_for_localhost, "_eok_loopback", False):
        return
    original = services.resolve_ip_for_localhost

    def resolve(host: str) -> str:
        return host if host.startswith("127.") else original(host)

    resolve._eok_loopback = True  # type: ignore[attr-defined]
    services.resolve_ip_for_localhost = resolve


def _ray_environment() -> None:
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # no usage reporting from a closed network
    os.environ.setdefault("RAY_SCHEDULER_EVENTS", "0")  # no autoscaler tips on the user's terminal
    # A raylet on a busy machine (a board farm's head, a 2-core laptop) can take over Ray's default 30 s
    # to register; waiting longer beats a node that gives up on its own start.
    os.environ.setdefault("RAY_raylet_start_wait_time_s", "120")


def ray_connect(address: str) -> None:
    """Join the cluster at `address` (host:port, `auto`, or ray://host:port) as a driver."""
    _ray_environment()
    try:
        import ray
    except ImportError as e:
        raise Unavailable("Ray is not installed", "install EoK's dependencies (scripts/setup.sh)") from e
    if ray.is_initialized():
        return
    keep_loopback_addresses()
    kwargs: dict[str, Any] = {"namespace": NAMESPACE, "logging_level": "WARNING", "log_to_driver": False}
    if address.startswith("127.") or address.startswith("localhost"):
        kwargs["_node_ip_address"] = "127.0.0.1"
        address = address.replace("localhost", "127.0.0.1", 1)
    try:
        ray.init(address=address, **kwargs)
    except (ConnectionError, RuntimeError, ValueError) as e:
        raise Unavailable(
            f"cannot join the Ray cluster at {address!r}: {str(e).splitlines()[0][:200]}",
            "start a head with `eok worker --head` (or `ray start --head`) or fix EOK_RAY_ADDRESS / --cluster",
        ) from e


_WORKER_EVALUATORS: dict[str, Evaluator] = {}
_WORKER_EMBEDDERS: dict[str, Embedder | None] = {}  # model -> this worker's (None: the model is unusable here)
_WORKER_LOCK = threading.Lock()


def _worker_settings(target_key: str, runner: str) -> Settings:
    """This node's settings, with the ssh runner pointed at the board attached here for `target_key`."""
    settings = get_settings()
    if runner != "ssh":
        return settings
    boards = json.loads(os.environ.get(BOARDS_ENV) or "{}")
    if target_key not in boards:
        return settings  # EOK_SSH_HOST of this node, if any
    board = Board.parse(f"{target_key}={boards[target_key]}")
    return settings.model_copy(update={"ssh_host": board.host, "ssh_port": board.port, "ssh_user": board.user})


def _worker_embedder(model: str) -> Embedder | None:
    """This worker's embedder for the driver's model (loaded on first use; one per worker process), or None
    when the model cannot be set up here: then the driver embeds."""
    with _WORKER_LOCK:
        if model not in _WORKER_EMBEDDERS:
            try:
                from knowledge.embeddings import Embedder

                settings = get_settings().model_copy(update={"embedding_model": model})
                _WORKER_EMBEDDERS[model] = Embedder.from_settings(settings)
            except Exception as e:
                log.warning("no embeddings on this worker for %s: %s", model, e)
                _WORKER_EMBEDDERS[model] = None
        return _WORKER_EMBEDDERS[model]


def evaluate_on_worker(job: EvalJob) -> EvalResult:
    """The body of every Ray evaluation task (one Evaluator per worker process and board). An agent's job
    comes back with its experience's summary embedded here, so the driver only writes (docs/SCALE.md)."""
    key = f"{job.runner}:{job.target.key}"
    with _WORKER_LOCK:
        if key not in _WORKER_EVALUATORS:
            _WORKER_EVALUATORS[key] = Evaluator(_worker_settings(job.target.key, job.runner))
        evaluator = _WORKER_EVALUATORS[key]
    embedder = _worker_embedder(job.summary.model) if job.summary is not None else None
    result = run_job(evaluator, job, embedder)
    import ray

    result.worker = ray.get_runtime_context().get_node_id()[:12]
    return result


class RayExecutor:
    """Evaluation jobs as Ray tasks; each asks for the resources of its runner."""

    name = "ray"

    def __init__(self, address: str) -> None:
        import ray

        self.address = address
        self._remote = ray.remote(evaluate_on_worker)
        self._resources: dict[str, float] = {}
        self._resources_at = -1e9
        self._lock = threading.Lock()

    @classmethod
    def connect(cls, address: str, settings: Settings | None = None) -> RayExecutor:
        ray_connect(address)
        return cls(address)

    def resources_for(self, runner: str, target: TargetProfile) -> dict[str, Any]:
        """A board job holds its board (and no CPU: the board computes); anything else holds one CPU."""
        if runner in ("ssh", "native") and target.is_riscv:
            return {"num_cpus": 0, "resources": {target.key: 1}}
        return {"num_cpus": 1}

    def check(self, runner: str, target: TargetProfile) -> None:
        """Board jobs need a node offering the board; the runner itself is checked on the worker."""
        if runner not in RUNNER_NAMES:
            raise InvalidInput(f"unknown runner {runner!r}", f"use one of: {', '.join(RUNNER_NAMES)}")
        if runner == "qemu" and not target.is_riscv:
            raise InvalidInput(f"target {target.key!r} is not RISC-V", "use --runner native for the host target")
        for name in self.resources_for(runner, target).get("resources") or {}:
            if not self.capacity(name):
                raise Unavailable(
                    f"no node of the Ray cluster at {self.address!r} offers {name!r}",
                    f"attach a board: eok worker --cluster {self.address} --board {name}=HOST",
                )

    def submit(self, job: EvalJob) -> Future[EvalResult]:
        self.check(job.runner, job.target)
        opts = self.resources_for(job.runner, job.target)
        ref = self._remote.options(max_retries=TASK_RETRIES, retry_exceptions=False, **opts).remote(job)
        return ref.future()

    def capacity(self, resource: str) -> int:
        """The cluster's total of `resource`, read at most every few seconds (a GCS round trip each)."""
        import ray

        with self._lock:
            if time.monotonic() - self._resources_at > RESOURCES_TTL_S:
                self._resources, self._resources_at = dict(ray.cluster_resources()), time.monotonic()
            return int(self._resources.get(resource, 0))

    def slots(self, runner: str, target: TargetProfile) -> int:
        opts = self.resources_for(runner, target)
        resource = next(iter(opts.get("resources") or {"CPU": 1}))
        return max(1, self.capacity(resource))

    def describe(self) -> str:
        import ray

        res = ray.cluster_resources()
        boards = {k: int(v) for k, v in res.items() if k.startswith(("k1-", "k3-"))}
        nodes = sum(1 for n in ray.nodes() if n.get("Alive"))
        extra = ", ".join(f"{v} x {k}" for k, v in sorted(boards.items()))
        return f"Ray cluster {self.address}: {nodes} nodes, {int(res.get('CPU', 0))} CPUs" + (
            f", boards {extra}" if extra else ""
        )

    def close(self) -> None:
        return None  # the connection stays for the process (other runs may share it)


# `ray start` gives its worker processes ports from this range (its --min-worker-port / --max-worker-port
# defaults) and refuses a head port inside it with a bare ValueError.
RAY_WORKER_PORTS = (10002, 19999)


def node_start_args(
    *,
    head: bool,
    address: str | None,
    port: int,
    num_cpus: int | None,
    boards: Sequence[Board],
    node_ip: str | None,
    block: bool,
) -> list[str]:
    """Arguments of `ray start` for an EoK head or worker node."""
    args = ["start", "--disable-usage-stats"]
    if head and RAY_WORKER_PORTS[0] <= port <= RAY_WORKER_PORTS[1]:
        low, high = RAY_WORKER_PORTS
        raise InvalidInput(
            f"--port {port} is inside Ray's worker port range {low}-{high} (each Ray worker process takes one)",
            f"give the head a port outside it, e.g. --port 6380 (the default) or --port {high + 1}",
        )
    if head:
        args += ["--head", f"--port={port}", "--include-dashboard=false"]
    else:
        if not address:
            raise InvalidInput("a worker needs the cluster's address", "pass --cluster HOST:PORT (the head's)")
        args.append(f"--address={address}")
    ip = node_ip or ("127.0.0.1" if head or (address or "").startswith(("127.", "localhost")) else None)
    if ip:
        args.append(f"--node-ip-address={ip}")
    if num_cpus is not None:
        args.append(f"--num-cpus={num_cpus}")
    if boards:  # one unit per board; start_node refuses two boards of one target on a node
        args.append(f"--resources={json.dumps({b.target: 1 for b in boards})}")
    if block:
        args.append("--block")
    return args


def start_node(args: list[str], boards: Sequence[Board]) -> int:
    """Run `ray start ARGS` in this process (so the loopback rule applies); returns its exit code."""
    _ray_environment()
    by_target: dict[str, str] = {}
    for b in boards:
        if b.target in by_target:
            raise InvalidInput(
                f"two boards for {b.target} on one node", "start one `eok worker` per board of the same target"
            )
        by_target[b.target] = b.address()
    if by_target:
        os.environ[BOARDS_ENV] = json.dumps(by_target)  # inherited by this node's raylet and its workers
    keep_loopback_addresses()
    from ray.scripts.scripts import cli

    try:
        cli.main(args=args, prog_name="ray", standalone_mode=False)
    except SystemExit as e:
        return int(e.code or 0)
    return 0


__all__ = ["Board", "RayExecutor", "evaluate_on_worker", "keep_loopback_addresses", "node_start_args", "start_node"]
