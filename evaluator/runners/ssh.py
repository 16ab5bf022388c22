"""Run harnesses on a real board over SSH: copy with scp, run pinned with taskset, read the result frames.

The board needs sshd, `taskset` and `timeout` (util-linux, coreutils: present on Bianbu and Debian).
On the board the binary runs as the SSH user under `ulimit` limits (CPU, address space, file size,
descriptors, no core) and `timeout`, in its own directory under `remote_dir`, and its process group is
killed when it ends. What a board cannot enforce from here: a fresh uid, network/mount namespaces,
seccomp, a process-count limit of its own (`ulimit -u` counts all of the SSH user's processes), or
killing a child that left the process group with setsid(). So point EoK at a board (or an account) used
for benchmarking only; the static check and the object check (evaluator/safety.py) still run before
anything is copied there.
"""

from __future__ import annotations

import secrets
import shlex
import shutil
from dataclasses import replace
from pathlib import Path

from core.errors import InvalidInput, Unavailable
from core.settings import Settings
from evaluator.runners.base import Measurement
from evaluator.sandbox import Limits, RunOutput, run
from evaluator.targets import TargetProfile
from evaluator.toolchain import Build, BuildKind

SSH_SLACK_S = 20.0  # connection set-up on top of the program's own wall limit
TIMEOUT_MARK = "eok: time limit reached on the board"


