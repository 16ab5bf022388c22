"""Distil classified optimization commits into Thoughts (technique x operator x ISA family) and Ideas.

Ids are deterministic (`thought:<technique>:<operator>:<isa family>`, `idea:<technique>`), so mining the
same evidence again, or more of it later, merges into the same nodes instead of duplicating them.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from knowledge.taxonomy import ISA_FAMILY, TECHNIQUE_DESCRIPTIONS, Isa, Operator, Technique
from miners.classify import TECHNIQUE_CODE, TOKEN_RX, Classification, diff_hunks, geometric_mean

EXAMPLE_MAX_LINES = 40
FAMILY_NAMES = {
    "riscv": "RISC-V",
    "x86": "x86",
    "arm": "Arm",
    "loongarch": "LoongArch",
    "power": "POWER",
    "wasm": "WebAssembly",
    "generic": "portable C",
}

IDEA_PRINCIPLES: dict[Technique, tuple[str, str]] = {
    Technique.VECTORIZE: (
        "Use the machine's vector unit for the hot loop",
        "Scalar loops leave most of the datapath idle; expressing the hot loop with vector "
        "instructions or intrinsics processes many elements per instruction.",
    ),
    Technique.VECTOR_LENGTH: (
        "Match vector length and register grouping to the machine",
        "The best element count per instruction (LMUL, vector width) balances throughput "
        "against register pressure and the machine's datapath width.",
    ),
    Technique.UNROLL: (
        "Unroll hot loops to expose independent work",
        "Unrolling cuts loop overhead and gives the scheduler independent instructions to overlap.",
    ),
    Technique.MULTI_ACCUMULATOR: (
        "Keep several independent accumulators in flight",
        "A single accumulator serialises on FMA latency; several independent ones keep "
        "the pipeline full and are combined once at the end.",
    ),
    Technique.REGISTER_BLOCKING: (
        "Block the computation in registers and tile it for the caches",
        "Reusing each loaded value for many operations moves the kernel from memory-bound "
        "to compute-bound; block sizes follow register count and cache sizes.",
    ),
    Technique.PACKING: (
        "Lay data out the way the kernel reads it",
        "Packing or repacking operands into contiguous, kernel-shaped panels turns strided, "
        "cache-unfriendly reads into streaming unit-stride loads.",
    ),
    Technique.PREFETCH: (
        "Fetch data before it is needed",
        "Software prefetch ahead of use hides memory latency the hardware prefetcher misses.",
    ),
    Technique.FUSION: (
        "Fuse operations to save instructions and passes over memory",
        "Fused multiply-add and fused loops do more work per instruction and per byte moved.",
    ),
    Technique.REDUCTION: (
        "Reduce horizontally once, not every iteration",
        "Accumulate in vector registers across the loop and do the expensive horizontal reduction once at the end.",
    ),
    Technique.APPROXIMATION: (
        "Approximate expensive functions with polynomials or tables",
        "Range reduction plus a short polynomial or a lookup table replaces slow libm calls and vectorises.",
    ),
    Technique.WIDENING: (
        "Use widening and integer dot-product instructions for narrow data",
        "Low-precision data is multiplied with widening or dot-product instructions so many "
        "narrow products accumulate per instruction without overflow.",
    ),
    Technique.TAIL_HANDLING: (
        "Handle loop tails in vector code",
        "Vector-length control or masks process the remainder without a slow scalar loop.",
    ),
    Technique.ALIGNMENT: (
        "Align data for the vector unit",
        "Aligned buffers and aligned loads avoid split accesses and enable faster instructions.",
    ),
    Technique.THREADING: (
        "Split the work across cores with low overhead",
        "Parallelise large problems and keep small ones single-threaded to avoid overhead.",
    ),
    Technique.MEMORY_ACCESS: (
        "Make memory accesses unit-stride and cache friendly",
        "Reordering loops and accesses for contiguity and reuse cuts cache misses and bandwidth.",
    ),
    Technique.ALGORITHMIC: (
        "Change the algorithm, not only the code",
        "A cheaper algorithm, a fast path for common cases or precomputation beats micro-tuning of a slower method.",
    ),
}


@dataclass(slots=True)
class Evidence:
    """One optimization commit as the distiller sees it."""

    sha: str
    repo: str
    title: str
    classification: Classification
    patch: str = ""
    code_paths: frozenset[str] | None = None  # examples come from these files only (None: every file)
    insight: str | None = None  # the LLM's one-paragraph lesson, when --llm
    _hunks: list[_Hunk] | None = None

    def hunks(self) -> list[_Hunk]:
        """The patch's hunks with what ranking needs, computed once: several thoughts look at them."""
        if self._hunks is None:
            keep = self.code_paths.__contains__ if self.code_paths is not None else None
            self._hunks = []
            budget = EXAMPLE_SCAN_CHARS
            for path, text in diff_hunks(self.patch, keep):
                changed = "\n".join(_CHANGED_RX.findall(text))
                if not changed:
                    continue
                tokens = Counter(TOKEN_RX.findall(changed))
                vocab = " ".join(tokens)
                intr = sum(tokens.get(m, 1) for m in _EXAMPLE_INTRINSIC_RX.findall(vocab))
                self._hunks.append(_Hunk(path, text, changed.count("\n") + 1, intr, tokens, vocab))
                budget -= len(changed)
                if budget <= 0:
                    break
        return self._hunks


