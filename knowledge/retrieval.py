"""Hybrid retrieval: FAISS vectors + Lucene full-text + graph expansion, fused by reciprocal rank and
weighted by an outcome prior (measured effect on this target first, then mined evidence) and by how well
a thought fits what the query asks for (knowledge/intent.py: its ISA, operator and technique)."""

from __future__ import annotations

import json
import math
import re
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, Field

from knowledge.embeddings import Embedder
from knowledge.intent import Intent, intent_fit, query_intent, target_vector_isa
from knowledge.models import effect_summary
from knowledge.store import GraphStore
from knowledge.taxonomy import MAX_PLAUSIBLE_SPEEDUP, OPERATOR_NEIGHBOURS, Isa, Operator, Technique, parse_enum
from knowledge.vector_index import FRESHNESS_CHECK_S, VectorIndex

Kind = Literal["thought", "idea", "experience"]
KIND_LABEL: dict[str, str] = {"thought": "Thought", "idea": "Idea", "experience": "Experience"}
LABEL_KIND = {v: k for k, v in KIND_LABEL.items()}
EXPANSION_FANOUT = 5  # thoughts per matched idea that graph expansion may add
RESULT_CACHE_BYTES = 64 * 2**20  # answers kept while the graph is unchanged, bounded by their JSON size
RESULT_MAX_BYTES = RESULT_CACHE_BYTES // 16  # a larger single answer (k in the thousands) is not kept
RRF_K = 60  # the usual reciprocal-rank constant: flattens the head so no single ranker dominates
FACT_CACHE_BYTES = 64 * 2**20  # facts about single nodes kept while the graph is unchanged (see _Facts)


Read = Callable[..., list[dict[str, Any]]]  # q(cypher, **params) inside one read transaction


class SearchFilters(BaseModel):
    kind: Kind | None = None
    isa: str | None = None
    operator: str | None = None
    technique: str | None = None
    target: str | None = None

    def normalised(self) -> SearchFilters:
        """Validate enum-valued filters so a typo is an error naming the filter, not an empty result."""
        return SearchFilters(
            kind=self.kind,
            isa=parse_enum(Isa, self.isa, "filter isa") if self.isa else None,
            operator=parse_enum(Operator, self.operator, "filter operator") if self.operator else None,
            technique=parse_enum(Technique, self.technique, "filter technique") if self.technique else None,
            target=self.target,
        )

    def attribute_filters(self, label: str) -> dict[str, str]:
        """Equality filters that apply to nodes of this label."""
        if label == "Thought":
            pairs = {"isa": self.isa, "operator": self.operator, "technique": self.technique}
        elif label == "Experience":
            pairs = {"target": self.target}
        else:
            pairs = {}
        return {k: str(v) for k, v in pairs.items() if v}

    def excludes(self, label: str) -> bool:
        """Ideas carry no isa/operator of their own: with such filters they come only through expansion."""
        return label == "Idea" and bool(self.isa or self.operator or self.technique)


class SearchHit(BaseModel):
    kind: Kind
    id: str
    title: str
    score: float
    prior: float = 0.0
    sources: list[str] = []
    node: dict[str, Any] = {}
    evidence: list[dict[str, Any]] = Field(default_factory=list)
    measured: dict[str, Any] | None = None  # effect on the filter's target: models.effect_summary + target


