"""Is a commit an optimization? Which ISA, operator and techniques? Scored from message, paths and diff.

Every signal adds or removes a fixed weight and leaves a reason, so a score can always be explained.
The weights express general facts about commit histories, not any one repository:
- maintainers say why a change is made (optimize, faster, speed up, a measured factor);
- fixes, reverts and build/doc/test changes are not optimizations even when they touch kernels;
- a kernel path or a diff that adds SIMD intrinsics makes a performance purpose likely.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from itertools import accumulate
from operator import add
from typing import Any

from knowledge.taxonomy import MAX_PLAUSIBLE_SPEEDUP, Isa, Operator, Technique
from miners.gitwalk import FileChange, RawCommit
from miners.profiles import ARCH_DIR_ISA, BUILD_RE, GPU_RE, LibraryProfile, file_kind, suffix

THRESHOLD = 2.0

# ---------------------------------------------------------------------------------------------------------
# Performance claims


_NUM = r"(\d+(?:\.\d+)?)"
_CLAIM_FACTOR = re.compile(
    rf"(?<![\w.]){_NUM}\s*(?:x|×|times)(?![\w])\s*(?:faster|speed-?up|improvement|better|"
    rf"higher|more|perf|performance|throughput)?",
    re.I,
)
_CLAIM_FACTOR_CTX = re.compile(
    r"faster|speed|perf|improv|gain|boost|throughput|gflops|better|up to|"
    r"accelerat|optimi",
    re.I,
)
_CLAIM_PERCENT = re.compile(
    rf"(?<![\w.]){_NUM}\s*%\s*(faster|speed-?up|improvement|better|gain|increase|"
    rf"more throughput|higher|performance|perf|boost|less time|reduction|fewer cycles|"
    rf"slower)",
    re.I,
)
_CLAIM_PERCENT_PRE = re.compile(
    rf"(?:speed-?up|improv\w*|faster|gain|boost|performance)\s+(?:of|by)?\s*"
    rf"(?:about|around|~|up to)?\s*\+?{_NUM}\s*%",
    re.I,
)
# "+39%" in a benchmark table: a signed gain, believed only when the message speaks of measuring speed.
_CLAIM_PLUS_PERCENT = re.compile(rf"(?<![\w.+-])\+\s?{_NUM}\s?%")
_BENCH_CTX = re.compile(r"bench|perf|speed|faster|throughput|gflops|t/s|tok/s|tokens/s|\b(?:pp|tg)\d+\b", re.I)
# "x1.5" (the factor written after the x): like "1.5x", it needs a performance word nearby.
_CLAIM_X_FIRST = re.compile(rf"(?<![\w.])[x×]\s?{_NUM}(?![\w.]|\s*[x×*]\s*\d)", re.I)
_CLAIM_FROM_TO = re.compile(
    rf"from\s+{_NUM}\s*(?:gflops|gb/s|t/s|tok/s|tokens/s|ms|us|µs|s|ns|cycles)?\s+to\s+"
    rf"{_NUM}\s*(gflops|gb/s|t/s|tok/s|tokens/s|ms|us|µs|s|ns|cycles)",
    re.I,
)
_TIME_UNITS = {"ms", "us", "µs", "s", "ns", "cycles"}


# CPU, ISA and accelerator names that look like an "x"-first factor: x86, x64, SpacemiT X60, X100, X280.
# A capital X before a whole number of two or more digits is a core name in these histories; a claim is
# written "x1.5", "x2" or "10x".
_X_NAME_NUMBERS = {"86", "64", "32"}
_NAME_AFTER = re.compile(r"\s*(?:[-_]?64\b|cores?\b|cpus?\b|chips?\b|boards?\b|soc\b|processors?\b|machines?\b)", re.I)
MAX_PLAUSIBLE = MAX_PLAUSIBLE_SPEEDUP  # beyond this a CPU SIMD change's claim is flagged, not believed
MAX_UNSUPPORTED = 8.0  # beyond this a claim needs a benchmark line (figures with units) in the message
_BENCH_LINE = re.compile(
    r"^.*\d.*(?:gflops|gb/s|t/s|tok/s|tokens/s|\bms\b|\bus\b|µs|\bns\b|cycles|\bsec\b|\bs\b|"
    r"\b(?:pp|tg)\d+\b|bench|speed-?up|\|).*\d.*$",
    re.I | re.M,
)


@dataclass(frozen=True, slots=True)
class Claim:
    """One speedup figure parsed from a message, with the text it was read from."""

    value: float
    span: str  # the matched text with a few words around it, on one line
    start: int
    end: int
    flag: str = ""  # why it is not believed ("implausible: ..."), empty when it is

    @property
    def plausible(self) -> bool:
        return not self.flag

    def describe(self) -> str:
        return f"{self.value:g}x from {self.span!r}" + (f" [{self.flag}]" if self.flag else "")


# A multiplier beside a count of threads, registers, lanes or unrolled iterations ("4 threads (x4)", "unroll
# x4", "8x unrolled", "registers x8") says how many, not how much faster.
_COUNT_WORD = (
    r"threads?|cores?|registers?|regs?|unroll\w*|accumulators?|lanes?|ways?|rows?|columns?|cols?|blocks?|"
    r"loops?|iterations?|elements?|bytes?|bits?|instructions?|insns?|vectors?|tiles?|times unrolled"
)
_COUNT_BEFORE = re.compile(rf"\b(?:{_COUNT_WORD})\s*[(\[]?\s*$", re.I)
_COUNT_AFTER = re.compile(rf"\s*[)\]]?\s*(?:{_COUNT_WORD})\b", re.I)
# Words that lead into an "x"-first factor ("speedup x1.5", "gives x2", "by ~x3"). Any other word right
# before it is a name the factor belongs to: an instruction ("rmpy x8"), a type or a kernel.
_X_LEAD = re.compile(
    r"(?:faster|speed-?ups?|perf\w*|improv\w*|gains?|boost\w*|throughput|better|accelerat\w*|optimi\w*|up to|"
    r"up|by|of|is|was|are|were|about|around|roughly|nearly|almost|approx\w*|over|than|gives?|got|gets?|"
    r"achieves?|reach\w*|a|an|and|or|to|at|with|~)\s*$",
    re.I,
)


def _counts_something(text: str, start: int, end: int) -> bool:
    """Is the multiplier at text[start:end] a count of threads, registers, lanes or unrolled steps?"""
    return bool(_COUNT_BEFORE.search(text, max(0, start - 30), start) or _COUNT_AFTER.match(text, end))


def _x_names_something(text: str, start: int) -> bool:
    """Does a word other than a speed word or a small function word stand right before an "x"-first factor?"""
    head = text[max(0, start - 30) : start]
    if not re.search(r"[A-Za-z_]\w*[ \t]+$", head):
        return False  # punctuation or a line start before it: "sgemv: x1.5 faster"
    return not _X_LEAD.search(head)


def _x_is_name(text: str, m: re.Match[str]) -> bool:
    """Is an "x"-first match (x86, X60, X100 cores) a CPU/ISA name rather than a factor?"""
    num = m.group(1)
    letter = m.group(0)[0]
    if num in _X_NAME_NUMBERS and "." not in num:
        return True
    if letter == "X" and "." not in num and len(num) >= 2:
        return True
    return bool(_NAME_AFTER.match(text, m.end()))


def _negative(text: str, start: int) -> bool:
    """A minus sign stuck to a figure and standing apart from what precedes it ("| -29.2%", "6.3 -29.2%",
    "(-10%)"), not a range's dash ("10-20%", "5% - 50%")."""
    if start == 0 or text[start - 1] not in "-−":
        return False
    return start == 1 or not (text[start - 2].isalnum() or text[start - 2] in "%.")


def _span(text: str, start: int, end: int) -> str:
    a = max(text.rfind("\n", 0, start) + 1, start - 40)
    b = text.find("\n", end)
    b = min(b if b >= 0 else len(text), end + 40)
    return " ".join(text[a:b].split())


def parse_claims(text: str) -> list[Claim]:
    """Speedup figures claimed in a message: "1.8x" -> 1.8, "35% faster" -> 1.35, "from 10 to 14 GFLOPS" -> 1.4.

    Time-like units invert (from 10 ms to 5 ms is 2x). Figures outside (1, 100] are dropped as noise
    (version numbers; "16x8 kernel" shapes are excluded by requiring context or a unit), CPU and ISA names
    (x86, x64, X60, X100) are never figures, and a figure above MAX_PLAUSIBLE, or above MAX_UNSUPPORTED with
    no benchmark line in the message, is kept with a flag: shown, never ranked.
    """
    found: list[tuple[float, int, int]] = []
    for m in _CLAIM_FACTOR.finditer(text):
        tail = text[m.end() : m.end() + 40]
        head = text[max(0, m.start() - 40) : m.start()]
        # "16x8" is a shape, not a claim; a factor needs a perf word nearby.
        if re.match(r"\d", text[m.end() - 1 : m.end() + 1][-1:] or "") or re.match(r"\s*\d", tail[:2]):
            continue
        if m.group(0).rstrip().lower().endswith(("x", "×", "times")) and not (
            _CLAIM_FACTOR_CTX.search(head) or _CLAIM_FACTOR_CTX.search(tail)
        ):
            continue
        if _counts_something(text, m.start(), m.start() + len(m.group(0).split()[0])):
            continue
        found.append((float(m.group(1)), m.start(), m.end()))
    for m in _CLAIM_PERCENT.finditer(text):
        word = m.group(2).lower()
        pct = float(m.group(1)) / 100
        if word == "slower" or _negative(text, m.start()):
            continue  # "-29.2%" in a benchmark row is a regression, not a speedup
        if word in ("less time", "reduction", "fewer cycles"):
            found.append((1 / (1 - pct) if pct < 1 else 0, m.start(), m.end()))
        else:
            found.append((1 + pct, m.start(), m.end()))
    for m in _CLAIM_PERCENT_PRE.finditer(text):
        found.append((1 + float(m.group(1)) / 100, m.start(), m.end()))
    if "+" in text and _BENCH_CTX.search(text):
        found += [(1 + float(m.group(1)) / 100, m.start(), m.end()) for m in _CLAIM_PLUS_PERCENT.finditer(text)]
    for m in _CLAIM_X_FIRST.finditer(text):
        if _x_is_name(text, m) or _x_names_something(text, m.start()) or _counts_something(text, m.start(), m.end()):
            continue
        head, tail = text[max(0, m.start() - 40) : m.start()], text[m.end() : m.end() + 40]
        if _CLAIM_FACTOR_CTX.search(head) or _CLAIM_FACTOR_CTX.search(tail):
            found.append((float(m.group(1)), m.start(), m.end()))
    for m in _CLAIM_FROM_TO.finditer(text):
        a, b, unit = float(m.group(1)), float(m.group(2)), m.group(3).lower()
        if a > 0 and b > 0:
            found.append((a / b if unit in _TIME_UNITS else b / a, m.start(), m.end()))
    bench = None
    out: list[Claim] = []
    for v, a, b in found:
        v = round(v, 3)
        if not (1.0 < v <= 100) or any(c.value == v for c in out):
            continue
        flag = ""
        if v > MAX_PLAUSIBLE:
            flag = f"implausible: above {MAX_PLAUSIBLE:g}x for a CPU SIMD change"
        elif v > MAX_UNSUPPORTED:
            bench = _BENCH_LINE.search(text) is not None if bench is None else bench
            if not bench:
                flag = f"implausible: above {MAX_UNSUPPORTED:g}x with no benchmark line in the message"
        out.append(Claim(v, _span(text, a, b), a, b, flag))
    return out


def parse_perf_claims(text: str) -> list[float]:
    """The believable speedup factors of a message (see parse_claims)."""
    return [c.value for c in parse_claims(text) if c.plausible]


# ---------------------------------------------------------------------------------------------------------
# ISA detection


def _rx(*parts: str) -> re.Pattern[str]:
    return re.compile("|".join(parts))