class SshRunner:
    name = "ssh"
    measurement: Measurement = "measured"

    def __init__(
        self,
        host: str,
        user: str | None = None,
        port: int = 22,
        key: Path | None = None,
        *,
        core: int = 0,
        remote_dir: str = "/tmp",
        known_hosts: Path | None = None,
        build_kind: BuildKind = "board",
        connect_timeout_s: float = 10.0,
    ) -> None:
        self.host, self.user, self.port, self.key = host, user, port, key
        self.core, self.remote_dir, self.known_hosts = core, remote_dir, known_hosts
        # "board" builds use the core's full ISA; "emulator" is for boards that are really qemu stand-ins.
        self.build_kind: BuildKind = build_kind
        self.connect_timeout_s = connect_timeout_s
        self._copies: dict[Path, str] = {}

    @classmethod
    def from_settings(cls, settings: Settings) -> SshRunner:
        if not settings.ssh_host:
            raise InvalidInput("the ssh runner needs a board", "set EOK_SSH_HOST (and EOK_SSH_USER, EOK_SSH_KEY)")
        return cls(
            settings.ssh_host,
            settings.ssh_user,
            settings.ssh_port,
            settings.ssh_key,
            known_hosts=settings.home / "ssh_known_hosts",
            build_kind="emulator" if settings.ssh_board_is_emulator else "board",
        )

    @property
    def destination(self) -> str:
        return f"{self.user}@{self.host}" if self.user else self.host

    def check(self, target: TargetProfile) -> None:
        if not target.is_riscv:
            raise InvalidInput(f"target {target.key!r} is not RISC-V", "use --runner native for the host target")
        for tool in ("ssh", "scp"):
            if not shutil.which(tool):
                raise Unavailable(f"{tool} not found", "apt-get install openssh-client")

    def _options(self) -> list[str]:
        opts = [
            "-o", "BatchMode=yes",
            "-o", f"ConnectTimeout={int(self.connect_timeout_s)}",
            "-o", "StrictHostKeyChecking=accept-new",
            "-o", "LogLevel=ERROR",
        ]  # fmt: skip
        if self.known_hosts:
            self.known_hosts.parent.mkdir(parents=True, exist_ok=True)
            opts += ["-o", f"UserKnownHostsFile={self.known_hosts}"]
        if self.key:
            opts += ["-i", str(self.key), "-o", "IdentitiesOnly=yes"]
        return opts

    def _ssh(self, command: str, cwd: Path, limits: Limits) -> RunOutput:
        argv = ["ssh", *self._options(), "-p", str(self.port), self.destination, command]
        local = replace(limits, wall_s=limits.wall_s + SSH_SLACK_S, isolate=False, memory_mb=max(limits.memory_mb, 512))
        return run(argv, cwd, local, env=_ssh_env())

    def _upload(self, build: Build, limits: Limits) -> str:
        if build.binary in self._copies:
            return self._copies[build.binary]
        remote = f"{self.remote_dir.rstrip('/')}/eok-{secrets.token_hex(6)}"
        self._reachable(self._ssh(f"mkdir -p {shlex.quote(remote)}", build.workdir, limits), "create a directory")
        local_path = str(build.binary.relative_to(build.workdir))
        argv = ["scp", *self._options(), "-P", str(self.port), "-q", local_path, f"{self.destination}:{remote}/"]
        local = replace(limits, wall_s=limits.wall_s + SSH_SLACK_S, isolate=False, memory_mb=max(limits.memory_mb, 512))
        self._reachable(run(argv, build.workdir, local, env=_ssh_env()), "copy the harness")
        self._copies[build.binary] = remote
        return remote

    def _upload_data(self, build: Build, args: list[str], remote: str, limits: Limits) -> None:
        """The plan named in `args` and the call inputs (in/) the harness reads, fresh for every run."""
        files = [a for a in args[1:2] if (build.workdir / a).is_file()]
        if args[:1] == ["run"] and (build.workdir / "in").is_dir():
            files.append("in")
        if not files:
            return
        dest = f"{self.destination}:{remote}/"
        argv = ["scp", *self._options(), "-P", str(self.port), "-q", "-r", *files, dest]
        local = replace(limits, wall_s=limits.wall_s + SSH_SLACK_S, isolate=False, memory_mb=max(limits.memory_mb, 512))
        self._reachable(run(argv, build.workdir, local, env=_ssh_env()), "copy the call inputs")

    def _reachable(self, out: RunOutput, what: str) -> RunOutput:
        """A failed connection is the board's problem, not the candidate's: raise instead of reporting."""
        if out.returncode == 0:
            return out
        reason = (out.stderr.strip().splitlines() or ["no answer"])[-1]
        if out.timed_out:
            reason = "no answer within the time limit"
        raise Unavailable(
            f"cannot {what} on the board {self.destination}:{self.port}: {reason}",
            "check EOK_SSH_HOST / EOK_SSH_PORT / EOK_SSH_USER / EOK_SSH_KEY and that the board's sshd is up",
        )

    def execute(self, build: Build, args: list[str], target: TargetProfile, limits: Limits) -> RunOutput:
        remote = self._upload(build, limits)
        self._upload_data(build, args, remote, limits)
        cpu = int(limits.cpu_s if limits.cpu_s is not None else limits.wall_s + 1) + 1
        ulimits = f"ulimit -t {cpu} -v {limits.memory_mb << 10} -f {limits.fsize_mb << 10} -n {limits.nofile} -c 0"
        run_cmd = " ".join(shlex.quote(a) for a in ["./" + build.binary.name, *args])
        # The shell stays the session's process, so a program killed by a signal shows as 128+N rather
        # than as ssh's own 255; timeout sends TERM at the limit and KILL 2 s later. timeout leads its own
        # process group ($p): whatever the program left in it is killed once the program is done.
        command = (
            f"cd {shlex.quote(remote)} && {ulimits} && {{ timeout -k 2 {limits.wall_s:.0f} "
            f"taskset -c {self.core} {run_cmd} & p=$!; wait $p; rc=$?; kill -KILL -$p 2>/dev/null; "
            f'if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then echo "{TIMEOUT_MARK}" >&2; fi; exit $rc; }}'
        )
        out = self._ssh(command, build.workdir, limits)
        if out.returncode == 255 and TIMEOUT_MARK not in out.stderr and "eok: trial" not in out.stderr:
            self._reachable(out, "run the harness")
        if TIMEOUT_MARK in out.stderr:
            out.timed_out = True
        elif out.returncode is not None and 128 < out.returncode < 160:
            out.returncode = -(out.returncode - 128)  # killed by signal N on the board
        return out

    def release(self, build: Build) -> None:
        remote = self._copies.pop(build.binary, None)
        if remote:
            self._ssh(f"rm -rf {shlex.quote(remote)}", build.workdir, Limits(wall_s=20))


def _ssh_env() -> dict[str, str]:
    import os

    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C"}
    if "HOME" in os.environ:
        env["HOME"] = os.environ["HOME"]  # ~/.ssh for keys and config when no key file is given
    if "SSH_AUTH_SOCK" in os.environ:
        env["SSH_AUTH_SOCK"] = os.environ["SSH_AUTH_SOCK"]
    return env
