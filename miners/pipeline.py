"""The miner: repository -> walk -> triage -> patches -> classification -> distillation -> graph.

Incremental: the Repository node remembers the last mined head; the next run walks only `head ^last`.
Everything written is MERGEd on deterministic keys, so re-mining never duplicates.
"""

from __future__ import annotations

import queue
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

import numpy as np

from core.errors import InvalidInput
from core.settings import Settings
from knowledge.embeddings import Embedder
from knowledge.ingest import Ingestor
from knowledge.models import Commit, Idea, Relationship, RelType, Repository, Thought, utcnow
from knowledge.store import GraphStore
from knowledge.taxonomy import Technique
from miners import check_library, gitwalk
from miners.classify import Classification, Triage, classify, gpu_only, needs_line_counts, triage
from miners.distill import (
    IDEA_PRINCIPLES,
    Evidence,
    IdeaGroup,
    ThoughtDraft,
    ThoughtFacts,
    build_thoughts,
    group_ideas,
    idea_id,
    idea_prompt,
    idea_text,
)
from miners.profiles import PROFILES, LibraryProfile, detect_library, is_kernel_file

DAMAGED_REASON = "an object of this commit is unreadable: line counts unknown"


class Progress(Protocol):
    def update(self, phase: str, done: int, total: int | None) -> None: ...


class _NoProgress:
    def update(self, phase: str, done: int, total: int | None) -> None:
        pass


@dataclass
class MineOptions:
    library: str = "auto"
    since: str | None = None
    full: bool = False  # walk the whole history again, whatever was mined before
    limit: int | None = None
    llm: bool = False
    name: str | None = None  # repository name in the graph; default: folder or owner/name of the URL
    max_file_lines: int = 3000  # a file changing more lines than this is generated/vendored: not read
    max_patch_bytes: int = 400_000  # per commit

    def validate(self) -> None:
        check_library(self.library)
        if self.full and self.since:
            raise InvalidInput("--full and --since: pick one", "--full re-walks everything; --since walks a range")
        if self.limit is not None and self.limit < 1:
            raise InvalidInput(f"--limit: {self.limit} is not a positive number", "give N >= 1 or leave it out")


@dataclass
class MineReport:
    repository: str
    library: str
    head: str | None
    previous_head: str | None
    up_to_date: bool = False
    no_kernel_code: bool = False  # HEAD holds no file a kernel is written in: nothing was mined
    commits_read: int = 0
    new_commits: int = 0
    candidates: int = 0
    optimization_commits: int = 0
    optimization_by_isa: dict[str, int] = field(default_factory=dict)
    thoughts_created: int = 0
    thoughts_updated: int = 0
    ideas_created: int = 0
    ideas_updated: int = 0
    mirrored_commits: int = 0  # commits of a change already in the graph from another repository (or run)
    embedded: int = 0
    llm_calls: int = 0
    llm_failures: list[str] = field(default_factory=list)
    mined_ranges: list[str] = field(default_factory=list)  # --since ranges not yet joined to the mined history
    commits: list[dict[str, Any]] = field(default_factory=list)  # per-candidate verdicts (the patch was read)
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
    classification: Classification  # the metadata verdict until a candidate's patch has been classified
    patch: str = ""  # kept only for optimization commits: the distiller takes its examples from it
    evidence: Evidence | None = None  # what a CPU optimization gives the distiller (hunks split already)


