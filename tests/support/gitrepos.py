"""Build small, real git repositories with GitPython for the miner tests.

`build_kernel_repo(path)` makes a history with RVV, AVX2 and NEON optimization commits, a bug fix, docs-only
and test-only commits, a binary file, a non-UTF-8 message, a rename, an empty commit, a merge and a 50 MB
diff. `EXPECTED` lists each commit's title with the classification the miner must give it.
"""

from __future__ import annotations

import os
from pathlib import Path

import git

RVV_DOT = """#include <riscv_vector.h>
float dot_rvv(const float *x, const float *y, long n) {
    size_t vlmax = __riscv_vsetvlmax_e32m4();
    vfloat32m4_t acc = __riscv_vfmv_v_f_f32m4(0.0f, vlmax);
    for (long i = 0; i < n;) {
        size_t vl = __riscv_vsetvl_e32m4(n - i);
        vfloat32m4_t vx = __riscv_vle32_v_f32m4(x + i, vl);
        vfloat32m4_t vy = __riscv_vle32_v_f32m4(y + i, vl);
        acc = __riscv_vfmacc_vv_f32m4_tu(acc, vx, vy, vl);
        i += vl;
    }
    vfloat32m1_t zero = __riscv_vfmv_s_f_f32m1(0.0f, 1);
    vfloat32m1_t sum = __riscv_vfredusum_vs_f32m4_f32m1(acc, zero, vlmax);
    float r = __riscv_vfmv_f_s_f32m1_f32(sum);
    vfloat32m1_t again = __riscv_vfredusum_vs_f32m4_f32m1(acc, zero, vlmax);
    (void)again;
    return r;
}
"""

AVX2_GEMV = """#include <immintrin.h>
void sgemv_t_haswell(long m, long n, const float *a, long lda, const float *x, float *y) {
    for (long j = 0; j < n; j++) {
        __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
        __m256 acc2 = _mm256_setzero_ps(), acc3 = _mm256_setzero_ps();
        long i = 0;
        for (; i + 32 <= m; i += 32) {
            acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + j * lda + i), _mm256_loadu_ps(x + i), acc0);
            acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + j * lda + i + 8), _mm256_loadu_ps(x + i + 8), acc1);
            acc2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + j * lda + i + 16), _mm256_loadu_ps(x + i + 16), acc2);
            acc3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + j * lda + i + 24), _mm256_loadu_ps(x + i + 24), acc3);
        }
        __m256 s = _mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3));
        float t[8];
        _mm256_storeu_ps(t, s);
        y[j] += t[0] + t[1] + t[2] + t[3] + t[4] + t[5] + t[6] + t[7];
    }
}
"""

NEON_AXPY = """#include <arm_neon.h>
void saxpy_neon(long n, float a, const float *x, float *y) {
    float32x4_t va = vdupq_n_f32(a);
    long i = 0;
    for (; i + 16 <= n; i += 16) {
        __builtin_prefetch(x + i + 64);
        __builtin_prefetch(y + i + 64);
        vst1q_f32(y + i, vfmaq_f32(vld1q_f32(y + i), va, vld1q_f32(x + i)));
        vst1q_f32(y + i + 4, vfmaq_f32(vld1q_f32(y + i + 4), va, vld1q_f32(x + i + 4)));
        vst1q_f32(y + i + 8, vfmaq_f32(vld1q_f32(y + i + 8), va, vld1q_f32(x + i + 8)));
        vst1q_f32(y + i + 12, vfmaq_f32(vld1q_f32(y + i + 12), va, vld1q_f32(x + i + 12)));
    }
    for (; i < n; i++) y[i] += a * x[i];
}
"""

SCALAR_DOT = """float dot(const float *x, const float *y, long n) {
    float s = 0.0f;
    for (long i = 0; i < n; i++) s += x[i] * y[i];
    return s;
}
"""

RVV_SCAL = """#include <riscv_vector.h>
void sscal_rvv(long n, float a, float *x) {
    for (long i = 0; i < n;) {
        size_t vl = __riscv_vsetvl_e32m8(n - i);
        vfloat32m8_t v = __riscv_vle32_v_f32m8(x + i, vl);
        __riscv_vse32_v_f32m8(x + i, __riscv_vfmul_vf_f32m8(v, a, vl), vl);
        i += vl;
    }
}
"""