class _Facts:
    """Facts about single nodes read from the graph (a hit's details, whether a thought carries RVV
    translations, the thoughts an idea lends its score to), kept while the graph generation is unchanged.

    The answer cache serves a repeated query; this serves a new one whose candidates earlier queries read:
    a new query's head is mostly nodes seen before (issue 23: over 300 new queries on 100k thoughts, 43% of
    the details, 70% of the translation checks and 88% of the expansions). Cleared with the answers when
    the graph changes, so an answer is the one the graph would give; bounded by an estimate of its bytes,
    oldest first out."""

    def __init__(self) -> None:
        self._items: OrderedDict[tuple, tuple[Any, int]] = OrderedDict()
        self._bytes = 0
        self._gen = -1
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def reset(self, gen: int) -> None:
        """Called under the retriever's lock when it sees a new graph generation."""
        with self._lock:
            if gen != self._gen:
                self._items.clear()
                self._bytes = 0
                self._gen = gen

    def get(self, keys: list[tuple]) -> tuple[dict[tuple, Any], list[tuple]]:
        """The known facts of these keys and the keys still to read, in their order."""
        known, todo = {}, []
        for key in keys:
            item = self._items.get(key)
            if item is None:
                todo.append(key)
            else:
                known[key] = item[0]
        self.hits += len(known)
        self.misses += len(todo)
        return known, todo

    def put(self, gen: int, facts: dict[tuple, Any]) -> None:
        with self._lock:
            if gen != self._gen:
                return  # read for a generation that has passed
            for key, value in facts.items():
                if key in self._items:
                    continue
                size = _approx_bytes(value) + 100
                self._items[key] = (value, size)
                self._bytes += size
            while self._bytes > FACT_CACHE_BYTES and self._items:
                _, (_, dropped) = self._items.popitem(last=False)
                self._bytes -= dropped


