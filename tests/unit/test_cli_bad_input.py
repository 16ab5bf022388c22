"""Every `eok` command, enumerated from the Typer app, fed bad values (types, ranges, enums, missing files,
directories for files) and bad settings (malformed EOK_API_KEYS / EOK_TASK_DIRS / EOK_API_PORT, an
EOK_HOME that is a file or cannot be created): each gives one error line naming the input plus its fix,
a non-zero exit and no traceback. Bad values are rejected before any work starts, so no Neo4j is needed."""

from __future__ import annotations

import subprocess
import sys
import types
import typing
from enum import Enum
from pathlib import Path
from typing import Any

import pytest
import typer.main

from core.settings import PROJECT_ROOT, get_settings
from service.cli import _register, app
from service.cli.app import WRITES_HOME, run_cli

_register()

# A valid value for each required argument, so only the bad value under test can fail the command.
VALID_ARGUMENTS = {
    "task": "relu",
    "query": "vector dot",
    "node_id": "thought:x",
    "name": "relu",
    "repo": ".",
    "library": "openblas",
    "clone": ".",
    "routine": "sdot",
    "run": "run-20260101-000000-abcdef",
}


def _commands() -> list[tuple[tuple[str, ...], Any]]:
    out = []

    def walk(cmd: Any, path: tuple[str, ...]) -> None:
        if hasattr(cmd, "commands"):
            for name, sub in cmd.commands.items():
                walk(sub, (*path, name))
        else:
            out.append((path, cmd))

    walk(typer.main.get_command(app), ())
    return out


COMMANDS = _commands()


def _members(annotation: Any) -> list[Any]:
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        return [a for a in typing.get_args(annotation) if a is not type(None)]
    return [annotation]


def _bad_values(param: Any, tmp: Path) -> list[tuple[str, str]]:
    """(value, why) pairs this parameter must reject."""
    info = param.type_descriptor.parameter_info
    bad: list[tuple[str, str]] = []
    for kind in _members(param.type_descriptor.annotation):
        if kind is int:
            bad.append(("abc", "not a number"))
            if param.min is not None:
                bad.append((str(param.min - 1), "below the minimum"))
            if param.max is not None:
                bad.append((str(param.max + 1), "above the maximum"))
        elif isinstance(kind, type) and issubclass(kind, Enum):
            bad.append(("nosuch", "not one of the choices"))
        elif kind is Path and getattr(info, "exists", False):
            bad.append((str(tmp / "missing.c"), "a missing file"))
            if getattr(info, "dir_okay", True) is False:
                bad.append((str(tmp), "a directory for a file"))
    return bad


def _required_args(cmd: Any) -> list[str]:
    return [VALID_ARGUMENTS[p.name] for p in cmd.params if p.param_type_name == "argument" and p.required]


def _cases(tmp: Path) -> list[tuple[list[str], str, str]]:
    cases = []
    for path, cmd in COMMANDS:
        for p in cmd.params:
            if p.param_type_name != "option":
                continue
            for value, why in _bad_values(p, tmp):
                cases.append(([*path, *_required_args(cmd), p.opts[0], value], p.opts[0], why))
    return cases


# Values only the command itself can judge (free-form strings checked against the suite, targets, runners).
EXTRA_CASES = [
    (["mine", ".", "--library", "zz"], "--library"),
    (["optimize", "relu", "--target", "zz"], "target 'zz'"),
    (["eval", "relu", "--target", "zz"], "target 'zz'"),
    (["optimize", "nosuch-task"], "task 'nosuch-task'"),
    (["optimize", "relu", "--runner", "native"], "runner 'native' cannot serve target 'k1-x60'"),
    (["eval", "relu", "--runner", "native"], "runner 'native' cannot serve target 'k1-x60'"),
    (["eval", "relu", "--cflags", "'-O2"], "--cflags"),
    (["cypher", "recent_runs", "--param", "novalue"], "--param"),
    (["mine", "/nonexistent/repo"], "/nonexistent/repo"),
    (["eval", "relu", "--library", "/"], "/eok-library.json: no built library here"),
    (["optimize", "relu", "--library", "/"], "/eok-library.json: no built library here"),
    (["upstream", "build", "openblas", "/nonexistent/clone"], "/nonexistent/clone"),
    (["upstream", "build", "ggml", "/nonexistent/clone", "--target", "zz"], "target 'zz'"),
    (["upstream", "test", "openblas", "/nonexistent/clone", "sdot"], "/nonexistent/clone"),
]


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    get_settings.cache_clear()
    try:
        code = run_cli(argv)
    finally:
        get_settings.cache_clear()
    out = capsys.readouterr()
    return code, out.out, out.err