# title -> (is_optimization, isas, operators, techniques); None where only "not an optimization" matters.
EXPECTED: dict[str, tuple[bool, list[str], list[str], list[str]]] = {
    "Initial scalar kernels": (False, [], [], []),
    "Optimize sdot with RVV intrinsics, 2.1x faster": (
        True,
        ["rvv"],
        ["dot"],
        ["vectorize", "vector_length", "reduction"],
    ),
    "Speed up sgemv_t with AVX2 FMA and four accumulators": (
        True,
        ["avx2"],
        ["gemv"],
        ["vectorize", "unroll", "multi_accumulator", "fusion"],
    ),
    "arm64: unroll saxpy by 16 and prefetch ahead (35% faster)": (
        True,
        ["neon"],
        ["axpy"],
        ["vectorize", "unroll", "prefetch"],  # its vfmaq replaces scalar code, not a separate mul + add
    ),
    "Fix wrong result in RVV dot tail": (False, [], [], []),
    "Update README with build instructions": (False, [], [], []),
    "Add unit tests for dot": (False, [], [], []),
    "Add logo": (False, [], [], []),
    "Caf?: tidy kernel comments": (False, [], [], []),  # Latin-1 byte: decoded, never a crash
    "Rename dot_rvv.c to dot_vector.c": (False, [], [], []),
    "Empty commit": (False, [], [], []),
    "Vectorize sscal with RVV": (True, ["rvv"], ["elementwise"], ["vectorize"]),
    "Raise sscal LMUL from m1 to m8 for throughput": (True, ["rvv"], ["elementwise"], ["vector_length"]),
    "Merge branch 'rvv-scal'": (False, [], [], []),
    "Add generated exp table": (False, [], [], []),
}


def _commit(repo: git.Repo, message: str, files: dict[str, str | bytes], when: int) -> str:
    root = Path(repo.working_tree_dir or ".")
    for rel, content in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            p.write_bytes(content)
        else:
            p.write_text(content)
        repo.index.add([rel])
    stamp = f"{when} +0000"
    return repo.index.commit(message, author_date=stamp, commit_date=stamp).hexsha