def _head_paths(handle: gitwalk.RepoHandle) -> set[str]:
    """Every file path at HEAD (empty for an empty history)."""
    out = subprocess.run(handle.git("ls-tree", "-r", "--name-only", "HEAD"), capture_output=True, check=False)
    return set(gitwalk.decode(out.stdout).split("\n")) - {""} if out.returncode == 0 else set()


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
        self._distiller: Any = None  # the LLM client of an --llm run (ideas are stated by it too)
        self._report: MineReport | None = None

    # -- the whole run ------------------------------------------------------------------------------------

    def mine(self, spec: str, options: MineOptions | None = None, early: gitwalk.EarlyWalk | None = None) -> MineReport:
        """Mine `spec` into the graph. `early` is a whole-history walk already started on the same repository
        (gitwalk.EarlyWalk): used when this run walks exactly that, stopped otherwise.
        """
        opts = options or MineOptions()
        opts.validate()
        t0 = time.perf_counter()
        handle = gitwalk.open_repository(spec, self.settings.home / "cache" / "repos", opts.name)
        paths = _head_paths(handle)
        profile = self._profile(paths, handle.name, opts.library)
        head = gitwalk.resolve_rev(handle, "HEAD")
        stored = self.store.get_node(Repository, handle.name)
        previous = stored.last_mined_head if stored else None
        report = MineReport(repository=handle.name, library=profile.name, head=head, previous_head=previous)
        if head is not None and not any(is_kernel_file(p) for p in paths):
            # A Python project, a website: its "optimize" commits are no kernel knowledge; say so, add nothing.
            report.no_kernel_code = True
            report.seconds = round(time.perf_counter() - t0, 3)
            return report
        revs = self._revs(handle, head, previous, opts)
        started = early.adopt(handle, revs or [], opts.limit) if early else None
        if head is None or revs is None:
            report.up_to_date = True
            report.seconds = round(time.perf_counter() - t0, 3)
            return report
        embedder = _background(self.embedder_factory)
        warnings = gitwalk.WalkWarnings()
        mined_before = self._mined_before(handle, stored, previous, revs)
        writer = _GraphWriter(self.store, handle.name)
        # The Repository node goes first (unchanged head): the commits written during the walk link to it.
        writer.put([_repository(handle, profile, stored, stored.last_mined_head if stored else None)])
        walked: list[str] = []
        try:
            candidates = self._walk(handle, profile, revs, opts, warnings, report, writer, walked, t0, started)
        finally:
            writer.close()
        report.timings["walk_and_classify"] = round(time.perf_counter() - t0, 3)  # commits written too
        report.timings["writer_thread_cpu_s"] = round(writer.cpu_s, 3)
        report.new_commits = len(walked) - len(mined_before(walked))
        self._write(handle, profile, head, revs, candidates, walked, opts, embedder, report, stored)
        report.warnings = warnings.messages
        report.seconds = round(time.perf_counter() - t0, 3)
        return report

    def _profile(self, paths: set[str], name: str, library: str) -> LibraryProfile:
        if library != "auto":
            return PROFILES[library]
        tops = paths | {p.rsplit("/", 1)[0] for p in paths if "/" in p}
        return detect_library(name, tops)

    def _revs(
        self, handle: gitwalk.RepoHandle, head: str | None, previous: str | None, opts: MineOptions
    ) -> list[str] | None:
        if head is None:
            return None
        if opts.full:
            return [head]
        if opts.since:
            since = gitwalk.resolve_rev(handle, opts.since)
            return [head, f"^{since}"]
        if previous == head:
            return None
        if previous and gitwalk.is_ancestor(handle, previous, head):
            return [head, f"^{previous}"]
        return [head]  # first mining, or history rewritten: walk all, MERGE keeps it duplicate-free

    def _mined_before(
        self, handle: gitwalk.RepoHandle, stored: Repository | None, previous: str | None, revs: list[str]
    ) -> Callable[[list[str]], set[str]]:
        """Which walked commits this repository had mined before: none on a first or incremental run.

        Otherwise (history rewritten, --since, after --limit runs) they are the commits reachable from the
        last mined head plus the evidence commits already linked to the repository, read now, before this
        run links its own.
        """
        ranges = stored.mined_ranges if stored else []
        if stored is None or (previous and revs[1:] == [f"^{previous}"] and not ranges):
            return lambda walked: set()
        known: set[str] = set()
        if previous and gitwalk.has_commit(handle, previous):
            known.update(gitwalk.rev_list(handle, [previous]))
        for r in ranges:  # what earlier --since runs walked
            tip, _, base = r.partition("^")
            if gitwalk.has_commit(handle, tip) and gitwalk.has_commit(handle, base):
                known.update(gitwalk.rev_list(handle, [tip, f"^{base}"]))
        rows = self.store.read(
            "MATCH (c:Commit)-[:IN_REPO]->(:Repository {name: $name}) RETURN c.sha AS sha", name=handle.name
        )
        known.update(r["sha"] for r in rows)
        return lambda walked: known.intersection(walked)

    # -- walk, patches, classification ---------------------------------------------------------------------

    def _walk(
        self,
        handle: gitwalk.RepoHandle,
        profile: LibraryProfile,
        revs: list[str],
        opts: MineOptions,
        warnings: gitwalk.WalkWarnings,
        report: MineReport,
        writer: _GraphWriter,
        walked: list[str],
        t0: float,
        started: gitwalk.GitStream | None,
    ) -> list[MinedCommit]:
        """Walk and triage on this thread; candidates are classified and written by the helper threads."""
        total = gitwalk.count_commits(handle, revs)
        if opts.limit:
            total = min(total, opts.limit)

        def seen(mc: MinedCommit) -> None:
            walked.append(mc.raw.sha)
            if len(walked) % 200 == 0:
                self.progress.update("reading commits", len(walked), total)

        def store(batch: list[MinedCommit]) -> None:
            writer.put([_commit_node(handle.name, m) for m in batch])

        raws = gitwalk.walk_commits(handle, revs, warnings, limit=opts.limit, started=started, line_counts=False)
        stamps: dict[str, float] = {}
        candidates = classify_commits(
            handle, profile, raws, warnings, opts, keep_all=False, on_commit=seen, on_batch=store, timings=stamps
        )
        report.timings["walk"] = round(stamps["walk_end"] - t0, 3)
        report.timings["classified"] = round(stamps["classified_end"] - t0, 3)
        for k in ("walk_cpu_s", "counts_thread_cpu_s", "patches_thread_cpu_s", "classify_thread_cpu_s"):
            report.timings[k] = round(stamps[k], 3)
        self.progress.update("reading commits", len(walked), len(walked))
        # Patches were read and classified alongside the walk: report their totals as finished stages.
        self.progress.update("patches read (candidates)", len(candidates), len(candidates))
        n_opt = sum(1 for m in candidates if m.classification.is_optimization)
        self.progress.update("classified as optimizations", n_opt, n_opt)
        report.commits_read = len(walked)
        report.candidates = len(candidates)
        report.commits = [_verdict(m) for m in candidates]
        return candidates

    # -- distillation and ingest ---------------------------------------------------------------------------

    def _write(
        self,
        handle: gitwalk.RepoHandle,
        profile: LibraryProfile,
        head: str,
        revs: list[str],
        candidates: list[MinedCommit],
        walked: list[str],
        opts: MineOptions,
        embedder_future: Future[Embedder],
        report: MineReport,
        stored: Repository | None,
    ) -> None:
        t0 = time.perf_counter()
        opt = [m for m in candidates if m.classification.is_optimization]
        report.optimization_commits = len(opt)
        by_isa: Counter[str] = Counter(str(i) for m in opt for i in (m.classification.isas or ["generic"]))
        report.optimization_by_isa = dict(sorted(by_isa.items(), key=lambda kv: -kv[1]))

        evidence = [m.evidence for m in opt if m.evidence is not None]
        self._distiller = None
        if opts.llm and evidence:
            self._llm(evidence, report)
        t_distill = time.perf_counter()
        self.progress.update("distilling thoughts", 0, len(evidence))
        drafts = build_thoughts(evidence)
        self.progress.update("distilling thoughts", len(evidence), len(evidence))
        graph = self._graph_thoughts(list(drafts))
        embedder = embedder_future.result()
        thoughts = [self._thought(d, graph.get(d.id)) for d in drafts.values()]
        report.thoughts_created = sum(1 for t in thoughts if t.id not in graph)
        report.thoughts_updated = len(thoughts) - report.thoughts_created
        report.mirrored_commits = sum(
            len(set(t.evidence) - set(graph[t.id]["shas"])) for t in drafts.values() if t.id in graph
        )
        # Unchanged thoughts (same text, no new evidence) are not written again.
        thoughts = [t for t in thoughts if t.id not in graph or _new_evidence(drafts[t.id], graph[t.id])]
        vectors = self._embed_new(embedder, thoughts, graph)
        ideas, moves = self._group_ideas(thoughts, vectors, graph)
        report.timings["distill"] = round(time.perf_counter() - t_distill, 3)
        idea_known = self.store.existing_keys("Idea", [i.id for i in ideas])
        report.ideas_created = len([i for i in ideas if i.id not in idea_known])
        report.ideas_updated = len(ideas) - report.ideas_created

        repo_node = _repository(handle, profile, stored, stored.last_mined_head if stored else None)
        if not opts.limit:  # a partial walk moves neither the head nor the count
            self._record_coverage(handle, repo_node, head, revs, walked, report)
        report.mined_ranges = repo_node.mined_ranges
        repo_node.mined_at = utcnow()
        rels = [_rel(RelType.HAS_THOUGHT, "Idea", t.idea_id, "Thought", t.id) for t in thoughts]
        for d in drafts.values():
            rels += [_rel(RelType.EVIDENCED_BY, "Thought", d.id, "Commit", sha) for sha in d.evidence]
        nodes = [repo_node, *ideas, *thoughts]
        self.progress.update("writing to the graph", 0, len(nodes))
        ingest = Ingestor(self.store, embedder).ingest(nodes, rels, precomputed=vectors)
        self._move_thoughts(moves)
        self.progress.update("writing to the graph", len(nodes), len(nodes))
        report.embedded = ingest.embedded
        report.timings["distill_and_ingest"] = round(time.perf_counter() - t0, 3)

    def _record_coverage(
        self,
        handle: gitwalk.RepoHandle,
        repo: Repository,
        head: str,
        revs: list[str],
        walked: list[str],
        report: MineReport,
    ) -> None:
        """What is mined now: the whole history up to `last_mined_head`, plus --since ranges beyond it.

        A --since range extends the mined history only when its base lies inside it (contiguous); else it
        is kept as a range, and the next plain mine walks the whole history (commits already mined count
        as old), so a --since run never hides the older commits from later runs.
        """
        previous = repo.last_mined_head
        if revs == [head]:  # the whole history: every earlier range is inside it
            repo.last_mined_head, repo.commits_read, repo.mined_ranges = head, len(walked), []
            return
        repo.commits_read += report.new_commits
        base = revs[1][1:] if len(revs) > 1 else None
        contiguous = previous is not None and base is not None and gitwalk.is_ancestor(handle, base, previous)
        if revs[1:] == [f"^{previous}"] or (contiguous and gitwalk.is_ancestor(handle, previous, head)):
            repo.last_mined_head = head
        elif base is not None:
            repo.mined_ranges = sorted({*repo.mined_ranges, f"{head}^{base}"})

    def _graph_thoughts(self, ids: list[str]) -> dict[str, dict[str, Any]]:
        """Thoughts already in the graph among `ids`, with their evidence: a re-mined or mirrored change."""
        rows = self.store.read(
            "MATCH (t:Thought) WHERE t.id IN $ids OPTIONAL MATCH (t)-[:EVIDENCED_BY]->(c:Commit) "
            "RETURN t {.*, embedding: null, embedding_vector: null} AS t, collect(c.sha) AS shas",
            ids=ids,
        )
        return {r["t"]["id"]: {**r["t"], "shas": r["shas"]} for r in rows}

    def _thought(self, d: ThoughtDraft, old: dict[str, Any] | None) -> Thought:
        """The node for a draft; a thought already in the graph keeps its text (so it is never re-embedded)
        and its idea, and gains the evidence and repositories of the commits mirroring its change."""
        shas = set(d.evidence) | set(old["shas"] if old else ())
        keep = old or {}
        return Thought(
            id=d.id,
            idea_id=keep.get("idea_id") or d.idea_id,
            title=keep.get("title") or d.title,
            description=keep.get("description") or d.description,
            example_code=keep.get("example_code") or d.example_code,
            identifiers=keep.get("identifiers") if old else d.identifiers,
            technique=d.technique,
            isa=d.isa,
            operator=d.operator,
            evidence_commits=len(shas),
            prior_speedup=d.prior_speedup,
            claims=d.claim_texts,
            rvv_equivalents=keep.get("rvv_equivalents") or d.rvv_equivalents,
            change=d.change,
            repos=sorted(set(d.repos) | set(keep.get("repos") or [])),
            source=keep.get("source") or d.source,
        )

    def _embed_new(
        self, embedder: Embedder, thoughts: list[Thought], graph: dict[str, dict[str, Any]]
    ) -> dict[str, np.ndarray]:
        """Vectors of the thoughts whose text is not in the graph yet (ingest stores these, grouping uses them)."""
        new = [t for t in thoughts if t.id not in graph]
        if not new:
            return {}
        self.progress.update("embedding thoughts", 0, len(new))
        vecs = embedder.embed([t.embedding_text() or t.title for t in new])
        self.progress.update("embedding thoughts", len(new), len(new))
        return {t.id: v for t, v in zip(new, vecs, strict=True)}

    def _group_ideas(
        self, thoughts: list[Thought], vectors: dict[str, np.ndarray], graph: dict[str, dict[str, Any]]
    ) -> tuple[list[Idea], list[tuple[str, str, str]]]:
        """Mined ideas over every mined thought of the techniques this run touched; (ideas, moves) where a
        move (thought, old idea, new idea) re-links a graph thought that now belongs to a mined idea."""
        techniques = sorted({str(t.technique) for t in thoughts})
        if not techniques:
            return [], []
        rows = self.store.read_values(
            "MATCH (t:Thought) WHERE t.technique IN $techs AND t.change IS NOT NULL AND t.change <> '' "
            "AND NOT t.id IN $ids AND t.embedding IS NOT NULL "
            "RETURN t.id AS id, t.technique AS technique, t.operator AS operator, t.isa AS isa, t.change AS change, "
            "t.repos AS repos, t.idea_id AS idea, t.description AS d, t.identifiers AS idents, t.embedding AS v",
            techs=techniques,
            ids=[t.id for t in thoughts],
        )
        facts: list[ThoughtFacts] = []
        vecs: list[np.ndarray] = []
        for r in rows:
            facts.append(
                _facts(
                    r["id"],
                    r["technique"],
                    r["operator"],
                    r["isa"],
                    r["change"],
                    r["repos"],
                    r["idea"],
                    r["d"],
                    r["idents"],
                )
            )
            vecs.append(np.frombuffer(r["v"], dtype="<f4"))
        for t in thoughts:
            v = vectors.get(t.id)
            if v is None:
                v = _stored_vector(self.store, t.id)
            if v is None:
                continue
            facts.append(
                _facts(t.id, t.technique, t.operator, t.isa, t.change, t.repos, t.idea_id, t.description, t.identifiers)
            )
            vecs.append(np.asarray(v, dtype="float32"))
        if not facts:
            return [], []
        groups = group_ideas(facts, np.stack(vecs))
        by_id = {f.id: f for f in facts}
        member_of = {m: g.id for g in groups.values() for m in g.members}
        for t in thoughts:
            t.idea_id = member_of.get(t.id, idea_id(Technique(t.technique)))
        # Graph thoughts whose idea changed: thoughts of this run that were in the graph already, and
        # thoughts not rewritten by this run that a new or grown group took in.
        moves = [(t.id, graph[t.id]["idea_id"], t.idea_id) for t in thoughts if t.id in graph]
        written = {t.id for t in thoughts}
        moves += [(f.id, f.idea_id, member_of[f.id]) for f in facts if f.id not in written and f.id in member_of]
        moves = [m for m in moves if m[1] != m[2]]
        ideas = [_technique_idea(Technique(t)) for t in techniques]
        changed = [g for g in groups.values() if g.changed]
        llm = self._idea_statements(changed, by_id)
        for g in changed:
            title, statement, applies = idea_text(g, by_id)
            said = llm.get(g.id)
            if said is not None:
                title, statement, applies = said.title, said.statement, said.applies_when
            ideas.append(
                Idea(
                    id=g.id,
                    title=title,
                    principle=statement,
                    applies_when=applies,
                    techniques=[g.technique],
                    evidence_changes=len({by_id[m].change for m in g.members if m in by_id}),
                    source="llm" if said is not None else "mined",
                )
            )
        return ideas, moves

    def _move_thoughts(self, moves: list[tuple[str, str, str]]) -> None:
        """Re-link graph thoughts that joined a mined idea; their vector's idea code is refreshed too."""
        if not moves:
            return
        gen = self.store.bump_embedding_generation()
        self.store.write(
            "UNWIND $moves AS m MATCH (t:Thought {id: m[0]}) "
            "OPTIONAL MATCH (:Idea {id: m[1]})-[r:HAS_THOUGHT]->(t) DELETE r "
            "WITH t, m MATCH (i:Idea {id: m[2]}) MERGE (i)-[:HAS_THOUGHT]->(t) "
            "SET t.idea_id = m[2], t.embedding_gen = $gen",
            moves=[list(m) for m in moves],
            gen=gen,
        )

    def _idea_statements(self, groups: list[IdeaGroup], facts: dict[str, ThoughtFacts]) -> dict[str, Any]:
        """With --llm, the LLM states each new or grown group's principle from its evidence (cached)."""
        if self._distiller is None or not groups:
            return {}
        self.progress.update("asking the LLM for ideas", 0, len(groups))
        before = self._distiller.calls
        out = self._distiller.idea_statements({g.id: idea_prompt(g, facts) for g in groups})
        if self._report is not None:
            self._report.llm_calls += self._distiller.calls - before
            self._report.llm_failures = self._distiller.failures
        return out

    def _llm(self, evidence: list[Evidence], report: MineReport) -> None:
        from miners.llm import LlmDistiller

        distiller = LlmDistiller(self.settings, self.settings.home / "cache" / "llm-mine")
        self._distiller, self._report = distiller, report
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


