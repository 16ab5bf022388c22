"""Distil classified optimization commits into Thoughts (one per technique instance) and Ideas (their groups).

A thought is what one change did with one technique on one ISA: the commit's own words for what and why,
the hunk that carries the technique (chosen by that ISA's vector code and the technique's signals, never a
licence header), the claimed figures with their text, and for other ISAs the RVV form of its intrinsics.
Ids are deterministic (`thought:<change>:<isa>:<technique>`): re-mining merges, and a pull request mirrored
between repositories (ggml and llama.cpp) is one change, so one thought with evidence from both.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from knowledge.rvv_translation import rvv_equivalents
from knowledge.taxonomy import ISA_FAMILY, TECHNIQUE_DESCRIPTIONS, Isa, Operator, Technique
from miners.classify import (
    ISA_ORDER,
    ISA_SUBSUMES,
    OPERATOR_RX,
    TECHNIQUE_CODE,
    TOKEN_RX,
    Classification,
    code_isa_counts,
    diff_hunks,
    geometric_mean,
    token_signals,
)
from miners.profiles import GPU_RE

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
    message: str = ""
    gpu_hunks: int = 0  # hunks of GPU code left out of the examples (set by hunks())
    _hunks: list[_Hunk] | None = None

    @property
    def change(self) -> str:
        return change_key(self.title, self.sha)

    def hunks(self) -> list[_Hunk]:
        """The patch's hunks with what ranking needs, computed once: several thoughts look at them."""
        if self._hunks is None:
            keep = self.code_paths.__contains__ if self.code_paths is not None else None
            named = set(self.classification.isas)
            self._hunks = []
            budget = EXAMPLE_SCAN_CHARS
            per_file: Counter[str] = Counter()
            for path, text in diff_hunks(self.patch, keep):
                if per_file[path] >= EXAMPLE_SCAN_FILE_CHARS:
                    continue  # this file has given enough; a many-kernel commit's other files come next
                added = "\n".join(_ADDED_RX.findall(text))
                if not added.strip():
                    continue
                if GPU_RE.search(path) or GPU_CODE_RX.search(added):
                    self.gpu_hunks += 1  # GPU code is no example of a CPU ISA
                    continue
                per_file[path] += len(added)
                tokens = Counter(TOKEN_RX.findall(added))
                vocab = " ".join(tokens)
                counts, _ = code_isa_counts(vocab)
                isa, n_isa = _hunk_isa(counts, tokens, vocab, named)
                n_lines = added.count("\n") + 1
                boiler = _boiler_lines(added) / n_lines
                self._hunks.append(_Hunk(path, text, n_lines, isa, n_isa, boiler, tokens, vocab))
                budget -= len(added)
                if budget <= 0:
                    break
        return self._hunks


_ADDED_RX = re.compile(r"^\+(.*)", re.M)
# GPU kernel code outside a GPU backend's folder (a CUDA kernel in a .cpp, an OpenCL/Metal/GLSL source in a
# string, SYCL in a shared header): marks no CPU code has. Such a hunk is no example of a CPU ISA.
GPU_CODE_RX = re.compile(
    r"\b(?:__global__|__device__|__shared__|__syncthreads|threadIdx|blockIdx|blockDim|warpSize|__shfl\w*|"
    r"cudaStream\w*|cudaMemcpy\w*|hipLaunch\w*|hipStream\w*|get_global_id|get_local_id|__kernel|__local|"
    r"simdgroup\w*|threadgroup|thread_position_in_grid|MTL\w+|gl_GlobalInvocationID|gl_LocalInvocationID|"
    r"local_size_x|sycl::\w+|nd_item|Vk[A-Z]\w+|vk[A-Z]\w+|wgpu\w*)\b|\[\[kernel\]\]|#version\s+\d{3}"
)
EXAMPLE_SCAN_CHARS = 120_000  # added code per commit searched for examples
EXAMPLE_SCAN_FILE_CHARS = 12_000  # ... and per file of it (the start of each kernel file is searched)
# Licence headers, includes, blank and comment-only lines: never what an example is for. A line is boilerplate
# when it holds one of the words or starts (after blanks) with an include, a comment or nothing.
_BOILER_WORDS = (
    "copyright",
    "licenc",
    "licens",
    "spdx",
    "all rights reserved",
    "warrant",
    "redistribut",
    "permission is hereby",
    "the software",
)
_BOILER_START = r"^[^\S\n]*(?:#[^\S\n]*(?:include|pragma once)|//|/\*|\*/|\*|$)"
_BOILER_RX = re.compile("|".join(map(re.escape, _BOILER_WORDS)) + "|" + _BOILER_START, re.I)  # one line
# The same lines counted over a hunk's added text in one scan of it lowercased (the regex above once per
# line cost 0.8 s of CPU per OpenBLAS mine, this 0.2 s).
_BOILER_START_RX = re.compile(_BOILER_START, re.M)


