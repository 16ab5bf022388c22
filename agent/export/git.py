"""The clone side of an export: checks that leave it untouched on refusal, and one commit on a new branch.

The branch is made in a temporary worktree of the clone (`git worktree add`), so the user's checkout, index
and files never change: the export adds one branch and nothing else.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from contextlib import contextmanager
from pathlib import Path

from agent.export.routines import ExportRefused


def git(clone: Path, *args: str, check: bool = True) -> str:
    r = subprocess.run(["git", "-C", str(clone), *args], capture_output=True, text=True)
    if check and r.returncode != 0:
        last = (r.stderr.strip().splitlines() or ["(no message)"])[-1]
        raise ExportRefused(f"{clone}: git {' '.join(args[:2])} failed: {last}", "check the clone with `git status`")
    return r.stdout


def check_clone(clone: Path, branch: str) -> str:
    """The clone's HEAD commit; ExportRefused when it is no git clone, is dirty, or already has `branch`."""
    if not clone.is_dir():
        raise ExportRefused(f"{clone}: no such folder", "give the path of a git clone of the library")
    if subprocess.run(["git", "-C", str(clone), "rev-parse", "HEAD"], capture_output=True).returncode != 0:
        raise ExportRefused(f"{clone}: not a git clone with a commit", "give a `git clone` of the library")
    dirty = git(clone, "status", "--porcelain", "--untracked-files=no").strip()
    if dirty:
        lines = dirty.splitlines()
        more = ", ..." if len(lines) > 1 else ""
        raise ExportRefused(
            f"{clone} has uncommitted changes ({lines[0].strip()}{more}): the export's 'before' "
            "must be the clone's HEAD",
            f"commit or stash them (git -C {clone} stash)",
        )
    if git(clone, "branch", "--list", branch).strip():
        raise ExportRefused(
            f"{clone} already has a branch {branch}", f"delete it (git -C {clone} branch -D {branch}) or export again"
        )
    return git(clone, "rev-parse", "HEAD").strip()


@contextmanager
def branch_worktree(clone: Path, branch: str, scratch: Path):
    """A temporary worktree of the clone on a new `branch` from HEAD; removed on exit (the branch stays)."""
    scratch.mkdir(parents=True, exist_ok=True)
    where = Path(tempfile.mkdtemp(prefix="export-", dir=scratch)) / "tree"
    git(clone, "worktree", "add", "-q", "-b", branch, str(where), "HEAD")
    try:
        yield where
    finally:
        git(clone, "worktree", "remove", "--force", str(where), check=False)
        shutil.rmtree(where.parent, ignore_errors=True)
        git(clone, "worktree", "prune", check=False)


def commit(tree: Path, files: dict[Path, str], message: str) -> str:
    """Write `files` (relative paths) in `tree`, commit them with `message`; the new commit's sha."""
    for rel, text in files.items():
        (tree / rel).write_text(text)
    git(tree, "add", "--", *map(str, files))
    author = ["-c", "user.name=EoK export", "-c", "user.email=eok-export@localhost"]
    # An identity of our own only where the clone has none: a configured user stays the author.
    has_user = bool(git(tree, "config", "user.email", check=False).strip())
    r = subprocess.run(
        ["git", "-C", str(tree), *([] if has_user else author), "commit", "-q", "-F", "-"],
        input=message,
        capture_output=True,
        text=True,
    )
    if r.returncode != 0:
        raise ExportRefused(f"{tree}: git commit failed: {r.stderr.strip()[-200:]}", "check the clone's git setup")
    return git(tree, "rev-parse", "HEAD").strip()