# An ISA's vector code: intrinsics, vector types, assembly mnemonics and registers. Guard macros, headers and
# ISA words in code (ISA_MARKS) say only that a file is ready for the ISA: a multi-ISA dispatch change
# names every ISA in its #if chain but shows the vector code of one.
_RVV_GUARDS = r"(?!_intrinsic\b|_min_vlen\b|_elen\w*|_fixed_vlen\b|ector\b)"
ISA_CODE: dict[Isa, re.Pattern[str]] = {
    Isa.RVV: _rx(
        rf"__riscv_v{_RVV_GUARDS}\w+",
        r"\bvsetvli?\b",
        r"\bvsetvl_e\d",
        r"\bv(?:float|int|uint)\d+m(?:f?\d)_t\b",
        r"\bv(?:le|se|lse|sse|fmacc|fmadd|fredusum|fredosum|redsum|wmacc|wmul|wredsum)\d*(?:_v\w*|\.v\w*)",
    ),
    Isa.XTHEADVECTOR: _rx(r"__riscv_th_v", r"\bth\.v"),
    Isa.AVX512: _rx(r"_mm512_\w+", r"__m512\w*", r"\bzmm\d+", r"_mm256_dpbusd", r"\bvpdpbusd"),
    Isa.AVX2: _rx(
        r"_mm256_\w+_epi(?:8|16|32|64)\b",
        r"_mm256_\w*fmadd\w*",
        r"_mm256_fmsub\w*",
        r"_mm256_maddubs",
        r"_mm256_permutevar8x32",
        r"\bvfmadd\d{3}[ps][sd]\b",
    ),
    Isa.AVX: _rx(r"_mm256_\w+", r"__m256\w*", r"\bymm\d+"),
    Isa.SSE: _rx(r"_mm_\w+", r"__m128\w*", r"\bxmm\d+"),
    Isa.NEON: _rx(
        r"\bv(?:ld|st)[1-4]q?_\w+",
        r"\bv(?:fma|mla|mul|add|sub|dot|max|min|cvt|addv|padd)q?_[suf]\d+",
        r"\b(?:float|int|uint)\d+x\d+(?:x\d)?_t\b",
        r"\bv\d+\.(?:2d|4s|8h|16b|2s|4h|8b)\b",
        r"\bvmmlaq_\w+",
    ),
    Isa.SVE: _rx(
        r"\bsv(?:float|int|uint|bool)\d*_t\b",
        r"\bsv(?:ld1|st1|mla|whilelt|ptrue|dup|add|mul)\w*",
        r"\bwhilelo\b",
        r"\bptrue\b",
        r"\bz\d+\.[sdhb]\b",
    ),
    Isa.LASX: _rx(r"__lasx_\w+", r"\bxvf?(?:ld|st|madd|fmadd)\w*\b"),
    Isa.LSX: _rx(r"__lsx_\w+"),
    Isa.VSX: _rx(
        r"\bvec_(?:xl|xst|madd|msub|perm|splats|ld|st|sum\w*|add|mul)\b",
        r"\bxvmadd\w+",
        r"\blxv\w*\b",
        r"\bstxv\w*\b",
        r"__builtin_mma_\w+",
    ),
    Isa.WASM_SIMD: _rx(r"\bwasm_[fiu]\d+x\d+_\w+", r"\bwasm_v128_\w+", r"\bv128_t\b"),
}
ISA_MARKS: dict[Isa, re.Pattern[str]] = {
    Isa.RVV: _rx(
        r"__riscv_v_intrinsic\b",
        r"__riscv_vector\b",
        r"__riscv_v_\w*(?:vlen|elen)\w*",
        r"riscv_vector\.h",
        r"\bRVV\b",
        r"_rvv\b",
        r"\bZVL\d+B\b",
        r"zvl\d+b",
    ),
    Isa.XTHEADVECTOR: _rx(r"xtheadvector", r"\bC910V\b", r"_c910v?\b", r"\bRVV ?0\.7"),
    Isa.AVX512: _rx(r"__AVX512\w*", r"\bavx512\w*", r"skylakex", r"cooperlake", r"sapphirerapids"),
    Isa.AVX2: _rx(r"__AVX2__", r"\bhaswell\b", r"\bzen\d?\b", r"\bavx2\b"),
    Isa.AVX: _rx(r"__AVX__", r"\bsandybridge\b", r"\bavx\b"),
    Isa.SSE: _rx(r"[xpet]mmintrin\.h", r"[sn]mmintrin\.h", r"__SSE\d?\w*", r"\bsse[234]?\w*\b"),
    Isa.NEON: _rx(r"__ARM_NEON\w*", r"arm_neon\.h", r"\bneon\b"),
    Isa.SVE: _rx(r"__ARM_FEATURE_SVE\w*", r"arm_sve\.h", r"\bsve2?\b"),
    Isa.LASX: _rx(r"lasxintrin\.h", r"__loongarch_asx", r"\blasx\b"),
    Isa.LSX: _rx(r"lsxintrin\.h", r"__loongarch_sx", r"\blsx\b", r"\bloongarch\w*"),
    Isa.VSX: _rx(
        r"altivec\.h",
        r"__VSX__",
        r"__POWER\d+_VECTOR__",
        r"\bpower(?:8|9|10)\b",
        r"\bvsx\b",
        r"\baltivec\b",
        r"__vector\b",
    ),
    Isa.WASM_SIMD: _rx(r"wasm_simd128\.h", r"__wasm_simd128__"),  # "wasm simd" spans two tokens: _ISA_SPACED_RX
}
# Plain words in a message that name an ISA (case-insensitive).
ISA_WORDS: dict[Isa, re.Pattern[str]] = {
    Isa.RVV: re.compile(
        r"\brvv\b|risc-?v vector|\brvv1\.0|\bzvl\d+b|riscv64.*vector|\bx280\b|\bk1\b.*spacemit|"
        r"\bspacemit\b",
        re.I,
    ),
    Isa.XTHEADVECTOR: re.compile(r"xtheadvector|\bc910v?\b|\bc920\b|rvv ?0\.7", re.I),
    Isa.AVX512: re.compile(r"avx-?512\w*|skylake-?x|cooper ?lake|sapphire ?rapids|\bvnni\b", re.I),
    Isa.AVX2: re.compile(r"\bavx2\b|\bhaswell\b|\bzen\d?\b", re.I),
    Isa.AVX: re.compile(r"\bavx\b|sandy ?bridge", re.I),
    Isa.SSE: re.compile(r"\bsse\d?\w*\b", re.I),
    Isa.NEON: re.compile(r"\bneon\b|\badvsimd\b|\bi8mm\b|\bdotprod\b", re.I),
    Isa.SVE: re.compile(r"\bsve2?\b|\bsme\b", re.I),
    Isa.LASX: re.compile(r"\blasx\b", re.I),
    Isa.LSX: re.compile(r"\blsx\b|\bloongarch\w*|\bloongson\w*", re.I),
    Isa.VSX: re.compile(r"\bvsx\b|\baltivec\b|\bpower ?(?:8|9|10)\b|\bppc64\w*\b|\bmma\b", re.I),
    Isa.WASM_SIMD: re.compile(r"\bwasm\b.*\bsimd\b|\bsimd128\b", re.I),
}
# Where one ISA's evidence implies another's text would also match (AVX2 code matches AVX patterns).
ISA_SUBSUMES: dict[Isa, tuple[Isa, ...]] = {
    Isa.AVX512: (Isa.AVX2, Isa.AVX, Isa.SSE),  # wider x86 code uses 128-bit intrinsics for its halves
    Isa.AVX2: (Isa.AVX, Isa.SSE),
    Isa.AVX: (Isa.SSE,),
    Isa.LASX: (Isa.LSX,),
    Isa.XTHEADVECTOR: (Isa.RVV,),
}
ISA_ORDER = list(ISA_CODE)


def detect_isas(
    code: str,
    message: str,
    arch_dirs: set[str],
    file_names: str,
    signals: _Signals | None = None,
    tokens: Counter[str] | None = None,
) -> list[Isa]:
    """The ISAs whose vector code the change adds; words, guards, file names and folders only when it adds none.

    `code` is the added code's vocabulary; `signals`, when given, its token signals (DiffStats), which then
    stand in for scanning `code` with every ISA pattern, and `tokens` their occurrences. An ISA counts as
    code when its intrinsics/types/mnemonics occur at least twice, or at least a tenth as often as the
    main ISA's: a stray `_mm_prefetch` in an RVV kernel does not make it an SSE change.
    """
    counts, marks = code_isa_counts(code, signals, tokens)
    found: set[Isa] = set()
    if counts:
        top = max(counts.values())
        found = {isa for isa, n in counts.items() if n >= max(2, top / 10)}
    named = {isa for isa, rx in ISA_WORDS.items() if rx.search(message)}
    named |= {isa for isa, rx in (*ISA_CODE.items(), *ISA_MARKS.items()) if rx.search(file_names)}
    if found:
        # The message or a file name may name the ISA more precisely than the code's tokens: AVX code in
        # an "AVX2" change (256-bit float intrinsics exist since AVX) is AVX2 code.
        found = {_refined(isa, named) for isa in found}
    else:
        # No vector code: the message and file names, then the arch folder, and guards only as a last resort
        # (a dispatch change names every ISA in its #if chain).
        found = named or {ARCH_DIR_ISA[a] for a in arch_dirs if a in ARCH_DIR_ISA} or marks
    for isa in list(found):
        for weaker in ISA_SUBSUMES.get(isa, ()):
            found.discard(weaker)
    return [isa for isa in ISA_ORDER if isa in found]


def _refined(isa: Isa, named: set[Isa]) -> Isa:
    """The named ISA that subsumes `isa` (AVX2 for AVX code), else `isa`."""
    return next((n for n in ISA_ORDER if n in named and isa in ISA_SUBSUMES.get(n, ())), isa)


def code_isa_counts(
    code: str, signals: _Signals | None = None, tokens: Counter[str] | None = None
) -> tuple[Counter[Isa], set[Isa]]:
    """(occurrences of each ISA's vector-code tokens, ISAs only marked by guards/headers/words) in `code`."""
    if signals is None:
        tokens = Counter(TOKEN_RX.findall(code))
        signals = _signals(tokens)
    counts: Counter[Isa] = Counter()
    marks: set[Isa] = set()
    for tok, _, isas, weak in signals:
        for isa in isas:
            counts[isa] += tokens.get(tok, 1) if tokens is not None else 1
        marks |= weak
    if _ISA_SPACED_RX.search(code):
        marks.add(Isa.WASM_SIMD)
    return counts, marks - set(counts)


# ---------------------------------------------------------------------------------------------------------
# Operator detection: file names and identifiers, then message words


# Names of element-wise and reduction kernels that are never everyday English (see PROSE_OPERATOR_RX).
_ELEMENTWISE_NAMES = (
    r"[sdcz]?scal(?:\b|_)|_scal|\brot[mg]?(?:\b|_)|[sdcz]rot|vec_(?:add|mul|scale|mad)|elementwise|element-wise"
)
_REDUCE_NAMES = r"[isdcz]?i?a(?:max|min)|asum|\bsum_rows\b|argmax"

