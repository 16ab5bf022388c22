"""Launch the cost model's traced qemu run inside the sandbox (`python -m evaluator.sandbox_launch`).

The cost model runs its qemu command itself and adds its logging options (`-d ... -D <log>`) after
argv[0], so argv[0] is a small script that execs this module with the limits, then `--`, then qemu and
whatever the cost model passed. Here (trusted, our uid) the run goes through `sandbox.run` like every
other step: fresh uid, no network, secrets hidden, seccomp, limits, nothing left running. qemu writes the
TB log (and the memory plugin its table) into a scratch folder only the sandbox uid can write; the cost
model's log path is a link to it while the run lasts (its size watch keeps working) and becomes the real
file, moved without following links, once every process of the run is dead. Exit status: qemu's, or
128+N for a signal as a shell would report it.
"""

from __future__ import annotations

import os
import shutil
import signal
import stat
import sys
from pathlib import Path

from evaluator.sandbox import Limits, run


def main(argv: list[str]) -> int:
    # Options as --name=value up to "--", then the command; parsed by hand: argparse costs ~0.1 s per run.
    split = argv.index("--") if "--" in argv else len(argv)
    pairs = [a.removeprefix("--").split("=", 1) for a in argv[:split]]
    opts = dict(pairs)
    hidden = [Path(v) for k, v in pairs if k == "hide"]
    command = argv[split + 1 :]
    limits = Limits(
        wall_s=float(opts["wall"]),
        memory_mb=int(opts["memory-mb"]),
        fsize_mb=int(opts["fsize-mb"]),
        nofile=int(opts.get("nofile", 64)),
        nproc=int(opts.get("nproc", 64)),
    )
    log = _log_path(command)
    scratch = (log.parent if log else Path.cwd()) / f"sandbox-{os.urandom(4).hex()}"
    outputs: dict[Path, Path] = {}  # what the run writes in scratch -> where the cost model expects it
    if log is not None:
        command[command.index("-D") + 1] = str(scratch / log.name)
        outputs[scratch / log.name] = log
        log.unlink(missing_ok=True)
        os.symlink(scratch / log.name, log)  # the cost model watches the log's size during the run
    plugin_copy = _redirect_plugin(command, scratch, outputs)
    try:
        out = run(command, Path.cwd(), limits, scratch=scratch, hidden=hidden, pass_fds=_key_fds(command))
    finally:
        for written, wanted in outputs.items():
            _publish(written, wanted)
        if plugin_copy is not None:
            plugin_copy.unlink(missing_ok=True)
    sys.stdout.write(out.stdout)
    sys.stderr.write(out.stderr)
    if out.violation:
        sys.stderr.write("eok: sandbox violation: a system call outside the allow-list (killed with SIGSYS)\n")
    if out.timed_out:
        sys.stderr.write(f"eok: time limit of {limits.wall_s:.0f} s reached\n")
        return 128 + signal.SIGKILL
    if out.signal:
        return 128 + out.signal
    return out.returncode or 0


def _log_path(command: list[str]) -> Path | None:
    if "-D" not in command or command.index("-D") + 1 >= len(command):
        return None
    return Path(command[command.index("-D") + 1]).absolute()


def _redirect_plugin(command: list[str], scratch: Path, outputs: dict[Path, Path]) -> Path | None:
    """The memory plugin (`-plugin so,...,out=path`): a readable copy of the .so next to the binary (our
    folder for it is private), its table written to scratch and handed over like the log."""
    if "-plugin" not in command:
        return None
    at = command.index("-plugin") + 1
    so, *opts = command[at].split(",")
    copy = Path.cwd() / f".plugin-{os.urandom(4).hex()}.so"
    shutil.copyfile(so, copy)
    copy.chmod(0o644)
    for k, opt in enumerate(opts):
        if opt.startswith("out="):
            wanted = Path(opt[4:]).absolute()
            outputs[scratch / wanted.name] = wanted
            opts[k] = f"out={scratch / wanted.name}"
    command[at] = ",".join([str(copy), *opts])
    return copy


def _key_fds(command: list[str]) -> tuple[int, ...]:
    """The plugin's key pipe (keyfd=N in its options): qemu must inherit it, nothing else does."""
    if "-plugin" not in command:
        return ()
    opts = command[command.index("-plugin") + 1].split(",")
    return tuple(int(o[6:]) for o in opts if o.startswith("keyfd="))


def _publish(written: Path, log: Path) -> None:
    """Replace the link with the log the run wrote, if that is a regular file (never follow a link)."""
    log.unlink(missing_ok=True)
    try:
        if stat.S_ISREG(os.lstat(written).st_mode):
            os.rename(written, log)
    except FileNotFoundError:
        pass


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
