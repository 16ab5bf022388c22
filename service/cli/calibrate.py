"""`eok calibrate --board HOST --target k1-x60 --out my-board.toml`: fit the target's cost-model figures to
one board's timings of the calibration kernels (docs/COSTMODEL.md, "eok calibrate")."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import typer

from core.errors import InvalidInput
from core.settings import get_settings
from service.cli.app import JsonOpt, app, console, err_console, print_json


@app.command("calibrate")
def calibrate_command(
    board: str = typer.Option(..., "--board", help="The board's host name or address (reached over ssh)."),
    target: str = typer.Option(..., "--target", "-t", help="The target to calibrate (a key, or a target TOML)."),
    out: Path = typer.Option(..., "--out", "-o", help="Where to write the calibrated target TOML."),
    port: int = typer.Option(22, "--port", help="The board's ssh port."),
    user: str = typer.Option(None, "--user", help="The ssh user (default: ssh's own)."),
    key: Path = typer.Option(None, "--key", help="The ssh private key file."),
    core: int = typer.Option(0, "--core", help="The board core the kernels are pinned to."),
    repeats: int = typer.Option(7, "--repeats", min=1, max=99, help="Timed calls per kernel and size (median)."),
    clock_ghz: float = typer.Option(
        0.0, "--clock-ghz", help="Board clock, if rdcycle is forbidden (default: target's)."
    ),
    json_out: bool = JsonOpt,
) -> None:
    """Time the calibration kernels on a board, fit the target's bandwidths and instruction-class prices,
    and write a target file to pass with `--target` to `eok eval` and `eok optimize`."""
    from evaluator.costmodel.calibration.board import SshBoard, Tracer
    from evaluator.costmodel.calibration.fit import calibration_plan, describe, fit, target_toml
    from evaluator.costmodel.model import machine_for
    from evaluator.runners import SshRunner
    from evaluator.targets import TARGETS_DIR, load_target

    settings = get_settings()
    profile = load_target(target)
    base_path = Path(target) if target.endswith(".toml") else TARGETS_DIR / f"{target}.toml"
    machine_for(profile)  # a target without a cost model is one line now, before the board is touched
    _check_writable(out)
    if key is not None and not key.is_file():
        raise InvalidInput(f"--key {key}: no such file", "give the ssh private key file of the board")
    runner = SshRunner(board, user, port, key, core=core, known_hosts=settings.home / "ssh_known_hosts")
    runner.check(profile)
    cache = settings.home / "cache" / "calibrate"
    ssh = SshBoard(runner, profile, cache, repeats, clock_ghz)
    tracer = Tracer(cache, profile)
    plan = calibration_plan(profile)
    measured = {}
    for i, pair in enumerate(plan, 1):
        measured[pair.key] = ssh.measure(pair)
        err_console.print(
            f"[{i}/{len(plan)}] {describe(pair)}: {measured[pair.key]:.0f} cycles on {board}", highlight=False
        )
    if ssh.used_clock:
        err_console.print(
            f"note: rdcycle is forbidden on {board}; cycles are ns x {ssh.clock_ghz} GHz", highlight=False
        )
    for pair in plan:  # the model's side: each pair traced once
        err_console.print(f"modeling {describe(pair)} ...", highlight=False)
        tracer.cycles(pair, machine_for(profile))
    result = fit(profile, plan, measured, tracer, lambda line: err_console.print(line, highlight=False))
    date = datetime.now(UTC).strftime("%Y-%m-%d")
    text = target_toml(base_path, result, board, date)
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, out)
    if json_out:
        print_json({"board": board, "target": profile.key, "out": str(out), "date": date, **result.to_json()})
        return
    _print(result, out)


def _check_writable(out: Path) -> None:
    parent = out.resolve().parent
    if out.is_dir():
        raise InvalidInput(f"--out {out} is a directory", "give a file name, e.g. my-board.toml")
    if not parent.is_dir() or not os.access(parent, os.W_OK) or (out.exists() and not os.access(out, os.W_OK)):
        raise InvalidInput(f"--out {out} cannot be written", "give a path in a writable directory")
    if out.suffix != ".toml":
        raise InvalidInput(f"--out {out} must end in .toml", "`--target` takes a file ending in .toml")


def _print(result, out: Path) -> None:
    data = result.to_json()
    for name, p in data["parameters"].items():
        console.print(f"{name:22s} {p['before']:10.4g} -> {p['after']:10.4g}   from {p['from']}", highlight=False)
    for r in data["pairs"]:
        console.print(
            f"{r['kernel']}/{r['impl']} n={r['n']} ({r['level']}): measured {r['measured_cycles']:.0f}, "
            f"model {r['modeled_before']:.0f} -> {r['modeled_after']:.0f} "
            f"(error x{r['error_before']:.2f} -> x{r['error_after']:.2f})",
            highlight=False,
        )
    console.print(f"wrote {out}: pass it with --target {out}", highlight=False)