OPERATOR_RX: list[tuple[Operator, re.Pattern[str]]] = [
    (
        Operator.QUANT_DOT,
        re.compile(
            r"vec_dot_[iq]\d|_q\d_[0-9k]\w*_q8|\bq\d_k\b|[iq]\d_[0-9k]\s*(?:x|dot)|"
            r"k_quants|\biq\d\w*|qgemm|q8gemm|quantized (?:dot|matmul|gemm)|int8 gemm|"
            r"qnbitgemm|sqnbit|mul_mat_q|matmul ?nbits|\bq[2-8]_[01k]\b|\bq[2-8]k\b|"
            # ggml's block formats inside identifiers (`ggml_vec_dot_iq1_s_q8_K`, `_tq1_0`, `_mxfp4_`): a
            # vec_dot of any format but a float one is a quantized dot
            r"vec_dot_(?!b?f\d)[a-z]{0,5}\d|(?:\b|_)(?:[it]?q[1-8]_(?:[01k]|[a-z]{1,2})|mxfp4|nvfp4)(?:\b|_)",
            re.I,
        ),
    ),
    (Operator.TRSM, re.compile(r"trsm", re.I)),
    (
        Operator.GEMV,
        re.compile(
            r"gemv|\bger\b|[sdcz]ger[uc]?_|symv|hemv|[sdcz]?[gsh]bmv|tpmv|trmv|spmv|mul_mat_vec|"
            r"matrix-vector|\bmat[ _-]?vec\b",
            re.I,
        ),
    ),
    (
        Operator.GEMM,
        re.compile(
            r"gemm|matmul|mul_mat|\bmmla\b|symm|syrk|syr2k|herk|trmm|hemm|sbgemm|"
            r"matrix[- ]multipl|\bmma\b|gemm_kernel|_kernel_\d+x\d+|\bmulmat",
            re.I,
        ),
    ),
    (Operator.DOT, re.compile(r"[sdcz]?dot[uc]?(?:_|\b|\.)|dsdot|vec_dot_f|\bdot product", re.I)),
    (Operator.AXPY, re.compile(r"axpy|axpby", re.I)),
    (Operator.NRM2, re.compile(r"nrm2|\bnorm2\b", re.I)),
    (Operator.SOFTMAX, re.compile(r"soft_?max", re.I)),
    (Operator.NORM, re.compile(r"rms_?norm|layer_?norm|group_?norm|batch_?norm|\bnorm\b|l2_norm", re.I)),
    # "conv" but not "convert"/"conversion" (type conversion is QUANTIZE's)
    (Operator.CONV, re.compile(r"conv(?!er[st]|ersion)|im2col|winograd|depthwise", re.I)),
    # a thread, machine or memory pool is no pooling kernel (`threadpool.cpp`, "use the thread pool")
    (Operator.POOL, re.compile(r"(?<!thread)(?<!thread[ _-])(?<!machine[ _-])(?<!memory[ _-])(?<!mem)pool", re.I)),
    (
        Operator.ACTIVATION,
        re.compile(
            r"gelu|silu|relu|swish|sigmoid|\btanh|\berf\b|logistic|\belu\b|exp_?f?\b|"
            r"activation|\bswiglu|\bgeglu",
            re.I,
        ),
    ),
    (Operator.ATTENTION, re.compile(r"flash_?attn|attention", re.I)),
    (Operator.ROPE, re.compile(r"\brope\b|rotary", re.I)),
    (Operator.RESIZE, re.compile(r"resize|upscale|bilinear|interpolat", re.I)),
    (Operator.TRANSPOSE, re.compile(r"transpose|[oi]matcopy", re.I)),
    (
        Operator.QUANTIZE,
        re.compile(
            r"quantize|dequant|fp16_to|f16_to_f32|fp32_to|bf16|cvt_?f|convert|conversion|"
            r"\bf(?:p)?(?:16|32)\s*(?:<->|->|to|2)\s*f(?:p)?(?:16|32)\b",
            re.I,
        ),
    ),
    (Operator.SCAN, re.compile(r"ssm_scan|cumsum|\bscan\b", re.I)),
    (Operator.SORT, re.compile(r"argsort|\bsort\b|top_?k", re.I)),
    (Operator.REDUCE, re.compile(_REDUCE_NAMES + r"|\bsum\b|reduce|\bmax\b", re.I)),
    # kernel file names end in _<variant> (`copy_rvv.c`, `scal_vector.c`): "_" ends a name there too
    (Operator.COPY, re.compile(r"[sdcz]copy|[sdcz]?swap(?:\b|_)|memcpy|memset|_copy\b|\bcopy(?:\b|_)", re.I)),
    (Operator.ELEMENTWISE, re.compile(_ELEMENTWISE_NAMES + r"|\badd\b|\bmul\b", re.I)),
]


# In a commit's words, some operator names are everyday English: "add" is the commonest title verb (5,094 of
# the four histories' 5,304 title matches of `elementwise` were "add": "Add CPU autodetection for Zen5"), and
# "max"/"sum"/"reduce" are limits, totals and a verb ("increase max threads", "reduce memory"). In prose
# they name the operator only with a kernel word beside them; in file names and code identifiers the bare
# name still counts (`add.c`, `max.S`).
PROSE_OPERATOR_RX: dict[Operator, re.Pattern[str]] = {
    Operator.ELEMENTWISE: re.compile(
        _ELEMENTWISE_NAMES + r"|(?<!mat[ _-])\b(?:vector|vec|element|binary|broadcast)[ _-](?:add|mul|sub|div)\b|"
        r"\b(?:add|mul|sub|div)[ _-](?:kernel|op|operator)s?\b",
        re.I,
    ),
    Operator.REDUCE: re.compile(
        _REDUCE_NAMES + r"|reduce_?(?:sum|max|min|mean|prod|l[12]|log)|\breduction|"
        r"\breduce[ _-](?:kernel|op|operator)s?\b|\b(?:max|sum|min)[ _-](?:reduction|kernel|op)s?\b|"
        r"\breduc\w* (?:max|sum|min)\b",
        re.I,
    ),
}


def _operators_in(text: str, prose: bool) -> list[Operator]:
    return [op for op, rx in OPERATOR_RX if ((prose and PROSE_OPERATOR_RX.get(op)) or rx).search(text)]


def detect_operators(file_names: list[str], message: str, identifiers: str | Callable[[], str]) -> list[Operator]:
    """Operators named by changed file names (strongest), else the title, else identifiers in the diff.

    `identifiers` may be a function: the identifier text is then built only when the names are silent.
    """
    stems = " ".join(_stem(p) for p in file_names)
    title = message.split("\n", 1)[0]
    for source, prose in ((stems, False), (title, True), (message, True), (identifiers, False)):
        text = source if isinstance(source, str) else source()
        ops = _operators_in(text, prose)
        if ops:
            if Operator.DOT in ops and _QUANTS_FILE.search(stems):
                # ggml's quantized kernels live in quants.c / ggml-quants.c: a "vec_dot" there is quantized
                ops = [Operator.QUANT_DOT if o == Operator.DOT else o for o in ops]
            return _prune_operators(list(dict.fromkeys(ops)))
    return []


_QUANTS_FILE = re.compile(r"(?:^|[\s_-])(?:k_)?quants\b", re.I)


def _prune_operators(ops: list[Operator]) -> list[Operator]:
    # A quantized dot product also matches gemm/dot words; keep the specific one.
    if Operator.QUANT_DOT in ops:
        ops = [o for o in ops if o not in (Operator.DOT, Operator.GEMM, Operator.GEMV)] or ops
    if Operator.GEMV in ops and Operator.GEMM in ops and len(ops) > 2:
        pass
    return ops[:4]


def _stem(path: str) -> str:
    name = path.rsplit("/", 1)[-1]
    return name.rsplit(".", 1)[0]


# ---------------------------------------------------------------------------------------------------------
# Techniques: what the diff does


_INTRINSIC_RX = re.compile(
    r"\b[xyz]mm\d+\b|\bv(?:fmadd|fmsub|fnmadd|mul|add|sub|mov|perm|shuf|broadcast)\w*p[sd]\b|"
    r"\bv\d+\.\d*[sdhb]\b|\bz\d+\.[sdhb]\b|\bv[a-z]+\d*\.v[vxfi]?\b|\bxv[a-z]+(?:sp|dp)\b|\blxv\w*|\bstxv\w*|"
    rf"__riscv_v{_RVV_GUARDS}\w+|\bv(?:le|se|fmacc|fmul|fadd|fredusum|wmacc|wmul|wredsum)\d*_v\w*|_mm(?:256|512)?_\w+|"
    r"\bv(?:ld|st)[1-4]q?_\w+|\bv\w+q_[suf]\d+\b|\bsv\w+_[suf]\d+\w*|__lsx_\w+|__lasx_\w+|\bvec_\w+|"
    r"\bwasm_\w+x\d+_\w+|__builtin_mma_\w+"
)
_LMUL_RX = re.compile(r"\b(?:v(?:float|int|uint)\d+|e\d+)m(f?\d)\b|vsetvl\w*_e\d+m(f?\d)")
_ACC_RX = re.compile(r"\b(?:v?acc(?:um)?|v?sum|vres|res|c|vc|vy|t)_?(\d{1,2})\b")
_UNROLL_RX = re.compile(r"\[\s*\w+\s*\+\s*(\d+)\s*\]|\+=\s*(4|8|16|32|64)\s*[;)]")
TOKEN_RX = re.compile(r"[A-Za-z_][\w.]*")
TECHNIQUE_MSG: dict[Technique, re.Pattern[str]] = {
    Technique.VECTORIZE: re.compile(
        r"vectori[sz]|\bsimd\b|intrinsic|\b(?:rvv|avx2?|avx-?512|neon|sve|lsx|lasx|vsx|"
        r"sse\d?)\b.{0,40}\b(?:kernel|implement|version|support|optimi)|vector (?:kernel|"
        r"implementation|version)",
        re.I,
    ),
    Technique.VECTOR_LENGTH: re.compile(
        r"\blmul\b|vector length|\bvlen\b|vector width|m[1248] ?(?:->|to) ?m[1248]|"
        r"register group",
        re.I,
    ),
    Technique.UNROLL: re.compile(r"unroll", re.I),
    Technique.MULTI_ACCUMULATOR: re.compile(r"accumulator|independent (?:sums|chains)|dependency chain", re.I),
    Technique.REGISTER_BLOCKING: re.compile(
        r"block(?:ing|ed)? ?size|register block|\btil(?:e|ing)\b|\bblocking\b|"
        r"\d+x\d+ (?:micro)?kernel|kernel \d+x\d+|unroll_[mn]|gemm_[pqr]\b",
        re.I,
    ),
    Technique.PACKING: re.compile(r"\b(?:re)?pack(?:ing|ed)?\b|data layout|interleav|ncopy|tcopy", re.I),
    Technique.PREFETCH: re.compile(r"prefetch", re.I),
    Technique.FUSION: re.compile(r"\bfus(?:e|ed|ion|ing)\b|\bfma\b|fused multiply", re.I),
    Technique.REDUCTION: re.compile(r"reduction|horizontal (?:add|sum)|\bhsum\b", re.I),
    Technique.APPROXIMATION: re.compile(r"polynomial|approximat|lookup table|\blut\b|table[- ]based", re.I),
    Technique.WIDENING: re.compile(
        r"widen|\bvnni\b|\bi8mm\b|dot ?prod(?:uct)? instruction|\bdotprod\b|"
        r"\bvpdpbusd\b|integer dot",
        re.I,
    ),
    Technique.TAIL_HANDLING: re.compile(r"\btail|remainder|leftover|\bmask(?:ed)? (?:load|store)", re.I),
    Technique.ALIGNMENT: re.compile(r"\balign(?:ed|ment)?\b|unaligned|misalign", re.I),
    Technique.THREADING: re.compile(r"thread|parallel|openmp|\bomp\b|pthread|multi-?core", re.I),
    Technique.MEMORY_ACCESS: re.compile(
        r"\bstride|(?<!non-)(?<!non)contiguous|cache (?:miss|friendly|locality)|memory access|"
        r"locality|non-temporal|streaming store|memory bandwidth",
        re.I,
    ),
    Technique.ALGORITHMIC: re.compile(
        r"\balgorithm|complexity|winograd|strassen|early (?:exit|return)|fast path|"
        r"precompute|avoid (?:re)?comput",
        re.I,
    ),
}
# Token-level patterns: matched against the distinct identifier/mnemonic tokens of the added code.
# A leading `\w*` is anchored with `\b`: the same matches (a word run containing the keyword), but the
# regex engine no longer retries from every character of every token, which made these the hot spot.
TECHNIQUE_CODE: dict[Technique, re.Pattern[str]] = {
    Technique.PREFETCH: re.compile(r"\b\w*prefetch\w*|\bprfm\b|\bdcbt\b|\bpld\b|\bPREFETCH\w*", re.I),
    Technique.WIDENING: re.compile(
        r"\b\w*(?:vwmacc|vwmul|vwredsum|vqmacc|_maddubs|_madd_epi16|_dpbus|vdotq_|vmlal|vmull|smmla|ummla|usdot|"
        r"__lsx_vmulw|__lasx_xvmulw|vec_msum)\w*"
    ),
    Technique.REDUCTION: re.compile(
        r"\b\w*(?:v(?:f)?red(?:u|o)?sum|vfredmax|_hadd_|vaddvq|vpaddq|svaddv|hsum|_reduce_)\w*"
    ),
    Technique.FUSION: re.compile(
        r"\b\w*(?:vfmacc|vfmadd|vfnmsac|_fmadd|_fnmadd|vfmaq|vmlaq_f|svmla|xvfmadd|vfmadd)\w*|\bvec_madd\b|\bfmla\b"
    ),
    Technique.TAIL_HANDLING: re.compile(
        r"_mm512_mask\w*|_mm\d*_mask(?:load|store)\w*|svwhilelt\w*|\b\w+_tail\b|\btail_\w*|\bremainder\b"
    ),
    Technique.ALIGNMENT: re.compile(r"\baligned\b|\balignas\b|_mm_malloc|posix_memalign|__builtin_assume_aligned"),
    Technique.THREADING: re.compile(
        r"\bomp\b|\bomp_\w+|pthread_create|num_threads|nthreads|blas_thread\w*|GEMM_MULTITHREAD\w*"
    ),
    Technique.PACKING: re.compile(r"\bpack_?[ab]\b|\b\w*repack\w*|\b\w+_[nt]copy\w*|\bpacked\b|\b\w*interleave\w*"),
    Technique.REGISTER_BLOCKING: re.compile(
        r"GEMM_DEFAULT_(?:UNROLL_[MN]|P|Q|R)\b|\b\w+_kernel_\d+x\d+\w*|\bMR\b|\bNR\b|\bTILE_[MNK]\b|\bblock_?size\b"
    ),
    Technique.MEMORY_ACCESS: re.compile(r"_mm\d*_stream_\w+|\bvlse\d+\w*|\bvsse\d+\w*|__builtin_nontemporal\w*"),
    Technique.APPROXIMATION: re.compile(r"\bpoly\w*|\blookup\w*|\b\w+_table\b|\bcoeffs?\b|\bln2\w*|\blog2e\b"),
}


