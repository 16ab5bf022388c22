"""Fast history walk: one `git log` stream for metadata, batched line counts and patches for candidates.

The walk that mines a history reads `--raw` (paths and blob ids: git diffs no blob); line counts cost git
ten times as much (`--numstat` over OpenBLAS: 6.2 s CPU against 0.7 s) and decide nothing for most commits,
so the miner asks for them (`read_commits`) only for the commits whose metadata could still make them
candidates. `walk_commits(..., line_counts=True)` gives every commit its counts, for tools and tests.

GitPython opens, validates and clones repositories; the bulk streams are plain git subprocesses because a
GitPython diff object per commit is two orders of magnitude slower on a 10k-commit history.

Damaged repositories (a fetched snapshot omits files >= 4 MiB; a clone can lose objects) are walked anyway:
when git dies on an unreadable object, the commit it was on is described from its tree alone (file names,
no line counts), a warning names the object, and the stream resumes after it.
"""

from __future__ import annotations

import contextlib
import fcntl
import re
import subprocess
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from core.errors import InvalidInput, NotFound, Unavailable

RS, US = "\x1e", "\x1f"  # record / unit separators: never in sane commit messages
LOG_FORMAT = f"{RS}%H{US}%P{US}%an{US}%aI{US}%B{US}"
GIT_ENV_CONFIG = ["-c", "core.quotepath=off", "-c", "log.showSignature=false", "-c", "diff.renameLimit=400"]
_MISSING_RE = re.compile(
    r"(?:unable to read|could not read|missing (?:blob|tree|commit)|bad object)\s+([0-9a-f]{7,64})"
)


@dataclass(frozen=True, slots=True)
class FileChange:
    path: str
    insertions: int
    deletions: int
    binary: bool = False
    old_path: str | None = None


@dataclass(slots=True)
class RawCommit:
    sha: str
    parents: list[str]
    author: str
    authored_at: str  # ISO 8601 with offset
    message: str
    files: list[FileChange] = field(default_factory=list)
    damaged: bool = False  # described from its tree only: an object it needs is unreadable
    counted: bool = True  # files carry line counts (False: walked with --raw, insertions/deletions are 0)

    @property
    def title(self) -> str:
        return self.message.split("\n", 1)[0].strip()

    @property
    def is_merge(self) -> bool:
        return len(self.parents) > 1

    @property
    def insertions(self) -> int:
        return sum(f.insertions for f in self.files)

    @property
    def deletions(self) -> int:
        return sum(f.deletions for f in self.files)


@dataclass(slots=True)
class WalkWarnings:
    """Unreadable objects and commits met during a walk; the miner reports them, never crashes on them."""

    messages: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, text: str) -> None:
        with self.lock:
            if text not in self.messages:
                self.messages.append(text)


def decode(raw: bytes) -> str:
    # Old commits carry Latin-1 or random bytes without an encoding header: replace, never crash.
    return raw.decode("utf-8", errors="replace")


# ---------------------------------------------------------------------------------------------------------
# Opening repositories


@dataclass(frozen=True, slots=True)
class RepoHandle:
    git_dir: Path
    name: str
    url: str | None

    def git(self, *args: str) -> list[str]:
        return ["git", *GIT_ENV_CONFIG, f"--git-dir={self.git_dir}", *args]


def is_url(spec: str) -> bool:
    return bool(re.match(r"^(https?|ssh|git|file)://", spec)) or bool(re.match(r"^[\w.-]+@[\w.-]+:", spec))


def repo_name_from(spec: str) -> str:
    tail = spec.rstrip("/").removesuffix(".git").rstrip("/")
    parts = re.split(r"[/:]", tail)
    parts = [p for p in parts if p]
    if len(parts) >= 2 and is_url(spec):
        return f"{parts[-2]}/{parts[-1]}"
    return parts[-1] if parts else "repo"


