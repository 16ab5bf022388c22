"""Build a library people ship (OpenBLAS, ggml, ONNX Runtime's MLAS) for a target, with the project's clang-22.

`build_library` copies the clone's working tree (tracked files as they are on disk, plus untracked files that
are not ignored) into a cache folder and runs the library's own build there, cross-compiling for the target's
ISA. The cache folder is keyed by the clone's HEAD commit, a hash of its uncommitted changes, the target and
the recipe (`recipe_key`): `$EOK_HOME/upstream/<library>/<commit>[-dirty<hash>]-<target>-b<recipe>/`, holding
`src/` (the tree built) and `eok-library.json` (the `BuiltLibrary` manifest). A clone is never written to. A
second call for the same state answers from the manifest; a tree with other changes (an export's branch) is
another key, so a rebuild never answers from the old build; when only source files changed, the clean build is
copied and rebuilt incrementally (seed_tree). How each library is recognised and built lives in its own module
(openblas.py, ggml.py, mlas.py); this one does what they share. docs/UPSTREAM.md has the whole story.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from core.errors import EokError, InvalidInput, Unavailable
from evaluator.targets import TargetProfile, load_target
from evaluator.upstream.built import LIBRARIES, MANIFEST_NAME, BuiltLibrary, read_manifest

Progress = Callable[[str], None]
CLANG, CLANGXX = "clang-22", "clang++-22"
AR, RANLIB = "llvm-ar-22", "llvm-ranlib-22"
TRIPLE = "riscv64-linux-gnu"
SYSROOT = Path("/usr/riscv64-linux-gnu")  # Debian's libc6-dev-riscv64-cross
TOOLCHAIN_FIX = (
    "apt-get install clang-22 lld-22 llvm-22 libc6-dev-riscv64-cross libgcc-12-dev-riscv64-cross "
    "libstdc++-12-dev-riscv64-cross cmake ninja-build make gcc (or run scripts/setup.sh)"
)
LINK_FLAGS = ["-fuse-ld=lld", "-static", "-no-pie"]  # programs EoK runs under qemu: static, fixed addresses
PROGRESS_EVERY_S = 1.0  # at most one condensed progress line per second while the build compiles


class LibraryBuildError(EokError):
    """A clone that cannot be built: the message names the clone and the cause, the hint the fix."""


def _silent(_: str) -> None:
    pass


@dataclass
class BuildOutputs:
    """What a library's build leaves, for the manifest."""

    archives: list[Path]
    include_dirs: list[Path]
    cflags: list[str]
    link_flags: list[str] = field(default_factory=list)


class Recipe(Protocol):
    """How one library is recognised and built (one module per library)."""

    library: str
    display: str  # how people write its name: "OpenBLAS"
    relocatable: bool  # its build tree may be copied to another folder and rebuilt there incrementally
    tools: tuple[str, ...]  # programs the build runs, checked before anything starts

    def not_this_library(self, clone: Path) -> str | None:
        """Why `clone` is not this library's tree (one phrase), or None when it is."""
        ...

    def precheck(self, clone: Path, target: TargetProfile) -> None:
        """Raise LibraryBuildError when this clone cannot be built for `target` (before anything is copied)."""
        ...

    def build(self, src: Path, target: TargetProfile, progress: Progress, jobs: int) -> BuildOutputs:
        """Build the copy of the tree at `src` for `target`; raise LibraryBuildError when it fails."""
        ...


def recipe_for(library: str) -> Recipe:
    """The build recipe of `library` (one of LIBRARIES); one clear line for another name."""
    from evaluator.upstream import ggml, mlas, openblas

    recipes: dict[str, Recipe] = {
        "openblas": openblas.OpenBlas(),
        "ggml": ggml.Ggml(),
        "onnxruntime-mlas": mlas.Mlas(),
    }
    if library not in recipes:
        raise InvalidInput(f"unknown library {library!r}", f"choose one of: {', '.join(LIBRARIES)}")
    return recipes[library]