# ---------------------------------------------------------------------------------------------------------
# Token signals: what the token-level patterns find in each distinct token, remembered process-wide.
#
# Signals used to be matched against the space-joined vocabulary of a diff. None of these patterns can
# match a space, and \b behaves the same at a token's ends as at the spaces around it, so matching each
# token alone finds exactly the same matches in the same order. Tokens repeat across a history (a few
# tens of thousands distinct in OpenBLAS against hundreds of thousands per-commit occurrences), so each
# token is matched once; most match nothing and are rejected by one combined prefilter.

# Slot -> pattern. The one ISA mark spanning two tokens is matched on the vocabulary (see code_isa_counts).
_INTRINSIC, _LMUL, _ACC = 0, 1, 2
_TOKEN_PATTERNS: tuple[re.Pattern[str], ...] = (_INTRINSIC_RX, _LMUL_RX, _ACC_RX, *TECHNIQUE_CODE.values())
_TECH_SLOT = {tech: 3 + i for i, tech in enumerate(TECHNIQUE_CODE)}
_ISA_TOKEN_RX = dict(ISA_CODE)
_ISA_MARK_RX = dict(ISA_MARKS)
_ISA_SPACED_RX = re.compile(r"\bwasm simd\b")  # the one code alternative that spans two tokens


def _scoped(rx: re.Pattern[str]) -> str:
    return f"(?i:{rx.pattern})" if rx.flags & re.I else f"(?:{rx.pattern})"


_ANY_TOKEN_RX = re.compile(
    "|".join(_scoped(rx) for rx in (*_TOKEN_PATTERNS, *ISA_CODE.values(), *_ISA_MARK_RX.values()))
)
_TokenSignals = tuple[tuple[list[Any], ...], frozenset[Isa], frozenset[Isa]]
_NO_SIGNALS: _TokenSignals = ((), frozenset(), frozenset())
_TOKEN_CACHE: dict[str, _TokenSignals] = {}


def token_signals(token: str) -> _TokenSignals:
    """(findall result per _TOKEN_PATTERNS slot, ISAs whose vector code the token is, ISAs it only marks)."""
    got = _TOKEN_CACHE.get(token)
    if got is None:
        if _ANY_TOKEN_RX.search(token) is None:
            got = _NO_SIGNALS
        else:
            found = tuple(rx.findall(token) for rx in _TOKEN_PATTERNS)
            isas = frozenset(isa for isa, rx in _ISA_TOKEN_RX.items() if rx.search(token))
            marks = frozenset(isa for isa, rx in _ISA_MARK_RX.items() if rx.search(token)) - isas
            got = (found, isas, marks) if any(found) or isas or marks else _NO_SIGNALS
        _TOKEN_CACHE[token] = got
    return got


_Signals = list[tuple[str, tuple[list[Any], ...], frozenset[Isa], frozenset[Isa]]]


def _signals(tokens: Counter[str]) -> _Signals:
    """The tokens (in vocabulary order) in which any token-level pattern matches, with what matched."""
    cache, out = _TOKEN_CACHE, []
    for tok in tokens:
        got = cache.get(tok) or token_signals(tok)
        if got is not _NO_SIGNALS:
            out.append((tok, *got))
    return out


def _slot_matches(signals: _Signals, slot: int) -> Iterator[Any]:
    """The matches of one pattern over the vocabulary, in vocabulary order."""
    for _, found, *_ in signals:
        if found and found[slot]:
            yield from found[slot]


def _slot_count(signals: _Signals, tokens: Counter[str], slot: int) -> int:
    """Occurrences: a match that is a whole token counts every time that token occurs."""
    return sum(tokens.get(m, 1) for m in _slot_matches(signals, slot))


# One pass tells whether any technique word occurs at all; most messages have none, and then the sixteen
# patterns need not run one by one.
_ANY_TECHNIQUE_MSG_RX = re.compile("|".join(_scoped(rx) for rx in TECHNIQUE_MSG.values()))


def _first_technique(text: str) -> tuple[Technique, re.Match[str]] | None:
    """The first technique (taxonomy order) whose message pattern occurs in `text`, with its match."""
    if _ANY_TECHNIQUE_MSG_RX.search(text) is None:
        return None
    return next(((t, m) for t, rx in TECHNIQUE_MSG.items() if (m := rx.search(text))), None)


def _is_intrinsic(token: str) -> bool:
    found = token_signals(token)[0]
    return bool(found and found[_INTRINSIC])


class DiffStats:
    """Added and removed code of a diff, with their tokens and token signals.

    Signals are matched against the distinct tokens, not megabytes of code: many times faster. The
    removed side is tokenized only when asked: most candidates are settled by the added side alone.
    """

    def __init__(self, added: str, removed: str | Callable[[], str]) -> None:
        self.added = added  # added lines joined (capped at ANALYSIS_CAP characters)
        self._removed = removed  # the removed lines, or how to extract them when first asked
        self.added_tokens: Counter[str] = Counter(TOKEN_RX.findall(added))  # identifier-like tokens -> count
        self.added_vocab = " ".join(self.added_tokens)
        self.added_signals = _signals(self.added_tokens)  # tokens any token-level pattern matches
        self.added_intrinsics = _slot_count(self.added_signals, self.added_tokens, _INTRINSIC)

    @cached_property
    def removed(self) -> str:
        return self._removed if isinstance(self._removed, str) else self._removed()

    @cached_property
    def removed_tokens(self) -> Counter[str]:
        return Counter(TOKEN_RX.findall(self.removed))

    @cached_property
    def removed_vocab(self) -> str:
        return " ".join(self.removed_tokens)

    @cached_property
    def removed_signals(self) -> _Signals:
        return _signals(self.removed_tokens)

    @cached_property
    def removed_intrinsics(self) -> int:
        return _slot_count(self.removed_signals, self.removed_tokens, _INTRINSIC)

    def count(self, rx: re.Pattern[str], added: bool = True) -> int:
        """Occurrences of tokens matching `rx` (a token-level pattern)."""
        tokens = self.added_tokens if added else self.removed_tokens
        return sum(tokens.get(m, 1) for m in rx.findall(self.added_vocab if added else self.removed_vocab))

    def technique_count(self, tech: Technique, added: bool = True) -> int:
        """`count(TECHNIQUE_CODE[tech])`, from the token signal cache."""
        if added:
            return _slot_count(self.added_signals, self.added_tokens, _TECH_SLOT[tech])
        return _slot_count(self.removed_signals, self.removed_tokens, _TECH_SLOT[tech])

    def intrinsics(self, added: bool = True) -> int:
        return self.added_intrinsics if added else self.removed_intrinsics

    def net_intrinsics(self) -> int:
        """Intrinsic calls added minus removed, where a rename to the v1.0 `__riscv_` prefix adds none."""
        return self.added_intrinsics - self.removed_intrinsics - self.renamed_intrinsics

    @cached_property
    def prefix_renames(self) -> Counter[str]:
        """Added `__riscv_X` calls whose unprefixed `X` was removed: the RVV v1.0 rename, old name -> count."""
        removed = self.removed_tokens
        return Counter(
            {
                tok[8:]: min(n, old)
                for tok, n in self.added_tokens.items()
                if tok.startswith("__riscv_") and (old := removed.get(tok[8:]))
            }
        )

    @property
    def renamed_intrinsics(self) -> int:
        """Renamed calls whose old name the intrinsic count missed (so `net_intrinsics` subtracts them)."""
        return sum(n for old, n in self.prefix_renames.items() if not _is_intrinsic(old))


ANALYSIS_CAP = 24_000  # characters of added (and removed) code the regex signals look at
# A changed line: '+'/'-' but not the '+++ '/'--- ' file headers (a content line that looks like one is
# skipped too, as the header test cannot tell them apart).
_ADDED_RX = re.compile(r"^\+(?!\+\+ )(.*)", re.M)
_REMOVED_RX = re.compile(r"^-(?!-- )(.*)", re.M)


def _file_sections(patch: str, keep_file: Callable[[str], bool] | None) -> list[tuple[str, str]]:
    """(file, section text) per `diff --git` header, in order; files failing `keep_file` dropped."""
    out: list[tuple[str, str]] = []
    # str.split on the header (C speed) instead of a multiline regex: content lines start with +, - or a
    # space, so "\ndiff --git " only ever begins a file.
    text = patch if patch.startswith("\n") else "\n" + patch
    for section in text.split("\ndiff --git ")[1:]:
        header, _, body = section.partition("\n")
        path = header.rsplit(" b/", 1)[-1]
        if keep_file is None or keep_file(path):
            out.append((path, body))
    return out


def _capped(lines: list[str], budget: int) -> tuple[list[str], int]:
    """Take lines while fewer than `budget` characters (each line plus its marker) were taken."""
    # used[i] = characters taken before line i; prefix sums in C instead of a Python loop per line.
    used = list(map(add, accumulate(map(len, lines), initial=0), range(len(lines) + 1)))
    n = bisect_left(used, budget)  # lines 0..n-1 start below the budget
    n = min(n, len(lines))
    return lines[:n], budget - used[n]


def diff_stats(patch: str, keep_file: Callable[[str], bool] | None = None) -> DiffStats:
    """Split a unified diff into added/removed code; files failing `keep_file` are ignored.

    The code texts are capped: a 3000-line new kernel shows its signals in its first few hundred lines,
    and regexes over megabytes of generated code would dominate the run time. Lines are found with one
    regex scan per file (C speed), not a Python loop over every line of the patch.
    """
    sections = _file_sections(patch, keep_file)
    # The removed side is extracted only if asked for (about half the candidates never need it).
    return DiffStats(_changed_lines(sections, _ADDED_RX), lambda: _changed_lines(sections, _REMOVED_RX))


def _changed_lines(sections: list[tuple[str, str]], rx: re.Pattern[str]) -> str:
    """The lines `rx` picks from each file section, in order, until ANALYSIS_CAP characters are taken."""
    out: list[str] = []
    budget = ANALYSIS_CAP
    for _, body in sections:
        got, budget = _capped(rx.findall(body), budget)
        out += got
        if budget <= 0:
            break
    return "\n".join(out)


HUNK_MAX_LINES = 400


def diff_hunks(patch: str, keep_file: Callable[[str], bool] | None = None) -> Iterator[tuple[str, str]]:
    """(file, hunk text) in order, each hunk at most HUNK_MAX_LINES lines: the distiller's example source.

    A generator: the distiller stops reading a big patch once it has seen enough code.
    """
    for path, body in _file_sections(patch, keep_file):
        for chunk in ("\n" + body).split("\n@")[1:]:
            text = "\n".join(("@" + chunk).split("\n", HUNK_MAX_LINES)[:HUNK_MAX_LINES]).rstrip("\n")
            if "\n\\" in text:  # "\ No newline at end of file" markers are not code
                text = _NO_NEWLINE_RX.sub("", text)
            yield path, text


_NO_NEWLINE_RX = re.compile(r"\n\\[^\n]*")


# Separate vector multiplies (RVV, SSE/AVX, NEON, SVE, LoongArch, VSX): what an FMA that fuses them replaces.
_SEPARATE_MUL_RX = re.compile(r"\b\w*(?:vfmul_v|_mm\d*_mul_p[sd]|vmulq_f|svmul_\w*f|xvfmul|__lsx_vfmul|vec_mul)\w*")