def open_repository(spec: str, cache_dir: Path, name: str | None = None) -> RepoHandle:
    """Open a work tree or bare repository by path, or clone a URL (bare) into `cache_dir`."""
    if is_url(spec):
        return _clone_or_update(spec, cache_dir, name or repo_name_from(spec))
    import git  # GitPython: imported here, after `eok mine` has started git on the history (EarlyWalk)

    path = Path(spec).expanduser()
    if not path.exists():
        raise NotFound(f"repository {spec!r}: no such path", "give a git work tree, a bare repository or a URL")
    try:
        repo = git.Repo(path, search_parent_directories=False)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise InvalidInput(
            f"repository {spec!r}: not a git repository", "give the top folder of a git clone or a bare .git dir"
        ) from None
    git_dir = Path(repo.git_dir).resolve()
    if name is None:
        base = Path(repo.working_tree_dir or git_dir).resolve()
        name = base.name.removesuffix(".git") or "repo"
    return RepoHandle(git_dir=git_dir, name=name, url=None)


def _clone_or_update(url: str, cache_dir: Path, name: str) -> RepoHandle:
    import git

    target = cache_dir / (name.replace("/", "+") + ".git")
    try:
        if target.exists():
            repo = git.Repo(target)
            repo.git.fetch("origin", "+refs/heads/*:refs/heads/*", "--prune")
        else:
            cache_dir.mkdir(parents=True, exist_ok=True)
            repo = git.Repo.clone_from(url, target, bare=True)
    except git.GitCommandError as e:
        raise Unavailable(
            f"repository {url!r}: clone/fetch failed: {decode_stderr(e.stderr)}",
            "check the URL and the network, or clone it yourself and pass the path",
        ) from None
    return RepoHandle(git_dir=Path(repo.git_dir).resolve(), name=name, url=url)


def decode_stderr(text: object) -> str:
    s = text.decode(errors="replace") if isinstance(text, bytes) else str(text or "")
    return " ".join(s.split())[:300]


def resolve_rev(handle: RepoHandle, rev: str) -> str | None:
    """The full sha of `rev`, or None for an empty repository when rev is HEAD."""
    proc = subprocess.run(
        handle.git("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"), capture_output=True, check=False
    )
    if proc.returncode != 0:
        if rev == "HEAD":
            return None
        raise InvalidInput(f"--since {rev!r}: no such revision in {handle.name}", "give a sha, tag or branch")
    return decode(proc.stdout).strip()


def has_commit(handle: RepoHandle, sha: str) -> bool:
    """Whether the commit object exists here (a force push can leave the last mined head behind)."""
    proc = subprocess.run(handle.git("cat-file", "-e", f"{sha}^{{commit}}"), capture_output=True, check=False)
    return proc.returncode == 0


def is_ancestor(handle: RepoHandle, ancestor: str, descendant: str) -> bool:
    proc = subprocess.run(
        handle.git("merge-base", "--is-ancestor", ancestor, descendant), capture_output=True, check=False
    )
    return proc.returncode == 0


def rev_list(handle: RepoHandle, revs: Sequence[str]) -> list[str]:
    proc = subprocess.run(handle.git("rev-list", *revs, "--"), capture_output=True, check=False)
    if proc.returncode != 0:
        raise InvalidInput(f"{handle.name}: cannot list commits {list(revs)}: {decode_stderr(proc.stderr)}")
    return decode(proc.stdout).split()


def count_commits(handle: RepoHandle, revs: Sequence[str]) -> int:
    proc = subprocess.run(handle.git("rev-list", "--count", *revs, "--"), capture_output=True, check=False)
    return int(decode(proc.stdout).strip() or 0) if proc.returncode == 0 else 0


# ---------------------------------------------------------------------------------------------------------
# The metadata stream (paths from --raw, or --numstat with line counts)


