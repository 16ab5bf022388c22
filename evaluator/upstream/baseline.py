"""The library as a baseline: which configured built library times a task's routine, and the adapter's C.

A task names the routine it corresponds to in its `[[library]]` tables (docs/TASKS.md); the operator
configures built libraries (`EOK_LIBRARY`, `--library`). Where both meet for the evaluated target, the
trusted binary also links the adapter and the library's archives (never candidate code), and the
evaluator times the library's kernel like the baselines (docs/EVALUATION.md, "The library as a baseline").
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from core.errors import InvalidInput
from evaluator import harness
from evaluator.tasks import KernelTask, LibraryRoutine
from evaluator.upstream.built import BuiltLibrary, read_manifest


@dataclass(frozen=True)
class ConfiguredLibrary:
    """A built library the operator configured, with a fingerprint of what would be linked."""

    built: BuiltLibrary
    manifest: Path
    fingerprint: str  # manifest + every archive's bytes: a rebuilt archive is another baseline


@dataclass(frozen=True)
class LibraryBaseline:
    """One task's routine in one configured library: what the trusted binary links and reports name."""

    library: ConfiguredLibrary
    routine: LibraryRoutine
    task: KernelTask

    @property
    def label(self) -> str:
        return self.library.built.label

    @property
    def symbol(self) -> str:
        """The adapter's own name in the trusted binary (never the task's: the library may define that)."""
        return harness.lib_name(self.task)

    @property
    def adapter_source(self) -> str:
        params = ", ".join(p.c_decl for p in self.task.params) or "void"
        return (
            f"/* adapter: {self.task.name} -> {self.routine.name} {self.routine.routine} */\n"
            "#include <stddef.h>\n#include <stdint.h>\n"
            f"{self.routine.header.strip()}\n\n"
            f"{self.task.return_type} {self.symbol}({params}) {{\n{self.routine.adapter.rstrip()}\n}}\n"
        )

    @property
    def key(self) -> str:
        """Part of every cache key of this baseline: the build and the adapter."""
        text = "\0".join([self.library.fingerprint, self.adapter_source])
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def configured_libraries(paths: list[Path]) -> list[ConfiguredLibrary]:
    """Read every configured manifest (a manifest file or a library's cache folder); one clear line if bad."""
    found: list[ConfiguredLibrary] = []
    for path in paths:
        path = Path(path).expanduser().resolve()
        built = read_manifest(path)
        manifest = path if path.is_file() else path / "eok-library.json"
        found.append(ConfiguredLibrary(built=built, manifest=manifest, fingerprint=_fingerprint(manifest, built)))
    names = [c.built.library + "@" + c.built.target for c in found]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise InvalidInput(f"EOK_LIBRARY: {dup.replace('@', ' for ')} is configured twice", "give one build each")
    return found


def library_baseline(task: KernelTask, target_key: str, libraries: list[ConfiguredLibrary]) -> LibraryBaseline | None:
    """The first of the task's `[[library]]` routines whose library is configured for this target, or None."""
    for routine in task.library:
        for lib in libraries:
            if lib.built.library == routine.name and lib.built.target == target_key:
                return LibraryBaseline(library=lib, routine=routine, task=task)
    return None


def _fingerprint(manifest: Path, built: BuiltLibrary) -> str:
    h = hashlib.sha256(manifest.read_bytes())
    for archive in built.archives:
        h.update(b"\0" + _file_digest(Path(archive), *_stamp(Path(archive))).encode())
    return h.hexdigest()[:20]


def _stamp(path: Path) -> tuple[int, int]:
    try:
        st = path.stat()
    except OSError:
        raise InvalidInput(
            f"{path}: an archive the built library lists is missing", "rebuild it with `eok upstream build`"
        ) from None
    return st.st_mtime_ns, st.st_size


@lru_cache(maxsize=64)
def _file_digest(path: Path, mtime_ns: int, size: int) -> str:
    """sha256 of an archive, computed once per (path, mtime, size): archives are megabytes."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