def detect_techniques(message: str, diff: DiffStats, paths: list[str]) -> tuple[list[Technique], list[str]]:
    """Techniques with the reason for each: message words first, then what the added code shows."""
    found: dict[Technique, str] = {}
    if _ANY_TECHNIQUE_MSG_RX.search(message):
        for tech, rx in TECHNIQUE_MSG.items():
            if m := rx.search(message):
                found.setdefault(tech, f"message says {m.group(0)!r}")
    new_intr = diff.net_intrinsics()
    if new_intr >= 8 and diff.removed_intrinsics <= new_intr // 3:
        found.setdefault(Technique.VECTORIZE, f"adds {new_intr} SIMD intrinsic calls")
    lmul_added = {m for g in _slot_matches(diff.added_signals, _LMUL) for m in g if m}
    lmul_removed = {m for g in _slot_matches(diff.removed_signals, _LMUL) for m in g if m}
    if lmul_added and lmul_removed and lmul_added != lmul_removed:
        found.setdefault(
            Technique.VECTOR_LENGTH, f"LMUL m{'/m'.join(sorted(lmul_removed))} -> m{'/m'.join(sorted(lmul_added))}"
        )
    accs_added = set(_slot_matches(diff.added_signals, _ACC))
    accs_removed = set(_slot_matches(diff.removed_signals, _ACC))
    if len(accs_added) >= 3 and len(accs_added) > len(accs_removed) + 1:
        found.setdefault(Technique.MULTI_ACCUMULATOR, f"{len(accs_added)} numbered accumulators in added code")
    unroll_added = _unroll_degree(diff.added)
    if unroll_added >= 4 and unroll_added > _unroll_degree(diff.removed):
        found.setdefault(Technique.UNROLL, f"unrolled by {unroll_added} in added code")
    for tech in TECHNIQUE_CODE:
        n_add, n_rem = diff.technique_count(tech), diff.technique_count(tech, added=False)
        if tech == Technique.FUSION and diff.count(_SEPARATE_MUL_RX, added=False) < 2:
            continue  # every vector kernel multiplies with FMAs: fusion is FMAs replacing separate mul + add
        if n_add >= 2 and n_add > n_rem:
            first = next(_slot_matches(diff.added_signals, _TECH_SLOT[tech]))
            found.setdefault(tech, f"added code uses {first!r}")
    if any(re.search(r"param\.h$", p) for p in paths) and re.search(r"GEMM_DEFAULT_(P|Q|R|UNROLL)", diff.added):
        found.setdefault(Technique.REGISTER_BLOCKING, "changes GEMM blocking parameters")
    order = list(Technique)
    techs = sorted(found, key=order.index)
    return techs, [f"{t.value}: {found[t]}" for t in techs]


def _unroll_degree(code: str) -> int:
    best = 0
    for off, step in _UNROLL_RX.findall(code):
        best = max(best, int(off or 0) + 1 if off else 0, int(step or 0))
    return best if best <= 64 else 0


# ---------------------------------------------------------------------------------------------------------
# Message signals


PERF_RX = re.compile(
    r"\boptimi[sz](?:e|ed|es|ing|ation|ations)\b|(?<![-/.])\bopt\b(?![-/.]|\s+step)|speed[- ]?up|\bfaster\b|"
    r"\bperformance\b|\bperf\b|"
    r"accelerat\w*|\bspeed\b|\bboost\w*|\bthroughput\b|\bgflops\b|\blatency\b|\befficien\w*|\btun(?:e|ed|ing)\b|"
    r"\bimprove\w* (?:the )?(?:speed|perf\w*|efficiency)|\bfast(?:er)? (?:path|version|kernel|implementation)|"
    r"\bquicker\b|\bhot ?path\b|\bcheaper\b|\bparalleli[sz](?:e|ed|es|ing|ation)\b|\bmulti-?thread(?:ed|ing)\b",
    re.I,
)
# Perf words that name a measuring tool, not a purpose: "perf logger", "for performance debugging".
_TOOL_WORDS = (
    r"logg\w*|logs?|debug\w*|counters?|monitor\w*|stats?|statistics|metrics|profil\w*|tests?|testing|"
    r"measur\w*|report\w*|trac(?:e|es|ing)|cases?|tools?|harness\w*|dashboards?"
)
_INSTRUMENT_AFTER_RX = re.compile(rf"[\s-]+(?:{_TOOL_WORDS}|analysis|regressions?|numbers|data)\b", re.I)
INSTRUMENT_TITLE_RX = re.compile(rf"\bperf(?:ormance)?[\s-]+(?:{_TOOL_WORDS})\b|\bprofil(?:er|ing)\b|\blogger\b", re.I)
_COMPILER_SETTING_RX = re.compile(r"[\s-]+(?:flags?|levels?|options?|settings?)\b", re.I)
# An identifier right before "optimization"/"opt" makes it a name ("KERNEL.POWER8 optimization", "mask_opt"),
# not a statement that this commit optimizes.
_NAME_WINDOW = 200  # characters before "optimization" searched for the name it belongs to
_NAMED_BEFORE_RX = re.compile(r"(?:\w+[._]\w[\w.]*|`[^`]+`)\s*$")
# Threads as the purpose: running on more cores is a speedup even without the word "faster".
THREAD_RX = re.compile(
    r"\bsmp\b|\bopenmp\b|\bpthreads?\b|\bmulti-?thread\w*|\bparallel(?:i[sz]\w*|ism)?\b|(?<!single-)(?<!single )"
    r"\bthreaded\b|(?<!single-)(?<!single )\bthreading\b|\bmulti-?core\b",
    re.I,
)
# A threading library as a condition or a build ("when OpenMP", "with pthreads", "OpenMP builds").
_THREAD_LIB_CONFIG_RX = re.compile(
    r"\b(?:when|with|without|if|under|in)\s+(?:\w+\s+)?(?:openmp|omp|smp|pthreads?)\b|"
    r"\b(?:openmp|omp|smp|pthreads?)\s+(?:builds?|mode|case|enabled|disabled|or|and)\b",
    re.I,
)
# A title about a benchmark (a script, a harness, a table of numbers) measures speed; it does not change it.
BENCH_TITLE_RX = re.compile(
    r"\bbenchmarks?\s*(?:\(#?\d+\))?\s*$|^(?:\[[^\]]*\]\s*)?(?:\w+\s*:\s*)?"
    r"(?:add\w*|updat\w*|improv\w*|extend\w*|new)\s+(?:\S+\s+){0,3}?benchmarks?\b",
    re.I,
)
# Choosing the number of threads by problem size is tuning, even worded "use a single thread for small input
# size": THREAD_RX leaves single-threaded alone, this names the size-dependent choice.
THREAD_SIZE_RX = re.compile(
    r"\b(?:single|one|1|fewer|less|more|multiple|max(?:imum)?|min(?:imum)?)[- ](?:threads?|cores?)\b.{0,40}?"
    r"\b(?:small|large|big|tiny|short|long|sizes?|inputs?|matri(?:x|ces)|vectors?|problems?)\b|"
    r"\b(?:small|large|big|tiny)\b.{0,40}?\b(?:single|one|fewer|less|more)[- ]threads?\b|"
    r"\b(?:multi-?)?thread(?:ing|ed)?[- ](?:thresholds?|switch\w*|cut-?offs?)\b|"
    r"\bthresholds?\b.{0,30}\b(?:multi-?)?thread(?:ing|s)?\b|"
    # "limit n_threads to the max n_tasks": oversubscribed cores only cost time
    r"\b(?:limit|cap|clamp)\w*\s+(?:the\s+)?(?:number\s+of\s+)?(?:n_?)?threads\b",
    re.I,
)
# The scope a title starts with: ggml's and llama.cpp's "ggml-cpu : ", ONNX Runtime's "[CUDA] ".
_SCOPE = r"(?:\[[^\]]{1,40}\]\s*|[\w./+ -]{1,30}?\s*:\s+)"
# Fusing operations (graph fusion, fused kernels) exists to save launches and memory round trips: a title that
# fuses ("fuse rms_norm + mul", "add fusion support for ...", "extend rope fusions"), not one that checks,
# skips, refactors or hardens an existing fusion.
FUSION_RX = re.compile(
    r"(?:^|:\s*|\b(?:and|to|also)\s+)fus(?:e|es|ing)\b|"
    r"\b(?:add\w*|extend\w*|implement\w*|enabl\w*|support\w*|more|new|generali[sz]\w*)\s+(?:\S+\s+){0,6}?fusions?\b|"
    # the title's subject is a fusion: "Not-where fusion (#7182)", "Gemm/Transpose fusion - more patterns"
    r"^" + _SCOPE + r"?\s*(?:[\w/+-]+(?:\s+[\w/+-]+)?[ -])?fusions?\b"
    r"(?!\s+(?:bug|fix|issue|crash)\w*)|"
    r"\bfusions?\s+(?:for|of)\b|\bfused\s+(?:\w+\s+){0,2}?(?:kernels?|ops?|operations?)\b|"
    r"\b(?:add\w*|implement\w*|use[sd]?)\s+(?:a\s+)?fused\b",
    re.I,
)
# Words that make a title about a fusion or a GPU mechanism something else: a check, a guard, a fallback, a fix.
_MECHANISM_BLOCK_RX = re.compile(
    r"\b(?:check\w*|skip\w*|avoid\w*|disabl\w*|refactor\w*|harden\w*|overlap\w*|mutat\w*|don'?t|do not|"
    r"align\w*|strict\w*|remov\w*|print\w*|handl\w*|account\w*|bounds?|blacklist\w*|missing|fallback|"
    r"exclud\w*|only|without|size|features?|race\w*|sinks?|asymmetric|browser|non-square|configs?|print\w*|"
    r"fit|fits|filter\w*|prepar\w*)\b",
    re.I,
)
# GPU performance mechanisms: named in a title on GPU code they state a speed purpose as plainly as "SIMD"
# does on CPU code (on GPU backends "kernel" alone does not: every operator is a kernel).
_GPU_MECH = (
    r"\bdp4a?\b|\bw?mma\b|tensor[- ]?cores?|\bcoopmat\d?\b|cooperative[-_ ]matri\w+|\bsubgroups?\b|"
    r"launch[-_ ]bounds|\bspecial[- ]cased?\b|\bspeciali[sz]ed\b|\bwarp[- ]per[- ](?:row|column|block)\b|"
    r"\bsimd[- ]?groups?\b|shared[- ]mem(?:ory)?\b|\bsmem\b|\boccupancy\b|register[- ](?:spill\w*|pressure)|"
    r"bank[- ]conflicts?|\bwarp[- ]?(?:level|shuffle|reduc\w*)\b|\bcp\.async\b|"
    r"\basync(?:hronous)?[- ](?:copy|loads?)\b|"
    r"\bvectori[sz]ed\s+(?:\w+\s+)?(?:loads?|stores?|ld/st|memory access\w*)\b|\bsplit[- ]?k\b|\bstream-?k\b"
)
# In a message any mention counts a little; in a title the mechanism must be what the change does ("use
# shared memory for ssm_conv", "Volta tensor core support for MMF", "fix register spill").
GPU_PERF_RX = re.compile(_GPU_MECH, re.I)
GPU_PERF_TITLE_RX = re.compile(
    r"\b(?:use[sd]?|using|enabl\w*|add\w*|implement\w*|port\w*|switch\w*|move[sd]?|copy|reduc\w*|limit\w*|fix\w*|"
    r"via|with|increas\w*|improv\w*|adjust\w*|tun\w*|split\w*|shard\w*)\b.{0,50}?(?:" + _GPU_MECH + r")|"
    r"(?:" + _GPU_MECH + r").{0,30}?\b(?:support|kernels?|path|for)\b|"
    # the mechanism is the title's subject: "CUDA: launch_bounds, small q4_K tiles"
    r"^" + _SCOPE + r"(?:" + _GPU_MECH + r")",
    re.I,
)
# Kernels written for one GPU family ("gemm and gemv kernels for Adreno") exist to run faster on it: the
# generic kernels already ran the operator.
GPU_TARGET_RX = re.compile(
    r"\b(?:kernels?|shaders?|paths?|variants?|versions?|implementations?|gemm|gemv|mat-?mul|mul_m[mv]\w*)\b"
    r"(?:\s+\w+){0,3}\s+(?:for|on)\s+(?:the\s+)?(?:adreno|mali|powervr|amd|rdna\d?|cdna\d?|gcn|nvidia|"
    r"intel|apple|turing|ampere|ada|hopper|blackwell|volta|pascal|xe\w*|arc|m[1-5]|mi\d+|a\d{1,3}x?)\b",
    re.I,
)
# A GPU kernel or variant for a shape regime ("kernel for single-token decode", "fp kernel for larger batch
# size MoE", "flat variants of q4_K gemv for very large matrices"): the generic kernel already ran it.
GPU_REGIME_RX = re.compile(
    r"\b(?:kernels?|shaders?|paths?|variants?|versions?|implementations?)\b(?:\s+[\w-]+){0,5}?\s+for\s+(?:the\s+)?"
    r"(?:[\w-]+\s+){0,2}?(?:large|larger|small|smaller|big|tiny|long|short|single[- ]token|bs\s?=?\s?1|"
    r"batch[- ]sizes?|decod\w*|prefill\w*)\b",
    re.I,
)
# Removing work that was done for nothing is a speedup: "remove redundant memcpy", "avoid reallocations".
WASTE_RX = re.compile(
    # many calls or launches made one: "group all experts in a single mul_mat_id", "batch the matmuls"
    r"\b(?:in(?:to)?|with|as|by|using)\s+(?:a\s+)?(?:single|one)\s+(?:\w+\s+)?(?:calls?|kernels?|launch\w*|"
    r"pass(?:es)?|dispatch\w*|ops?|operations?|matmuls?|mul_mat\w*|gemms?|loops?)\b|"
    r"\bbatch(?:es|ing)?\s+(?:the|all|multiple|several)\s+(?:\w+\s+)?(?:calls|kernels|launches|dispatches|ops|"
    r"matmuls|gemms|mul_mats?)\b|"
    r"\b(?:remov|avoid|skip|eliminat|drop|reduc|sav|cut)\w*\s+(?:(?:the|a|an|of|some|\w+)\s+){0,2}?"
    r"(?:redundant|unnecessary|unneeded|superfluous|needless|duplicated?|repeated)\s+(?:\w+\s+)?"
    r"(?:cop(?:y|ies|ying)|memcpy|memcop(?:y|ies)|alloc\w*|realloc\w*|sync\w*|barriers?|work|comput\w*|"
    r"loads?|stores?|transfers?|launch\w*|conversions?|casts?|passes|dispatch\w*|round[- ]trips?)\b|"
    r"\bavoid\w*\s+(?:\w+\s+){0,4}?(?:re-?alloc\w*|re-?comput\w*|copies|copying|sync\w*)\b|"
    # work an application did whose result nobody used: "don't compute timestamps when not printing them"
    r"\b(?:don'?t|do not|no longer|avoid\w*|skip\w*)\s+(?:\w+\s+){0,2}?(?:comput\w*|calculat\w*|"
    r"re-?comput\w*|allocat\w*|load\w*|evaluat\w*|sort\w*|copy\w*)\b(?:\s+\S+){0,4}?\s+(?:when|if|unless)\s+"
    r"(?:not|no|un\w+|they\s+are\s+not|it\s+is\s+not)\b",
    re.I,
)
FEATURE_TITLE_RX = re.compile(
    r"\bsupport(?:s|ed|ing)?\b|"
    # a new operator or data format: "add FILL op", "implement SOLVE_TRI", "1.5 bit quantization"
    r"\b(?:add\w*|implement\w*|initial)\s+(?:\w+\s+){0,3}?(?:ops?|operators?|(?:data\s*)?types?|formats?)\b|"
    r"\b\d(?:\.\d+)?[- ]?bits?\s+quant\w*|\bnew\s+quant\w*",
    re.I,
)
# An operator named in capitals ("add CONV_2D_DW", "implement SOLVE_TRI") is ggml's way of naming a new op.
_OP_NAME_TITLE_RX = re.compile(
    r"(?i:\b(?:add\w*|implement\w*))\s+(?:\w+\s+){0,2}?[A-Z]{2,}(?:_[A-Z0-9]+)+\b(?! kernel)"
)
# A change made for correctness, not speed: alignment, endianness, accuracy, races.
CORRECTNESS_TITLE_RX = re.compile(
    r"\bendian\w*|\b(?:un|mis)aligned\b|\bcorrect(?:ness|ly)?\b|\baccura(?:cy|te)\b|\bprecision (?:issue|loss)s?\b|"
    r"\bstrict[- ]aliasing\b|\bundefined behaviou?r\b|\brace conditions?\b|\bout[- ]of[- ]bounds\b",
    re.I,
)
# A sync imports another repository's changes: its title lists them, and a fix among them is one of many.
SYNC_TITLE_RX = re.compile(r"^(?:[\w.-]+\s*:\s*)?sync\b", re.I)
# Build time is not run time: "incremental shader builds", "reduce build time".
BUILD_TIME_RX = re.compile(r"\bincremental\s+(?:\w+\s+)?builds?\b|\b(?:build|compilation)[- ]times?\b", re.I)
# GitHub's web editor names a commit "Update <file>": that says nothing, least of all housekeeping.
# A clause separator after the title's leading change: "X + misc fixes", "X; fix typo", "X, also fix Y".
# A clause separator at least 9 characters after the title's first word character (see _trailing_clause).
_CLAUSE_SEPARATOR_RX = re.compile(r"\s\+\s|;\s|,\s+(?:also|and)\s|\s&\s")
# "ggml : refactor ...": the verb comes after the scope (up to three: "[EP] cuda: fp16: ...").
_SCOPE_PREFIX_RX = re.compile(r"^" + _SCOPE + r"{1,3}")
# Housekeeping verbs after a scope ("ggml : refactor ..."); not "remove"/"update", which a scope often
# follows with wasted work or a kernel ("sycl: remove redundant memcopy").
_SCOPED_HOUSEKEEPING_RX = re.compile(
    r"(?:refactor\w*|clean\s?up|format\w*|style|rename\w*|docs?|readme|changelog|ci|tests?|build|cmake|bump|"
    r"release|version|license|copyright)\b",
    re.I,
)
# "add <X> support": a capability, unless X is an ISA or vector extension (a first vector kernel is a speedup).
ADD_SUPPORT_RX = re.compile(r"\badd(?:ed|s|ing)?\s+(?P<what>(?:[\w.+-]+\s+){0,2}?[\w.+-]+)\s+support\b", re.I)
_ISA_WORDS_RX = re.compile(
    r"\b(?:rvv|risc-?v|riscv\w*|avx\w*|neon|sve2?|sme2?|lsx|lasx|vsx|altivec|power ?(?:9|10)|sse\w*|simd|"
    r"intrinsics?|assembly|asm|vector\w*|mma|amx|ime\d?|msa|wasm|x86\w*|arm\w*|aarch64|loongarch\w*|"
    r"zvfh\w*|zv\w+|xthead\w*|kleidiai|spacemit)\b",
    re.I,
)
# A purpose clause naming a capability: what the change is for, whatever work it takes.
FEATURE_PURPOSE_RX = re.compile(r"\b(?:in order )?to\s+(?:support|accept)\b", re.I)
DEFAULT_UPDATE_TITLE_RX = re.compile(r"^update\s+[\w./-]+\.\w+$", re.I)
# Identifiers and file names ("level3_gemm3m_thread.c"): technique words inside them are names, not statements.
# Matched from token starts only, so a long token is scanned once (a hostile 20 kB title took 6 s before).
_IDENT_RX = re.compile(r"(?<!\S)(?=\S*?[_/.]\w)\S+")

