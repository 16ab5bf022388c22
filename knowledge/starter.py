"""A small starter set of ideas and thoughts shipped with EoK, written for this project.

Used when no repository has been mined yet (a fresh install, the tests, the main job's default), so the
agent always has directions. Mined knowledge supersedes it: starter nodes are ordinary Ideas/Thoughts
with source="starter", and their measured effectiveness accumulates like any other's.
"""

from __future__ import annotations

from knowledge.models import Idea, Relationship, Thought
from knowledge.taxonomy import Isa, Operator, Technique

T = Technique
_IDEAS: list[tuple[str, str, str, list[tuple[Technique, str, str, str, str]]]] = [
    # (idea id, title, principle, [(technique, operator, title, description, example)])
    (
        "starter:vectorize",
        "Let the vector unit do the work",
        "Express the inner loop with RVV intrinsics (or help the autovectorizer) so each instruction handles VL elements.",
        [
            (
                T.VECTORIZE,
                "other",
                "Strip-mine the loop with vsetvl",
                "Loop with vl = vsetvl(n - i); load, compute and store vl elements per iteration; no scalar tail.",
                "for (size_t i = 0, vl; i < n; i += vl) { vl = __riscv_vsetvl_e32m4(n - i); "
                "vfloat32m4_t v = __riscv_vle32_v_f32m4(x + i, vl); __riscv_vse32_v_f32m4(y + i, v, vl); }",
            ),
            (
                T.TAIL_HANDLING,
                "other",
                "Handle tails with vl, not scalar epilogues",
                "The last iteration simply runs with a shorter vl; masks only where a lane condition is data-dependent.",
                "vl = __riscv_vsetvl_e32m8(n - i);",
            ),
        ],
    ),
    (
        "starter:lmul",
        "Group registers to match the machine's width",
        "Pick LMUL so one instruction covers enough data to amortise loop overhead without running out of registers.",
        [
            (
                T.VECTOR_LENGTH,
                "other",
                "Raise LMUL for streaming kernels",
                "Element-wise and streaming loops do best with m4/m8: fewer vsetvl and branch instructions per element.",
                "vfloat32m8_t a = __riscv_vle32_v_f32m8(x + i, vl);",
            ),
            (
                T.VECTOR_LENGTH,
                "gemv",
                "Wide LMUL along the contiguous dimension of GEMV",
                "In the transposed GEMV the contiguous row is long: m4/m8 loads give the longest useful vectors.",
                "acc = __riscv_vfmacc_vv_f32m8(acc, __riscv_vle32_v_f32m8(a + j, vl), __riscv_vle32_v_f32m8(x + j, vl), vl);",
            ),
        ],
    ),
    (
        "starter:accumulators",
        "Keep several independent accumulators in flight",
        "A single accumulator serialises on the FMA latency (5 cycles on X60); independent partial sums hide it.",
        [
            (
                T.MULTI_ACCUMULATOR,
                "dot",
                "Four partial sums for dot products",
                "Split the loop into 4 interleaved streams with their own vfmacc accumulators, add them at the end.",
                "acc0 = __riscv_vfmacc_vv_f32m2(acc0, a0, b0, vl); acc1 = __riscv_vfmacc_vv_f32m2(acc1, a1, b1, vl);",
            ),
            (
                T.REDUCTION,
                "dot",
                "Reduce once, after the loop",
                "Accumulate element-wise in vector registers and do one vfredusum at the end: reductions cost ~15 cycles.",
                "s = __riscv_vfmv_f_s_f32m1_f32(__riscv_vfredusum_vs_f32m4_f32m1(acc, zero, vlmax));",
            ),
        ],
    ),
    (
        "starter:unroll",
        "Unroll to expose independent work",
        "Unrolling removes loop overhead and lets an in-order dual-issue core pair independent instructions.",
        [
            (
                T.UNROLL,
                "other",
                "Unroll the vector loop by two",
                "Process two vector chunks per iteration so loads of the next chunk overlap arithmetic of the current.",
                "#pragma clang loop unroll_count(2)",
            )
        ],
    ),
    (
        "starter:blocking",
        "Reuse every loaded value several times",
        "Register blocking: compute a tile of outputs at once so each load feeds several FMAs (X60 loads are slow).",
        [
            (
                T.REGISTER_BLOCKING,
                "gemm",
                "MR x NR register tile with broadcast FMAs",
                "Keep an MR x (NR vector) tile of C in registers; per k, load one B vector and broadcast MR A scalars.",
                "c0 = __riscv_vfmacc_vf_f32m2(c0, a[0*lda + k], b, vl); c1 = __riscv_vfmacc_vf_f32m2(c1, a[1*lda + k], b, vl);",
            ),
            (
                T.PACKING,
                "gemm",
                "Pack panels into contiguous buffers",
                "Copy the B panel once into a contiguous, aligned buffer so the micro-kernel streams unit-stride loads.",
                "memcpy(bp + k * nr, b + k * ldb + j, nr * sizeof(float));",
            ),
            (
                T.REGISTER_BLOCKING,
                "gemv",
                "Several rows per pass in GEMV",
                "Compute 2-4 output rows per pass so each loaded x vector is reused by several rows.",
                "acc0 = __riscv_vfmacc_vv_f32m4(acc0, __riscv_vle32_v_f32m4(a0 + j, vl), xv, vl);",
            ),
        ],
    ),
    (
        "starter:memory",
        "Stream memory the way the hardware likes",
        "Unit-stride, contiguous access and no aliasing doubts: strided and indexed accesses are slow on X60.",
        [
            (
                T.MEMORY_ACCESS,
                "other",
                "Declare pointers restrict",
                "Tell the compiler outputs do not alias inputs so it vectorizes without runtime overlap checks.",
                "void f(int n, const float *restrict x, float *restrict y)",
            ),
            (
                T.PREFETCH,
                "other",
                "Prefetch ahead of the stream",
                "Issue a prefetch a few cache lines (e.g. 128 B on K1) ahead of the loads in long streaming loops.",
                "__builtin_prefetch(x + i + 32, 0, 3);",
            ),
            (
                T.ALIGNMENT,
                "other",
                "Assume alignment where the caller guarantees it",
                "Alignment hints let the compiler drop peeling code.",
                "x = __builtin_assume_aligned(x, 16);",
            ),
        ],
    ),
    (
        "starter:fusion",
        "Fuse passes over memory",
        "Combine operations (FMA, fused loops) so data is loaded once and intermediate arrays disappear.",
        [
            (
                T.FUSION,
                "softmax",
                "Fuse exp and sum in softmax",
                "Compute exp(x - max) and accumulate the sum in the same pass; a second pass only scales.",
                "e = vexp(__riscv_vfsub_vf_f32m4(v, mx, vl)); sum = __riscv_vfadd_vv_f32m4(sum, e, vl);",
            ),
            (
                T.FUSION,
                "other",
                "Contract multiply-adds into FMAs",
                "Let the compiler contract a*b+c into one fused multiply-add (-ffp-contract=fast).",
                "-ffp-contract=fast",
            ),
        ],
    ),
    (
        "starter:approx",
        "Approximate transcendental functions in-vector",
        "Replace scalar libm calls by range reduction plus a short polynomial evaluated on whole vectors.",
        [
            (
                T.APPROXIMATION,
                "activation",
                "Vector exp by range reduction",
                "exp(x) = 2^n * p(r) with n = round(x log2 e), r = x - n ln2, p a degree-5 polynomial; 2^n via exponent bits.",
                "n = __riscv_vfcvt_x_f_v_i32m4(__riscv_vfmul_vf_f32m4(x, 1.442695f, vl), vl);",
            ),
            (
                T.APPROXIMATION,
                "softmax",
                "Vector exp inside softmax",
                "Softmax tolerances allow a polynomial exp: vectorize the whole row instead of calling expf per element.",
                "e = vexp_f32m4(__riscv_vfsub_vf_f32m4(x, mx, vl), vl);",
            ),
        ],
    ),
    (
        "starter:widening",
        "Multiply narrow, accumulate wide",
        "For int8/int4 data use widening multiplies (vwmul/vwmacc) into int16/int32 and convert to float once per block.",
        [
            (
                T.WIDENING,
                "quant_dot",
                "int8 dot products with vwmul + vwredsum",
                "Multiply int8 vectors into int16 with vwmul, then widen-reduce into int32; scale by the block's fp scales.",
                "p = __riscv_vwmul_vv_i16m2(a, b, vl); s = __riscv_vwredsum_vs_i16m2_i32m1(p, z, vl);",
            )
        ],
    ),
    (
        "starter:algorithm",
        "Do less work",
        "Hoist invariants, replace divisions by multiplications with a reciprocal, skip work that cannot matter.",
        [
            (
                T.ALGORITHMIC,
                "other",
                "Multiply by a reciprocal instead of dividing",
                "vfdiv is 12-40x slower than vfmul on X60: compute 1/x once and multiply.",
                "float inv = 1.0f / sum; y = __riscv_vfmul_vf_f32m4(y, inv, vl);",
            ),
            (
                T.THREADING,
                "other",
                "Parallelise only large problems",
                "Threads pay off only when each gets enough work; single-core kernels are the unit EoK tunes.",
                "",
            ),
        ],
    ),
]


def starter_knowledge() -> tuple[list[Idea | Thought], list[Relationship]]:
    nodes: list[Idea | Thought] = []
    rels: list[Relationship] = []
    for idea_id, title, principle, thoughts in _IDEAS:
        nodes.append(
            Idea(
                id=idea_id,
                title=title,
                principle=principle,
                source="starter",
                techniques=sorted({t[0] for t in thoughts}),
            )
        )
        for technique, operator, t_title, description, example in thoughts:
            tid = f"{idea_id}:{technique.value}:{operator}"
            isa = Isa.RVV if "__riscv_" in example else Isa.GENERIC
            nodes.append(
                Thought(
                    id=tid,
                    idea_id=idea_id,
                    title=t_title,
                    description=description,
                    example_code=example,
                    identifiers=" ".join(w for w in example.replace("(", " ").split() if w.startswith("__riscv")),
                    technique=technique,
                    isa=isa,
                    operator=Operator(operator),
                    source="starter",
                )
            )
            rels.append(
                Relationship(
                    type="HAS_THOUGHT", start_label="Idea", start_key=idea_id, end_label="Thought", end_key=tid
                )
            )
    return nodes, rels