def _boiler_lines(text: str) -> int:
    """How many lines of `text` are licence, include, comment or blank lines."""
    low = text.lower()
    starts = {m.start() for m in _BOILER_START_RX.finditer(low)}
    for word in _BOILER_WORDS:
        i = low.find(word)
        while i >= 0:
            starts.add(low.rfind("\n", 0, i) + 1)  # the start of the line the word is on
            i = low.find(word, i + 1)
    return len(starts)


# "... (#1234)" on GitHub, "... (llama/1234)" / "(whisper/1234)" when ggml syncs a llama.cpp/whisper.cpp PR
_PR_RX = re.compile(r"\s*\((?:#|llama/|whisper/|ggml/)(\d+)\)\s*$")
_WORDS_RX = re.compile(r"[a-z0-9_.]+")


def change_key(title: str, sha: str) -> str:
    """One key per change: a pull request's title and number (mirrored PRs share it), else the commit."""
    m = _PR_RX.search(title)
    if not m:
        return sha[:12]
    words = " ".join(_WORDS_RX.findall(title[: m.start()].lower()))
    return "pr" + hashlib.sha1(f"{words}|{m.group(1)}".encode()).hexdigest()[:10]


@dataclass(frozen=True, slots=True)
class _Hunk:
    path: str
    text: str
    n_added: int
    isa: Isa | None  # the ISA whose vector code the added lines show (None: portable code)
    isa_tokens: int  # occurrences of that ISA's vector-code tokens
    boiler: float  # share of added lines that are licence/include/comment/blank
    tokens: Counter[str]  # identifiers of the added lines -> occurrences
    vocab: str  # the distinct tokens: technique patterns are token-level, so they scan this, not the text

    def hits(self, rx: re.Pattern[str]) -> int:
        return sum(self.tokens.get(m, 1) for m in rx.findall(self.vocab))


def _hunk_isa(counts: Counter[Isa], tokens: Counter[str], vocab: str, named: set[Isa]) -> tuple[Isa | None, int]:
    """The hunk's main ISA by its vector-code tokens, refined by the commit's ISAs (AVX code in an AVX2 change)."""
    if not counts:
        return None, 0
    found = {i for i, n in counts.items() if n >= max(counts.values()) / 10}
    for i in list(found):
        found -= set(ISA_SUBSUMES.get(i, ()))
    isa = max(sorted(found, key=ISA_ORDER.index), key=lambda i: counts[i])
    better = next((n for n in ISA_ORDER if n in named and isa in ISA_SUBSUMES.get(n, ())), isa)
    return better, sum(counts[i] for i in counts if i == isa or i in ISA_SUBSUMES.get(isa, ()))


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
    rvv_equivalents: list[str] = field(default_factory=list)
    change: str = ""
    repos: list[str] = field(default_factory=list)
    source: str = "mined"  # mined | llm (an LLM lesson is in the text)

    @property
    def prior_speedup(self) -> float | None:
        g = geometric_mean(self.claims)
        return round(g, 3) if g else None

    def absorb(self, other: ThoughtDraft) -> None:
        """The same change seen again (a mirrored pull request): its commits become evidence too."""
        new = [s for s in other.evidence if s not in self.evidence]
        if not new:
            return
        self.evidence = sorted({*self.evidence, *new})
        self.repos = sorted({*self.repos, *other.repos})


def thought_id(change: str, isa: Isa, technique: Technique, operator: Operator | None = None) -> str:
    """`thought:<change>:<isa>:<technique>`, plus `:<operator>` for a commit's further kernels."""
    base = f"thought:{change}:{isa.value}:{technique.value}"
    return f"{base}:{operator.value}" if operator is not None else base


def idea_id(technique: Technique) -> str:
    """The technique's own idea: thoughts no group of other evidence shares yet hang here."""
    return f"idea:{technique.value}"