IMPL_RX = re.compile(
    r"\b(?:add(?:ed|s|ing)?|implement\w*|use[sd]?|using|enable[sd]?|introduc\w*|new|port\w*|rewrit\w*|"
    r"optimi[sz]\w*|vectori[sz]\w*|improv\w*|refin\w*|rework\w*)\b.{0,60}\b"
    r"(?:rvv|risc-?v vector|avx2?|avx-?512|neon|sve2?|lsx|lasx|vsx|"
    r"altivec|power ?(?:9|10)|sse\d?|simd|intrinsics?|assembly|asm|vector(?:ized)?|kernels?|micro-?kernels?|"
    r"mma|amx|wasm simd)\b|"
    # a CPU backend for a vendor's matrix/vector extension is a kernel implementation (SpacemiT IME, AMX, SME)
    r"\b(?:add\w*|implement\w*|introduc\w*|new|port\w*)\b.{0,40}\b(?:spacemit|ime\d?|amx|sme2?|kleidiai)\b"
    r"(?:.{0,30}\b(?:backend|instructions?|support|kernels?))?",
    re.I,
)
# A fix of slowness is a speedup: "fix performance bug", "performance regression fix", "fix slow path".
PERF_FIX_RX = re.compile(
    r"\b(?:performance|perf|speed|slow\w*)\s+(?:bug|issue|regression|problem)s?\b|"
    r"\bfix\w*\s+(?:the\s+|a\s+)?(?:slow\w*|performance|perf)\b|"
    # "minor fixes for up llama load model speed": fixes whose stated aim is speed
    r"\bfix\w*\s+(?:\S+\s+){0,4}?(?:for|to)\s+(?:\S+\s+){0,4}?(?:speed|faster|performance|perf)\b"
    r"(?![\s-]+(?:tests?|testing|suite|ci|builds?|tools?|logg\w*|counters?|regressions?|numbers))|"
    # pathologies that only cost time: a "fix" of them is a speedup
    r"\b(?:fix\w*|avoid\w*|reduc\w*|remov\w*)\s+(?:\w+\s+){0,3}?(?:register[- ]spill\w*|spill\w*|"
    r"(?:low|poor|bad)\s+(?:occupancy|performance)|bank[- ]conflicts?|false[- ]sharing|cache[- ]thrash\w*|"
    r"(?:pipeline\s+)?stalls?|contention)\b|"
    r"\b(?:poor|bad|low|degraded)\s+(?:performance|perf|throughput|occupancy)\b",
    re.I,
)
NEG_STRONG_RX = re.compile(
    r"^(?:revert\b|merge\b)|\bfix(?:e[sd]|ing)?\b|\bbug\w*|\bcrash\w*|\bsegfault|\bwrong\b|\bincorrect\w*|"
    r"\bregression\b|\bbroken\b|\bbreak(?:s|age)?\b|\bnan\b|\boverflow\b|\bleak\w*|\bwarnings?\b|\berrors?\b|"
    r"\bfail\w*|\bissue #?\d+|\bmisc\b|\bcompil(?:e|ation|er) (?:error|warning|issue|fix)|\btypo\w*|"
    r"\bworkaround\b|\bsymbols?\b|\bsanitizer",
    re.I,
)
NEG_HOUSEKEEPING_RX = re.compile(
    r"^(?:update|bump|release|version|changelog|readme|doc[s]?|ci|test[s]?|build|cmake|makefile|"
    r"cleanup|clean up|refactor|format|style|rename|remove|delete|sync|copyright|license)\b|"
    r"\b(?:docs?|documentation|readme|changelog|ci|github actions?|workflow|appveyor|travis|azure|cmake|"
    r"makefile|build system|tests?|unit tests?|test suite|utest|ctest|benchmark(?:s|ing)? (?:script|tool))\b",
    re.I,
)


@dataclass(slots=True)
class Classification:
    score: float
    is_optimization: bool
    reasons: list[str]
    isas: list[Isa] = field(default_factory=list)
    operators: list[Operator] = field(default_factory=list)
    techniques: list[Technique] = field(default_factory=list)
    perf_claims: list[float] = field(default_factory=list)  # the believable figures of `claims`
    kernel_files: list[str] = field(default_factory=list)
    claims: list[Claim] = field(default_factory=list)  # every parsed figure with its span, flagged ones too


@dataclass(slots=True)
class Triage:
    """The cheap, metadata-only look at a commit that decides whether its patch is worth reading."""

    candidate: bool
    kinds: dict[str, str]  # path -> file kind
    patch_paths: list[str]  # source files worth reading (not vendored, not binary, not huge)
    avoid_paths: list[str]  # source files not to diff: too big, or past the patch cap of a huge commit
    meta: MetaSignals
    huge_arch_kernels: list[str] = field(default_factory=list)  # too big to read, in an ISA's kernel folder


BIG_COMMIT_LINES = 12_000  # changed lines that fill the 400 kB patch cap: beyond them nothing is read
CODE_TECHNIQUE_BONUS = 1.0  # the most techniques seen in the added code can add
MAX_DIFF_BONUS = 1.0 + CODE_TECHNIQUE_BONUS  # the most the diff can add (intrinsics 1.0 + techniques)
NEW_KERNEL_BONUS = 0.5  # a kernel file added whole (>= 30 lines, none removed): the one signal of line counts


@dataclass(slots=True)
class MetaSignals:
    """What the message and the file list alone say; the diff can add at most MAX_DIFF_BONUS."""

    score: float
    reasons: list[str]
    code_paths: list[str]
    kernel_paths: list[str]
    claims: list[float]  # believable figures only
    final: bool  # no diff can change the verdict (merge, no source code)
    parsed: list[Claim] = field(default_factory=list)  # every figure, flagged ones too


