"""What a retrieval query asks for, and how well a thought fits it: the ranking rules, in one place.

A kernel engineer's query names (or its target context implies) an ISA, an operator and a technique in the
engineer's words: "unroll the sgemm micro-kernel with __riscv_vfmacc" -> isa {rvv}, operator {gemm}, technique
{unroll, register_blocking}. `query_intent` reads them; `intent_fit` turns a thought's labels into a log-scale
boost (+ for each named field it matches, - for code the asker cannot use or a kernel of another shape).
`Retriever.search` applies it to every query, so `eok ideas search` and the agent's context rank alike.

The vocabulary is the taxonomy's (knowledge/taxonomy.py), in the words of the RVV 1.0 specification (its
instruction and intrinsic names), of BLAS and ggml, and of the task suite (evaluator/suite: "histogram" and
"stream compaction" are `sort` tasks, "im2col" a `copy` task that feeds a convolution).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache
from typing import Any

from pydantic import BaseModel

from core.errors import EokError
from knowledge.fit import quantized
from knowledge.taxonomy import ISA_FAMILY, OPERATOR_NEIGHBOURS, Isa, Operator, Technique

# Log-scale weights. Each field a query names earns the same for a match. An engineer who names an ISA wants
# that ISA's code: another ISA's code costs more than a match earns unless it carries an RVV translation of its
# key code (then, like portable C, it is the right idea without the intrinsics and costs half a match); the
# same ISA family (xtheadvector for RVV, AVX-512 for AVX2) earns half. An ISA only implied by the target
# (a K1 search that names no ISA) weighs half as much: the asker did not say, but cannot run other ISAs' code.
# A kernel of another operator costs as much as a match earns, unless it is a neighbour (its loops share the
# shape: taxonomy.OPERATOR_NEIGHBOURS), portable advice ("other"), or its technique does not depend on what
# the loop computes (OPERATOR_GENERIC). A technique close to the one named (TECHNIQUE_NEIGHBOURS: the same
# lesson seen from another side) earns what a neighbouring operator does. A query about float data (f32,
# sgemm, single precision) is not answered by a quantized kernel (a block format's lookup tables, int8 dot
# products: knowledge.fit.quantized, the test the agent's context applies to a float task) and costs as much.
INTENT_WEIGHT = {"operator": 1.5, "isa": 1.0, "technique": 1.0}
SAME_FAMILY = 0.5
PORTABLE_COST = 0.5
TRANSLATED_COST = 0.5
OTHER_ISA_COST = 2.0
IMPLIED_ISA_SCALE = 0.5
NEIGHBOUR_OPERATOR = 0.2
NEIGHBOUR_TECHNIQUE = 0.4
QUANTIZED_COST = 1.0
OTHER_OPERATOR_COST = 1.0
OPERATOR_GENERIC = frozenset({Technique.TAIL_HANDLING, Technique.ALIGNMENT, Technique.THREADING, Technique.PREFETCH})
_T = Technique
_CLOSE_TECHNIQUES = (
    (_T.MULTI_ACCUMULATOR, _T.UNROLL),  # unrolling a reduction is what gives it several accumulators
    (_T.MULTI_ACCUMULATOR, _T.REDUCTION),  # accumulate in vectors, reduce once after the loop
    (_T.PACKING, _T.MEMORY_ACCESS),  # both decide the order the kernel reads memory in
    (_T.PACKING, _T.REGISTER_BLOCKING),  # a GEMM packs panels for its register blocks
    (_T.MEMORY_ACCESS, _T.PREFETCH),
    (_T.VECTOR_LENGTH, _T.VECTORIZE),  # LMUL and vl are choices made while vectorising
    (_T.VECTOR_LENGTH, _T.TAIL_HANDLING),  # on RVV the tail is a shorter vl
)
TECHNIQUE_NEIGHBOURS: dict[str, frozenset[str]] = {
    t.value: frozenset(b.value if a == t else a.value for a, b in _CLOSE_TECHNIQUES if t in (a, b)) for t in Technique
}

# RVV 1.0: its names in prose, the cores and chips that implement it here, its vtype words (LMUL, VLEN,
# e32m4, vfloat32m1_t, Zv* extensions), its intrinsics (__riscv_...), and its instruction names, bare
# (vfredusum, vle32.v) or in the intrinsic form without the prefix (vfmacc_vv_f32m1). NEON's own names
# (vmulq_f32, vcvtq_f32_s32) are left out: they end in q or an element type, never in an RVV operand form.
_RVV_MNEMONIC = (
    r"vsetvli?|vsetivli|v[ls]e(?:8|16|32|64)(?:ff)?|v[ls]se(?:8|16|32|64)?|v[ls]seg\d\w*|v[ls][uo]xei\d+|"
    r"vf?w?red\w+|vf?w?n?macc(?:u|su|us)?|vf?n?msac|vf?w?mul(?:su|hu?|hsu)?|vf[wn]?cvt\w*|vn(?:srl|sra|clipu?)|"
    r"vrgather\w*|vcompress|vslide\w+|vf?merge|vf?mv|vcpop|vfirst|viota|vid|vms[bio]f|vsext|vzext|vfsqrt|"
    r"vfrec7|vfrsqrt7|vmfeq|vmflt|vmfle|vmfgt|"
    # the arithmetic, logic and shift instructions engineers name bare ("vand and vsrl", "vfmax/vfmin")
    r"vf?w?(?:add|sub)u?|vf?rsub|vf?(?:max|min)u?|vfabs|vfneg|vfsgnjn?x?|vf?r?divu?|vremu?|vand|vx?or|vs(?:ll|rl|ra)|"
    r"vms(?:eq|ne|ltu?|leu?|gtu?|geu?)|vfclass"
)
_RVV_WORDS = (
    r"\brvv\b|risc-?v|\brv64\w*|\bzv[a-z0-9]+|\bzfh(?:min)?\b|\bvlen\b|\blmul\b|"
    r"\bk[13]\b|\bx60\b|\bx100\b|\ba100\b|spacemit|"
    r"__riscv_v\w+|\bv(?:float|u?int|bool)\d+(?:mf?\d)?(?:x\d)?_t\b|\be(?:8|16|32|64)mf?\d\b|"
    rf"\b(?:{_RVV_MNEMONIC})(?:\b|[._]v[vxfswim]{{0,2}}\b|_v[vxfswim]{{0,2}}_\w+)"
)
_ISA_WORDS: dict[Isa, str] = {
    Isa.XTHEADVECTOR: r"xthead|thead|\b0\.7(\.1)?\b|\bc9[0-2]\d\b",
    Isa.RVV: _RVV_WORDS,
    Isa.NEON: r"\bneon\b|aarch64|\barm(?:64|v[89]\w*)?\b|\bv[a-z]+[0-9]?q?_(?:[fsup](?:8|16|32|64)|bf16)(?:\b|_)",
    Isa.SVE: r"\bsve2?\b|\bsv[a-z]+\d*_\w+",
    Isa.AVX512: r"avx-?512|_mm512_",
    Isa.AVX2: r"\bavx2\b|_mm256_|\bfma3\b",
    Isa.AVX: r"\bavx\b",
    Isa.SSE: r"\bsse\d?\b|\bx86\b|\b_mm_",
    # portable code asked for: plain or scalar C, a reference or fallback, what the compiler vectorizes itself
    Isa.GENERIC: r"\bportable\b|\b(?:plain|generic|standard) c\b|"
    r"(?<!without a )(?<!instead of a )(?<!no )\bscalar\b(?!s| (?:epilogue|remainder|tail|cleanup|operand))|"
    r"\bc (?:fallback|reference)\b|"
    r"\breference (?:c|implementation|loop)\b|without (?:simd|intrinsics)|no hardware support|"
    r"compiler can (?:auto-?)?vectori[sz]e|auto-?vectori[sz]",
}
# An activation by name ("f32 activations" is data, not the operator); exp and log alone are also the insides of a
# softmax or an attention, and read as an activation only when neither is named.
_ACTIVATION_NAMES = r"gelu|silu|swish|relu|sigmoid|logistic|tanh|hardswish|activation(?!s)"
_NAMED_ACTIVATION = re.compile(_ACTIVATION_NAMES, re.IGNORECASE)
_CONTAINS_EXP = {str(Operator.SOFTMAX), str(Operator.ATTENTION)}
# Operators, in the words their queries use. A word may name two (im2col: the copy that feeds a convolution).
_OPERATOR_WORDS: dict[Operator, str] = {
    # a ggml block format (q4_0, q8_K, iq2_xs) names quantized data, whose kernels are dots and (de)quantization
    Operator.QUANT_DOT: r"vec_dot|\b[it]?q\d_[0-9k]\w*\b|quanti[sz]ed (?:dot|mat|gemm|gemv|weights?)|"
    r"int8 (?:dot|mat|gemm|gemv)|\bmatmulnbits\b|\b[48]-?bit weights?",
    # a type named is data ("fp16 accumulation"); converting numbers is read by _converts_numbers
    Operator.QUANTIZE: r"quanti[sz]|dequant|\b[it]?q\d_[0-9k]\b|vfn?w?cvt|\bto u?int(?:4|8)?\b|\b127\b|"
    r"\bround(?:s|ing|ed)? to (?:the )?(?:nearest )?int",
    Operator.TRSM: r"\btrsm\b|triangular solve",
    Operator.GEMV: r"gemv|\bger\b|symv|trmv|matrix[- ]vector|mat-?vec|(?-i:\bA ?\* ?x\b)|level[- ]?2 blas",
    Operator.GEMM: r"gemm|matmul|mat_mul|matrix[- ](?:matrix|multipl|product)|micro-?kernel|\btrmm\b|"
    r"\blinear[- ]layers?\b|fully[- ]connected|level[- ]?3 blas|(?-i:\bA ?\* ?B)",
    Operator.DOT: r"\b[sd]?dot\b|dot[- ]product|inner product|vec_dot",
    Operator.AXPY: r"axpb?y",
    Operator.NRM2: r"nrm2|euclidean norm|\b2-norm\b|vector norm",
    # also described by its steps: the max or the sum of the row around an exp (within one clause, bounded so a
    # long query costs linear time), or a log-sum-exp
    Operator.SOFTMAX: r"softmax|log[- ]?sum[- ]?exp|\b(?:max|sum)\b[^.;:]{0,80}\bexp(?!and)\w*|"
    r"\bexp(?!and)\w*[^.;:]{0,80}\b(?:max|sum)\b",
    Operator.NORM: r"(?:rms|layer|batch|group|instance)[ _-]?norm|normali[sz]ation|root[- ]mean[- ]square|"
    r"mean and variance|\bvariance\b",
    Operator.CONV: r"\bconv(?!er)|im2col|winograd|depthwise|pointwise|1x1|3x3|\bunfold|patches into columns",
    Operator.POOL: r"(?<!thread )\bpool|pooling|(?:max|min|avg|average|global)[ _-]?pool|"
    r"average over (?:all )?(?:the )?spatial|spatial (?:average|mean)",
    Operator.ACTIVATION: _ACTIVATION_NAMES + r"|exponential|\bexpf?\b|\berff?\b|\blogf?\b",
    Operator.ATTENTION: r"attention|\bsdpa\b|kv[- ]cache|\bwkv\b|rwkv",
    Operator.ROPE: r"\brope\b|rotary",
    Operator.RESIZE: r"resiz|upsampl|bilinear|interpolat",
    Operator.TRANSPOSE: r"transpos",
    Operator.SCAN: r"prefix[- ]sum|\bscan\b|cumsum|cumulative",
    Operator.SORT: r"\bsort|merge sorted|\bmerg(?:e|ing) two|histogram|compaction|\bnms\b|non-max|\btop-?k\b",
    Operator.COPY: r"memcpy|memset|im2col|\bcopy|\bunfold|patches into columns",
    # "reduce once" and "reduction" are techniques; the reduce operator is a sum, max or min of a vector
    Operator.REDUCE: r"\bi?s?amax\b|\bi?s?amin\b|\b[sd]?asum\b|\bsum of\b|\breduce[_ ](?:sum|max|min)|"
    r"\bargmax\b|\bargmin\b|\bmaximum of\b|\bhorizontal (?:sum|max)|\b(?:sum|max|min)[- ]reduction\b|\bsum loop",
    Operator.ELEMENTWISE: r"\b[sd]?scal\b|element-?wise|\bpointwise add|\bbox decode|\byolo",
}
_TECHNIQUE_WORDS: dict[Technique, str] = {
    Technique.PREFETCH: r"prefetch|zicbop",
    # on an in-order core, interleaving loads with the arithmetic is what unrolling buys
    Technique.UNROLL: r"unroll|interleav\w* (?:the )?(?:vector )?(?:loads?|fmas?|vfmacc)|"
    r"(?:hide|hiding) (?:the )?(?:load |memory |fma )?latency|never waits",
    Technique.MULTI_ACCUMULATOR: r"accumulators|partial sums|independent (?:chains|sums)|fma latency|"
    r"(?:several|multiple|independent|\d+) (?:running |partial )?(?:maxima|minima|sums|maxes|mins)\b",
    Technique.VECTOR_LENGTH: r"\blmul\b|register group|\bm[248]\b|\be(?:8|16|32|64)m[1248]\b|vector[- ]length|"
    r"strip[- ]?min\w*|\bvlmax\b|\bvlenb\b",
    Technique.TAIL_HANDLING: r"\btails?\b|epilogue|remainder|leftover",
    Technique.PACKING: r"packing|\bpack(?:ed)? (?:a|b|panel)|\bpack\b|data layout|re-?layout|"
    r"\binterleaved (?:records|layout)",
    Technique.REGISTER_BLOCKING: r"blocking|tiling|\btiles?\b|micro-?kernel|\breuse\b|"
    r"(?:several|multiple|\d+) (?:rows|columns|outputs|dot products) at (?:a time|once)|"
    r"across (?:several|multiple) (?:rows|columns)",
    # accumulating narrow products in a wider type is what widening instructions are for
    Technique.WIDENING: r"\bwiden\w*|vf?wmacc|vf?wmul|vwredsum|"
    r"(?:int32|i32|32-?bit|fp32|f32) accumulat\w*|accumulat\w* (?:in|into) (?:an? )?(?:int32|i32|32-?bit|int16)",
    # accumulating in a vector register is the other half of reducing once, after the loop
    Technique.REDUCTION: r"reduces? once|horizontal|vf?redu?o?sum|vredsum|(?<!range )reduction|"
    r"accumulat\w* (?:\w+ ){0,3}in (?:a )?vectors?\b",
    Technique.MEMORY_ACCESS: r"strided|unit-?stride|\bvlse|gather|segment(?:ed)? load|vlseg|cache lines?|"
    r"\binc[xy]\b|\bnon-?unit (?:stride|increment)s?|negative strides?",
    Technique.APPROXIMATION: r"polynomial|approximat|lookup table|\blut\b|fast[- ](?:exp|log|tanh|sigmoid|erf|math)",
    Technique.THREADING: r"thread|multi-?core|openmp|paralleli[sz]|\b(?:\d+|all|several|both) (?:\w+ )?cores\b",
    # the taxonomy's fusion includes FMA and folding one operator into another's constants
    Technique.FUSION: r"\bfus(?:e|ed|ion)\b|single pass|one pass|\bfold\w* (?:\w+ ){0,4}into\b",
    Technique.ALGORITHMIC: r"winograd|strassen|\bfft\b|algorithmic|lower complexity",
    Technique.ALIGNMENT: r"\balign(?:ed|ment)?\b|misalign|unaligned",
}


# Float data named: element types, precisions, and BLAS's s/d routine names.
_FLOAT_DATA = re.compile(
    r"\b(?:b?f|fp)(?:16|32|64)\b|\bbfloat16\b|\bfloats?\b|\b(?:single|double|half)[- ]precision|"
    r"\b[sd](?:gemm|gemv|dot|axpy|scal|nrm2|asum|ger|symv|trsm|amax)\w*",
    re.IGNORECASE,
)


# Quantized data in words, beyond what knowledge.fit.quantized reads (block formats, int8): sub-byte and narrow
# integer weights, nibbles, scales kept per block.
_QUANTIZED_WORDS = re.compile(
    r"\bu?int4\b|\b[248]-?bit (?:int|integer|weight|quant)|\bnibbles?\b|"
    r"per-?block scales?|block-?wise scales?|\bscales? (?:per|for each) block",
    re.IGNORECASE,
)
_PRODUCTS = {str(Operator.DOT), str(Operator.GEMV), str(Operator.GEMM)}
# A conversion named as something to do, not as the type of a scale ("fp16 scales").
_CONVERSION_ACTION = re.compile(
    r"\b(?:de)?quantiz(?:e|es|ing|ation)\b|\bconver(?:t|ts|ting|sion)\b|\bcast\b|vfn?w?cvt", re.IGNORECASE
)


# Converting numbers (not a layout: "convert a planar tensor to interleaved records") is a quantize kernel's job:
# a conversion named beside a numeric type, or one type turned into another ("fp16 to fp32").
_NUMBER_TYPE = r"(?:\b(?:b?f|fp|u?int|i|u)(?:4|8|16|32|64)\b|\bint\b|\bfloats?\b|\bhalf\b|\bdouble\b|\bbfloat16\b|"
_NUMBER_TYPE += r"\bfloat16\b|\bbinary16\b|(?:half|single|double)[- ]precision)"
_NUMERIC = re.compile(_NUMBER_TYPE, re.IGNORECASE)
_TYPE_TO_TYPE = re.compile(rf"{_NUMBER_TYPE}(?: bit pattern)? (?:to|->|into) (?:an? )?{_NUMBER_TYPE}", re.IGNORECASE)
# The BLAS levels by name: level 1 is the vector routines.
_LEVEL1_BLAS = re.compile(r"level[- ]?1 blas|\bblas[- ]?(?:level[- ]?)?1\b", re.IGNORECASE)
_LEVEL1_OPERATORS = {
    str(o) for o in (Operator.DOT, Operator.AXPY, Operator.NRM2, Operator.REDUCE, Operator.ELEMENTWISE)
}
# An operator named with the steps inside it is asked for whole: a softmax's max and sum reductions, a norm's
# sum of squares, a GEMV's dots or axpys (and its transposed layout), an attention's softmax and dots.
_STEPS_INSIDE: dict[str, set[str]] = {
    str(whole): {str(step) for step in steps}
    for whole, steps in {
        Operator.SOFTMAX: {Operator.REDUCE, Operator.ELEMENTWISE},
        Operator.NORM: {Operator.REDUCE, Operator.ELEMENTWISE, Operator.NRM2},
        Operator.ATTENTION: {Operator.SOFTMAX, Operator.DOT, Operator.GEMV, Operator.REDUCE},
        Operator.GEMV: {Operator.DOT, Operator.AXPY, Operator.TRANSPOSE},
        Operator.GEMM: {Operator.DOT, Operator.AXPY, Operator.TRANSPOSE},
        Operator.QUANT_DOT: {Operator.DOT},
        Operator.POOL: {Operator.REDUCE},
        Operator.ROPE: {Operator.ELEMENTWISE},
    }.items()
}
# Words for multiplying quantized data: "int8 x int8 products per block" is a quantized dot.
_PRODUCT_WORDS = re.compile(r"\bproducts?\b|\bmultipl\w*|\btimes\b|\w\s[x*\u00d7]\s\w", re.IGNORECASE)


def _compiled(words: dict[Any, str]) -> list[tuple[Any, re.Pattern[str]]]:
    return [(value, re.compile(rx, re.IGNORECASE)) for value, rx in words.items()]


_QUERY_ISA = _compiled(_ISA_WORDS)
_QUERY_OPERATOR = _compiled(_OPERATOR_WORDS)
_QUERY_TECHNIQUE = _compiled(_TECHNIQUE_WORDS)


class Intent(BaseModel):
    """What a query names explicitly: "unroll sgemm on RVV" -> isa {rvv}, operator {gemm}, technique {unroll}.
    `implied_isa` is the target's vector ISA when the query names none (a K1 search: rvv)."""

    isa: set[str] = set()
    operator: set[str] = set()
    technique: set[str] = set()
    implied_isa: str | None = None
    float_data: bool = False  # names float data and no quantized data

    @property
    def isas(self) -> set[str]:
        """The ISAs the asker wants code for: those named, else the target's."""
        return self.isa or ({self.implied_isa} if self.implied_isa else set())


