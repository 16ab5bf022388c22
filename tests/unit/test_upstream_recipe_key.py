"""A library build's cache key covers what shapes the build besides the tree: recipe, ISA flags, compiler."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from evaluator.targets import load_target
from evaluator.upstream import build
from evaluator.upstream.build import cache_folder, recipe_for, recipe_key


def test_the_recipe_key_changes_with_the_recipe_the_target_and_the_compiler(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    openblas, k1 = recipe_for("openblas"), load_target("k1-x60")
    key = recipe_key(openblas, k1)
    assert key == recipe_key(openblas, k1) and len(key) == 8
    assert recipe_key(recipe_for("ggml"), k1) != key  # another recipe's code
    assert recipe_key(openblas, load_target("k3-x100")) != key  # other ISA flags
    other = tmp_path / "clang-22"
    other.write_bytes(b"an upgraded compiler")
    monkeypatch.setattr(build.shutil, "which", lambda name: str(other) if name == build.CLANG else shutil.which(name))
    assert recipe_key(openblas, k1) != key
    a = cache_folder(tmp_path, "openblas", "c0ffee", None, "k1-x60", key)
    b = cache_folder(tmp_path, "openblas", "c0ffee", None, "k1-x60", recipe_key(openblas, k1))
    assert a != b and a.name == f"c0ffee-k1-x60-b{key}"