def classify_commits(
    handle: gitwalk.RepoHandle,
    profile: LibraryProfile,
    raws: Iterable[gitwalk.RawCommit],
    warnings: gitwalk.WalkWarnings,
    opts: MineOptions | None = None,
    *,
    keep_all: bool = True,
    on_commit: Callable[[MinedCommit], None] | None = None,
    on_batch: Callable[[list[MinedCommit]], None] | None = None,
    timings: dict[str, float] | None = None,
) -> list[MinedCommit]:
    """Triage every commit as it arrives; fetch patches of the candidates and classify them meanwhile.

    Returns every commit (`keep_all`) or only the candidates, in walk order, all classified. `on_batch`
    receives each classified batch of candidates (from a helper thread) as soon as it is done. `timings`
    receives when the walk and the classification ended (perf_counter) and the CPU seconds of each thread.
    """
    opts = opts or MineOptions()
    pipe = _CandidatePipeline(handle, profile, warnings, opts, on_batch)
    walked: list[MinedCommit] = []
    cpu0 = time.thread_time()
    try:
        for raw in raws:
            tri = triage(raw, profile, opts.max_file_lines)
            mc = MinedCommit(raw, tri, _meta_verdict(raw, tri))
            counts = needs_line_counts(raw, tri) or (keep_all and not raw.counted)
            if tri.candidate or counts:
                pipe.submit(mc, counts)
            if tri.candidate or counts or keep_all:
                walked.append(mc)
            if on_commit:
                on_commit(mc)
        walk_cpu, walk_end = time.thread_time() - cpu0, time.perf_counter()
    finally:
        pipe.finish()
    if timings is not None:
        timings.update(
            walk_end=walk_end,
            walk_cpu_s=walk_cpu,
            classified_end=time.perf_counter(),
            counts_thread_cpu_s=pipe.counter.cpu_s,
            patches_thread_cpu_s=pipe.fetcher.cpu_s,
            classify_thread_cpu_s=pipe.classifier.cpu_s,
        )
    # Commits walked without line counts were read for them where they could be candidates: some are not.
    return walked if keep_all else [m for m in walked if m.triage.candidate]


