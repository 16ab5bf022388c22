"""The miner: repository -> walk -> triage -> patches -> classification -> distillation -> graph.

Incremental: the Repository node remembers the last mined head; the next run walks only `head ^last`.
Everything written is MERGEd on deterministic keys, so re-mining never duplicates.
"""

from __future__ import annotations

import queue
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from core.errors import InvalidInput
from core.settings import Settings
from knowledge.embeddings import Embedder
from knowledge.ingest import Ingestor
from knowledge.models import Commit, Idea, Relationship, RelType, Repository, Thought, utcnow
from knowledge.store import GraphStore
from knowledge.taxonomy import Technique
from miners import gitwalk
from miners.classify import Classification, Triage, classify, geometric_mean, gpu_only, triage
from miners.distill import IDEA_PRINCIPLES, Evidence, ThoughtDraft, build_thoughts, idea_id, merge_near_duplicates
from miners.profiles import PROFILES, LibraryProfile, detect_library

LIBRARIES = ("auto", "openblas", "ggml", "onnxruntime", "generic")


class Progress(Protocol):
    def update(self, phase: str, done: int, total: int | None) -> None: ...


class _NoProgress:
    def update(self, phase: str, done: int, total: int | None) -> None:
        pass


@dataclass
class MineOptions:
    library: str = "auto"
    since: str | None = None
    limit: int | None = None
    llm: bool = False
    name: str | None = None  # repository name in the graph; default: folder or owner/name of the URL
    max_file_lines: int = 3000  # a file changing more lines than this is generated/vendored: not read
    max_patch_bytes: int = 400_000  # per commit
    merge_threshold: float = 0.95  # cosine similarity above which two thoughts are one

    def validate(self) -> None:
        if self.library not in LIBRARIES:
            raise InvalidInput(f"--library: unknown value {self.library!r}", f"use one of: {', '.join(LIBRARIES)}")
        if self.limit is not None and self.limit < 1:
            raise InvalidInput(f"--limit: {self.limit} is not a positive number", "give N >= 1 or leave it out")


@dataclass
class MineReport:
    repository: str
    library: str
    head: str | None
    previous_head: str | None
    up_to_date: bool = False
    commits_read: int = 0
    new_commits: int = 0
    candidates: int = 0
    optimization_commits: int = 0
    optimization_by_isa: dict[str, int] = field(default_factory=dict)
    thoughts_created: int = 0
    thoughts_updated: int = 0
    ideas_created: int = 0
    ideas_updated: int = 0
    thoughts_merged: int = 0
    embedded: int = 0
    llm_calls: int = 0
    llm_failures: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        return asdict(self)


@dataclass
class MinedCommit:
    raw: gitwalk.RawCommit
    triage: Triage
    classification: Classification
    patch: str = ""  # kept only for optimization commits: the distiller takes its examples from it