def build_library(
    library: str,
    clone: Path,
    target: str = "k1-x60",
    *,
    progress: Progress = _silent,
    home: Path | None = None,
    jobs: int = 2,
) -> BuiltLibrary:
    """Cross-build `clone` (a git clone of `library`) for `target`, or answer from the cache.

    `progress` gets short lines from the first second ("copying the tree", "compiling 37/212 kernel/...").
    `home` is EOK_HOME (default: the settings'). Raises LibraryBuildError (not a git clone, not that
    library, the build failed: its last compiler error), Unavailable (a tool of the toolchain is missing).
    """
    recipe = recipe_for(library)
    profile = load_target(target)
    clone = _checked_clone(clone, recipe)
    recipe.precheck(clone, profile)
    commit, dirty = clone_state(clone)
    folder = cache_folder(home, library, commit, dirty, profile.key, recipe_key(recipe, profile))
    with _locked(folder, progress):  # two processes asking for one build: the second waits, then reads the cache
        if (folder / MANIFEST_NAME).is_file():
            progress(f"{library}: cached build of {commit[:10]}{' (with changes)' if dirty else ''} in {folder}")
            return read_manifest(folder)
        return _build(recipe, clone, profile, commit, dirty, folder, home, progress, jobs)


def _build(
    recipe: Recipe,
    clone: Path,
    profile: TargetProfile,
    commit: str,
    dirty: str | None,
    folder: Path,
    home: Path | None,
    progress: Progress,
    jobs: int,
) -> BuiltLibrary:
    library = recipe.library
    check_toolchain(recipe)
    src = folder / "src"
    state = f"{commit[:10]}{', with changes' if dirty else ''}"
    seed = _seed(home, library, clone, commit, profile.key, recipe_key(recipe, profile)) if recipe.relocatable else None
    if seed:
        progress(f"{library}: comparing the tree of {clone} ({state}) with the build in {seed.name}")
    if seed and seed_tree(seed / "src", clone, src):
        progress(f"{library}: reusing the build in {seed.name}: only changed sources are compiled")
    else:
        progress(f"{library}: copying the tree of {clone} ({state})")
        copy_tree(clone, src)
    t0 = time.monotonic()
    out = recipe.build(src, profile, progress, jobs)
    built = BuiltLibrary(
        library=library,
        commit=commit,
        target=profile.key,
        clone=str(clone),
        archives=[str(p) for p in out.archives],
        include_dirs=[str(p) for p in out.include_dirs],
        cflags=out.cflags,
        link_flags=out.link_flags,
    )
    built.write(folder)
    progress(f"{library}: built in {time.monotonic() - t0:.0f} s -> {folder}")
    return built


@contextmanager
def _locked(folder: Path, progress: Progress) -> Iterator[None]:
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f"{folder.name}.lock", "w") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            progress(f"waiting for another process building {folder}")
            fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


# ------------------------------------------------------------------------------------- the clone


def _checked_clone(clone: Path, recipe: Recipe) -> Path:
    clone = Path(clone).expanduser().resolve()
    name = recipe.display
    if not clone.is_dir():
        raise LibraryBuildError(f"{clone}: no such folder", f"give the path of a git clone of {name}")
    if _git(clone, "rev-parse", "--show-toplevel") is None:
        raise LibraryBuildError(f"{clone}: not a git clone", f"give a `git clone` of {name}")
    if reason := recipe.not_this_library(clone):
        raise LibraryBuildError(f"{clone}: not a clone of {name} ({reason})", f"give a git clone of {name}")
    return clone


def _git(clone: Path, *args: str) -> str | None:
    """git's output in `clone`, or None when git fails (not a repository, no commit)."""
    r = subprocess.run(["git", "-C", str(clone), *args], capture_output=True, text=True)
    return r.stdout if r.returncode == 0 else None