def _parse_numstat(blob: str) -> list[FileChange]:
    """Parse `--numstat -z`: "ins\\tdel\\tpath\\0" or, for a rename, "ins\\tdel\\t\\0old\\0new\\0"."""
    out: list[FileChange] = []
    tokens = blob.split("\0")
    i = 0
    while i < len(tokens):
        tok = tokens[i].lstrip("\n")
        i += 1
        if not tok:
            continue
        parts = tok.split("\t", 2)
        if len(parts) != 3:
            continue
        ins, dels, path = parts
        old = None
        if path == "":  # a rename: the old and new paths follow as their own tokens
            old = tokens[i] if i < len(tokens) else None
            path = tokens[i + 1] if i + 1 < len(tokens) else ""
            i += 2
        binary = ins == "-" or dels == "-"
        out.append(
            FileChange(
                path=path,
                insertions=0 if binary else int(ins),
                deletions=0 if binary else int(dels),
                binary=binary,
                old_path=old,
            )
        )
    return out


def _parse_raw(blob: str) -> list[FileChange]:
    """Parse `--raw -z`: ":modes blobs STATUS\\0path\\0" or, for a rename or copy, ":... R086\\0old\\0new\\0"."""
    return [
        FileChange(path=new or path, insertions=0, deletions=0, old_path=old or None)
        for old, new, path in _RAW_ENTRY_RX.findall(blob)
    ]


_RAW_ENTRY_RX = re.compile(r":[0-7]+ [0-7]+ [^ ]+ [^ ]+ (?:[RC]\d*\0([^\0]*)\0([^\0]*)|[A-Z]\d*\0([^\0]*))\0")


def _parse_record(rec: str, counted: bool = True) -> RawCommit | None:
    fields = rec.split(US, 5)
    if len(fields) < 6 or not re.fullmatch(r"[0-9a-f]{40,64}", fields[0]):
        return None
    sha, parents, author, date, message, changes = fields
    return RawCommit(
        sha=sha,
        parents=parents.split(),
        author=author,
        authored_at=date,
        message=message.strip(),
        files=_parse_numstat(changes) if counted else _parse_raw(changes),
        counted=counted,
    )