class Miner:
    """Mines one repository into the graph. `embedder_factory` is called at most once, in the background."""

    def __init__(
        self,
        store: GraphStore,
        embedder_factory: Callable[[], Embedder],
        settings: Settings,
        progress: Progress | None = None,
    ) -> None:
        self.store = store
        self.embedder_factory = embedder_factory
        self.settings = settings
        self.progress = progress or _NoProgress()

    # -- the whole run ------------------------------------------------------------------------------------

    def mine(self, spec: str, options: MineOptions | None = None) -> MineReport:
        opts = options or MineOptions()
        opts.validate()
        t0 = time.perf_counter()
        handle = gitwalk.open_repository(spec, self.settings.home / "cache" / "repos", opts.name)
        profile = self._profile(handle, opts.library)
        head = gitwalk.resolve_rev(handle, "HEAD")
        stored = self.store.get_node(Repository, handle.name)
        previous = stored.last_mined_head if stored else None
        report = MineReport(repository=handle.name, library=profile.name, head=head, previous_head=previous)
        revs = self._revs(handle, head, previous, opts)
        if head is None or revs is None:
            report.up_to_date = True
            report.seconds = round(time.perf_counter() - t0, 3)
            return report
        embedder = _background(self.embedder_factory)
        warnings = gitwalk.WalkWarnings()
        mined = self._walk(handle, profile, revs, opts, warnings, report)
        report.timings["walk_and_classify"] = round(time.perf_counter() - t0, 3)
        self._write(handle, profile, head, mined, opts, embedder, report, stored)
        report.warnings = warnings.messages
        report.seconds = round(time.perf_counter() - t0, 3)
        return report

    def _profile(self, handle: gitwalk.RepoHandle, library: str) -> LibraryProfile:
        if library != "auto":
            return PROFILES[library]
        import subprocess

        out = subprocess.run(handle.git("ls-tree", "-r", "--name-only", "HEAD"), capture_output=True, check=False)
        paths = set(gitwalk.decode(out.stdout).split("\n")) if out.returncode == 0 else set()
        tops = paths | {p.rsplit("/", 1)[0] for p in paths if "/" in p}
        return detect_library(handle.name, tops)

    def _revs(
        self, handle: gitwalk.RepoHandle, head: str | None, previous: str | None, opts: MineOptions
    ) -> list[str] | None:
        if head is None:
            return None
        if opts.since:
            since = gitwalk.resolve_rev(handle, opts.since)
            return [head, f"^{since}"]
        if previous == head:
            return None
        if previous and gitwalk.is_ancestor(handle, previous, head):
            return [head, f"^{previous}"]
        return [head]  # first mining, or history rewritten: walk all, MERGE keeps it duplicate-free

    # -- walk, patches, classification ---------------------------------------------------------------------

    def _walk(
        self,
        handle: gitwalk.RepoHandle,
        profile: LibraryProfile,
        revs: list[str],
        opts: MineOptions,
        warnings: gitwalk.WalkWarnings,
        report: MineReport,
    ) -> list[MinedCommit]:
        total = gitwalk.count_commits(handle, revs)
        if opts.limit:
            total = min(total, opts.limit)
        fetcher = _PatchFetcher(handle, profile, warnings, opts.max_patch_bytes)
        out: list[MinedCommit] = []
        for n, raw in enumerate(gitwalk.walk_commits(handle, revs, warnings, limit=opts.limit), 1):
            tri = triage(raw, profile, opts.max_file_lines)
            mc = MinedCommit(raw, tri, Classification(round(tri.meta.score, 2), False, list(tri.meta.reasons)))
            out.append(mc)
            if tri.candidate:
                fetcher.submit(mc)
            if n % 200 == 0:
                self.progress.update("reading commits", n, total)
        self.progress.update("reading commits", len(out), len(out))
        fetcher.finish()
        report.commits_read = len(out)
        report.candidates = fetcher.submitted
        for mc in out:
            if mc.raw.damaged:
                mc.classification.reasons.append("an object of this commit is unreadable: line counts unknown")
        return out

    # -- distillation and ingest ---------------------------------------------------------------------------

    def _write(
        self,
        handle: gitwalk.RepoHandle,
        profile: LibraryProfile,
        head: str,
        mined: list[MinedCommit],
        opts: MineOptions,
        embedder_future: Future[Embedder],
        report: MineReport,
        stored: Repository | None,
    ) -> None:
        t0 = time.perf_counter()
        existing = self.store.existing_keys("Commit", [m.raw.sha for m in mined])
        report.new_commits = len(mined) - len(existing)
        commit_nodes = [_commit_node(handle.name, m) for m in mined]
        opt = [m for m in mined if m.classification.is_optimization]
        report.optimization_commits = len(opt)
        by_isa: Counter[str] = Counter(str(i) for m in opt for i in (m.classification.isas or ["generic"]))
        report.optimization_by_isa = dict(sorted(by_isa.items(), key=lambda kv: -kv[1]))

        evidence = [
            Evidence(m.raw.sha, handle.name, m.raw.title, m.classification, m.patch)
            for m in opt
            if m.classification.techniques and not gpu_only([f.path for f in m.raw.files])
        ]
        if opts.llm and evidence:
            self._llm(evidence, report)
        embedder = embedder_future.result()
        drafts = build_thoughts(evidence)
        known = self.store.existing_keys("Thought", list(drafts))
        merged = merge_near_duplicates(drafts, embedder.embed, opts.merge_threshold, keep=known)
        report.thoughts_merged = len(drafts) - len(merged)
        thoughts = self._merge_with_graph(merged)
        report.thoughts_created = len([t for t in thoughts if t.id not in known])
        report.thoughts_updated = len(thoughts) - report.thoughts_created
        ideas = _ideas({Technique(t.technique) for t in thoughts})
        idea_known = self.store.existing_keys("Idea", [i.id for i in ideas])
        report.ideas_created = len([i for i in ideas if i.id not in idea_known])
        report.ideas_updated = len(ideas) - report.ideas_created

        repo_node = Repository(
            name=handle.name,
            url=handle.url or (stored.url if stored else None),
            library=profile.name,
            last_mined_head=head if not opts.limit else (stored.last_mined_head if stored else None),
            mined_at=utcnow(),
            commits_read=(stored.commits_read if stored else 0) + report.new_commits,
        )
        rels = [_rel(RelType.IN_REPO, "Commit", c.sha, "Repository", handle.name) for c in commit_nodes]
        rels += [_rel(RelType.HAS_THOUGHT, "Idea", t.idea_id, "Thought", t.id) for t in thoughts]
        for d in merged.values():
            rels += [_rel(RelType.EVIDENCED_BY, "Thought", d.id, "Commit", sha) for sha in d.evidence]
        ingest = Ingestor(self.store, embedder).ingest([repo_node, *commit_nodes, *ideas, *thoughts], rels)
        report.embedded = ingest.embedded
        report.timings["distill_and_ingest"] = round(time.perf_counter() - t0, 3)

    def _llm(self, evidence: list[Evidence], report: MineReport) -> None:
        from miners.llm import LlmDistiller

        distiller = LlmDistiller(self.settings, self.settings.home / "cache" / "llm-mine")
        self.progress.update("asking the LLM", 0, len(evidence))
        insights = distiller.insights(evidence)
        for e in evidence:
            ins = insights.get(e.sha)
            if ins is None:
                continue
            e.insight = ins.lesson
            extra = [t for t in ins.techniques if t not in e.classification.techniques]
            e.classification.techniques = [*e.classification.techniques, *extra]
        report.llm_calls = distiller.calls
        report.llm_failures = distiller.failures

    def _merge_with_graph(self, drafts: dict[str, ThoughtDraft]) -> list[Thought]:
        """Fold in evidence already in the graph so counts and priors cover every mining run."""
        rows = self.store.read(
            "MATCH (t:Thought)-[:EVIDENCED_BY]->(c:Commit) WHERE t.id IN $ids "
            "RETURN t.id AS id, collect(c.sha) AS shas, collect(c.perf_claims) AS claims, "
            "head(collect(t.example_code)) AS example",
            ids=list(drafts),
        )
        before = {r["id"]: r for r in rows}
        out: list[Thought] = []
        for d in drafts.values():
            old = before.get(d.id)
            shas = set(d.evidence)
            claims = list(d.claims)
            example = d.example_code
            if old:
                new_shas = set(old["shas"]) - shas
                shas |= set(old["shas"])
                claims_by_sha = dict(zip(old["shas"], old["claims"], strict=False))
                claims += [x for s in new_shas for x in (claims_by_sha.get(s) or [])]
                example = old["example"] or example
            prior = geometric_mean(claims)
            out.append(
                Thought(
                    id=d.id,
                    idea_id=d.idea_id,
                    title=d.title,
                    description=d.description,
                    example_code=example,
                    identifiers=d.identifiers,
                    technique=d.technique,
                    isa=d.isa,
                    operator=d.operator,
                    evidence_commits=len(shas),
                    prior_speedup=round(prior, 3) if prior else None,
                    source="llm" if any("LLM" in x for x in d.merged_from) else "mined",
                )
            )
        return out