def build_thoughts(evidence: Sequence[Evidence]) -> dict[str, ThoughtDraft]:
    """One draft per (change, ISA, technique); mirrored commits of one change fold into the same draft."""
    out: dict[str, ThoughtDraft] = {}
    for ev in sorted(evidence, key=lambda e: e.sha):
        for d in evidence_thoughts(ev):
            if d.id in out:
                out[d.id].absorb(d)
            else:
                out[d.id] = d
    return out


def evidence_thoughts(ev: Evidence) -> list[ThoughtDraft]:
    """The technique instances one commit evidences: per ISA whose vector code it shows, per kernel, per technique.

    A commit that adds kernels for several operators (OpenBLAS's "Initial version for riscv sifive x280":
    asum, axpy, dot, nrm2, gemm, ... in one go) evidences one instance per operator it touches, each with
    its own kernel file's hunk and that file's operator; a commit about one kernel gives one per technique.
    """
    c = ev.classification
    all_hunks = ev.hunks()
    if not all_hunks and ev.gpu_hunks:
        return []  # its code is all GPU code: the ISA a message names is not what the change touched
    hunks = [h for h in all_hunks if h.boiler < 0.9]
    isas = list(c.isas) or [Isa.GENERIC]
    shown = [i for i in isas if any(h.isa == i for h in hunks)]
    # A change adding one ISA's vector code and naming others (dispatch, guards) is about that one ISA.
    targets = shown or isas
    why = rationale(ev.message, ev.title)
    texts = [claim_text(x.value, x.span, ev.sha) for x in c.claims if x.plausible]
    out: list[ThoughtDraft] = []
    for isa in targets:
        pool = [h for h in hunks if h.isa == isa] or [h for h in hunks if h.isa is None] or hunks
        for op, group, primary in _kernels(pool, c):
            for tech in _techniques(c, group, primary, len(targets) > 1):
                hunk = _best_hunk(group, tech)
                example = render_example(hunk, ev.sha, isa, tech) if hunk else ""
                idents = sorted(set(_EXAMPLE_IDENT_RX.findall(example)))
                out.append(
                    ThoughtDraft(
                        id=thought_id(ev.change, isa, tech, None if primary else op),
                        idea_id=idea_id(tech),
                        technique=tech,
                        operator=op,
                        isa=isa,
                        title=thought_title(ev.title, tech, isa, None if primary else op),
                        description=describe(ev, tech, op, isa, why),
                        example_code=example,
                        identifiers=" ".join(idents[:60]),
                        evidence=[ev.sha],
                        claims=list(c.perf_claims),
                        claim_texts=texts,
                        rvv_equivalents=rvv_equivalents(example) if ISA_FAMILY[isa] != "riscv" else [],
                        change=ev.change,
                        repos=[ev.repo],
                        source="llm" if ev.insight else "mined",
                    )
                )
    return out


MAX_KERNELS_PER_CHANGE = 12  # operators one commit can evidence on one ISA (the ones with the most ISA code)


def _kernels(pool: list[_Hunk], c: Classification) -> list[tuple[Operator, list[_Hunk], bool]]:
    """(operator, its hunks, primary?) of the kernels a commit's hunks on one ISA belong to.

    A hunk's operator comes from its file's name (`axpy_rvv.c`); hunks of files that name none belong to
    the commit's own operator. One operator (the usual case): one kernel with every hunk, the commit's
    operator. Several: the kernel with the most ISA code is the primary one (the unsuffixed thought id).
    """
    commit_op = Operator(c.operators[0]) if c.operators else Operator.OTHER
    by_op: dict[Operator, list[_Hunk]] = defaultdict(list)
    for h in pool:
        by_op[_file_operator(h.path) or commit_op].append(h)
    if len(by_op) <= 1:
        only = next(iter(by_op), commit_op)
        return [(only, pool, True)]
    ranked = sorted(by_op.items(), key=lambda kv: (-sum(h.isa_tokens for h in kv[1]), kv[0].value))
    ranked = ranked[:MAX_KERNELS_PER_CHANGE]
    return [(op, group, i == 0) for i, (op, group) in enumerate(ranked)]


def _file_operator(path: str) -> Operator | None:
    stem = path.rsplit("/", 1)[-1].rsplit(".", 1)[0]
    return next((op for op, rx in OPERATOR_RX if rx.search(stem)), None)