def _meta_verdict(raw: gitwalk.RawCommit, tri: Triage) -> Classification:
    """The verdict of a commit whose patch is not (yet) read: its metadata score, never an optimization."""
    c = Classification(round(tri.meta.score, 2), False, list(tri.meta.reasons))
    if raw.damaged:
        c.reasons.append(DAMAGED_REASON)
    return c


def _technique_idea(t: Technique) -> Idea:
    """The technique's own idea: its principle is hand-written (so labelled "starter"), its thoughts are the
    ones no group of evidence shares yet."""
    return Idea(
        id=idea_id(t), title=IDEA_PRINCIPLES[t][0], principle=IDEA_PRINCIPLES[t][1], techniques=[t], source="starter"
    )


def _facts(
    tid: str, tech: Any, op: Any, isa: Any, change: str, repos: Any, idea: str | None, desc: str, idents: str | None
) -> ThoughtFacts:
    why = desc.split("Why: ", 1)[1].split(" Claimed:", 1)[0] if "Why: " in (desc or "") else ""
    if why.startswith("the commit gives no reason"):
        why = ""
    return ThoughtFacts(
        id=tid,
        technique=Technique(tech),
        operator=str(op),
        isa=str(isa),
        change=change,
        repo=(repos or [""])[0],
        idea_id=idea or idea_id(Technique(tech)),
        why=why,
        identifiers=idents or "",
        what=(desc or "").split(". ", 1)[0][:200],
    )


