"""Hybrid retrieval: FAISS vectors + Lucene full-text + graph expansion, fused by reciprocal rank and
weighted by an outcome prior (measured effect on this target first, then mined evidence)."""

from __future__ import annotations

import math
import re
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, Field

from knowledge.embeddings import Embedder
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
# Log-scale weights of what a query names explicitly: each named field (operator, ISA, technique) earns the
# same. An engineer who names an ISA wants that ISA's code: code on another ISA costs as much as a match
# earns, portable C (right idea, none of the ISA's intrinsics) half of it. A neighbouring operator
# (taxonomy.OPERATOR_NEIGHBOURS: a dot for a gemv question) earns less than the operator named.
INTENT_WEIGHT = {"operator": 1.0, "isa": 1.0, "technique": 1.0}
OTHER_ISA_COST = 1.0
PORTABLE_COST = 0.5
NEIGHBOUR_OPERATOR = 0.4

# What a kernel engineer's query names, in the words such queries use (not the miners' commit patterns:
# those read code and commit messages). Operators are tried in order; the first match wins per word.
_QUERY_ISA: list[tuple[Isa, re.Pattern[str]]] = [
    (Isa.XTHEADVECTOR, re.compile(r"xthead|thead|\b0\.7(\.1)?\b|\bc9[0-2]\d\b", re.I)),
    (
        Isa.RVV,
        re.compile(
            r"\brvv\b|risc-?v|riscv|\bvsetvli?\b|\bvfmacc|\bvfred|\bvle\d|\bvlse|\blmul\b|zvfh|\bk1\b|\bx60\b", re.I
        ),
    ),
    (Isa.NEON, re.compile(r"\bneon\b|aarch64|\barm64?\b", re.I)),
    (Isa.SVE, re.compile(r"\bsve2?\b", re.I)),
    (Isa.AVX512, re.compile(r"avx-?512", re.I)),
    (Isa.AVX2, re.compile(r"\bavx2\b", re.I)),
    (Isa.SSE, re.compile(r"\bsse\d?\b|\bx86\b", re.I)),
]
_QUERY_OPERATOR: list[tuple[Operator, re.Pattern[str]]] = [
    (Operator.QUANT_DOT, re.compile(r"vec_dot|quantized dot|\bq\d_[0-9k]\b", re.I)),  # ggml block formats
    (Operator.QUANTIZE, re.compile(r"quantize|dequant|\bfp16 to\b|\bf16 to\b|conversion", re.I)),
    (Operator.TRSM, re.compile(r"\btrsm\b", re.I)),
    (Operator.GEMV, re.compile(r"gemv|\bger\b|symv|matrix-vector", re.I)),
    (Operator.GEMM, re.compile(r"gemm|matmul|micro-?kernel", re.I)),
    (Operator.DOT, re.compile(r"\b[sd]?dot\b|dot product", re.I)),
    (Operator.AXPY, re.compile(r"axpy", re.I)),
    (Operator.NRM2, re.compile(r"nrm2", re.I)),
    (Operator.SOFTMAX, re.compile(r"softmax", re.I)),
    (Operator.NORM, re.compile(r"rms_?norm|layer_?norm|batch_?norm", re.I)),
    (Operator.CONV, re.compile(r"\bconv|im2col|winograd", re.I)),
    (Operator.ACTIVATION, re.compile(r"gelu|silu|relu|sigmoid|tanh|activation|\bexpf?\b", re.I)),
    (Operator.ROPE, re.compile(r"\brope\b|rotary", re.I)),
    (Operator.REDUCE, re.compile(r"\bi?amax\b|\bi?amin\b|asum|\bsum\b", re.I)),  # "reduce once" is a technique
    (Operator.ELEMENTWISE, re.compile(r"\b[sd]?scal\b", re.I)),
]