def _techniques(c: Classification, group: list[_Hunk], primary: bool, several_isas: bool) -> list[Technique]:
    """The commit's techniques that this kernel's hunks carry.

    The primary kernel takes every technique the commit shows (its message speaks for it); another
    kernel of the same commit only those whose code is in its own hunks, and vectorization when its
    hunks are the ISA's vector code.
    """
    out: list[Technique] = []
    for name in c.techniques:
        tech = Technique(name)
        rx = TECHNIQUE_CODE.get(tech)
        code_based = any(r.startswith(f"{tech.value}: added code uses") for r in c.reasons)
        hit = rx is not None and any(h.hits(rx) for h in group)
        if primary:
            if code_based and rx is not None and several_isas and not hit:
                continue  # the technique's code is in another ISA's hunks
            out.append(tech)
        elif hit or (tech == Technique.VECTORIZE and any(h.isa_tokens for h in group)):
            out.append(tech)
    return out


def claim_text(value: float, span: str, sha: str) -> str:
    """A claimed figure with the words it was read from and its commit: `1.8x: "1.8x faster on K1" (abc123def)`."""
    return f"{value:g}x: {span!r} ({sha[:9]})"


_PR_SUFFIX_RX = re.compile(r"\s*\((?:#|llama/|whisper/|ggml/)\d+\)\s*$")


def thought_title(commit_title: str, tech: Technique, isa: Isa, operator: Operator | None = None) -> str:
    where = "" if isa == Isa.GENERIC else f" on {isa.value}"
    what = f"{tech.value} of {operator.value}" if operator is not None else tech.value
    return f"{_PR_SUFFIX_RX.sub('', commit_title)[:110]} [{what}{where}]"


# A sentence that says why: cause, mechanism or effect words.
_WHY_RX = re.compile(
    r"\b(?:because|so that|so the|in order to|to avoid|avoids?|hides?|hiding|reduc\w+|fewer|saves?|"
    r"latency|bandwidth|cache|throughput|instead of|allows?|enables?|improv\w+|faster|speed\w*|"
    r"stall\w*|pipeline|register pressure|overhead|bound)\b",
    re.I,
)
_NOISE_LINE_RX = re.compile(
    r"^\s*(?:[*-]\s|co-authored-by|signed-off-by|reviewed-by|\||```|#+\s|http)|^\s*$",
    re.I,
)


def rationale(message: str, title: str) -> str:
    """The commit's own reason: the first body sentence with a cause/mechanism/effect word, else ""."""
    body = message.split("\n", 1)[1] if "\n" in message else ""
    lines = [ln.strip() for ln in body.split("\n") if not _NOISE_LINE_RX.match(ln)]
    text = " ".join(lines)
    for sentence in re.split(r"(?<=[.!?])\s+", text):
        if len(sentence) >= 20 and _WHY_RX.search(sentence):
            return sentence[:300]
    return ""


def describe(ev: Evidence, tech: Technique, op: Operator, isa: Isa, why: str) -> str:
    """What was done, why (the commit's own words), what the diff shows and what was claimed."""
    c = ev.classification
    where = "portable C" if isa == Isa.GENERIC else isa.value
    lines = [
        f"{ev.repo} {ev.sha[:9]}: {ev.title[:160]}.",
        f"{TECHNIQUE_DESCRIPTIONS[tech]} in {op.value} code ({where}).",
    ]
    signal = next((r.split(": ", 1)[1] for r in c.reasons if r.startswith(f"{tech.value}: ")), "")
    if signal:
        lines.append(f"The change {signal}.")
    if ev.insight:
        lines.append(ev.insight)
    lines.append(f"Why: {why}" if why else "Why: the commit gives no reason beyond its title.")
    claims = [x for x in c.claims if x.plausible]
    if claims:
        lines.append("Claimed: " + "; ".join(f"{x.value:g}x ({x.span!r})" for x in claims[:3]) + ".")
    return " ".join(lines)


def _best_hunk(pool: Sequence[_Hunk], tech: Technique) -> _Hunk | None:
    """The hunk that carries the technique: its signals first, then the ISA's vector code, never boilerplate."""
    rx = TECHNIQUE_CODE.get(tech)

    def rank(h: _Hunk) -> float:
        hits = h.hits(rx) if rx is not None else 0
        return 10 * min(hits, 10) + 3 * min(h.isa_tokens, 20) + min(h.n_added, 30) / 10 - 40 * h.boiler

    return max(pool, key=rank, default=None)