class GitStream:
    """A `git log -z` record stream; the process starts at once, records are parsed as they are read.

    Iterating yields commits as complete records arrive (a record is complete once the next one starts
    or git exits 0) and, when git fails, a final GitStreamError item.
    """

    def __init__(self, cmd: list[str], stdin_data: bytes | None, counted: bool = True) -> None:
        self.counted = counted  # the command prints --numstat (else --raw)
        self.proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE if stdin_data is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert self.proc.stdout is not None and self.proc.stderr is not None
        _widen_pipe(self.proc.stdout.fileno())
        if stdin_data is not None:
            threading.Thread(target=_feed, args=(self.proc, stdin_data), daemon=True).start()
        self._err: list[bytes] = []
        err = self.proc.stderr
        self._err_thread = threading.Thread(target=lambda: self._err.append(err.read()), daemon=True)
        self._err_thread.start()

    def cancel(self) -> None:
        """Stop git (nothing more will be read); harmless once it has finished."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()

    def __iter__(self) -> Iterator[RawCommit | BaseException]:
        proc = self.proc
        assert proc.stdout is not None
        pending = b""
        held: str | None = None
        while chunk := proc.stdout.read1(PIPE_BYTES):  # whatever git has written, in one read
            pending += chunk
            *complete, pending = pending.split(RS.encode())
            for raw in complete:
                if not raw:
                    continue
                if held is not None and (c := _parse_record(held, self.counted)):
                    yield c
                held = decode(raw)
        rc = proc.wait()
        self._err_thread.join()
        if pending:
            if held is not None and (c := _parse_record(held, self.counted)):
                yield c
            held = decode(pending)
        if rc == 0:
            if held is not None and (c := _parse_record(held, self.counted)):
                yield c
            return
        yield GitStreamError(decode_stderr(b"".join(self._err)))


PIPE_BYTES = 1 << 20


def _widen_pipe(fd: int) -> None:
    """Let git run up to 1 MiB ahead of us (Linux; default 64 KiB).

    The classifier threads hold the GIL for whole regex scans; with a small pipe git would stall on a
    full buffer meanwhile and the walk would take longer than git alone.
    """
    # Not Linux, or above /proc/sys/fs/pipe-max-size: the default size still works, only slower.
    with contextlib.suppress(AttributeError, OSError):
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)


def _feed(proc: subprocess.Popen[bytes], data: bytes) -> None:
    try:
        assert proc.stdin is not None
        proc.stdin.write(data)
        proc.stdin.close()
    except (BrokenPipeError, OSError):
        pass


class GitStreamError(Exception):
    pass


def walk_commits(
    handle: RepoHandle,
    revs: Sequence[str],
    warnings: WalkWarnings,
    *,
    limit: int | None = None,
    started: GitStream | None = None,
    line_counts: bool = True,
) -> Iterator[RawCommit]:
    """Every commit of `revs` (newest first), from one `git log` process: with its numstat, or with
    `line_counts=False` its `--raw` paths only (`RawCommit.counted` False; see `read_commits`).

    `started` is that process already running (see EarlyWalk). On an unreadable object git stops; the
    commit it stopped at is described from its tree, named in a warning, and one new
    `git log --no-walk` over the remaining commits carries on.
    """
    limit_args = [f"--max-count={limit}"] if limit else []
    counted = started.counted if started else line_counts
    first = started or GitStream(handle.git(*_log_args(counted), *limit_args, *revs, "--"), None, counted)
    yield from _resilient(handle, first, lambda: rev_list(handle, [*limit_args, *revs]), warnings, counted)


@dataclass
class EarlyWalk:
    """The whole-history walk of a local repository, started before anything else is ready.

    `eok mine` starts it first thing, so git works while Python imports the graph driver and connects.
    It walks without line counts (`--raw`), as the miner does. The miner adopts it when the run walks the
    whole history from the same head (a first mining, or history rewritten) and cancels it otherwise; an
    unused walk costs git a few milliseconds.
    """

    git_dir: Path
    head: str
    stream: GitStream

    @classmethod
    def start(cls, spec: str) -> EarlyWalk | None:
        """None for URLs and anything git does not take for a repository (the miner reports those)."""
        path = Path(spec).expanduser()
        if is_url(spec) or not path.is_dir():
            return None
        where = subprocess.run(
            ["git", "-C", str(path), "rev-parse", "--absolute-git-dir"], capture_output=True, check=False
        )
        if where.returncode != 0:
            return None
        handle = RepoHandle(git_dir=Path(decode(where.stdout).strip()).resolve(), name="", url=None)
        head = resolve_rev(handle, "HEAD")
        if head is None:
            return None
        return cls(handle.git_dir, head, GitStream(handle.git(*_log_args(False), head, "--"), None, counted=False))

    def adopt(self, handle: RepoHandle, revs: Sequence[str], limit: int | None) -> GitStream | None:
        """The running stream if it is exactly the walk wanted; otherwise stop it and return None."""
        if limit is None and list(revs) == [self.head] and handle.git_dir == self.git_dir:
            return self.stream
        self.cancel()
        return None

    def cancel(self) -> None:
        self.stream.cancel()


def read_commits(handle: RepoHandle, shas: Sequence[str], warnings: WalkWarnings) -> Iterator[RawCommit]:
    """Exactly these commits (no ancestors), in this order, with their numstat; damage handled as in a walk."""
    if not shas:
        return
    first = GitStream(handle.git(*_log_args(True), "--no-walk=unsorted", "--stdin", "--"), _stdin(shas))
    yield from _resilient(handle, first, lambda: list(shas), warnings, True)


def _log_args(counted: bool) -> tuple[str, ...]:
    """The `git log` of a metadata stream: line counts (--numstat) or changed paths only (--raw)."""
    return ("log", "--no-color", "--numstat" if counted else "--raw", "-z", f"--format={LOG_FORMAT}")


def _stdin(shas: Sequence[str]) -> bytes:
    return ("\n".join(shas) + "\n").encode()


def _resilient(
    handle: RepoHandle,
    stream: Iterable[RawCommit | BaseException],
    order: Callable[[], list[str]],
    warnings: WalkWarnings,
    counted: bool,
) -> Iterator[RawCommit]:
    """Pass a record stream through; when git dies, describe the commit it died on and resume after it."""
    seen: list[str] = []
    remaining: list[str] | None = None
    while True:
        failure: GitStreamError | None = None
        for item in stream:
            if isinstance(item, BaseException):
                failure = item  # type: ignore[assignment]
                break
            seen.append(item.sha)
            yield item
        if failure is None:
            return
        done = set(seen)
        remaining = [s for s in (order() if remaining is None else remaining) if s not in done]
        if not remaining:
            warnings.add(f"git log failed after the last commit: {failure}")
            return
        bad = remaining.pop(0)
        missing = _MISSING_RE.findall(str(failure))
        what = f"object {missing[0]}" if missing else str(failure)
        warnings.add(f"commit {bad[:12]}: unreadable {what}; line counts skipped")
        fallback = describe_from_tree(handle, bad, warnings)
        seen.append(bad)
        if fallback is not None:
            yield fallback
        if not remaining:
            return
        stream = GitStream(
            handle.git(*_log_args(counted), "--no-walk=unsorted", "--stdin", "--"), _stdin(remaining), counted
        )


def describe_from_tree(handle: RepoHandle, sha: str, warnings: WalkWarnings) -> RawCommit | None:
    """A commit's metadata and changed paths without reading blobs (no line counts)."""
    # `git log --no-walk` prints the header without diffing; `git show -s` still reads blobs on some commits.
    meta = subprocess.run(
        handle.git("log", "--no-walk", "--no-color", f"--format={LOG_FORMAT}", sha, "--"),
        capture_output=True,
        check=False,
    )
    if meta.returncode != 0:
        warnings.add(f"commit {sha[:12]}: unreadable commit object, skipped ({decode_stderr(meta.stderr)})")
        return None
    rec = _parse_record(decode(meta.stdout).lstrip(RS))
    if rec is None:
        return None
    raw = subprocess.run(
        handle.git("diff-tree", "-r", "--no-renames", "--name-only", "-z", "--root", "--no-commit-id", sha),
        capture_output=True,
        check=False,
    )
    if raw.returncode != 0:
        warnings.add(f"commit {sha[:12]}: unreadable tree, files unknown ({decode_stderr(raw.stderr)})")
    paths = [p for p in decode(raw.stdout).split("\0") if p] if raw.returncode == 0 else []
    rec.files = [FileChange(path=p, insertions=0, deletions=0) for p in paths]
    rec.damaged = True
    return rec