def query_intent(query: str, target_isa: str | None = None) -> Intent:
    isas = {str(isa) for isa, rx in _QUERY_ISA if rx.search(query)}
    if str(Isa.XTHEADVECTOR) in isas:
        isas.add(str(Isa.RVV))  # a 0.7.1 port starts from RVV code
    quantized_data = quantized({"title": query}) or bool(_QUANTIZED_WORDS.search(query))
    operators = {str(op) for op, rx in _QUERY_OPERATOR if rx.search(query)}
    if _converts_numbers(query):
        operators.add(str(Operator.QUANTIZE))
    if _LEVEL1_BLAS.search(query) and not operators:  # "saxpy, a level-1 BLAS routine" names its operator
        operators |= _LEVEL1_OPERATORS
    if operators & _CONTAINS_EXP and not _NAMED_ACTIVATION.search(query):
        operators.discard(str(Operator.ACTIVATION))
    return Intent(
        isa=isas,
        # a product of quantized data first: "q4_K vec_dot" names a dot that is a quantized dot, not a quantize
        operator=_without_inner_steps(_products_of_quantized_data(query, operators) if quantized_data else operators),
        technique={str(t) for t, rx in _QUERY_TECHNIQUE if rx.search(query)},
        implied_isa=None if isas else target_isa,
        float_data=bool(_FLOAT_DATA.search(query)) and not quantized_data,
    )