def render_example(h: _Hunk, sha: str, isa: Isa, tech: Technique) -> str:
    """The hunk's densest window of EXAMPLE_MAX_LINES lines (added code with the ISA's and the technique's
    tokens weighs most), boilerplate trimmed from its edges, headed by file, commit and ISA."""
    header, *lines = h.text.split("\n")
    weights = _line_weights(h.text, isa, TECHNIQUE_CODE.get(tech))
    n = min(EXAMPLE_MAX_LINES, len(lines))
    best, best_at = -1.0, 0
    run = sum(weights[:n])
    for start in range(0, len(lines) - n + 1):
        if start:
            run += weights[start + n - 1] - weights[start - 1]
        if run > best:
            best, best_at = run, start
    window = lines[best_at : best_at + n]
    while window and _BOILER_RX.search(window[0][1:]):
        window.pop(0)
    while window and _BOILER_RX.search(window[-1][1:]):
        window.pop()
    where = "" if isa == Isa.GENERIC else f" ({isa.value})"
    more = len(lines) - len(window)
    tail = [f"... ({more} more lines in this hunk)"] if more > 0 else []
    return "\n".join([f"// {h.path} @ {sha[:9]}{where}", header.split("@@")[0] + "@@", *window, *tail])


_CONTEXT_LINE, _BOILER_LINE = 0.1, 0.0  # the weights of a line that is not added code


def _line_weights(text: str, isa: Isa, rx: re.Pattern[str] | None) -> list[float]:
    """Per line after the hunk header: 1 for added code, +1 per token of `isa`'s vector code, +2 per token
    `rx` matches; context and boilerplate lines weigh _CONTEXT_LINE and _BOILER_LINE."""
    base, vocab, token_ids, token_lines = _line_tokens(text)
    per_token = np.array(
        [(isa in token_signals(t)[1]) + (2.0 if rx is not None and rx.search(t) else 0.0) for t in vocab]
    )
    # Whole numbers: summed in any order they are exact, so the windows (and their ties) are the same.
    extra = np.bincount(token_lines, weights=per_token[token_ids], minlength=len(base)) if vocab else 0.0
    return (base + extra).tolist()


@functools.lru_cache(maxsize=64)
def _line_tokens(text: str) -> tuple[np.ndarray, list[str], np.ndarray, np.ndarray]:
    """A hunk's lines after its header as arrays: each line's base weight (1 for added code), the distinct
    tokens of its added code lines, and each token occurrence's vocabulary index and line. Cached: one hunk
    is rendered for each technique and ISA it shows."""
    base: list[float] = []
    index: dict[str, int] = {}
    ids: list[int] = []
    where: list[int] = []
    for i, line in enumerate(text.split("\n")[1:]):
        if not line.startswith("+"):
            base.append(_CONTEXT_LINE)
        elif _BOILER_RX.search(line[1:]):
            base.append(_BOILER_LINE)
        else:
            base.append(1.0)
            for tok in TOKEN_RX.findall(line[1:]):
                ids.append(index.setdefault(tok, len(index)))
                where.append(i)
    return np.array(base), list(index), np.array(ids, dtype=np.intp), np.array(where, dtype=np.intp)


_EXAMPLE_IDENT_RX = re.compile(
    r"\b(?:__riscv_\w+|_mm\d*_\w+|v\w+q_[suf]\d+\w*|sv\w+_[suf]\d+\w*|__l[a]?sx_\w+|vec_\w+|v[a-z]+\d*_v[vxf]\w*)\b"
)


# ---------------------------------------------------------------------------------------------------------
# Ideas: groups of thoughts of one technique whose texts are close


IDEA_JOIN = 0.80  # cosine similarity of a thought to a group's centroid (or leader) to belong to it


@dataclass(slots=True)
class IdeaGroup:
    id: str
    technique: Technique
    members: list[str]  # thought ids
    changed: bool = False  # new, or took in thoughts: its text is (re)written


@dataclass(frozen=True, slots=True)
class ThoughtFacts:
    """What grouping and an idea's text need of a thought (a draft or one read from the graph)."""

    id: str
    technique: Technique
    operator: str
    isa: str
    change: str
    repo: str
    idea_id: str
    why: str
    identifiers: str
    what: str = ""  # the commit it comes from: "<repo> <sha>: <title>"