_CHANGED_RX = re.compile(r"^[+-].*", re.M)
EXAMPLE_SCAN_CHARS = 40_000  # changed code per commit searched for an example (the best is near the top)


@dataclass(frozen=True, slots=True)
class _Hunk:
    path: str
    text: str
    n_changed: int  # +/- lines
    intrinsics: int
    tokens: Counter[str]  # identifiers of the +/- lines -> occurrences
    vocab: str  # the distinct tokens: technique patterns are token-level, so they scan this, not the text

    def hits(self, rx: re.Pattern[str]) -> int:
        return sum(self.tokens.get(m, 1) for m in rx.findall(self.vocab))


@dataclass(slots=True)
class ThoughtDraft:
    id: str
    idea_id: str
    technique: Technique
    operator: Operator
    isa: Isa
    title: str
    description: str
    example_code: str
    identifiers: str
    evidence: list[str]
    claims: list[float]
    claim_texts: list[str] = field(default_factory=list)  # each believable figure with its span and commit
    merged_from: list[str] = field(default_factory=list)
    source: str = "mined"  # mined | llm (an LLM lesson is in the text) | whatever a graph thought had

    @property
    def prior_speedup(self) -> float | None:
        g = geometric_mean(self.claims)
        return round(g, 3) if g else None


def thought_id(technique: Technique, operator: Operator, family: str) -> str:
    return f"thought:{technique.value}:{operator.value}:{family}"


def idea_id(technique: Technique) -> str:
    return f"idea:{technique.value}"


def group_key(ev: Evidence) -> list[tuple[Technique, Operator, str, Isa]]:
    """The (technique, operator family, ISA family, representative ISA) groups one commit evidences."""
    c = ev.classification
    op = c.operators[0] if c.operators else Operator.OTHER
    isas = c.isas or [Isa.GENERIC]
    by_family: dict[str, Isa] = {}
    for isa in isas:
        by_family.setdefault(ISA_FAMILY[Isa(isa)], Isa(isa))
    return [(Technique(t), Operator(op), fam, isa) for t in c.techniques for fam, isa in by_family.items()]