_QUERY_TECHNIQUE: list[tuple[Technique, re.Pattern[str]]] = [
    (Technique.PREFETCH, re.compile(r"prefetch", re.I)),
    (Technique.UNROLL, re.compile(r"unroll", re.I)),
    (Technique.MULTI_ACCUMULATOR, re.compile(r"accumulators|partial sums", re.I)),
    (Technique.VECTOR_LENGTH, re.compile(r"\blmul\b|register group", re.I)),
    (Technique.TAIL_HANDLING, re.compile(r"\btails?\b|epilogue|remainder", re.I)),
    (Technique.PACKING, re.compile(r"packing|\bpack\b", re.I)),
    (Technique.REGISTER_BLOCKING, re.compile(r"blocking|tiling|micro-?kernel", re.I)),
    (Technique.WIDENING, re.compile(r"widening|vwmacc|vwmul", re.I)),
    (Technique.REDUCTION, re.compile(r"reduce once|horizontal|vfredusum|vredsum", re.I)),
    (Technique.MEMORY_ACCESS, re.compile(r"strided|unit-?stride|\bvlse", re.I)),
    (Technique.APPROXIMATION, re.compile(r"polynomial|approximat", re.I)),
    (Technique.THREADING, re.compile(r"thread|multicore|openmp", re.I)),
]


class Intent(BaseModel):
    """What a query names explicitly: "unroll sgemm on RVV" -> isa {rvv}, operator {gemm}, technique {unroll}."""

    isa: set[str] = set()
    operator: set[str] = set()
    technique: set[str] = set()


def query_intent(query: str) -> Intent:
    isas = {str(isa) for isa, rx in _QUERY_ISA if rx.search(query)}
    if str(Isa.XTHEADVECTOR) in isas:
        isas.add(str(Isa.RVV))  # a 0.7.1 port starts from RVV code
    return Intent(
        isa=isas,
        operator={str(op) for op, rx in _QUERY_OPERATOR if rx.search(query)},
        technique={str(t) for t, rx in _QUERY_TECHNIQUE if rx.search(query)},
    )


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
            cached = self._results.get(key)
            if cached is not None:
                self._results.move_to_end(key)
                self.cache_hits += 1
                return [h.model_copy() for h in cached[0]]
            self.cache_misses += 1
        hits = self._search(query, k, f)
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

    def _search(self, query: str, k: int, f: SearchFilters) -> list[SearchHit]:
        kinds = [f.kind] if f.kind else ["thought", "idea", "experience"]
        labels = [KIND_LABEL[kd] for kd in kinds if not f.excludes(KIND_LABEL[kd])]
        pool = max(4 * k, 40)
        self.index.ensure_fresh(max_age_s=FRESHNESS_CHECK_S)
        qvec = self.embedder.embed_query(query)
        ranks: dict[tuple[str, str], dict[str, int]] = {}
        for label in labels:
            for r, hit in enumerate(self.index.search(qvec, pool, {label}, f.attribute_filters(label))):
                ranks.setdefault((label, hit.key), {})["vector"] = r
        intent = query_intent(query)
        if "Thought" in labels:
            # What the query names explicitly joins the pool as a ranker of its own: the nearest thoughts
            # on each named ISA (and operator), so a generic-sounding phrasing cannot crowd them out.
            for extra in _intent_filters(intent, f):
                for r, hit in enumerate(self.index.search(qvec, pool, {"Thought"}, extra)):
                    ranks.setdefault(("Thought", hit.key), {}).setdefault("intent", r)

        def graph_side(q: Read) -> list[SearchHit]:
            for label, keys in self._fulltext(q, query, pool, f, labels).items():
                for r, key in enumerate(keys):
                    ranks.setdefault((label, key), {})["fulltext"] = r
            fused = {key: sum(1.0 / (RRF_K + 1 + r) for r in src.values()) for key, src in ranks.items()}
            self._expand(q, fused, ranks, f, set(labels) | ({"Idea"} if "idea" in kinds else set()))
            return self._finish(q, fused, ranks, f, k, intent)

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
            rows = q(
                "CALL db.index.fulltext.queryNodes('knowledge_text', $q, {limit: $scan}) YIELD node "
                f"WITH node WHERE ({thought_ok} AND $thoughts) OR (node:Idea AND $ideas) "
                "RETURN CASE WHEN node:Thought THEN 'Thought' ELSE 'Idea' END AS label, node.id AS k",
                q=terms,
                scan=limit * 5,
                thoughts="Thought" in knowledge,
                ideas="Idea" in knowledge,
                **where,
            )
            for r in rows:
                if len(out.setdefault(r["label"], [])) < limit:
                    out[r["label"]].append(r["k"])
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
            rows += q(
                "UNWIND $iids AS iid MATCH (i:Idea {id: iid}) CALL (i) { MATCH (i)-[:HAS_THOUGHT]->(t:Thought) "
                f"WHERE true{cond} RETURN t LIMIT $fanout }} RETURN i.id AS idea, t.id AS thought",
                iids=idea_ids,
                fanout=EXPANSION_FANOUT,
                **where,
            )
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
    ) -> list[SearchHit]:
        # Apply the prior to a generous head only: details cost a query, the tail never wins. The head is
        # chosen with the query's intent already applied (from the attributes beside the vectors), so a
        # thought only the intent ranker found is not cut for appearing in one ranker.
        def first_pass(key: tuple[str, str]) -> float:
            if not intent or key[0] != "Thought":
                return fused[key]
            return fused[key] * math.exp(_intent_fit(self.index.attributes("Thought", key[1]), intent))

        head = sorted(fused, key=first_pass, reverse=True)[: max(3 * k, 30)]
        details = self._details(q, head, f.target)
        hits = []
        for key in head:
            d = details.get(key)
            if d is None:
                continue
            fit = _intent_fit(d["node"], intent) if intent and key[0] == "Thought" else 0.0
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

    def _details(self, q: Read, keys: list[tuple[str, str]], target: str | None) -> dict[tuple[str, str], dict]:
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
    """Filters of the intent rankers: each named ISA x each named operator and its neighbours."""
    base = f.attribute_filters("Thought")
    ops = set(intent.operator)
    for op in intent.operator:
        ops |= {n.value for n in OPERATOR_NEIGHBOURS.get(Operator(op), frozenset())}
    out = []
    for isa in sorted(intent.isa) or [None]:
        for op in sorted(ops) or [None]:
            extra = {**({"isa": isa} if isa else {}), **({"operator": op} if op else {})}
            if extra and all(base.get(a, v) == v for a, v in extra.items()):
                out.append({**base, **extra})
    return out