def _new_evidence(d: ThoughtDraft, old: dict[str, Any]) -> bool:
    return bool(set(d.evidence) - set(old["shas"]))


def _stored_vector(store: GraphStore, tid: str) -> np.ndarray | None:
    rows = store.read_values("MATCH (t:Thought {id: $id}) RETURN t.embedding AS v", id=tid)
    return np.frombuffer(rows[0]["v"], dtype="<f4") if rows and rows[0]["v"] else None


def _rel(kind: RelType, sl: str, sk: str, el: str, ek: str) -> Relationship:
    return Relationship(type=kind, start_label=sl, start_key=sk, end_label=el, end_key=ek)


def _repository(
    handle: gitwalk.RepoHandle, profile: LibraryProfile, stored: Repository | None, head: str | None
) -> Repository:
    return Repository(
        name=handle.name,
        url=handle.url or (stored.url if stored else None),
        library=profile.name,
        last_mined_head=head,
        mined_ranges=stored.mined_ranges if stored else [],
        mined_at=stored.mined_at if stored else None,
        commits_read=stored.commits_read if stored else 0,
    )


def evidence_of(repo: str, m: MinedCommit) -> Evidence | None:
    """A classified optimization as distiller evidence, its example hunks split now (on the classifier
    thread, while git still walks) rather than at the end; None when it evidences no CPU thought.
    """
    cls = m.classification
    if not cls.is_optimization or not cls.techniques or gpu_only([f.path for f in m.raw.files]):
        return None
    ev = Evidence(m.raw.sha, repo, m.raw.title, cls, m.patch, frozenset(m.triage.patch_paths), message=m.raw.message)
    ev.hunks()  # examples come from the files the classifier read
    return ev