def _tree_files(clone: Path) -> list[str]:
    """Paths (relative) of the files a build sees: tracked ones present on disk, untracked not ignored."""
    out = subprocess.run(
        ["git", "-C", str(clone), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        check=True,
    ).stdout.decode()
    return sorted({p for p in out.split("\0") if p and (clone / p).is_file()})


def clone_state(clone: Path) -> tuple[str, str | None]:
    """(HEAD commit, hash of the uncommitted changes or None for a clean tree) of a git clone."""
    commit = (_git(clone, "rev-parse", "HEAD") or "").strip()
    if not commit:
        raise LibraryBuildError(f"{clone}: the git clone has no commit", "check out a commit of the library")
    status = _git(clone, "status", "--porcelain", "-z", "--untracked-files=all") or ""
    changed = sorted(p[3:] for p in status.split("\0") if len(p) > 3)
    if not changed:
        return commit, None
    h = hashlib.sha256()
    for rel in changed:  # a rename lists both names; each is hashed as it is now on disk
        path = clone / rel
        h.update(rel.encode() + b"\0")
        h.update(path.read_bytes() if path.is_file() else b"<absent>")
        h.update(b"\0")
    return commit, h.hexdigest()[:12]


def cache_folder(
    home: Path | None, library: str, commit: str, dirty: str | None, target: str, recipe: str = ""
) -> Path:
    """Where a build of `library` at this commit (and these changes) for `target`, by this recipe, lives."""
    if home is None:
        from core.settings import get_settings

        home = get_settings().home
    key = f"{commit}{f'-dirty{dirty}' if dirty else ''}-{target}{f'-b{recipe}' if recipe else ''}"
    return Path(home) / "upstream" / library / key


def recipe_key(recipe: Recipe, target: TargetProfile) -> str:
    """What else shapes a build besides the tree: the recipe's code and this module's (flags, steps), the
    target's ISA flags and the compiler installed (its path, size and time). A changed recipe or an
    upgraded clang-22 is a new cache folder, never an answer from a build it would not make today."""
    h = hashlib.sha256()
    for path in (Path(sys.modules[type(recipe).__module__].__file__ or ""), Path(__file__)):
        h.update(path.read_bytes() if path.is_file() else b"<absent>")
    h.update(" ".join([*target.isa_flags("emulator"), "|", *target.isa_flags("board")]).encode())
    compiler = shutil.which(CLANG)
    if compiler:
        st = Path(compiler).resolve().stat()
        h.update(f"{compiler}:{st.st_size}:{st.st_mtime_ns}".encode())
    return h.hexdigest()[:8]


def copy_tree(clone: Path, dest: Path) -> None:
    """Copy the files of the clone's working tree (not .git, not ignored build outputs) to `dest`."""
    if dest.exists():  # an earlier build stopped half-way: start it again from a clean copy
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    listing = dest.parent / "files.list"
    listing.write_bytes("\0".join(_tree_files(clone)).encode())
    pack = subprocess.Popen(
        ["tar", "-C", str(clone), "--null", "-T", str(listing), "-cf", "-"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    unpack = subprocess.run(["tar", "-C", str(dest), "-xf", "-"], stdin=pack.stdout, capture_output=True)
    assert pack.stdout is not None
    pack.stdout.close()
    pack_err = pack.stderr.read().decode() if pack.stderr else ""
    if pack.wait() != 0 or unpack.returncode != 0:
        why = (pack_err or unpack.stderr.decode()).strip().splitlines()
        raise LibraryBuildError(f"{clone}: copying the tree failed ({why[-1] if why else 'tar failed'})")


SOURCE_SUFFIXES = (".c", ".S", ".s", ".cpp", ".cc")


def _seed(home: Path | None, library: str, clone: Path, commit: str, target: str, recipe: str) -> Path | None:
    """A finished clean build of this commit or of its parent (an export's branch commits on top of the
    commit built first), to copy and rebuild incrementally; None when there is none."""
    parent = (_git(clone, "rev-parse", "--verify", "-q", f"{commit}^") or "").strip()
    for base in filter(None, (commit, parent)):
        folder = cache_folder(home, library, base, None, target, recipe)
        if (folder / MANIFEST_NAME).is_file() and (folder / "files.list").is_file():
            return folder
    return None


def seed_tree(seed_src: Path, clone: Path, dest: Path) -> bool:
    """Copy an earlier build tree to `dest` and bring the clone's changed files into it, when only source files
    differ (make and ninja then recompile just those). False, with nothing left at `dest`, when a header,
    a Makefile or a removed file differs: make does not track those, so only a clean build is safe.
    """
    before = set(filter(None, (seed_src.parent / "files.list").read_bytes().decode().split("\0")))
    files = _tree_files(clone)
    if before - set(files):
        return False
    changed = [rel for rel in files if not _same_file(clone / rel, seed_src / rel)]
    if any(not rel.endswith(SOURCE_SUFFIXES) for rel in changed):
        return False
    if dest.exists():
        shutil.rmtree(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    # -a keeps the build's timestamps, so only what the copies below touch is older than its sources
    subprocess.run(["cp", "-a", str(seed_src), str(dest)], check=True)
    for rel in changed:
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(clone / rel, dest / rel)
    (dest.parent / "files.list").write_bytes("\0".join(files).encode())
    return True


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.stat().st_size == b.stat().st_size and a.read_bytes() == b.read_bytes()
    except OSError:
        return False


# ------------------------------------------------------------------------------------ toolchain


def check_toolchain(recipe: Recipe) -> None:
    """One clear line naming the first missing tool of the cross toolchain."""
    for tool in (CLANG, "ld.lld-22", AR, RANLIB, *recipe.tools):
        if shutil.which(tool) is None:
            raise Unavailable(f"{tool} not found: it is needed to build {recipe.library}", TOOLCHAIN_FIX)
    if not (SYSROOT / "include" / "stdio.h").is_file():
        raise Unavailable(f"{SYSROOT}: the riscv64 C library headers are missing", TOOLCHAIN_FIX)


def cross_cc(target: TargetProfile, cxx: bool = False) -> list[str]:
    """The compiler command line for the target: clang-22 cross to riscv64 with the target's ISA flags.

    Emulator flags: the built code runs under qemu-riscv64 7.2 (tests, the benchmark) as well as on the board.
    """
    return [CLANGXX if cxx else CLANG, f"--target={TRIPLE}", *target.isa_flags("emulator")]


# ---------------------------------------------------------------------------------- running builds


@dataclass
class BuildStep:
    """One command of a library's build, with how its output is condensed into progress lines."""

    argv: list[str]
    cwd: Path
    what: str  # "configuring", "compiling": the progress lines' verb
    compiled: Callable[[str], str | None]  # "37/212 kernel/riscv64/dot.c" for a line that compiles, else None
    env: dict[str, str] = field(default_factory=dict)


def run_step(step: BuildStep, clone_label: str, progress: Progress) -> int:
    """Run one build command, condensing its output to a progress line a second; the count of compiles.

    Raises LibraryBuildError with the last compiler error line when the command fails.
    """
    env = {**os.environ, "LC_ALL": "C", **step.env}
    log = step.cwd / f"eok-{step.what.replace(' ', '-')}.log"
    count, last = 0, 0.0
    errors: list[str] = []
    with log.open("w") as fh:
        proc = subprocess.Popen(
            step.argv,
            cwd=step.cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
        )
        assert proc.stdout is not None
        for line in proc.stdout:
            fh.write(line)
            if " error: " in line or line.startswith(("error:", "make: ***", "CMake Error")):
                errors.append(line.strip())
            text = step.compiled(line)
            if text is None:
                continue
            count += 1
            now = time.monotonic()
            if now - last >= PROGRESS_EVERY_S:
                last = now
                progress(f"{step.what} {text}")
        rc = proc.wait()
    if rc != 0:
        cause = next((e for e in reversed(errors) if " error: " in e or e.startswith("error:")), None)
        cause = cause or (errors[-1] if errors else f"{Path(step.argv[0]).name} exited with {rc}")
        raise LibraryBuildError(
            f"{clone_label}: the build failed while {step.what}: {cause}", f"see {log}; fix the tree and build again"
        )
    return count