# ---------------------------------------------------------------------------------------------------------
# Patches for candidates


@dataclass(frozen=True, slots=True)
class PatchRequest:
    sha: str
    paths: tuple[str, ...]  # the files worth reading (source code; not vendored, binary or huge)
    avoid: tuple[str, ...] = ()  # files of this commit too big to read: kept out of its batch's pathspec


def _patch_records(text: str) -> list[tuple[str, str]]:
    """(sha, patch) in output order; the text before the first record separator is ignored."""
    out: list[tuple[str, str]] = []
    for rec in text.split(RS)[1:]:
        sha, _, body = rec.partition("\n")
        sha = sha.strip()
        if _SHA_RE.fullmatch(sha):
            out.append((sha, body))
    return out


_SHA_RE = re.compile(r"[0-9a-f]{40,64}")


def pack_batches(requests: Sequence[PatchRequest], size: int) -> list[list[PatchRequest]]:
    """Group requests (in order) for shared `git log -p` processes.

    Commits without huge files share whole-commit batches: no pathspec, because git matches a long
    pathspec against every tree entry of every commit, which costs far more than diffing the few files
    nobody reads. Commits with a huge file share batches limited to the union of their wanted files, and
    never with a commit whose wanted file is another's huge one (git would diff it).
    """
    whole = [r for r in requests if r.paths and not r.avoid]
    out = [whole[i : i + size] for i in range(0, len(whole), size)]
    cur: list[PatchRequest] = []
    union: set[str] = set()
    avoid: set[str] = set()
    for r in requests:
        if not r.paths or not r.avoid:
            continue  # nothing worth reading (classified from its metadata), or in a whole batch
        clash = union.intersection(r.avoid) or avoid.intersection(r.paths)
        if cur and (len(cur) >= size or clash):
            out.append(cur)
            cur, union, avoid = [], set(), set()
        cur.append(r)
        union.update(r.paths)
        avoid.update(r.avoid)
    if cur:
        out.append(cur)
    return out