def build_thoughts(evidence: Sequence[Evidence]) -> dict[str, ThoughtDraft]:
    groups: dict[tuple[Technique, Operator, str], list[tuple[Evidence, Isa]]] = defaultdict(list)
    for ev in evidence:
        for tech, op, fam, isa in group_key(ev):
            groups[(tech, op, fam)].append((ev, isa))
    out: dict[str, ThoughtDraft] = {}
    for (tech, op, fam), items in sorted(groups.items(), key=lambda kv: kv[0]):
        evs = sorted((e for e, _ in items), key=lambda e: (-e.classification.score, e.sha))
        isa_counts: dict[Isa, int] = defaultdict(int)
        for _, isa in items:
            isa_counts[isa] += 1
        isa = max(sorted(isa_counts), key=lambda i: isa_counts[i])
        tid = thought_id(tech, op, fam)
        example, idents = pick_example(tech, evs)
        claims = [x for e in evs for x in e.classification.perf_claims]
        texts = [claim_text(c.value, c.span, e.sha) for e in evs for c in e.classification.claims if c.plausible]
        out[tid] = ThoughtDraft(
            id=tid,
            idea_id=idea_id(tech),
            technique=tech,
            operator=op,
            isa=isa,
            title=thought_title(tech, op, fam, isa),
            description=describe(tech, op, fam, evs),
            example_code=example,
            identifiers=idents,
            evidence=sorted({e.sha for e in evs}),
            claims=claims,
            claim_texts=texts,
            source="llm" if any(e.insight for e in evs) else "mined",
        )
    return out


def claim_text(value: float, span: str, sha: str) -> str:
    """A claimed figure with the words it was read from and its commit: `1.8x: "1.8x faster on K1" (abc123def)`."""
    return f"{value:g}x: {span!r} ({sha[:9]})"


def thought_title(tech: Technique, op: Operator, fam: str, isa: Isa) -> str:
    what = "kernels" if op == Operator.OTHER else f"{op.value} kernels"
    where = FAMILY_NAMES.get(fam, fam)
    isa_txt = f" ({isa.value})" if isa != Isa.GENERIC else ""
    return f"{IDEA_PRINCIPLES[tech][0]}: {what} on {where}{isa_txt}"


def describe(tech: Technique, op: Operator, fam: str, evs: Sequence[Evidence]) -> str:
    """Deterministic text from the features: the technique, what the commits did, what they claimed."""
    lines = [f"{TECHNIQUE_DESCRIPTIONS[tech]} in {op.value} code for {FAMILY_NAMES.get(fam, fam)}."]
    insights = [e.insight for e in evs if e.insight]
    if insights:
        lines.append(insights[0])
    signals = []
    for e in evs:
        for r in e.classification.reasons:
            if f"{tech.value}:" in r and "message says" not in r:
                signals.append(r.split(": ", 2)[-1])
    techs_reason = [r for e in evs for r in e.classification.reasons if r.startswith("+") and "diff shows" in r]
    if signals:
        lines.append("Seen in the diffs: " + "; ".join(dict.fromkeys(signals[:3])) + ".")
    elif techs_reason:
        lines.append("Seen in the diffs: " + techs_reason[0].split("diff shows ", 1)[-1] + ".")
    titles = "; ".join(f"{e.title[:80]!r} ({e.sha[:9]})" for e in evs[:3])
    lines.append(f"Evidence: {len(evs)} commit{'s' if len(evs) != 1 else ''}, e.g. {titles}.")
    claims = [x for e in evs for x in e.classification.perf_claims]
    if claims:
        g = geometric_mean(claims)
        lines.append(f"Reported speedups: {', '.join(f'{x:g}x' for x in claims[:5])} (geometric mean {g:.2f}x).")
    return " ".join(lines)


_EXAMPLE_INTRINSIC_RX = re.compile(r"__riscv_\w+|_mm\d*_\w+|\bv\w+q_\w+|\bsv\w+_[suf]\d+|__l[a]?sx_\w+|vec_\w+")
_EXAMPLE_IDENT_RX = re.compile(
    r"\b(?:__riscv_\w+|_mm\d*_\w+|v\w+q_[suf]\d+\w*|sv\w+_[suf]\d+\w*|__l[a]?sx_\w+|vec_\w+|v[a-z]+\d*_v[vxf]\w*)\b"
)


