"""A stand-in K1 board: a real sshd on 127.0.0.1 whose `taskset` runs riscv64 binaries under qemu.

The runner's command is unchanged (`taskset -c <core> ./harness ...`); the shim pins as asked and runs the
binary through qemu-riscv64, an honest stand-in for the board's CPU. Binaries for it are built with the
emulator ISA subset (qemu 7.2 lacks Zicond, which a real X60 has).
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

SHIM = """#!/bin/sh
# Test board: `taskset -c CORE ./harness ARGS` runs the riscv64 harness under qemu, pinned to CORE.
[ "$1" = "-c" ] || exec /usr/bin/taskset "$@"
core="$2"; shift 2
echo "$core" > "$HOME_BOARD/last_core"
exec /usr/bin/taskset -c "$core" qemu-riscv64 -cpu {cpu} "$@"
"""


@dataclass(frozen=True)
class StandInBoard:
    port: int
    key: Path  # the client's private key
    root: Path
    remote: Path  # a directory on the "board" for copies


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def stand_in_board(root: Path, qemu_cpu: str) -> Iterator[StandInBoard]:
    for name in ("host_key", "client_key"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(root / name)], check=True)
    shutil.copy(root / "client_key.pub", root / "authorized_keys")
    shim_dir = root / "shim"
    shim_dir.mkdir()
    (shim_dir / "taskset").write_text(SHIM.replace("{cpu}", qemu_cpu))
    (shim_dir / "taskset").chmod(0o755)
    remote = root / "remote"
    remote.mkdir()
    port = _free_port()
    (root / "sshd_config").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {root / 'host_key'}\n"
        f"AuthorizedKeysFile {root / 'authorized_keys'}\nPidFile {root / 'sshd.pid'}\n"
        "PasswordAuthentication no\nKbdInteractiveAuthentication no\nPubkeyAuthentication yes\n"
        "PermitRootLogin prohibit-password\nUsePAM no\nStrictModes no\n"
        f"SetEnv PATH={shim_dir}:/usr/local/bin:/usr/bin:/bin HOME_BOARD={root}\n"
        "Subsystem sftp internal-sftp\n"
    )
    Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege-separation directory (systemd makes it on boards)
    sshd = subprocess.Popen(["/usr/sbin/sshd", "-D", "-e", "-f", str(root / "sshd_config")], stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if sshd.poll() is not None:
                raise RuntimeError(sshd.stderr.read().decode() if sshd.stderr else "sshd exited")
            time.sleep(0.05)
        yield StandInBoard(port=port, key=root / "client_key", root=root, remote=remote)
    finally:
        sshd.terminate()
        sshd.wait(timeout=10)