def metadata_signals(c: RawCommit, kinds: dict[str, str]) -> MetaSignals:
    paths = [f.path for f in c.files]
    code_paths = [p for p in paths if kinds.get(p) in ("kernel", "source")]
    kernel_paths = [p for p in paths if kinds.get(p) == "kernel"]
    if c.is_merge:
        return MetaSignals(0.0, ["merge commit: its changes are judged in the merged commits"], [], [], [], True)
    # A vendored tree's build file is this library's choice of what to build ("turn on optimized code" swaps
    # LAPACK routines for the library's own in lapack-netlib/SRC/Makefile): build, not somebody else's code.
    build_only = bool(paths) and all(
        kinds[p] == "build" or (kinds[p] == "vendored" and BUILD_RE.search(p)) for p in paths
    )
    if not code_paths and not (build_only and PERF_RX.search(c.message)):
        what = ", ".join(sorted({kinds[p] for p in paths})) or "no"
        return MetaSignals(0.0, [f"changes no source code (only {what} files)"], [], [], [], True)
    reasons: list[str] = []
    score = 0.0

    def add(w: float, why: str) -> None:
        nonlocal score
        score += w
        reasons.append(f"{w:+.1f} {why}")

    # "Return sb pointer when OpenMP": a threading library named as a build configuration, not a purpose
    message, title = c.message, _THREAD_LIB_CONFIG_RX.sub(" ", c.title)
    perf_words = speed_words(message)
    title_perf = bool(perf_words) and bool(speed_words(title))
    if BENCH_TITLE_RX.search(title) and not title_perf:
        # "[CUDA] MatMulNBits benchmark": the message's latency and performance words are what it measures
        perf_words = set()
    gpu = gpu_only(code_paths or paths)
    parsed = parse_claims(message)
    claims = [c.value for c in parsed if c.plausible]
    blocked = _MECHANISM_BLOCK_RX.search(title)
    gpu_title = (
        (GPU_PERF_TITLE_RX.search(title) or GPU_TARGET_RX.search(title) or GPU_REGIME_RX.search(title))
        if gpu and not blocked
        else None
    )
    thread_title = THREAD_RX.search(title) or THREAD_SIZE_RX.search(title)
    worded_title = _IDENT_RX.sub(" ", title)  # the title's words without its identifiers and file names
    fusion_title = None if blocked else FUSION_RX.search(worded_title)
    # A title about fusing operations states a speed purpose as plainly as "faster", whatever the body says.
    title_perf = title_perf or bool(fusion_title)
    title_speed = title_perf or bool(claims)  # the title or a measurement states speed
    feature_title = (
        None
        if title_speed or gpu_title or thread_title or fusion_title
        else FEATURE_TITLE_RX.search(title) or _OP_NAME_TITLE_RX.search(title)
    )
    if gpu and perf_words and not title_perf and feature_title and not IMPL_RX.search(title):
        # "add Metal depthwise convolution ... (better perf than the CPU)": a feature whose message mentions
        # speed in passing; the title says what the change is for.
        add(0.5, f"a feature's message mentions performance in passing ({', '.join(sorted(perf_words)[:4])})")
    elif perf_words:
        add(2.0 if title_perf else 1.5, f"message speaks of performance ({', '.join(sorted(perf_words)[:4])})")
    elif m := thread_title:
        title_perf = True  # a title about threads states a speed purpose as plainly as "faster"
        add(2.0, f"title speaks of threading, a speed purpose ({m.group(0)!r})")
    elif m := fusion_title:  # fusing operations saves launches and memory round trips: nothing else
        add(2.0, f"title fuses operations, a speed purpose ({m.group(0)!r})")
    elif m := THREAD_RX.search(message) or THREAD_SIZE_RX.search(message):
        add(0.5, f"message speaks of threading ({m.group(0)!r})")
    if m := WASTE_RX.search(title):
        add(1.5, f"title removes wasted work ({m.group(0)[:50]!r})")
    elif m := WASTE_RX.search(message):
        add(0.5, f"message removes wasted work ({m.group(0)[:50]!r})")
    if claims:
        add(1.5, f"claims speedup {', '.join(f'{x:g}x' for x in claims[:4])}")
    for claim in parsed:
        if not claim.plausible:
            add(0.0, f"figure not believed: {claim.describe()[:120]}")
    title_impl = False
    # "use unaligned vector loads for correctness": the vector code is the means, correctness the purpose
    correctness = None if title_speed or PERF_FIX_RX.search(title) else CORRECTNESS_TITLE_RX.search(title)
    if gpu_title:
        title_impl = True
        add(1.5, f"title names a GPU performance mechanism or target ({gpu_title.group(0)[:50]!r})")
    elif (
        (m := IMPL_RX.search(title))
        and not correctness
        and not (gpu and m.group(0).lower().rstrip("s").endswith("kernel"))
    ):
        title_impl = True
        add(1.5, f"title introduces a SIMD/kernel implementation ({m.group(0)[:50]!r})")
    elif (m := IMPL_RX.search(message)) and not gpu and not correctness:
        add(0.5, f"message introduces a SIMD/kernel implementation ({m.group(0)[:50]!r})")
    elif gpu and not (blocked or feature_title) and (m := GPU_PERF_RX.search(message)):
        add(0.5, f"message names a GPU performance mechanism ({m.group(0)[:50]!r})")
    if not (title_perf or title_impl or claims) and feature_title:
        # "add support for Q4_1", "support mixed head sizes", "add FILL op": a new capability, unless a
        # SIMD/kernel title, a speed word in it or a measured speedup says otherwise.
        add(-0.5, f"title adds a feature ({feature_title.group(0)!r})")
    if kernel_paths:
        add(0.5, f"touches kernel code ({kernel_paths[0]}{' ...' if len(kernel_paths) > 1 else ''})")
        if new_kernels := _new_kernel_files(c, kinds):
            add(NEW_KERNEL_BONUS, f"adds kernel file {new_kernels[0].path}")
    if len(paths) >= 3 and 0 < len(code_paths) / len(paths) < 0.3:
        add(-0.5, "mostly non-source files")
    title_tech = None if correctness else _first_technique(worded_title)
    if title_tech and kernel_paths:
        # "Added prefetch to CGEMV and ZGEMV": a technique applied to a kernel the title names is the change
        # (not "Add RoPE contiguous check", "alignment size converted": a check, a size is no speedup)
        named_op = [] if blocked else _operators_in(worded_title, prose=True)
        on = f" on {named_op[0].value}" if named_op else ""
        add(
            1.5 if named_op else 1.0,
            f"title names a technique{on} on kernel code ({title_tech[0].value}: {title_tech[1].group(0)!r})",
        )
    # The body's technique matters only with a speed word or kernel code: only then is it looked for.
    elif (
        not correctness
        and (perf_words or kernel_paths)
        and (msg_tech := title_tech or _first_technique(_IDENT_RX.sub(" ", message)))
    ):
        add(0.5, f"message names a technique ({msg_tech[0].value}: {msg_tech[1].group(0)!r})")
    if (neg := NEG_STRONG_RX.search(title)) and (m := PERF_FIX_RX.search(title)):
        add(0.0, f"title fixes slowness, not a bug ({m.group(0)!r})")
    elif (
        neg
        and neg.start() > 0
        and _trailing_clause(title, neg.start())
        and not NEG_STRONG_RX.search(title, 0, neg.start())
    ):
        # "scale caching for k quants + misc fixes": the fix rides along with the change the title leads with
        add(-0.5, f"a fix follows the title's main change ({neg.group(0).strip()!r})")
    elif neg and SYNC_TITLE_RX.search(title):
        # "sync llama.cpp (CUDA add/mul bcast + Metal fix + custom RoPE)": one fix among the imported changes
        add(-0.5, f"a sync's title lists a fix among its changes ({neg.group(0).strip()!r})")
    elif neg:
        add(-2.5 if not claims else -1.0, f"title reads as a fix/revert ({neg.group(0).strip()!r})")
    elif title_speed:
        pass  # a body's fix beside a stated speed purpose is a review round or a side fix, not the purpose
    elif neg := _body_fix(message):
        add(-0.5, f"message mentions a fix ({neg.group(0).strip()!r})")
    unscoped = _SCOPE_PREFIX_RX.sub("", title)  # "ggml : refactor ...": the scope hides the title's verb
    if (
        (
            neg := NEG_HOUSEKEEPING_RX.search(title)
            or _SCOPED_HOUSEKEEPING_RX.match(unscoped)
            or BUILD_TIME_RX.search(title)
        )
        and not title_perf
        and not DEFAULT_UPDATE_TITLE_RX.match(title)
    ):
        add(-1.0, f"title reads as housekeeping ({neg.group(0).strip()!r})")
    added = ADD_SUPPORT_RX.search(worded_title)
    if added and title_impl and not (title_perf or claims) and not _ISA_WORDS_RX.search(added.group("what")):
        add(-1.0, f"title adds support for something other than an ISA ({added.group(0)!r})")
    if (m := FEATURE_PURPOSE_RX.search(title)) and not (title_perf or claims):
        # "Rework the MVN kernel to support arbitrary axes": the kernel work is the means, the feature the aim
        add(-1.0, f"title states a feature as its purpose ({m.group(0)!r})")
    if correctness and not title_perf:
        add(-1.0, f"title states a correctness purpose ({correctness.group(0)!r})")
    if (m := INSTRUMENT_TITLE_RX.search(title)) and not title_perf:
        add(-1.0, f"title describes instrumentation, not a speedup ({m.group(0)!r})")
    # "disable X to improve performance" is tuning: only a disable without a speed purpose counts against.
    if _SLOW_DISABLE_RX.search(title) and not claims and not title_perf:
        add(-1.0, "title speaks of slowing down or disabling")
    return MetaSignals(score, reasons, code_paths, kernel_paths, claims, False, parsed)


# Squashed pull requests list their review rounds ("* fix typo", "* Fix review comments"): those fixes are
# how the change was polished, not what it is for.
_REVIEW_FIX_RX = re.compile(
    r"\bfix(?:e[sd]|ing)?\s+(?:the\s+)?(?:review\w*|typos?|ci|build|lint\w*|whitespaces?|warnings?|format\w*|"
    r"style|editorconfig|comments?|compil\w*|tests?|pycheck)\b",
    re.I,
)
_SLOW_DISABLE_RX = re.compile(r"\bslow(?:er|down)\b|\bdisable\w*\b", re.I)


def _body_fix(message: str) -> re.Match[str] | None:
    """The first fix/bug word of a message once the review rounds of a squashed pull request are blanked.

    A squashed pull request lists its commits as "* ..." bullets: with two or more, every bullet is a
    review round ("* fixed for review comments", "* fix CI"), not what the change is for.
    """
    if NEG_STRONG_RX.search(message) is None:  # the usual case: no fix word at all, nothing to blank
        return None
    text = _REVIEW_FIX_RX.sub(" ", message)
    if len(_BULLET_RX.findall(text)) >= 2:
        text = _BULLET_RX.sub(" ", text)
    return NEG_STRONG_RX.search(PERF_FIX_RX.sub(" ", text))


_BULLET_RX = re.compile(r"^\s*\*\s.*$", re.M)
_DISABLED_AFTER_RX = re.compile(r"\s+(?:is|are|was|gets?)\s+(?:now\s+)?(?:disabled|off|turned\s+off)\b", re.I)
_DISABLED_BEFORE_RX = re.compile(
    r"\b(?:disabl\w*|turn(?:s|ed|ing)?\s+off|switch(?:es|ed|ing)?\s+off|revert\w*)\s+(?:the\s+)?"
    r"(?:(?!(?:for|to|and|in|on|with|because|so)\b)[\w`.-]+\s+){0,2}$",
    re.I,
)


def speed_words(text: str) -> set[str]:
    """Performance words stating a purpose; not those naming a tool ("perf logger") or a thing ("mask_opt")."""
    out: set[str] = set()
    for m in PERF_RX.finditer(text):
        word = m.group(0).lower()
        if word.startswith(("perf", "opt")) and _INSTRUMENT_AFTER_RX.match(text, m.end()):
            continue
        # "changed default optimization flag from O3 to O2": the compiler's setting, not a purpose
        if word.startswith("opt") and _COMPILER_SETTING_RX.match(text, m.end()):
            continue
        # "KERNEL.POWER8 optimization" names a thing; "small mul_mat_vec optimizations" states the work
        # (the name is the word right before: a bounded window keeps a message of repeated words linear)
        if (
            word.startswith("opt")
            and word != "optimizations"
            and _NAMED_BEFORE_RX.search(text, max(0, m.start() - _NAME_WINDOW), m.start())
        ):
            continue
        # "Disable reorder optimize by default": an optimization switched off is not a speedup
        if word.startswith("opt") and _switched_off(text, m):
            continue
        out.add(word)
    return out