def _converts_numbers(query: str) -> bool:
    return bool(_TYPE_TO_TYPE.search(query) or (_CONVERSION_ACTION.search(query) and _NUMERIC.search(query)))


def _without_inner_steps(operators: set[str]) -> set[str]:
    """The operators not inside another named one (the steps hold no cycle, so the outermost always stay)."""
    return operators - set().union(*(_STEPS_INSIDE.get(op, set()) for op in operators))


def _products_of_quantized_data(query: str, operators: set[str]) -> set[str]:
    """A product of quantized data is a quantized dot however it is worded: "int8 times int8 dot product per
    block with fp16 scales" names a dot and (through "fp16") a conversion, yet asks for neither an f32 dot nor
    a quantize kernel. A conversion stays asked for only when the query names it as an action."""
    if not operators & _PRODUCTS and not _PRODUCT_WORDS.search(query):
        return operators
    composed = (operators - {str(Operator.DOT)}) | {str(Operator.QUANT_DOT)}
    return composed if _CONVERSION_ACTION.search(query) else composed - {str(Operator.QUANTIZE)}


@cache
def target_vector_isa(target_key: str | None) -> str | None:
    """The vector ISA a target runs (rvv for the K1 and K3 cores), None for the host or an unknown key."""
    if not target_key:
        return None
    from evaluator.targets import load_target  # the target files only: evaluator/targets.py needs nothing else

    try:
        target = load_target(target_key)
    except EokError:
        return None  # a target filter names experiences; an unknown one implies no ISA
    return str(Isa.RVV) if target.is_riscv and target.vlen else None