def _verdict(m: MinedCommit) -> dict[str, Any]:
    """One candidate's verdict for `eok mine --json`: what was decided and why."""
    c = m.classification
    return {
        "sha": m.raw.sha,
        "title": m.raw.title,
        "verdict": "optimization" if c.is_optimization else "other",
        "score": c.score,
        "isas": [str(i) for i in c.isas],
        "operators": [str(o) for o in c.operators],
        "techniques": [str(t) for t in c.techniques],
        "claims": [{"value": x.value, "span": x.span, "flag": x.flag} for x in c.claims],
        "reasons": c.reasons,
    }


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
        claim_spans=[c.span for c in cls.claims if c.plausible],
        flagged_claims=[c.describe() for c in cls.claims if not c.plausible],
        score=cls.score,
        reasons=cls.reasons,
        is_optimization=cls.is_optimization,
    )


def _background(factory: Callable[[], Embedder]) -> Future[Embedder]:
    """Build the embedder off the main thread (the model itself loads lazily, on the first uncached text)."""
    fut: Future[Embedder] = Future()

    def run() -> None:
        try:
            fut.set_result(factory())
        except BaseException as e:
            fut.set_exception(e)

    threading.Thread(target=run, daemon=True, name="eok-embedder-load").start()
    return fut


class _Stage:
    """A worker thread fed by a queue; `close()` drains it and re-raises the first error it hit."""

    def __init__(self, name: str, work: Callable[[Any], None], maxsize: int = 0) -> None:
        self.work = work
        self.q: queue.Queue[Any] = queue.Queue(maxsize)
        self.error: BaseException | None = None
        self.cpu_s = 0.0  # CPU time the thread used (the profile of where a run's time goes)
        self.thread = threading.Thread(target=self._run, daemon=True, name=name)
        self.thread.start()

    def put(self, item: Any) -> None:
        if self.error is not None:
            raise self.error
        self.q.put(item)

    def close(self) -> None:
        self.q.put(_END)
        self.thread.join()
        if self.error is not None:
            raise self.error

    def _run(self) -> None:
        while (item := self.q.get()) is not _END:
            if self.error is None:  # after a failure, drain without working so producers never block
                try:
                    self.work(item)
                except BaseException as e:
                    self.error = e
        self.cpu_s = time.thread_time()