def pick_example(tech: Technique, evs: Sequence[Evidence]) -> tuple[str, str]:
    """A trimmed before/after hunk from the best evidence, preferring hunks that show the technique."""
    rx = TECHNIQUE_CODE.get(tech)
    best: tuple[int, str, str, str] | None = None
    for e in evs[:8]:
        if not e.patch:
            continue
        for h in e.hunks():
            hits = h.hits(rx) if rx else 0
            rank = hits * 10 + min(h.intrinsics, 20) + min(h.n_changed, 30) // 10
            if best is None or rank > best[0]:
                best = (rank, e.sha, h.path, h.text)
    if best is None:
        return "", ""
    _, sha, path, hunk = best
    lines = hunk.split("\n")
    if len(lines) > EXAMPLE_MAX_LINES:
        lines = [*lines[:EXAMPLE_MAX_LINES], f"... ({len(lines) - EXAMPLE_MAX_LINES} more lines)"]
    code = f"// {path} @ {sha[:9]}\n" + "\n".join(lines)
    idents = sorted(set(_EXAMPLE_IDENT_RX.findall(code)))
    return code, " ".join(idents[:60])


# ---------------------------------------------------------------------------------------------------------
# Near-duplicate merging


def merge_text(d: ThoughtDraft) -> str:
    """What near-duplicate merging compares: title and description without the evidence list."""
    return f"{d.title}\n{d.description.split(' Evidence:')[0]}"


def merge_near_duplicates(
    drafts: dict[str, ThoughtDraft],
    embed: Callable[[list[str]], np.ndarray],
    threshold: float,
    keep: set[str] = frozenset(),  # type: ignore[assignment]
    graph: Sequence[ThoughtDraft] = (),
) -> dict[str, ThoughtDraft]:
    """Fold a thought into another of the same operator and ISA family when their texts nearly match.

    `graph` holds thoughts already in the graph that are not among `drafts` (text only, no evidence):
    a new draft can fold into one of them, which then comes back in the result carrying the draft's
    evidence. Ids in `keep` and graph thoughts always survive; two of them are never merged (both are
    nodes already). Deterministic: candidates are visited in id order and the one with more evidence
    (then the smaller id) survives.
    """
    hosts = {g.id: g for g in graph if g.id not in drafts}
    pool = {**drafts, **hosts}
    ids = sorted(pool)
    if len(ids) < 2:
        return drafts
    fixed = set(keep) | set(hosts)
    vecs = embed([merge_text(pool[i]) for i in ids])
    sims = vecs @ vecs.T
    alive = dict(pool)
    for a_idx, a in enumerate(ids):
        if a not in alive:
            continue
        for b_idx in range(a_idx + 1, len(ids)):
            b = ids[b_idx]
            if b not in alive or (a in fixed and b in fixed):
                continue
            da, db = alive[a], alive[b]
            if da.operator != db.operator or ISA_FAMILY[da.isa] != ISA_FAMILY[db.isa]:
                continue
            if float(sims[a_idx, b_idx]) < threshold:
                continue
            winner, loser = _survivor(da, db, fixed)
            winner.evidence = sorted(set(winner.evidence) | set(loser.evidence))
            winner.claims = winner.claims + loser.claims
            winner.claim_texts = winner.claim_texts + loser.claim_texts
            winner.merged_from.append(loser.id)
            alive.pop(loser.id)
            if loser.id == a:
                break
    # Graph thoughts come back only when they took in evidence.
    return {k: v for k, v in alive.items() if k not in hosts or v.merged_from}


def _survivor(a: ThoughtDraft, b: ThoughtDraft, keep: set[str]) -> tuple[ThoughtDraft, ThoughtDraft]:
    if (a.id in keep) != (b.id in keep):
        return (a, b) if a.id in keep else (b, a)
    if len(a.evidence) != len(b.evidence):
        return (a, b) if len(a.evidence) > len(b.evidence) else (b, a)
    return (a, b) if a.id < b.id else (b, a)