def _switched_off(text: str, m: re.Match[str]) -> bool:
    """Is the optimization word `m` the thing a disable/turn-off/revert acts on?"""
    before = _DISABLED_BEFORE_RX.search(text, max(0, m.start() - 60), m.start())
    return bool(before or _DISABLED_AFTER_RX.match(text, m.end()))


def _trailing_clause(title: str, end: int) -> bool:
    """Does a second clause (" + ", "; ", ", and ", " & ") start before `end`, after at least 9 characters of
    the title's first one? One linear scan: a lazy `\\w.{8,}?` before the separator retried from every word
    character was quadratic in the title's length."""
    first = _WORD_CHAR_RX.search(title, 0, end)
    return first is not None and _CLAUSE_SEPARATOR_RX.search(title, first.start() + 9, end) is not None


_WORD_CHAR_RX = re.compile(r"\w")


def _new_kernel_files(c: RawCommit, kinds: dict[str, str]) -> list[FileChange]:
    """Kernel files the commit adds whole (>= 30 lines, none removed): what NEW_KERNEL_BONUS rewards."""
    return [f for f in c.files if kinds.get(f.path) == "kernel" and f.deletions == 0 and f.insertions >= 30]


def _lines(f: FileChange) -> int:
    return f.insertions + f.deletions


def triage(c: RawCommit, profile: LibraryProfile, max_file_lines: int, before: Triage | None = None) -> Triage:
    """Read the patch only when it can change the verdict: metadata score + MAX_DIFF_BONUS >= THRESHOLD.

    `before` is the same commit's triage without line counts: its metadata is reused unless the counts
    earn the one signal they feed (NEW_KERNEL_BONUS), so a commit's message is scanned once.
    """
    if (
        before is not None
        and list(before.kinds) == [f.path for f in c.files]
        and not _new_kernel_files(c, before.kinds)
    ):
        kinds, meta = before.kinds, before.meta
    else:
        kinds = {f.path: file_kind(f.path, profile) for f in c.files}
        meta = metadata_signals(c, kinds)
    if meta.final or meta.score + MAX_DIFF_BONUS < THRESHOLD:
        return Triage(False, kinds, [], [], meta)
    by_path = {f.path: f for f in c.files}
    huge = [p for p in meta.code_paths if _lines(by_path[p]) > max_file_lines]
    wanted = [p for p in meta.code_paths if not by_path[p].binary and _lines(by_path[p]) <= max_file_lines]
    if sum(_lines(by_path[p]) for p in wanted) > BIG_COMMIT_LINES:
        # An import of a whole library: only the first files (in git's path order) fit in the patch cap
        # anyway, so only those are diffed; git would otherwise write tens of megabytes nobody reads.
        keep: list[str] = []
        used = 0
        for p in sorted(wanted):
            if keep and used + _lines(by_path[p]) > BIG_COMMIT_LINES:
                break
            keep.append(p)
            used += _lines(by_path[p])
        huge_arch = [p for p in huge if _isa_folder(p, profile)]
        huge += [p for p in wanted if p not in set(keep)]
        wanted = keep
    else:
        huge_arch = [p for p in huge if _isa_folder(p, profile)]
    return Triage(True, kinds, wanted, huge, meta, huge_arch)


def needs_line_counts(c: RawCommit, tri: Triage) -> bool:
    """Could a commit triaged without its line counts (walked with --raw) still be a candidate?

    Line counts enter the metadata score only through NEW_KERNEL_BONUS (counts of 0 never earn it), so the
    score with that bonus granted wherever a kernel file changed bounds the true one: below the bound's
    threshold the verdict is final without them, and git never diffs the commit's blobs.
    """
    if c.counted or c.damaged or tri.meta.final:
        return False
    bound = tri.meta.score + (NEW_KERNEL_BONUS if tri.meta.kernel_paths else 0.0)
    return bound + MAX_DIFF_BONUS >= THRESHOLD


def _isa_folder(path: str, profile: LibraryProfile) -> bool:
    """Is `path` a kernel file under an architecture folder that names a SIMD ISA (kernel/riscv64/...)?"""
    arch = profile.kernel_arch(path)
    return bool(arch) and arch in ARCH_DIR_ISA


def classify(c: RawCommit, profile: LibraryProfile, tri: Triage, patch: str) -> Classification:
    """Score a commit; >= THRESHOLD means its main purpose is speed. Reasons explain each weight."""
    meta = tri.meta
    if meta.final:
        return Classification(0.0, False, list(meta.reasons))
    score = meta.score
    reasons = list(meta.reasons)

    def add(w: float, why: str) -> None:
        nonlocal score
        score += w
        reasons.append(f"{w:+.1f} {why}")

    code_set = set(meta.code_paths)
    diff = diff_stats(patch, code_set.__contains__)
    # The removed side matters only when the added side alone has enough intrinsics.
    net_intr = diff.net_intrinsics() if diff.added_intrinsics >= 8 else 0
    if diff.added_intrinsics >= 8 and (renamed := sum(diff.prefix_renames.values())) * 2 >= diff.added_intrinsics:
        add(-1.5, f"renames {renamed} intrinsic calls to the __riscv_ prefix: a mechanical change")
    # Only where it can decide the verdict (the retune signal and its prefetch technique add at most 1.5).
    can_matter = net_intr < 8 and not tri.huge_arch_kernels and THRESHOLD - 1.5 <= score < THRESHOLD
    retuned = _retuned_constants(patch, set(meta.kernel_paths)) if can_matter else (0, False)
    if net_intr >= 8 and (new_type := _new_data_type(diff)) and not speed_words(c.title):
        # A new quantization format comes with its SIMD dot products: they implement the format, they do not
        # speed up anything that existed before.
        add(0.0, f"adds {net_intr} SIMD intrinsic calls for a new data type ({new_type}): a feature's code")
    elif net_intr >= 8:
        add(1.0, f"adds {net_intr} SIMD intrinsic calls")
    elif retuned[0] >= 2:
        # "Update dgemm_kernel_4x8_haswell.S" changing prefetch distances: lines that differ from the old
        # ones only in their numbers tune the kernel, whatever the title says.
        add(1.0, f"retunes numeric constants of kernel code ({retuned[0]} lines differ only in their numbers)")
    elif tri.huge_arch_kernels:
        # Too big to diff (> max_file_lines changed), but thousands of lines in an ISA's kernel folder are
        # SIMD or assembly code: the path says what the unread diff would have shown.
        big = tri.huge_arch_kernels[0]
        add(1.0, f"rewrites {big} ({profile.kernel_arch(big)} kernel code too large to read)")
    if score + CODE_TECHNIQUE_BONUS < THRESHOLD:
        # Settled: even every technique signal could not lift it. Half the candidates end here, and the
        # technique patterns are the costliest part of classifying; the score is then a lower bound.
        reasons.append("diff techniques not examined: they could not reach the threshold")
        return Classification(round(score, 2), False, reasons, perf_claims=meta.claims, claims=meta.parsed)
    techniques, tech_reasons = detect_techniques(c.message, diff, meta.code_paths)
    if retuned[1] and Technique.PREFETCH not in techniques:
        techniques = sorted({*techniques, Technique.PREFETCH}, key=list(Technique).index)
        tech_reasons.append("prefetch: changes prefetch distances")
    code_techs = [r for r in tech_reasons if "message says" not in r]
    if code_techs:
        add(min(CODE_TECHNIQUE_BONUS, 0.5 * len(code_techs)), f"diff shows {'; '.join(code_techs[:3])}")
    is_opt = score >= THRESHOLD
    if not is_opt:  # ISA/operator/technique detail is only kept for optimization commits
        return Classification(round(score, 2), False, reasons, perf_claims=meta.claims, claims=meta.parsed)
    arch_dirs = {a for p in meta.kernel_paths if (a := profile.kernel_arch(p))}
    isas = detect_isas(
        diff.added_vocab, c.message, arch_dirs, " ".join(meta.code_paths), diff.added_signals, diff.added_tokens
    )
    operators = detect_operators(meta.code_paths, c.message, lambda: _identifiers(diff.added_tokens))
    return Classification(
        score=round(score, 2),
        is_optimization=True,
        reasons=reasons,
        isas=isas,
        operators=operators,
        techniques=techniques,
        perf_claims=meta.claims,
        claims=meta.parsed,
        kernel_files=meta.kernel_paths,
    )


_NUMBER_RX = re.compile(r"(?<![\w.])(?:0x[0-9a-f]+|\d+)(?![\w.])", re.I)
_PREFETCH_OP_RX = re.compile(r"prefetch|\bpld\b|\bprfm\b|\bdcbt\b|\bprefetcht\d|\bpreld\b", re.I)
_CHANGED_LINE_RX = re.compile(r"^[+-](?![+-]{2} )", re.M)
_ENUM_MEMBER_RX = re.compile(r"^[A-Z][A-Z0-9_]*\s*=\s*\S+\s*,?\s*(?://.*|/\*.*)?$")
# A run of removed lines and the run of added lines right after it. Two scans, not one regex for the pair:
# that one backtracked through every long removed block that no added line follows (0.6 s per OpenBLAS mine).
_REMOVED_RUN_RX = re.compile(r"(?:^-[^\n]*\n)+", re.M)
_ADDED_RUN_RX = re.compile(r"(?:\+[^\n]*\n?)(?:^\+[^\n]*\n?)*", re.M)


def _replaced_runs(body: str) -> Iterator[tuple[str, str]]:
    """(removed lines, added lines) of every removed run that added lines replace at once."""
    for removed in _REMOVED_RUN_RX.finditer(body):
        if added := _ADDED_RUN_RX.match(body, removed.end()):
            yield removed.group(0), added.group(0)


def _retuned_constants(patch: str, kernel_paths: set[str]) -> tuple[int, bool]:
    """Changed lines of kernel files whose replacement differs only in numbers (offsets, distances, sizes),
    when such lines are most of what the kernel files change (else 0), and whether prefetches were among them."""
    if not kernel_paths:
        return 0, False
    retuned = changed = 0
    prefetch = False
    for _, body in _file_sections(patch, kernel_paths.__contains__):
        body = body[:200_000]
        changed += len(_CHANGED_LINE_RX.findall(body))
        for old, new in _replaced_runs(body):
            olds, news = old.rstrip("\n").split("\n"), new.rstrip("\n").split("\n")
            if len(olds) != len(news):
                continue
            for a, b in zip(olds, news, strict=True):
                a, b = a[1:].strip(), b[1:].strip()
                if a == b or _ENUM_MEMBER_RX.match(a) or not _NUMBER_RX.search(a):
                    continue  # renumbered enum members ("GGML_OP_FOO = 42,") are bookkeeping, not tuning
                if _NUMBER_RX.sub("#", a) == _NUMBER_RX.sub("#", b):
                    retuned += 1
                    prefetch = prefetch or bool(_PREFETCH_OP_RX.search(a))
    # the retuned pairs (a removed and an added line each) are at least half of every changed kernel line
    return (retuned, prefetch) if 4 * retuned >= changed else (0, False)


# A new member of a type enum ("GGML_TYPE_IQ1_S = 19,"): the change adds a data format.
_NEW_TYPE_RX = re.compile(r"^\s*([A-Z][A-Z0-9]*_TYPE_[A-Z0-9_]+)\s*=\s*\d+\s*,", re.M)


def _new_data_type(diff: DiffStats) -> str | None:
    """The first type-enum member the added code defines that the removed code did not, if any."""
    added = _NEW_TYPE_RX.findall(diff.added)
    if not added:
        return None
    removed = set(_NEW_TYPE_RX.findall(diff.removed))
    return next((t for t in added if t not in removed), None)


def _identifiers(tokens: Counter[str], limit: int = 4000) -> str:
    """The added code's longer identifiers, space-separated, cut at `limit` characters."""
    out: list[str] = []
    size = 0
    for t in tokens:
        if len(t) > 3:
            out.append(t)
            size += len(t) + 1
            if size > limit:
                break
    return " ".join(out)[:limit]


def gpu_only(paths: list[str]) -> bool:
    code = [p for p in paths if suffix(p) in (".c", ".cc", ".cpp", ".h", ".hpp", ".cu", ".cuh", ".metal", ".comp")]
    return bool(code) and all(GPU_RE.search(p) for p in code)


def geometric_mean(values: list[float]) -> float | None:
    vals = [v for v in values if v > 0]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else None