_END = object()


class _CandidatePipeline:
    """Line counts, patches and classification of candidate commits while the walk goes on.

    Four threads work at once: the walk (caller), a counter reading the line counts of the commits walked
    without them that could still be candidates (one `git log --numstat` per batch) and triaging them
    again, a fetcher running one `git log -p` per batch of candidates, and a classifier working on the
    previous batch, so git's diffing and Python's regexes overlap. Every commit passes the counter, in
    walk order. Patches are dropped after classification except for optimization commits (their hunks
    become thought examples).
    """

    BATCH = 150

    def __init__(
        self,
        handle: gitwalk.RepoHandle,
        profile: LibraryProfile,
        warnings: gitwalk.WalkWarnings,
        opts: MineOptions,
        on_batch: Callable[[list[MinedCommit]], None] | None,
    ) -> None:
        self.handle = handle
        self.profile = profile
        self.warnings = warnings
        self.opts = opts
        self.on_batch = on_batch
        self.to_count: list[tuple[MinedCommit, bool]] = []  # walk thread only
        self.to_fetch: list[MinedCommit] = []  # counter thread only
        # At most two fetched batches wait for the classifier: patches are big, git must not run far ahead.
        self.classifier = _Stage("eok-classify", self._classify, maxsize=2)
        self.fetcher = _Stage("eok-patches", self._fetch)
        self.counter = _Stage("eok-line-counts", self._count)

    def submit(self, mc: MinedCommit, needs_counts: bool) -> None:
        self.to_count.append((mc, needs_counts))
        if len(self.to_count) >= self.BATCH:
            self.counter.put(self.to_count)
            self.to_count = []

    def finish(self) -> None:
        try:
            try:
                if self.to_count:
                    self.counter.put(self.to_count)
                    self.to_count = []
                self.counter.close()
            finally:
                if self.to_fetch:
                    self.fetcher.put(self.to_fetch)
                    self.to_fetch = []
                self.fetcher.close()
        finally:
            self.classifier.close()

    def _count(self, batch: list[tuple[MinedCommit, bool]]) -> None:
        wanted = [mc.raw.sha for mc, needs in batch if needs]
        counted = {r.sha: r for r in gitwalk.read_commits(self.handle, wanted, self.warnings)}
        for mc, needs in batch:
            if needs and (raw := counted.get(mc.raw.sha)) is not None:
                mc.raw = raw
                mc.triage = triage(raw, self.profile, self.opts.max_file_lines, before=mc.triage)
                mc.classification = _meta_verdict(raw, mc.triage)
            if mc.triage.candidate:
                self.to_fetch.append(mc)
        if len(self.to_fetch) >= self.BATCH:
            self.fetcher.put(self.to_fetch)
            self.to_fetch = []

    def _fetch(self, batch: list[MinedCommit]) -> None:
        reqs = [
            gitwalk.PatchRequest(m.raw.sha, tuple(m.triage.patch_paths), tuple(m.triage.avoid_paths)) for m in batch
        ]
        patches = gitwalk.fetch_patches(
            self.handle, reqs, self.warnings, max_bytes=self.opts.max_patch_bytes, batch=self.BATCH
        )
        self.classifier.put((batch, patches))

    def _classify(self, item: tuple[list[MinedCommit], dict[str, str]]) -> None:
        batch, patches = item
        for m in batch:
            patch = patches.get(m.raw.sha, "")
            m.classification = classify(m.raw, self.profile, m.triage, patch)
            if m.raw.damaged:
                m.classification.reasons.append(DAMAGED_REASON)
            m.patch = patch if m.classification.is_optimization else ""
            m.evidence = evidence_of(self.handle.name, m)
        if self.on_batch:
            self.on_batch(batch)


class _GraphWriter(_Stage):
    """Writes Repository and Commit nodes (commits with their IN_REPO link) while the walk goes on."""

    def __init__(self, store: GraphStore, repo: str) -> None:
        self.store = store
        self.repo = repo
        super().__init__("eok-graph-writer", self._write)

    def _write(self, nodes: list[Repository | Commit]) -> None:
        self.store.upsert_nodes(nodes)
        commits = [n.sha for n in nodes if isinstance(n, Commit)]
        if commits:
            self.store.upsert_relationships(
                [_rel(RelType.IN_REPO, "Commit", sha, "Repository", self.repo) for sha in commits]
            )