def _ideas(techniques: set[Technique]) -> list[Idea]:
    return [
        Idea(id=idea_id(t), title=IDEA_PRINCIPLES[t][0], principle=IDEA_PRINCIPLES[t][1], techniques=[t])
        for t in sorted(techniques, key=list(Technique).index)
    ]


def _rel(kind: RelType, sl: str, sk: str, el: str, ek: str) -> Relationship:
    return Relationship(type=kind, start_label=sl, start_key=sk, end_label=el, end_key=ek)


def _commit_node(repo: str, m: MinedCommit) -> Commit:
    c, cls = m.raw, m.classification
    try:
        when: datetime | None = datetime.fromisoformat(c.authored_at) if c.authored_at else None
    except ValueError:
        when = None
    return Commit(
        sha=c.sha,
        repo=repo,
        title=c.title[:300] or "(no message)",
        message=c.message[:4000],
        author=c.author,
        authored_at=when,
        files=[f.path for f in c.files][:200],
        insertions=c.insertions,
        deletions=c.deletions,
        isas=cls.isas,
        operators=cls.operators,
        techniques=cls.techniques,
        perf_claims=cls.perf_claims,
        score=cls.score,
        reasons=cls.reasons,
        is_optimization=cls.is_optimization,
    )


def _background(factory: Callable[[], Embedder]) -> Future[Embedder]:
    """Load the embedding model while git works: it takes seconds and needs no input."""
    fut: Future[Embedder] = Future()

    def run() -> None:
        try:
            fut.set_result(factory())
        except BaseException as e:
            fut.set_exception(e)

    threading.Thread(target=run, daemon=True, name="eok-embedder-load").start()
    return fut