def _approx_bytes(value: Any) -> int:
    if isinstance(value, str):
        return len(value)
    if isinstance(value, dict):
        return sum(len(k) + _approx_bytes(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return sum(_approx_bytes(v) + 8 for v in value)
    return 16


class Retriever:
    def __init__(self, store: GraphStore, embedder: Embedder, index: VectorIndex) -> None:
        self.store = store
        self.embedder = embedder
        self.index = index
        self._results: OrderedDict[tuple, tuple[list[SearchHit], int]] = OrderedDict()
        self._results_bytes = 0
        self._results_gen = -1
        self._lock = threading.Lock()
        self.cache_hits = 0
        self.cache_misses = 0
        self.facts = _Facts()

    def search(self, query: str, k: int = 10, filters: SearchFilters | None = None) -> list[SearchHit]:
        """The top-k hits. Answers are kept per (query, k, filters) until the graph changes: any EoK write
        bumps the graph generation (this process's at once, others' seen within FRESHNESS_CHECK_S)."""
        f = (filters or SearchFilters()).normalised()
        key = (query, k, f.model_dump_json())
        gen = self.store.graph_generation(max_age_s=FRESHNESS_CHECK_S)
        with self._lock:
            if gen != self._results_gen:
                self._results.clear()
                self._results_bytes = 0
                self._results_gen = gen
            self.facts.reset(gen)
            cached = self._results.get(key)
            if cached is not None:
                self._results.move_to_end(key)
                self.cache_hits += 1
                return [h.model_copy() for h in cached[0]]
            self.cache_misses += 1
        hits = self._search(query, k, f, gen)
        self._keep(key, hits, gen)
        return [h.model_copy() for h in hits]

    @property
    def cached_bytes(self) -> int:
        return self._results_bytes

    def _keep(self, key: tuple, hits: list[SearchHit], gen: int) -> None:
        """Cache an answer, evicting the least recently used until the total fits RESULT_CACHE_BYTES."""
        size = sum(len(h.model_dump_json()) for h in hits) + len(key[0]) + 200
        if size > RESULT_MAX_BYTES:
            return
        with self._lock:
            if gen != self._results_gen or key in self._results:
                return
            self._results[key] = (hits, size)
            self._results_bytes += size
            while self._results_bytes > RESULT_CACHE_BYTES:
                _, (_, dropped) = self._results.popitem(last=False)
                self._results_bytes -= dropped

    def _search(self, query: str, k: int, f: SearchFilters, gen: int = -2) -> list[SearchHit]:
        kinds = [f.kind] if f.kind else ["thought", "idea", "experience"]
        labels = [KIND_LABEL[kd] for kd in kinds if not f.excludes(KIND_LABEL[kd])]
        pool = max(4 * k, 40)
        self.index.ensure_fresh(max_age_s=FRESHNESS_CHECK_S)
        qvec = self.embedder.embed_query(query)
        ranks: dict[tuple[str, str], dict[str, int]] = {}
        for label in labels:
            for r, hit in enumerate(self.index.search(qvec, pool, {label}, f.attribute_filters(label))):
                ranks.setdefault((label, hit.key), {})["vector"] = r
        intent = query_intent(query, target_vector_isa(f.target))
        if "Thought" in labels:
            # What the query names explicitly joins the pool as a ranker of its own: the nearest thoughts
            # on each wanted ISA (and operator, or technique), and on the named operator whatever their ISA,
            # so a generic-sounding phrasing cannot crowd them out. A thought counts its best rank in them.
            for extra in _intent_filters(intent, f):
                for r, hit in enumerate(self.index.search(qvec, pool, {"Thought"}, extra)):
                    src = ranks.setdefault(("Thought", hit.key), {})
                    src["intent"] = min(r, src.get("intent", r))

        def graph_side(q: Read) -> list[SearchHit]:
            for label, keys in self._fulltext(q, query, pool, f, labels).items():
                for r, key in enumerate(keys):
                    ranks.setdefault((label, key), {})["fulltext"] = r
            fused = {key: sum(1.0 / (RRF_K + 1 + r) for r in src.values()) for key, src in ranks.items()}
            self._expand(q, fused, ranks, f, set(labels) | ({"Idea"} if "idea" in kinds else set()), gen)
            return self._finish(q, fused, ranks, f, k, intent, gen)

        return self.store.read_many(graph_side)

    # -- rankers -----------------------------------------------------------------------------------------

    def _fulltext(self, q: Read, query: str, limit: int, f: SearchFilters, labels: list[str]) -> dict[str, list[str]]:
        terms = _lucene_terms(query)
        out: dict[str, list[str]] = {}
        if not terms:
            return out
        knowledge = [lb for lb in labels if lb in ("Thought", "Idea")]
        if knowledge:
            where = f.attribute_filters("Thought")
            thought_ok = " AND ".join(["node:Thought"] + [f"node.{_attr_prop(a)} = ${a}" for a in where])
            # One row of two lists, in Lucene's order: 200 rows cost the driver ~4 ms of CPU, one row ~0.5 ms.
            [row] = q(
                "CALL db.index.fulltext.queryNodes('knowledge_text', $q, {limit: $scan}) YIELD node "
                f"WITH node WHERE ({thought_ok} AND $thoughts) OR (node:Idea AND $ideas) "
                "RETURN collect(node:Thought) AS thought, collect(node.id) AS k",
                q=terms,
                scan=limit * 5,
                thoughts="Thought" in knowledge,
                ideas="Idea" in knowledge,
                **where,
            )
            for is_thought, key in zip(row["thought"], row["k"], strict=True):
                label = "Thought" if is_thought else "Idea"
                if len(out.setdefault(label, [])) < limit:
                    out[label].append(key)
        if "Experience" in labels and self.index.count("Experience"):  # no experiences yet: save the query
            where = f.attribute_filters("Experience")
            cond = "".join(f" AND node.{_attr_prop(a)} = ${a}" for a in where)
            rows = q(
                "CALL db.index.fulltext.queryNodes('experience_text', $q, {limit: $scan}) YIELD node "
                f"WITH node WHERE true{cond} RETURN node.id AS k LIMIT $limit",
                q=terms,
                scan=limit * 5,
                limit=limit,
                **where,
            )
            out["Experience"] = [r["k"] for r in rows]
        return out

    def _expand(
        self,
        q: Read,
        fused: dict[tuple[str, str], float],
        ranks: dict[tuple[str, str], dict[str, int]],
        f: SearchFilters,
        labels: set[str],
        gen: int = -2,
    ) -> None:
        """Graph expansion: a matching thought lends half its score to its idea and vice versa."""
        thought_ids = [key for (lb, key) in fused if lb == "Thought"]
        idea_ids = [key for (lb, key) in fused if lb == "Idea"]
        if not thought_ids and not idea_ids:
            return
        where = f.attribute_filters("Thought")
        cond = "".join(f" AND t.{_attr_prop(a)} = ${a}" for a in where)
        # A thought's idea is stored beside its vector; an idea's thoughts take one index-backed lookup with
        # a bounded fan-out: an idea with thousands of thoughts lends its score to a few of them, not to all.
        rows = []
        if "Idea" in labels:
            rows = [{"idea": idea, "thought": t} for t in thought_ids if (idea := self.index.idea_of(t))]
        if idea_ids and "Thought" in labels:
            scope = json.dumps(where, sort_keys=True)
            known, todo = self.facts.get([("fanout", iid, scope) for iid in idea_ids])
            if todo:
                fresh: dict[tuple, list[str]] = {key: [] for key in todo}
                for r in q(
                    "UNWIND $iids AS iid MATCH (i:Idea {id: iid}) CALL (i) { MATCH (i)-[:HAS_THOUGHT]->(t:Thought) "
                    f"WHERE true{cond} RETURN t LIMIT $fanout }} RETURN i.id AS idea, collect(t.id) AS thoughts",
                    iids=[key[1] for key in todo],
                    fanout=EXPANSION_FANOUT,
                    **where,
                ):
                    fresh[("fanout", r["idea"], scope)] = r["thoughts"]
                self.facts.put(gen, fresh)
                known.update(fresh)
            rows += [{"idea": iid, "thought": t} for iid in idea_ids for t in known[("fanout", iid, scope)]]
        for idea, thought in dict.fromkeys((r["idea"], r["thought"]) for r in rows):
            t, i = ("Thought", thought), ("Idea", idea)
            if t in fused and "Idea" in labels:
                _lend(fused, ranks, i, fused[t])
            if i in fused and "Thought" in labels:
                _lend(fused, ranks, t, fused[i])

    # -- details and prior -----------------------------------------------------------------------------

    def _finish(
        self,
        q: Read,
        fused: dict[tuple[str, str], float],
        ranks: dict,
        f: SearchFilters,
        k: int,
        intent: Intent | None = None,
        gen: int = -2,
    ) -> list[SearchHit]:
        # Apply the prior to a generous head only: details cost a query, the tail never wins. The head is
        # chosen with the query's intent already applied (from the attributes beside the vectors, and for
        # code on another ISA whether it carries an RVV translation), so a thought only the intent ranker
        # found is not cut for appearing in one ranker, nor an untranslated one kept for its words.
        # Each candidate thought's attributes, looked up once for both uses.
        attrs = {key: self.index.attributes("Thought", key) for (lb, key) in fused if lb == "Thought"} if intent else {}
        translated = self._translated(q, fused, intent, gen, attrs)

        def first_pass(key: tuple[str, str]) -> float:
            if not intent or key[0] != "Thought":
                return fused[key]
            return fused[key] * math.exp(intent_fit({**attrs[key[1]], "rvv_equivalents": key[1] in translated}, intent))

        head = sorted(fused, key=first_pass, reverse=True)[: max(3 * k, 30)]
        details = self._details(q, head, f.target, gen)
        hits = []
        for key in head:
            d = details.get(key)
            if d is None:
                continue
            fit = intent_fit(d["node"], intent) if intent and key[0] == "Thought" else 0.0
            prior = _outcome_prior(key[0], d) + fit
            hits.append(
                SearchHit(
                    kind=LABEL_KIND[key[0]],  # type: ignore[arg-type]
                    id=key[1],
                    title=d["node"].get("title") or d["node"].get("summary") or key[1],
                    score=fused[key] * math.exp(prior),
                    prior=prior,
                    sources=sorted(ranks.get(key, {})),
                    node=d["node"],
                    evidence=d["evidence"],
                    measured=d.get("measured"),
                )
            )
        hits.sort(key=lambda h: h.score, reverse=True)
        return hits[:k]

    def _translated(
        self,
        q: Read,
        fused: dict[tuple[str, str], float],
        intent: Intent | None,
        gen: int = -2,
        attrs: dict[str, dict[str, str]] | None = None,
    ) -> set[str]:
        """The thoughts on another ISA among the candidates that carry RVV equivalents of their key code (one
        query, only when the asker wants RVV code)."""
        if not intent or str(Isa.RVV) not in intent.isas:
            return set()
        if attrs is None:
            attrs = {key: self.index.attributes("Thought", key) for (label, key) in fused if label == "Thought"}
        foreign = [key for key, a in attrs.items() if a.get("isa") not in _RISCV_OR_PORTABLE]
        if not foreign:
            return set()
        known, todo = self.facts.get([("rvv", key) for key in foreign])
        if todo:
            [row] = q(
                "UNWIND $ids AS id MATCH (t:Thought {id: id}) WHERE size(coalesce(t.rvv_equivalents, [])) > 0 "
                "RETURN collect(id) AS ids",
                ids=[key[1] for key in todo],
            )
            yes = set(row["ids"])
            fresh = {key: key[1] in yes for key in todo}
            self.facts.put(gen, fresh)
            known.update(fresh)
        return {key[1] for key, has in known.items() if has}

    def _details(
        self, q: Read, keys: list[tuple[str, str]], target: str | None, gen: int = -2
    ) -> dict[tuple[str, str], dict]:
        """Each hit's properties, evidence and measured effect: those read before at this graph generation
        from memory, the rest in one query per label."""
        known, todo = self.facts.get(
            [("details", label, key, target if label == "Thought" else None) for label, key in keys]
        )
        out = {(fk[1], fk[2]): d for fk, d in known.items()}
        if todo:
            fresh = self._read_details(q, [(fk[1], fk[2]) for fk in todo], target)
            self.facts.put(
                gen, {("details", lb, key, target if lb == "Thought" else None): d for (lb, key), d in fresh.items()}
            )
            out.update(fresh)
        return out

    def _read_details(self, q: Read, keys: list[tuple[str, str]], target: str | None) -> dict[tuple[str, str], dict]:
        ids = {lb: [k for (label, k) in keys if label == lb] for lb in ("Thought", "Idea", "Experience")}
        out: dict[tuple[str, str], dict] = {}
        if ids["Thought"]:
            for r in q(_THOUGHT_DETAILS, ids=ids["Thought"], target=target):
                m = r["measured"]
                measured = {"target": m["target"], **effect_summary(m)} if m else None
                out[("Thought", r["id"])] = {"node": r["node"], "evidence": r["evidence"], "measured": measured}
        if ids["Idea"]:
            for r in q(_IDEA_DETAILS, ids=ids["Idea"]):
                out[("Idea", r["id"])] = {"node": r["node"], "evidence": r["evidence"]}
        if ids["Experience"]:
            for r in q(_EXPERIENCE_DETAILS, ids=ids["Experience"]):
                out[("Experience", r["id"])] = {"node": r["node"], "evidence": r["evidence"]}
        return out


_RISCV_OR_PORTABLE = {str(Isa.RVV), str(Isa.XTHEADVECTOR), str(Isa.GENERIC), None}
_THOUGHT_DETAILS = """
UNWIND $ids AS id MATCH (t:Thought {id: id})
OPTIONAL MATCH (t)-[:EVIDENCED_BY]->(c:Commit)
WITH t, id, c ORDER BY size(c.perf_claims) DESC, c.authored_at DESC
WITH t, id, collect(c {.sha, .repo, .title, .perf_claims, .claim_spans, .isas})[..5] AS evidence
OPTIONAL MATCH (t)-[e:EFFECT_ON]->(g:Target {key: $target})
RETURN id, t {.id, .idea_id, .title, .description, .example_code, .technique, .isa, .operator,
              .evidence_commits, .prior_speedup, .claims, .rvv_equivalents, .source} AS node, evidence,
       CASE WHEN e IS NULL THEN null ELSE e {.*, target: g.key} END AS measured
"""
_IDEA_DETAILS = """
UNWIND $ids AS id MATCH (i:Idea {id: id})
CALL (i) { OPTIONAL MATCH (i)-[:HAS_THOUGHT]->(t:Thought) RETURN t LIMIT 8 }
RETURN id, i {.id, .title, .principle, .techniques, .source} AS node,
       collect(t {.id, .title, .technique, .isa, .operator, .evidence_commits}) AS evidence
"""
_EXPERIENCE_DETAILS = """
UNWIND $ids AS id MATCH (x:Experience {id: id})
OPTIONAL MATCH (x)-[:APPLIED]->(t:Thought)
RETURN id, x {.id, .task_id, .target_key, .status, .speedup, .competent_speedup, .measurement, .summary,
              .feedback, .generator, .run_id} AS node, collect(t {.id, .title, .technique}) AS evidence
"""


def _outcome_prior(label: str, d: dict[str, Any]) -> float:
    """log-scale boost in [-1, 1]: measured effect on the target dominates mined evidence."""
    node = d["node"]
    if label == "Thought":
        claimed = node.get("prior_speedup") or 1.0
        if claimed > MAX_PLAUSIBLE_SPEEDUP:  # a graph mined before claims were checked: never boost on it
            claimed = 1.0
        mined = 0.05 * math.log1p(node.get("evidence_commits") or 0) + 0.2 * math.log(claimed)
        m = d.get("measured")
        if m and m.get("trials"):
            # What the thought itself added (gain over the parent); a failure counts as no gain.
            n = m["trials"]
            mean = m["sum_log_gain"] / n
            success = m["successes"] / n
            w = n / (n + 3)  # shrink small samples toward the mined prior
            return _clamp(w * (mean + 0.3 * (success - 0.5)) + (1 - w) * mined)
        return _clamp(mined)
    if label == "Experience":
        s = node.get("speedup")
        return _clamp(0.5 * math.log(s)) if node.get("status") == "ok" and s else -0.3
    return _clamp(0.05 * math.log1p(sum(t.get("evidence_commits") or 0 for t in d["evidence"])))


def _intent_filters(intent: Intent, f: SearchFilters) -> list[dict[str, str]]:
    """Filters of the intent rankers: each wanted ISA (named, or the target's) x each named operator and its
    neighbours (or x each named technique), and each named operator on any ISA: when the graph holds no code
    of that operator on the wanted ISA, its portable or translated thoughts are the answer."""
    base = f.attribute_filters("Thought")
    ops = set(intent.operator)
    for op in intent.operator:
        ops |= {n.value for n in OPERATOR_NEIGHBOURS.get(Operator(op), frozenset())}
    isas = sorted(intent.isas)
    combos: list[dict[str, str]] = [{"isa": i, "operator": o} for i in isas for o in sorted(ops)]
    combos += [{"isa": i, "technique": t} for i in isas for t in sorted(intent.technique)]
    combos += [{"operator": o} for o in sorted(intent.operator)]
    if not combos:
        combos = [{"isa": i} for i in isas]
    return [{**base, **extra} for extra in combos if all(base.get(a, v) == v for a, v in extra.items())]


def _clamp(x: float) -> float:
    return max(-1.0, min(1.0, x))


def _lend(fused: dict, ranks: dict, key: tuple[str, str], score: float) -> None:
    fused[key] = fused.get(key, 0.0) + 0.5 * score
    ranks.setdefault(key, {}).setdefault("graph", 0)


def _attr_prop(attr: str) -> str:
    return "target_key" if attr == "target" else attr


_WORD = re.compile(r"[A-Za-z0-9_]{2,}")


def _lucene_terms(query: str) -> str:
    """Plain words OR-ed together: user text never reaches Lucene's query syntax. An identifier also gives its
    parts (`__riscv_vfredusum_vs_f32m1` -> vfredusum, f32m1): Lucene keeps it whole, prose names the parts."""
    words = [w.lower() for w in _WORD.findall(query)]
    parts = [p for w in words if "_" in w for p in w.split("_") if len(p) >= 3]
    return " OR ".join(dict.fromkeys(words + parts))