def group_ideas(
    facts: Sequence[ThoughtFacts], vectors: np.ndarray, threshold: float = IDEA_JOIN
) -> dict[str, IdeaGroup]:
    """Mined ideas as groups of thoughts of one technique from at least two changes.

    Thoughts already in a mined idea stay there. The others (new, or still on their technique's own idea)
    join the mined idea whose centroid is nearest if it is within `threshold`, else gather behind the first
    of them (id order) within `threshold` of it; a gathering spanning two or more changes becomes a new
    idea (`idea:<technique>:<leader's change>`), and the rest stay on the technique's own idea.
    Deterministic for a given graph and input, and incremental: an idea keeps its id as it grows.
    """
    groups: dict[str, IdeaGroup] = {}
    by_tech: dict[Technique, list[int]] = defaultdict(list)
    for i, f in enumerate(facts):
        by_tech[f.technique].append(i)
    for tech, idx in sorted(by_tech.items()):
        fallback = idea_id(tech)
        mined: dict[str, list[int]] = defaultdict(list)
        loose: list[int] = []
        for i in sorted(idx, key=lambda i: facts[i].id):
            (mined[facts[i].idea_id] if facts[i].idea_id.startswith(fallback + ":") else loose).append(i)
        for gid, members in mined.items():
            groups[gid] = IdeaGroup(gid, tech, [facts[i].id for i in members])
        if mined and loose:
            ids = sorted(mined)
            cents = np.stack([_unit(vectors[mined[g]].mean(axis=0)) for g in ids])
            sims = vectors[loose] @ cents.T
            rest = []
            for row, i in enumerate(loose):
                j = int(np.argmax(sims[row]))
                if sims[row, j] >= threshold:
                    groups[ids[j]].members.append(facts[i].id)
                    groups[ids[j]].changed = True
                else:
                    rest.append(i)
            loose = rest
        taken: set[int] = set()
        close = vectors[loose] @ vectors[loose].T >= threshold if loose else np.zeros((0, 0), bool)
        for ai, a in enumerate(loose):
            if a in taken:
                continue
            near = [b for bi, b in enumerate(loose) if close[ai, bi] and b not in taken]
            if len({facts[b].change for b in near}) >= 2:
                gid = f"{fallback}:{facts[a].change}"
                groups[gid] = IdeaGroup(gid, tech, [facts[b].id for b in near], changed=True)
                taken.update(near)
    return groups


def _unit(v: np.ndarray) -> np.ndarray:
    n = float(np.linalg.norm(v))
    return v / n if n else v


def idea_prompt(group: IdeaGroup, facts: dict[str, ThoughtFacts], limit: int = 12) -> str:
    """The evidence an LLM reads to state a group's principle: each thought's change, ISA and reason."""
    members = [facts[m] for m in sorted(group.members) if m in facts][:limit]
    lines = [f"Technique: {group.technique.value} ({TECHNIQUE_DESCRIPTIONS[group.technique]})", "Changes:"]
    for f in members:
        lines.append(f"- {f.what} [{f.operator}, {f.isa}]" + (f" Why: {f.why}" if f.why else ""))
    return "\n".join(lines)


def idea_text(group: IdeaGroup, facts: dict[str, ThoughtFacts]) -> tuple[str, str, str]:
    """(title, statement, when it applies) of a mined idea, from its thoughts' evidence."""
    members = [facts[m] for m in group.members if m in facts]
    ops = [o for o, _ in Counter(f.operator for f in members).most_common(3)]
    isas = [i for i, _ in Counter(f.isa for f in members).most_common(4)]
    changes = {f.change for f in members}
    repos = sorted({f.repo for f in members if f.repo})
    idents = Counter(t for f in members for t in set(f.identifiers.split()))
    common = [t for t, n in idents.most_common(6) if n >= 2]
    principle = IDEA_PRINCIPLES[group.technique][0]
    title = f"{principle}: {', '.join(ops)} on {', '.join(isas)}"
    why = next((f.why for f in members if f.why), "")
    statement = f"{TECHNIQUE_DESCRIPTIONS[group.technique]} in {', '.join(ops)} kernels ({', '.join(isas)})."
    if why:
        statement += f" As one of its {len(changes)} changes puts it: {why}"
    applies = (
        f"{', '.join(ops)} kernels on {', '.join(isas)}; evidenced by {len(changes)} changes"
        + (f" in {', '.join(repos)}" if repos else "")
        + (f"; shared intrinsics: {', '.join(common)}" if common else "")
        + "."
    )
    return title, statement, applies