def fetch_patches(
    handle: RepoHandle,
    requests: Sequence[PatchRequest],
    warnings: WalkWarnings,
    *,
    max_bytes: int,
    batch: int = 150,
    on_done: Callable[[int], None] | None = None,
) -> dict[str, str]:
    """Unified diffs (3 lines of context) of candidate commits, capped at `max_bytes` each.

    Commits share one `git log -p --no-walk --stdin` process per batch (see `pack_batches`); git never
    diffs huge generated files. Commits without files worth reading get no entry.
    """
    out: dict[str, str] = {}
    for group in pack_batches(requests, batch):
        out.update(batch_patches(handle, group, warnings, max_bytes))
        if on_done:
            on_done(len(group))
    return out


def _patch_cmd(handle: RepoHandle, extra: Sequence[str]) -> list[str]:
    # Literal pathspecs: file names with '*', '?' or a leading ':' are names, not patterns.
    return [
        *handle.git("--literal-pathspecs", "log", "--no-color", "-p", "--no-renames", "-U3", f"--format={RS}%H"),
        *extra,
    ]


def batch_patches(
    handle: RepoHandle, group: Sequence[PatchRequest], warnings: WalkWarnings, max_bytes: int
) -> dict[str, str]:
    """Patches of a batch from one git process; when git dies on an unreadable object, the commits it
    printed completely are kept, the one it died on is fetched alone (only its own files) and one new
    process carries on with the rest, so a damaged object costs two processes, not one per commit.
    """
    out: dict[str, str] = {}
    pending = list(group)
    while pending:
        limited = any(r.avoid for r in pending)
        paths = sorted({p for r in pending for p in r.paths}) if limited else []
        proc = subprocess.run(
            _patch_cmd(handle, ["--no-walk=unsorted", "--stdin", "--", *paths]),
            input=_stdin([r.sha for r in pending]),
            capture_output=True,
            check=False,
        )
        records = _patch_records(decode(proc.stdout))
        if proc.returncode == 0:
            out.update((s, body[:max_bytes]) for s, body in records)
            return out
        complete = records[:-1]  # the last record may be the one git died in
        if [s for s, _ in complete] != [r.sha for r in pending[: len(complete)]]:
            # Output out of order (never seen with --no-walk=unsorted): fetch each commit on its own.
            out.update((r.sha, _single_patch(handle, r.sha, r.paths, warnings, max_bytes)) for r in pending)
            return out
        out.update((s, body[:max_bytes]) for s, body in complete)
        bad = pending[len(complete)]
        out[bad.sha] = _single_patch(handle, bad.sha, bad.paths, warnings, max_bytes)
        pending = pending[len(complete) + 1 :]
    return out


def _single_patch(handle: RepoHandle, sha: str, paths: Sequence[str], warnings: WalkWarnings, max_bytes: int) -> str:
    proc = subprocess.run(_patch_cmd(handle, ["--no-walk", sha, "--", *paths]), capture_output=True, check=False)
    if proc.returncode != 0:
        warnings.add(f"commit {sha[:12]}: patch unreadable, classified from metadata ({decode_stderr(proc.stderr)})")
        return ""
    return dict(_patch_records(decode(proc.stdout))).get(sha, "")[:max_bytes]