def _env(when: int) -> dict[str, str]:
    stamp = f"{when} +0000"
    return {"GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp}


def init_repo(path: Path) -> git.Repo:
    repo = git.Repo.init(path, initial_branch="main")
    with repo.config_writer() as cw:
        cw.set_value("user", "name", "Test Author")
        cw.set_value("user", "email", "test@example.org")
        cw.set_value("commit", "gpgsign", "false")
    return repo


def build_kernel_repo(path: Path, huge_mb: int = 50) -> git.Repo:
    repo = init_repo(path)
    t = 1_700_000_000
    _commit(repo, "Initial scalar kernels", {"kernel/generic/dot.c": SCALAR_DOT, "README.md": "# k\n"}, t)
    _commit(
        repo,
        "Optimize sdot with RVV intrinsics, 2.1x faster\n\nUses LMUL=4 and one reduction at the end.",
        {"kernel/riscv64/dot_rvv.c": RVV_DOT},
        t + 10,
    )
    _commit(
        repo,
        "Speed up sgemv_t with AVX2 FMA and four accumulators",
        {"kernel/x86_64/sgemv_t_haswell.c": AVX2_GEMV},
        t + 20,
    )
    _commit(
        repo,
        "arm64: unroll saxpy by 16 and prefetch ahead (35% faster)",
        {"kernel/arm64/saxpy_neon.c": NEON_AXPY},
        t + 30,
    )
    _commit(
        repo,
        "Fix wrong result in RVV dot tail",
        {"kernel/riscv64/dot_rvv.c": RVV_DOT.replace("return r;", "return r + 0.0f;")},
        t + 40,
    )
    _commit(repo, "Update README with build instructions", {"README.md": "# k\n\nmake\n"}, t + 50)
    _commit(repo, "Add unit tests for dot", {"tests/test_dot.c": "int main(void) { return 0; }\n"}, t + 60)
    _commit(repo, "Add logo", {"docs/logo.png": bytes(range(256)) * 64}, t + 70)
    # A Latin-1 message without an encoding header: git keeps the raw bytes.
    root = Path(repo.working_tree_dir or ".")
    (root / "kernel/generic/dot.c").write_text(SCALAR_DOT + "/* tidy */\n")
    repo.index.add(["kernel/generic/dot.c"])
    msg = root.parent / f"{root.name}-msg.txt"
    msg.write_bytes(b"Caf\xe9: tidy kernel comments\n")
    repo.git.commit("-F", str(msg), "--cleanup=verbatim", env=_env(t + 80))
    repo.git.mv("kernel/riscv64/dot_rvv.c", "kernel/riscv64/dot_vector.c")
    repo.git.commit("-m", "Rename dot_rvv.c to dot_vector.c", env=_env(t + 90))
    repo.git.commit("--allow-empty", "-m", "Empty commit", env=_env(t + 100))
    main_head = repo.head.commit
    feature = repo.create_head("rvv-scal", main_head)
    feature.checkout()
    _commit(
        repo,
        "Vectorize sscal with RVV",
        {"kernel/riscv64/scal_rvv.c": RVV_SCAL.replace("e32m8", "e32m1").replace("f32m8", "f32m1")},
        t + 110,
    )
    _commit(repo, "Raise sscal LMUL from m1 to m8 for throughput", {"kernel/riscv64/scal_rvv.c": RVV_SCAL}, t + 115)
    repo.heads.main.checkout()
    repo.git.merge("--no-ff", "rvv-scal", "-m", "Merge branch 'rvv-scal'", env=_env(t + 120))
    line = "  0x3f800000, 0x3f800001, 0x3f800002, 0x3f800003, 0x3f800004, 0x3f800005, 0x3f800006,\n"
    big = "static const unsigned exp_table[] = {\n" + line * (huge_mb * 1024 * 1024 // len(line)) + "};\n"
    _commit(repo, "Add generated exp table", {"kernel/generic/exp_table.c": big}, t + 130)
    os.remove(msg)
    return repo


def add_commit(repo: git.Repo, message: str, files: dict[str, str], when: int) -> str:
    return _commit(repo, message, files, when)


def amend_head(repo: git.Repo, message: str, when: int) -> str:
    """Rewrite the newest commit (same tree, new message and date): history the miner saw is gone."""
    repo.git.commit("--amend", "-m", message, env=_env(when))
    return repo.head.commit.hexsha


# ---------------------------------------------------------------------------------------------------------
# A ggml-like history for ISA attribution, claims and example hunks.

LICENCE = "".join(f"// Copyright (c) 2024 The Authors. Licensed under the MIT licence, line {i}.\n" for i in range(12))


def _rvv_q8_dot(prefix: str, chains: int = 2) -> str:
    """An RVV int8 dot product written with intrinsics named `prefix` + name ("" = pre-1.0 names)."""
    p = prefix
    body = "".join(
        f"        vint8m1_t a{k} = {p}vle8_v_i8m1(x + i + {16 * k}, vl);\n"
        f"        vint8m1_t b{k} = {p}vle8_v_i8m1(y + i + {16 * k}, vl);\n"
        f"        acc{k} = {p}vwmacc_vv_i16m2(acc{k}, a{k}, b{k}, vl);\n"
        for k in range(chains)
    )
    return (
        "#include <riscv_vector.h>\n"
        "int dot_q8_rvv(const signed char *x, const signed char *y, int n) {\n"
        f"    size_t vl = {p}vsetvl_e8m1(16);\n"
        f"    vint16m2_t acc0 = {p}vmv_v_x_i16m2(0, vl), acc1 = acc0, acc2 = acc0, acc3 = acc0;\n"
        f"    for (int i = 0; i < n; i += {16 * chains}) {{\n" + body + "    }\n"
        f"    vint32m1_t zero = {p}vmv_v_x_i32m1(0, 1);\n"
        f"    vint32m1_t s = {p}vwredsum_vs_i16m2_i32m1(acc0, zero, vl);\n"
        f"    return {p}vmv_x_s_i32m1_i32(s);\n"
        "}\n"
    )


DISPATCH = """void ggml_vec_dot_q8(int n, float *s, const void *x, const void *y) {
#if defined(__ARM_NEON)
    *s = ggml_vec_dot_q8_arm(n, x, y);
#elif defined(__AVX2__)
    *s = ggml_vec_dot_q8_x86(n, x, y);
#elif defined(__riscv_v_intrinsic)
    *s = dot_q8_rvv(x, y, n);
#else
    *s = ggml_vec_dot_q8_generic(n, x, y);
#endif
}
"""

NEON_SILU = """#include <arm_neon.h>
void silu_f32_neon(int n, float *y, const float *x) {
    for (int i = 0; i + 8 <= n; i += 8) {
        float32x4_t x0 = vld1q_f32(x + i), x1 = vld1q_f32(x + i + 4);
        float32x4_t e0 = vexpq_f32(vnegq_f32(x0)), e1 = vexpq_f32(vnegq_f32(x1));
        vst1q_f32(y + i, vdivq_f32(x0, vaddq_f32(vdupq_n_f32(1.0f), e0)));
        vst1q_f32(y + i + 4, vdivq_f32(x1, vaddq_f32(vdupq_n_f32(1.0f), e1)));
    }
}
"""

AVX2_SILU = """#include <immintrin.h>
void silu_f32_avx2(int n, float *y, const float *x) {
    for (int i = 0; i + 16 <= n; i += 16) {
        __m256 x0 = _mm256_loadu_ps(x + i), x1 = _mm256_loadu_ps(x + i + 8);
        __m256 e0 = exp256_ps(_mm256_sub_ps(_mm256_setzero_ps(), x0));
        __m256 e1 = exp256_ps(_mm256_sub_ps(_mm256_setzero_ps(), x1));
        _mm256_storeu_ps(y + i, _mm256_div_ps(x0, _mm256_add_ps(_mm256_set1_ps(1.0f), e0)));
        _mm256_storeu_ps(y + i + 8, _mm256_div_ps(x1, _mm256_add_ps(_mm256_set1_ps(1.0f), e1)));
    }
}
"""

AVX2_CVT = """#include <immintrin.h>
void fp16_to_fp32_row(const unsigned short *x, float *y, int n) {
    for (int i = 0; i + 8 <= n; i += 8) {
        __m128i h = _mm_loadu_si128((const __m128i *)(x + i));
        _mm256_storeu_ps(y + i, _mm256_cvtph_ps(h));
        __m128i h2 = _mm_loadu_si128((const __m128i *)(x + i + 8));
        _mm256_storeu_ps(y + i + 8, _mm256_cvtph_ps(h2));
    }
}
"""

# title -> (isas, operators) the miner must give each optimization of build_attribution_repo
ATTRIBUTION: dict[str, tuple[list[str], list[str]]] = {
    "ggml : faster q8_0 dot on SpacemiT X60 (1.6x vs the x86 port, X100 too)": (["rvv"], ["quant_dot"]),
    "ggml : speed up fp16 conversion with AVX2, 2x faster": (["avx2"], ["quantize"]),
    "ggml : vectorize silu for NEON and AVX2 (1.3x faster)": (["avx2", "neon"], ["activation"]),
}
RENAME_TITLE = "riscv: use the __riscv_ prefixed RVV 1.0 intrinsics"


def build_attribution_repo(path: Path) -> git.Repo:
    """Old-style RVV code, its rename to `__riscv_` names, a multi-ISA dispatch change with X60/x86/X100 in
    the message, a type conversion, and one commit with NEON and AVX2 code (behind a licence header)."""
    repo = init_repo(path)
    t = 1_710_000_000
    rv, cpu = "ggml/src/ggml-cpu/arch/riscv/quants.c", "ggml/src/ggml-cpu/quants.c"
    _commit(repo, "ggml : initial CPU backend", {cpu: "// dispatch\n", rv: _rvv_q8_dot("")}, t)
    _commit(repo, RENAME_TITLE, {rv: _rvv_q8_dot("__riscv_")}, t + 10)
    _commit(
        repo,
        "ggml : faster q8_0 dot on SpacemiT X60 (1.6x vs the x86 port, X100 too)\n\n"
        "Four independent widening accumulators hide the vwmacc latency on the X60 cores.\n",
        {cpu: DISPATCH, rv: _rvv_q8_dot("__riscv_", chains=4)},
        t + 20,
    )
    _commit(
        repo,
        "ggml : speed up fp16 conversion with AVX2, 2x faster",
        {"ggml/src/ggml-cpu/arch/x86/convert.c": AVX2_CVT},
        t + 30,
    )
    _commit(
        repo,
        "ggml : vectorize silu for NEON and AVX2 (1.3x faster)",
        {
            "ggml/src/ggml-cpu/arch/arm/vec.c": LICENCE + NEON_SILU,
            "ggml/src/ggml-cpu/arch/x86/vec.c": LICENCE + AVX2_SILU,
        },
        t + 40,
    )
    return repo
