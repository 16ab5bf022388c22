"""A real Ray cluster on 127.0.0.1 for tests: a head and worker nodes, each an `eok worker` process."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

PROJECT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def eok_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(PROJECT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["RAY_USAGE_STATS_ENABLED"] = "0"
    env.update(extra)
    return env


@dataclass
class Node:
    name: str
    proc: subprocess.Popen
    log: Path

    def kill(self) -> None:
        """kill -9 of the node and everything it started (its raylet, GCS, Ray workers)."""
        kill_tree(self.proc.pid)
        self.proc.wait(timeout=30)


def kill_tree(pid: int) -> None:
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return
    for p in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.send_signal(signal.SIGKILL)
    psutil.wait_procs(procs, timeout=30)


@dataclass
class Cluster:
    port: int
    folder: Path
    nodes: list[Node] = field(default_factory=list)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start_node(self, name: str, *args: str, env: dict[str, str] | None = None) -> Node:
        log = self.folder / f"{name}.log"
        proc = subprocess.Popen(
            [sys.executable, "-m", "service.cli", "worker", *args],
            cwd=PROJECT,
            env=env or eok_env(),
            stdout=log.open("wb"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        node = Node(name, proc, log)
        self.nodes.append(node)
        return node

    def start_head(self, num_cpus: int = 1) -> Node:
        return self.start_node("head", "--head", f"--port={self.port}", f"--num-cpus={num_cpus}")

    def start_worker(self, name: str, num_cpus: int = 1, boards: tuple[str, ...] = (), **env: str) -> Node:
        args = [f"--cluster={self.address}", f"--num-cpus={num_cpus}", *(f"--board={b}" for b in boards)]
        return self.start_node(name, *args, env=eok_env(**env))

    def wait_for(self, resources: dict[str, float], timeout_s: float = 180.0) -> None:
        """Until the cluster offers at least `resources` (asked from a throwaway driver process)."""
        probe = (
            "import json, sys, ray\n"
            "from evaluator.cluster import ray_connect\n"
            f"ray_connect({self.address!r})\n"
            "print(json.dumps(ray.cluster_resources()))\n"
        )
        deadline = time.monotonic() + timeout_s
        last = ""
        while time.monotonic() < deadline:
            out = subprocess.run(
                [sys.executable, "-c", probe], cwd=PROJECT, env=eok_env(), capture_output=True, text=True, timeout=120
            )
            last = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else out.stderr[-500:]
            if out.returncode == 0:
                import json

                have = json.loads(last)
                if all(have.get(k, 0) >= v for k, v in resources.items()):
                    return
            for n in self.nodes:
                if n.proc.poll() is not None:
                    raise RuntimeError(f"ray node {n.name} exited: {n.log.read_text()[-2000:]}")
            time.sleep(1.0)
        raise TimeoutError(f"cluster never offered {resources}: {last}")

    def stop(self) -> None:
        for n in reversed(self.nodes):
            if n.proc.poll() is None:
                n.kill()
        self.nodes.clear()
