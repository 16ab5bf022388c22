"""The bundled kernel suite (evaluator/suite) is well formed: specs read straight from task.toml, and every
reference compiled with the real RISC-V compiler against its own declared signature."""

from __future__ import annotations

import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest

from evaluator.tasks import SUITE_DIR, Category, list_tasks, parse_signature
from knowledge.taxonomy import Operator

TASK_DIRS = sorted(d for d in SUITE_DIR.iterdir() if (d / "task.toml").is_file())
TASK_NAMES = [d.name for d in TASK_DIRS]
REQUIRED = ("name", "category", "operator", "dtype", "description", "signature", "tolerance", "sizes")
CLANG = "clang-22"
RISCV_FLAGS = ["--target=riscv64-linux-gnu", "-mcpu=spacemit-x60", "-O3", "-Wall", "-Wextra", "-Werror"]


def spec_of(directory: Path) -> dict[str, Any]:
    return tomllib.loads((directory / "task.toml").read_text())


def size_values(entry: dict[str, Any]) -> dict[str, int]:
    return {k: v for k, v in entry.items() if k != "bench"}


def test_suite_has_at_least_40_tasks() -> None:
    assert len(TASK_DIRS) >= 40, TASK_NAMES


def test_names_are_unique_and_equal_directory_names() -> None:
    names = [spec_of(d)["name"] for d in TASK_DIRS]
    assert names == TASK_NAMES
    assert len(set(names)) == len(names)


@pytest.mark.parametrize("directory", TASK_DIRS, ids=TASK_NAMES)
def test_spec_fields(directory: Path) -> None:
    spec = spec_of(directory)
    missing = [f for f in REQUIRED if f not in spec]
    assert not missing, f"{directory.name}: missing {missing}"
    assert spec["category"] in {c.value for c in Category}
    assert spec["operator"] in {o.value for o in Operator}
    assert "\n" not in spec["description"].strip()
    assert (directory / "reference.c").is_file()


@pytest.mark.parametrize("directory", TASK_DIRS, ids=TASK_NAMES)
def test_sizes_have_one_bench_and_a_tail(directory: Path) -> None:
    sizes = spec_of(directory)["sizes"]
    assert sum(1 for s in sizes if s.get("bench") is True) == 1
    # A tail: some bound dimension that is not a multiple of 8, so vector remainders get exercised.
    assert any(v % 8 for s in sizes for v in size_values(s).values()), sizes


@pytest.mark.parametrize("directory", TASK_DIRS, ids=TASK_NAMES)
def test_every_parameter_is_bound_or_described(directory: Path) -> None:
    spec = spec_of(directory)
    _, _, params = parse_signature(spec["signature"])
    args = spec.get("args", {})
    bound = set(size_values(spec["sizes"][0]))
    for p in params:
        if p.pointer:
            assert p.name in args, f"pointer {p.name} has no [args.{p.name}]"
            assert args[p.name]["kind"] in ("in", "out", "inout")
            assert args[p.name].get("count"), f"pointer {p.name} has no count"
        else:
            assert p.name in bound or args.get(p.name, {}).get("kind") == "scalar", p.name
    for s in spec["sizes"]:
        assert set(size_values(s)) == bound


def test_loader_accepts_the_whole_suite() -> None:
    tasks = list_tasks()
    assert sorted(t.name for t in tasks) == sorted(TASK_NAMES)
    assert all(t.counts[t.bench_index] for t in tasks)


@pytest.mark.qemu
@pytest.mark.parametrize("directory", TASK_DIRS, ids=TASK_NAMES)
def test_reference_compiles_for_x60_against_its_signature(directory: Path, tmp_path: Path) -> None:
    # The declared prototype comes first, so a reference whose definition differs from the signature
    # in task.toml is a conflicting-types error, not a silent mismatch.
    assert shutil.which(CLANG), f"{CLANG} is required (apt install clang-22)"
    signature = spec_of(directory)["signature"].strip().rstrip(";")
    unit = tmp_path / "unit.c"
    reference = (directory / "reference.c").resolve()
    unit.write_text(f'#include <stddef.h>\n#include <stdint.h>\n{signature};\n#include "{reference}"\n')
    proc = subprocess.run(
        [CLANG, *RISCV_FLAGS, "-c", str(unit), "-o", str(tmp_path / "unit.o")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