def _intent_fit(node: dict[str, Any], intent: Intent) -> float:
    """Log-scale: + for each named ISA, operator and technique it matches (less for a neighbouring
    operator); - for code on another ISA than the one named, half as much for portable C."""
    fit = 0.0
    isa = node.get("isa") or "generic"
    if intent.isa and isa not in intent.isa:
        fit -= PORTABLE_COST if isa == "generic" else OTHER_ISA_COST
    for field in ("isa", "operator", "technique"):
        if node.get(field) in getattr(intent, field):
            fit += INTENT_WEIGHT[field]
    op = node.get("operator")
    if intent.operator and op not in intent.operator and _neighbour(op, intent.operator):
        fit += NEIGHBOUR_OPERATOR
    return fit


def _neighbour(op: str | None, named: set[str]) -> bool:
    try:
        neighbours = OPERATOR_NEIGHBOURS.get(Operator(op or "other"), frozenset())
    except ValueError:
        return False
    return any(n.value in named for n in neighbours)


def _clamp(x: float) -> float:
    return max(-1.0, min(1.0, x))


def _lend(fused: dict, ranks: dict, key: tuple[str, str], score: float) -> None:
    fused[key] = fused.get(key, 0.0) + 0.5 * score
    ranks.setdefault(key, {}).setdefault("graph", 0)


def _attr_prop(attr: str) -> str:
    return "target_key" if attr == "target" else attr


_WORD = re.compile(r"[A-Za-z0-9_]{2,}")


def _lucene_terms(query: str) -> str:
    """Plain words OR-ed together: user text never reaches Lucene's query syntax."""
    return " OR ".join(dict.fromkeys(w.lower() for w in _WORD.findall(query)))