def _assert_one_clear_error(code: int, err: str, names: str) -> None:
    lines = [line for line in err.splitlines() if line.strip()]
    assert code != 0
    assert "Traceback" not in err and "unexpected" not in err, err
    assert len(lines) <= 2 and lines[0].startswith("error:"), err  # the error, then at most its fix
    assert names in lines[0], f"the error does not name {names}: {err}"


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EOK_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)  # no .env from the work tree


def test_every_command_is_covered() -> None:
    names = {" ".join(p) for p, _ in COMMANDS}
    assert {"optimize", "eval", "mine", "serve", "up", "ideas search", "db start", "db status"} <= names
    assert len(_cases(Path("/tmp"))) >= 20  # ranges, enums and paths of every command


def test_every_bad_argument_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for argv, option, why in _cases(tmp_path):
        code, _, err = _run(argv, capsys)
        assert code == 2, (argv, why, err)
        _assert_one_clear_error(code, err, option)


def test_values_only_the_command_can_judge(capsys: pytest.CaptureFixture[str]) -> None:
    for argv, names in EXTRA_CASES:
        code, _, err = _run(argv, capsys)
        _assert_one_clear_error(code, err, names)


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("EOK_API_KEYS", "notjson"),
        ("EOK_TASK_DIRS", "["),
        ("EOK_MINE_REPOS", "{"),
        ("EOK_API_PORT", "http"),
        ("EOK_LIBRARY", "["),
    ],
)
def test_every_command_names_a_malformed_setting(
    variable: str, value: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(variable, value)
    for path, cmd in COMMANDS:
        code, _, err = _run([*path, *_required_args(cmd)], capsys)
        _assert_one_clear_error(code, err, variable)


def test_an_unusable_eok_home_is_named_before_any_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    a_file = tmp_path / "file"
    a_file.write_text("x")
    for home in (a_file, a_file / "below-a-file", Path("/proc/eok-home")):
        monkeypatch.setenv("EOK_HOME", str(home))
        for path, cmd in COMMANDS:
            if path[0] not in WRITES_HOME:
                continue
            code, _, err = _run([*path, *_required_args(cmd)], capsys)
            _assert_one_clear_error(code, err, "EOK_HOME")


def test_json_errors_reach_stdout_as_json(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    code, out, err = _run(["optimize", "relu", "--runner", "native", "--json"], capsys)
    assert code == 2 and "cannot serve target 'k1-x60'" in json.loads(out)["error"]
    _assert_one_clear_error(code, err, "native")


def test_the_installed_entry_point_prints_no_traceback(tmp_path: Path) -> None:
    # The real process: pydantic's SettingsError used to escape as a 30-line traceback.
    env = {"EOK_API_KEYS": "{not json", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "service.cli", "tasks", "list"],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.startswith("error: EOK_API_KEYS is malformed"), done.stderr


def test_every_command_names_its_module() -> None:
    """`eok X` imports only X's module: every top-level command must be in the table (or in app.py)."""
    from service.cli import COMMAND_MODULES

    names = {c.name or c.callback.__name__ for c in app.registered_commands}
    names |= {g.name for g in app.registered_groups}
    assert names - set(COMMAND_MODULES) == {"version"}  # defined in app.py, always there
    assert set(COMMAND_MODULES) <= names