class _PatchFetcher:
    """Fetches and classifies candidates in batches while the log stream is still being read.

    A second git process reads patches on the other core; patches are dropped after classification
    except for optimization commits, whose hunks become thought examples.
    """

    BATCH = 150

    def __init__(
        self, handle: gitwalk.RepoHandle, profile: LibraryProfile, warnings: gitwalk.WalkWarnings, max_bytes: int
    ) -> None:
        self.handle = handle
        self.profile = profile
        self.warnings = warnings
        self.max_bytes = max_bytes
        self.submitted = 0
        self.q: queue.Queue[MinedCommit | None] = queue.Queue()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True, name="eok-patches")
        self.thread.start()

    def submit(self, mc: MinedCommit) -> None:
        self.submitted += 1
        self.q.put(mc)

    def finish(self) -> None:
        self.q.put(None)
        self.thread.join()
        if self.error:
            raise self.error

    def _run(self) -> None:
        try:
            pending: list[MinedCommit] = []
            done = False
            while not done:
                item = self.q.get()
                if item is None:
                    done = True
                else:
                    pending.append(item)
                if len(pending) >= self.BATCH or (done and pending):
                    self._classify(pending)
                    pending = []
        except BaseException as e:
            self.error = e

    def _classify(self, batch: list[MinedCommit]) -> None:
        reqs = [gitwalk.PatchRequest(m.raw.sha, tuple(m.triage.patch_paths), m.triage.whole) for m in batch]
        patches = gitwalk.fetch_patches(self.handle, reqs, self.warnings, max_bytes=self.max_bytes)
        for m in batch:
            patch = patches.get(m.raw.sha, "")
            m.classification = classify(m.raw, self.profile, m.triage, patch)
            m.patch = patch if m.classification.is_optimization else ""