def intent_fit(thought: Mapping[str, Any], intent: Intent) -> float:
    """Log-scale fit of a thought (its isa, operator, technique, rvv_equivalents) to a query's intent."""
    fit = isa_fit(thought, intent) + operator_fit(thought, intent) + technique_fit(thought, intent)
    return fit - QUANTIZED_COST if intent.float_data and quantized(thought) else fit


def isa_fit(thought: Mapping[str, Any], intent: Intent) -> float:
    wanted = intent.isas
    if not wanted:
        return 0.0
    scale = 1.0 if intent.isa else IMPLIED_ISA_SCALE
    isa = thought.get("isa") or str(Isa.GENERIC)
    if isa in wanted:
        return scale * INTENT_WEIGHT["isa"]
    if isa == Isa.GENERIC:
        return -scale * PORTABLE_COST
    if _family(isa) in {_family(w) for w in wanted}:
        return scale * SAME_FAMILY
    if str(Isa.RVV) in wanted and thought.get("rvv_equivalents"):
        return -scale * TRANSLATED_COST
    return -scale * OTHER_ISA_COST


def operator_fit(thought: Mapping[str, Any], intent: Intent) -> float:
    op = thought.get("operator") or str(Operator.OTHER)
    if not intent.operator or op == Operator.OTHER:
        return 0.0
    if op in intent.operator:
        return INTENT_WEIGHT["operator"]
    if _neighbour(op, intent.operator):
        return NEIGHBOUR_OPERATOR
    if thought.get("technique") in OPERATOR_GENERIC:
        return 0.0
    return -OTHER_OPERATOR_COST


def technique_fit(thought: Mapping[str, Any], intent: Intent) -> float:
    technique = thought.get("technique") or ""
    if technique in intent.technique:
        return INTENT_WEIGHT["technique"]
    if TECHNIQUE_NEIGHBOURS.get(technique, frozenset()) & intent.technique:
        return NEIGHBOUR_TECHNIQUE
    return 0.0


def _family(isa: str) -> str:
    try:
        return ISA_FAMILY[Isa(isa)]
    except ValueError:
        return isa


def _neighbour(op: str, named: set[str]) -> bool:
    """Either way round: a conversion (`elementwise`) answers part of a `quantize` question although the
    taxonomy lists only quantize's neighbours, and the intent rankers search a named operator's neighbours."""
    try:
        mine = OPERATOR_NEIGHBOURS.get(Operator(op), frozenset())
    except ValueError:
        return False
    return any(n.value in named for n in mine) or any(
        Operator(op) in OPERATOR_NEIGHBOURS.get(Operator(n), frozenset()) for n in named
    )
