"""Classifier, ISA/operator/technique detection and perf-claim parsing on real git repositories."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from miners import gitwalk
from miners.classify import detect_operators, needs_line_counts, parse_perf_claims, speed_words, triage
from miners.pipeline import classify_commits
from miners.profiles import GENERIC, GGML, ONNXRUNTIME, OPENBLAS, PROFILES, detect_library, file_kind
from tests.support.gitrepos import EXPECTED, RVV_DOT, _commit, build_kernel_repo, init_repo


@pytest.fixture(scope="module")
def kernel_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("kernels") / "repo"
    build_kernel_repo(path)
    return path


def _walk(path: Path) -> tuple[list, gitwalk.WalkWarnings]:
    """The miner's own walk -> triage -> patches -> classification path, without a graph."""
    handle = gitwalk.open_repository(str(path), path / "cache")
    warnings = gitwalk.WalkWarnings()
    mined = classify_commits(handle, OPENBLAS, gitwalk.walk_commits(handle, ["HEAD"], warnings), warnings)
    return mined, warnings


def _walk_raw(path: Path) -> tuple[list, gitwalk.WalkWarnings]:
    """The path `eok mine` takes: a --raw walk, line counts read only for commits that may be candidates."""
    handle = gitwalk.open_repository(str(path), path / "cache")
    warnings = gitwalk.WalkWarnings()
    raws = gitwalk.walk_commits(handle, ["HEAD"], warnings, line_counts=False)
    return classify_commits(handle, OPENBLAS, raws, warnings, keep_all=False), warnings


def _verdicts(mined: list) -> list[tuple]:
    return [
        (m.raw.sha, m.raw.files, m.raw.damaged, m.classification.score, m.classification.reasons, m.triage.patch_paths)
        for m in mined
    ]


def _key(title: str) -> str:
    return "Caf?: tidy kernel comments" if title.endswith(": tidy kernel comments") else title


def test_every_commit_is_classified_exactly(kernel_repo: Path) -> None:
    mined, warnings = _walk(kernel_repo)
    got = {
        _key(m.raw.title): (
            m.classification.is_optimization,
            [str(i) for i in m.classification.isas],
            [str(o) for o in m.classification.operators],
            [str(t) for t in m.classification.techniques],
        )
        for m in mined
    }
    assert got == {k: tuple(v) for k, v in EXPECTED.items()}
    assert warnings.messages == []


def test_reasons_explain_the_score(kernel_repo: Path) -> None:
    mined, _ = _walk(kernel_repo)
    by_title = {m.raw.title: m.classification for m in mined}
    rvv = by_title["Optimize sdot with RVV intrinsics, 2.1x faster"]
    assert rvv.perf_claims == [2.1]
    assert any("claims speedup 2.1x" in r for r in rvv.reasons)
    assert rvv.score == pytest.approx(sum(float(r.split(" ", 1)[0]) for r in rvv.reasons))
    fix = by_title["Fix wrong result in RVV dot tail"]
    assert any("fix/revert" in r for r in fix.reasons) and not fix.is_optimization
    assert by_title["Update README with build instructions"].reasons == ["changes no source code (only doc files)"]
    assert "merge commit" in by_title["Merge branch 'rvv-scal'"].reasons[0]


def test_walk_reads_renames_binaries_empty_and_huge_commits(kernel_repo: Path) -> None:
    mined, _ = _walk(kernel_repo)
    by_title = {m.raw.title: m.raw for m in mined}
    assert len(mined) == len(EXPECTED)
    rename = by_title["Rename dot_rvv.c to dot_vector.c"]
    assert [(f.old_path, f.path) for f in rename.files] == [("kernel/riscv64/dot_rvv.c", "kernel/riscv64/dot_vector.c")]
    logo = by_title["Add logo"].files[0]
    assert logo.binary and logo.insertions == 0
    assert by_title["Empty commit"].files == []
    huge = by_title["Add generated exp table"]
    assert huge.insertions > 600_000  # 50 MB of lines: counted, but its patch is never read
    assert len(by_title["Merge branch 'rvv-scal'"].parents) == 2
    latin = next(m.raw for m in mined if m.raw.title.endswith(": tidy kernel comments"))
    assert latin.title.startswith("Caf")


def test_walk_survives_missing_objects(tmp_path: Path) -> None:
    repo = build_kernel_repo(tmp_path / "broken", huge_mb=1)
    blob = repo.commit("HEAD~6").tree / "kernel/arm64/saxpy_neon.c"  # written by the NEON commit
    obj = Path(repo.git_dir) / "objects" / blob.hexsha[:2] / blob.hexsha[2:]
    obj.unlink()
    mined, warnings = _walk(tmp_path / "broken")
    assert len(mined) == len(EXPECTED)  # nothing lost but the unreadable line counts
    assert any(blob.hexsha in w for w in warnings.messages), warnings.messages
    damaged = [m for m in mined if m.raw.damaged]
    assert damaged and all("unreadable" in m.classification.reasons[-1] for m in damaged)


def test_walk_without_line_counts_lists_the_same_files(kernel_repo: Path) -> None:
    handle = gitwalk.open_repository(str(kernel_repo), kernel_repo / "cache")
    warnings = gitwalk.WalkWarnings()
    counted = list(gitwalk.walk_commits(handle, ["HEAD"], warnings))
    raw = list(gitwalk.walk_commits(handle, ["HEAD"], warnings, line_counts=False))
    assert [(r.sha, [(f.path, f.old_path) for f in r.files]) for r in raw] == [
        (r.sha, [(f.path, f.old_path) for f in r.files]) for r in counted
    ]
    assert all(r.counted for r in counted) and not any(r.counted for r in raw)
    assert any(f.old_path for r in raw for f in r.files)  # the rename is seen without diffing a blob


def test_mining_without_line_counts_gives_every_verdict_unchanged(kernel_repo: Path) -> None:
    full, _ = _walk(kernel_repo)
    mined, warnings = _walk_raw(kernel_repo)
    assert _verdicts(mined) == _verdicts([m for m in full if m.triage.candidate])
    assert mined and all(m.raw.counted for m in mined) and warnings.messages == []


def test_a_new_kernel_file_is_read_for_its_line_counts(tmp_path: Path) -> None:
    """Line counts feed one signal (a kernel file added whole): a commit that only it makes a candidate
    is found although the walk reads no line counts."""
    repo = init_repo(tmp_path / "repo")
    _commit(repo, "Initial", {"README.md": "# k\n"}, 1_700_000_000)
    kernel = RVV_DOT + "".join(f"// step {i}\n" for i in range(15))  # >= 30 lines, all new
    sha = _commit(repo, "Cleanup kernel code", {"kernel/riscv64/scal_rvv.c": kernel}, 1_700_000_100)
    handle = gitwalk.open_repository(str(tmp_path / "repo"), tmp_path)
    warnings = gitwalk.WalkWarnings()
    raw = next(iter(gitwalk.walk_commits(handle, ["HEAD"], warnings, line_counts=False)))
    without = triage(raw, OPENBLAS, 3000)
    assert raw.sha == sha and not without.candidate and needs_line_counts(raw, without)
    mined, _ = _walk_raw(tmp_path / "repo")
    assert [m.raw.sha for m in mined] == [sha]
    assert any("adds kernel file kernel/riscv64/scal_rvv.c" in r for r in mined[0].classification.reasons)


def test_mining_without_line_counts_survives_missing_objects(tmp_path: Path) -> None:
    repo = build_kernel_repo(tmp_path / "broken", huge_mb=1)
    neon = repo.commit("HEAD~9")  # the NEON saxpy commit, a candidate: its line counts need the blob
    blob = neon.tree / "kernel/arm64/saxpy_neon.c"
    (Path(repo.git_dir) / "objects" / blob.hexsha[:2] / blob.hexsha[2:]).unlink()
    full, _ = _walk(tmp_path / "broken")
    mined, warnings = _walk_raw(tmp_path / "broken")
    assert _verdicts(mined) == _verdicts([m for m in full if m.triage.candidate])
    assert any(blob.hexsha in w and neon.hexsha[:12] in w for w in warnings.messages), warnings.messages
    assert [m.raw.sha for m in mined if m.raw.damaged] == [neon.hexsha]


def test_patch_batch_resumes_after_a_missing_object(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One unreadable blob costs two extra git processes, not one per commit of its batch."""
    repo = build_kernel_repo(tmp_path / "broken", huge_mb=1)
    neon = repo.commit("HEAD~9")  # the NEON saxpy commit: it wrote the blob removed below
    blob = neon.tree / "kernel/arm64/saxpy_neon.c"
    (Path(repo.git_dir) / "objects" / blob.hexsha[:2] / blob.hexsha[2:]).unlink()
    handle = gitwalk.open_repository(str(tmp_path / "broken"), tmp_path)
    warnings = gitwalk.WalkWarnings()
    raws = [r for r in gitwalk.walk_commits(handle, ["HEAD"], warnings) if not r.is_merge]
    reqs = [
        gitwalk.PatchRequest(
            r.sha, tuple(f.path for f in r.files if f.path.startswith("kernel/") and f.insertions < 3000)
        )
        for r in raws
    ]
    reqs = [r for r in reqs if r.paths]
    trace = tmp_path / "git-trace.log"
    monkeypatch.setenv("GIT_TRACE", str(trace))
    patches = gitwalk.fetch_patches(handle, reqs, warnings, max_bytes=400_000)
    assert trace.read_text().count("built-in: git log") == 3  # the batch, the bad commit alone, the rest
    assert patches[neon.hexsha] == "" and any(
        neon.hexsha[:12] in w and "patch unreadable" in w for w in warnings.messages
    )
    good = [r.sha for r in reqs if r.sha != neon.hexsha]
    assert len(good) >= 7 and all(patches[s].startswith("\ndiff --git") for s in good)
    assert "__riscv_vfredusum" in patches[repo.commit("HEAD~11").hexsha]  # the RVV sdot commit, after the bad one


def test_early_walk_is_adopted_only_for_the_same_whole_history(kernel_repo: Path, tmp_path: Path) -> None:
    handle = gitwalk.open_repository(str(kernel_repo), tmp_path)
    head = gitwalk.resolve_rev(handle, "HEAD")
    assert head is not None
    early = gitwalk.EarlyWalk.start(str(kernel_repo))
    assert early is not None and early.head == head and early.git_dir == handle.git_dir
    started = early.adopt(handle, [head], None)
    assert started is early.stream
    warnings = gitwalk.WalkWarnings()
    walked = [c.title for c in gitwalk.walk_commits(handle, [head], warnings, started=started)]
    assert len(walked) == len(EXPECTED) and walked[0] == "Add generated exp table"
    # An incremental run walks less: the early process is stopped, not read.
    other = gitwalk.EarlyWalk.start(str(kernel_repo))
    assert other is not None
    assert other.adopt(handle, [head, f"^{head}~3"], None) is None
    assert other.stream.proc.poll() is not None
    assert gitwalk.EarlyWalk.start(str(tmp_path)) is None  # not a repository: the miner reports it
    assert gitwalk.EarlyWalk.start("https://example.org/x.git") is None


@pytest.mark.parametrize(
    ("text", "claims"),
    [
        ("sgemm: 1.8x faster on K1", [1.8]),
        ("this makes dgemv 35% faster", [1.35]),
        ("improves from 10 to 14 GFLOPS", [1.4]),
        ("latency from 10 ms to 5 ms", [2.0]),
        ("speedup of 20% for small sizes", [1.2]),
        ("add 16x8 kernel", []),
        ("bump to version 0.3.28", []),
        ("about 3 times faster", [3.0]),
        ("10% slower but correct", []),
        # signed gains in a benchmark table count; the loss next to them does not
        ("Benchmarks (MI300X):\n  pp512  +7%,  pp4096 +39%\n  tg128  -10%", [1.07, 1.39]),
        ("coverage +5% after the new tests", []),  # no word about speed: not a claim
        ("sgemv: x1.5 faster on small matrices", [1.5]),
        ("~2x speedup for q4_0 on Zen 4", [2.0]),
        ("use a 4x4 tile, x4 unrolled", []),
    ],
)
def test_perf_claims(text: str, claims: list[float]) -> None:
    assert parse_perf_claims(text) == claims


def test_library_profiles_know_kernel_paths() -> None:
    assert OPENBLAS.kernel_arch("kernel/riscv64/dot_vector.c") == "riscv64"
    assert GGML.kernel_arch("ggml/src/ggml-cpu/arch/riscv/quants.c") == "riscv"
    assert GGML.kernel_arch("src/ggml-quants.c") == ""
    assert ONNXRUNTIME.kernel_arch("onnxruntime/core/mlas/lib/riscv64/SgemmKernelRvv.cpp") == "riscv64"
    assert GENERIC.kernel_arch("src/arch/x86_64/gemm.c") == "x86_64"
    assert file_kind("lapack-netlib/SRC/dgetrf.f", OPENBLAS) == "vendored"
    assert file_kind("ctest/c_dblat1.f", OPENBLAS) == "test"
    assert file_kind("docs/index.md", OPENBLAS) == "doc"
    assert file_kind("CMakeLists.txt", OPENBLAS) == "build"
    assert detect_library("whatever", {"kernel", "param.h", "driver/level3"}) is OPENBLAS
    assert detect_library("ggml-org/llama.cpp", set()) is GGML
    assert set(PROFILES) == {"openblas", "ggml", "onnxruntime", "generic"}


# ---------------------------------------------------------------------------------------------------------
# Message and path signals, each on a real commit of a repository built here.

# Two FMAs and two prefetches per line group, the prefetch distances as format fields.
HASWELL_ASM = "".join(
    f"    vfmadd231pd %ymm{i}, %ymm{i + 4}, %ymm{i + 8}\n    prefetcht0 {{a}}(%rax)\n    prefetcht0 {{b}}(%rbx)\n"
    for i in range(4)
)


SIGNAL_COMMITS: dict[str, dict[str, str]] = {
    "enabled smp for ger.c and zger.c, but only for 64bit binaries": {
        "interface/ger.c": "#ifdef SMP\n#define SMPTEST 1\n#endif\nint nthreads;\n",
    },
    "Add option USE_LOCKING for single-threaded build with locking support": {
        "driver/others/memory.c": "#ifdef USE_LOCKING\nstatic int lock;\n#endif\n",
    },
    "vulkan: disable FA mask_opt on GCN to improve performance": {
        "src/ggml-vulkan/ggml-vulkan.cpp": "bool use_mask_opt = device->architecture != GCN;\n",
    },
    "vulkan: Add perf logger mode with concurrency\n\nTimes groups of work to see whether single ops need "
    "to be optimized.": {
        "src/ggml-vulkan/ggml-vulkan.cpp": "static bool perf_logger_concurrent = false;\n",
    },
    "metal : add opt_step_adamw and op_sum": {
        "src/ggml-metal/ggml-metal.metal": "kernel void kernel_opt_step_adamw_f32() {}\n",
    },
    "POWER9: Use default param values from POWER8 on AIX\n\nAIX uses KERNEL.POWER8 optimization on POWER9.": {
        "param.h": "#define SGEMM_DEFAULT_P 832\n",
    },
    "sycl: remove redundant memcopy in ggml_backend_sycl_buffer_set_tensor": {
        "src/ggml-sycl/ggml-sycl.cpp": "queue.memcpy(dst, src, size);\n",
    },
    "hexagon: add support for Q4_1 in MUL_MAT\n\n* fix typo\n* Fix review comments": {
        "src/ggml-hexagon/ggml-hexagon.cpp": "case GGML_TYPE_Q4_1: return true;\n",
    },
    "Update level3_gemm3m_thread.c": {
        "driver/level3/level3_gemm3m_thread.c": "min_jj = 3 * GEMM3M_UNROLL_N;\n",
    },
    # classifier v3 classes (docs/MINERS.md "Precision and recall")
    "Use a single thread for small input size": {
        "interface/zaxpy.c": "if (n <= 10000) nthreads = 1;\nelse nthreads = blas_cpu_number;\n",
    },
    "turn on optimized code": {
        "lapack-netlib/SRC/Makefile": "DLAPACKOBJS = dgetrf.o dgetrs.o dpotrf.o dtrtrs.o\n",
    },
    "POWER10: use unaligned vector loads for correctness": {
        "kernel/power/dcopy_power10.c": "".join(f"v{i} = vec_xl(0, x + {2 * i});\n" for i in range(12)),
    },
    "opencl: add q4_K gemm and gemv kernels for Adreno": {
        "src/ggml-opencl/kernels/gemv_q4_k.cl": "kernel void gemv_q4_k(global float * y) { y[0] = 0.0f; }\n",
        "src/ggml-opencl/ggml-opencl.cpp": "if (is_adreno) kernel = backend->kernel_gemv_q4_k;\n",
    },
    "metal : fix q5_k mul_mv register spill": {
        "src/ggml-metal/ggml-metal.metal": "float4 sumf = 0.f; // one accumulator: no spill\n",
    },
    "ggml-cpu: fuse RMS_NORM + MUL": {
        "src/ggml-cpu/ops.cpp": "static void rms_norm_mul_f32(const float * x, const float * w, float * y);\n",
    },
    "CUDA: check for buffer overlap before fusing": {
        "src/ggml-cuda/ggml-cuda.cu": "if (ggml_cuda_buffers_overlap(a, b)) return false;\n",
    },
    "metal : add CONV_2D_DW support\n\nAdds perf cases to test-backend-ops; faster than the CPU fallback.": {
        "src/ggml-metal/ggml-metal.metal": "kernel void kernel_conv_2d_dw(device float * dst) { dst[0] = 0; }\n",
    },
    "ggml : sync llama.cpp (Q9_X)": {
        "src/ggml.h": "    GGML_TYPE_Q9_X = 99,\n",
        "src/ggml-quants.c": "".join(
            f"acc = _mm256_fmadd_ps(_mm256_loadu_ps(x + {8 * i}), y, acc);\n" for i in range(10)
        ),
    },
    "vulkan : incremental shader builds\n\nAvoid recompiling the shaders that did not change.": {
        "src/ggml-vulkan/vulkan-shaders/vulkan-shaders-gen.cpp": "if (up_to_date(src, spv)) continue;\n",
    },
    "ggml-cpu: speed up the q4_0 dot product\n\n* fix the tail handling": {
        "src/ggml-cpu/arch/x86/quants.c": "for (; i + 32 <= n; i += 32) { sum += dot32(x + i, y + i); }\n",
    },
    "whisper : don't compute token timestamps when they are not printed": {
        "src/whisper-main.cpp": "wparams.token_timestamps = params.output_timestamps;\n",
    },
    # classifier v4 classes (docs/MINERS.md "Precision and recall")
    "Add dgemm kernel 4x8 for Haswell": {"kernel/x86_64/dgemm_kernel_4x8_haswell.S": HASWELL_ASM.format(a=256, b=384)},
    "Update dgemm_kernel_4x8_haswell.S": {"kernel/x86_64/dgemm_kernel_4x8_haswell.S": HASWELL_ASM.format(a=512, b=640)},
    "Update Makefile.system": {"Makefile.system": "NUM_THREADS = 64\nBUFFER_SIZE = 32 << 20\n"},
    "Update Makefile.system for the new buffer": {"Makefile.system": "NUM_THREADS = 128\nBUFFER_SIZE = 64 << 20\n"},
    "Improve the z14 SGEMVT kernel": {
        "sgemv_t_z14.c": "".join(f"vsum{i % 4} = vec_madd(va{i}, vx{i}, vsum{i % 4});\n" for i in range(12)),
    },
    "Improve the accuracy of the exp kernel": {
        "kernel/x86_64/exp_haswell.c": "".join(f"p = _mm256_fmadd_ps(p, x, c{i});\n" for i in range(10)),
    },
    "CUDA: small mul_mat_vec optimizations": {
        "src/ggml-cuda/mmv.cu": "const int nwarps = ncols <= 1024 ? 2 : 4; // fewer idle warps\n",
    },
    "ggml : group all experts in a single mul_mat_id": {
        "src/ggml-cpu/ops.cpp": "ggml_compute_forward_mul_mat_id_all(params, dst, ids, n_as);\n",
    },
    "ggml : scale caching for k quants + misc fixes": {
        "src/ggml-cpu/arch/x86/quants.c": "".join(
            f"const __m256 d{i} = _mm256_set1_ps(x[{i}].d * y[{i}].d); // cached scale\n" for i in range(10)
        ),
    },
    "ggml : fix crash in the q4_0 dot + cleanup": {
        "src/ggml-cpu/arch/x86/quants.c": "".join(f"acc = _mm256_add_ps(acc, p{i});\n" for i in range(10)),
    },
    # classifier v5 classes (tuned on blind5's misses; docs/MINERS.md "Precision and recall")
    "Return the buffer pointer when OpenMP or Windows": {
        "driver/others/blas_server_omp.c": "if (omp_in_parallel()) return sb;\n",
    },
    "SYCL: disable reorder optimization by default (llama/1)": {
        "src/ggml-sycl/ggml-sycl.cpp": "static bool reorder = false; // off: it broke some models\n",
    },
    "[CUDA] MatMulNBits benchmark (#2)\n\nMeasures latency and performance of the 8-bit kernel.": {
        "onnxruntime/contrib_ops/cuda/quantization/matmul_8bits.cu": "__global__ void k(int * packed) {}\n",
    },
    "llama : minor fixes for up llama load model speed (#3)\n\nunordered_map for the bpe ranks.": {
        "src/llama-vocab.cpp": "std::unordered_map<std::string, int> bpe_ranks;\n",
    },
    "unet fusion for stable diffusion webui (#4)\n\nSpeed up the fp16 unet; fixes the shape lookup.": {
        "onnxruntime/core/optimizer/attention_fusion.cc": "if (IsFusable(node)) FuseAttention(graph, node);\n",
    },
    # classifier v6/v7 classes (docs/MINERS.md, blind7-blind9): each a made-up commit of the class
    "Mul/Relu fusion - more patterns (#5)": {
        "onnxruntime/core/optimizer/mul_relu_fusion.cc": "bool MulReluFusion::SatisfyCondition() { return true; }\n",
    },
    "Add TensorRT perf tool (#6)\n\nMeasures the performance of engines.": {
        "onnxruntime/python/tools/trt_perf.py": "def run(): pass\n",
        "onnxruntime/core/providers/tensorrt/perf_tool.cc": "int main() { return 0; }\n",
    },
    "Rework CPU LayerNorm kernel to support arbitrary axes (#7)": {
        "onnxruntime/core/providers/cpu/nn/layer_norm.cc": "for (int64_t a : axes) Normalize(a);\n",
    },
    "Added prefetch to SGEMV and DGEMV.": {
        "kernel/mips/sgemv_n_msa.c": "    PREF_OFFSET(a0, 64);\n    y0 += a0[0] * x0;\n",
    },
    "arm: add hardfp support in vfp dot kernels": {
        "kernel/arm/sdot_vfp.S": "    vldmia.f32 X!, { s8 - s9 }\n",
    },
    "changed default optimization flag from O2 to O1 for MIPS": {
        "kernel/Makefile": "COMMON_OPT = -O1\n",
        "driver/others/memory.c": "int unused;\n",
    },
    "ggml : refactor the quantization helpers (#8)": {
        "ggml.c": "static inline __m256 sum_i16(__m256i x) { return _mm256_cvtepi32_ps(_mm256_madd_epi16(x, x)); }\n",
    },
    "cuda : add a warp-per-row rwkv kernel for single-token decode (#10)": {
        "src/ggml-cuda/rwkv.cu": "__global__ void rwkv_row(const float * x) { int row = blockIdx.x; }\n",
    },
    "ggml : limit n_threads to the number of rows (#11)": {
        "src/ggml.c": "n_threads = MIN(n_threads, n_rows);\n",
    },
    "Reset the queue earlier to allow overlap with the compute (#12)": {
        "src/ggml-backend.cpp": "ggml_backend_sched_reset(sched);\n",
    },
    "cuda: launch_bounds and larger tiles for the q4_K mmq kernel (#9)": {
        "src/ggml-cuda/mmq.cu": "template <int mmq_x> __launch_bounds__(256, 2) __global__ void mmq() {}\n",
    },
}
HUGE_RVV_TITLE = "ggml-cpu: extend RVV quantization vec dot to higher VLENs"


@pytest.fixture(scope="module")
def signal_commits(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """title -> Classification, from the miner's own path over a real repository (profile OpenBLAS or ggml)."""
    root = tmp_path_factory.mktemp("signals")
    out: dict[str, object] = {}
    for name, profile, commits in (
        (
            "openblas",
            OPENBLAS,
            {k: v for k, v in SIGNAL_COMMITS.items() if not any("ggml" in p or "onnxruntime" in p for p in v)},
        ),
        ("ggml", GGML, {k: v for k, v in SIGNAL_COMMITS.items() if any("ggml" in p for p in v)}),
        ("onnxruntime", ONNXRUNTIME, {k: v for k, v in SIGNAL_COMMITS.items() if any("onnxruntime" in p for p in v)}),
    ):
        repo = init_repo(root / name)
        t = 1_700_000_000
        _commit(repo, "Initial import", {"README.md": "# r\n"}, t)
        for i, (message, files) in enumerate(commits.items(), 1):
            _commit(repo, message, files, t + 10 * i)
        if name == "ggml":
            # 3,400 added lines of RVV code: past the 3,000-line cap, so its patch is never read
            body = "\n".join(RVV_DOT.replace("dot_rvv", f"dot_rvv_{i}") for i in range(170))
            _commit(repo, HUGE_RVV_TITLE, {"src/ggml-cpu/arch/riscv/quants.c": body}, t + 999)
        handle = gitwalk.open_repository(str(root / name), root / "cache")
        warnings = gitwalk.WalkWarnings()
        for m in classify_commits(handle, profile, gitwalk.walk_commits(handle, ["HEAD"], warnings), warnings):
            out[m.raw.title] = m.classification
    return out


def _has(c: object, text: str) -> bool:
    return any(text in r for r in c.reasons)  # type: ignore[attr-defined]


def test_threading_in_the_title_is_a_speed_purpose(signal_commits: dict) -> None:
    smp = signal_commits["enabled smp for ger.c and zger.c, but only for 64bit binaries"]
    assert _has(smp, "title speaks of threading") and smp.is_optimization
    locking = signal_commits["Add option USE_LOCKING for single-threaded build with locking support"]
    assert not _has(locking, "threading") and not locking.is_optimization


def test_disabling_to_improve_performance_is_tuning(signal_commits: dict) -> None:
    c = signal_commits["vulkan: disable FA mask_opt on GCN to improve performance"]
    assert not _has(c, "disabling") and c.is_optimization


def test_instrumentation_and_names_are_not_speed_claims(signal_commits: dict) -> None:
    logger = signal_commits["vulkan: Add perf logger mode with concurrency"]
    assert _has(logger, "instrumentation") and not logger.is_optimization
    assert not _has(signal_commits["metal : add opt_step_adamw and op_sum"], "performance")
    power = signal_commits["POWER9: Use default param values from POWER8 on AIX"]
    assert not _has(power, "performance") and not power.is_optimization
    assert speed_words("only for performance debug for now") == set()
    assert speed_words("rename optimize_graph to graph_optimize in ggml-opt") == set()
    assert speed_words("optimize the q4_0 dot product") == {"optimize"}


def test_removing_redundant_work_is_a_speed_purpose(signal_commits: dict) -> None:
    c = signal_commits["sycl: remove redundant memcopy in ggml_backend_sycl_buffer_set_tensor"]
    assert _has(c, "removes wasted work") and c.is_optimization


def test_feature_titles_and_review_rounds(signal_commits: dict) -> None:
    c = signal_commits["hexagon: add support for Q4_1 in MUL_MAT"]
    assert _has(c, "title adds a feature") and _has(c, "touches kernel code (src/ggml-hexagon")
    assert not _has(c, "mentions a fix")  # "* fix typo" is a review round, not the commit's purpose


def test_github_default_update_title_is_neutral(signal_commits: dict) -> None:
    c = signal_commits["Update level3_gemm3m_thread.c"]
    assert not _has(c, "housekeeping") and not _has(c, "threading")  # 'thread' is part of a file name


def test_huge_isa_kernel_file_still_counts(signal_commits: dict) -> None:
    c = signal_commits[HUGE_RVV_TITLE]
    assert _has(c, "kernel code too large to read") and c.is_optimization
    assert [str(i) for i in c.isas] == ["rvv"]


# ---------------------------------------------------------------------------------------------------------
# classifier v3: the classes of the blind2 sample's misses and of issue 12


def test_thread_count_sized_to_the_input_is_tuning(signal_commits: dict) -> None:
    c = signal_commits["Use a single thread for small input size"]
    assert _has(c, "title speaks of threading") and c.is_optimization


def test_vendored_build_file_switching_to_optimized_routines(signal_commits: dict) -> None:
    c = signal_commits["turn on optimized code"]
    assert not _has(c, "changes no source code") and c.is_optimization


def test_correctness_title_outweighs_the_intrinsics(signal_commits: dict) -> None:
    c = signal_commits["POWER10: use unaligned vector loads for correctness"]
    assert _has(c, "correctness purpose") and not c.is_optimization


def test_gpu_kernels_for_one_gpu_family_and_spill_fixes(signal_commits: dict) -> None:
    adreno = signal_commits["opencl: add q4_K gemm and gemv kernels for Adreno"]
    assert _has(adreno, "GPU performance mechanism or target") and adreno.is_optimization
    spill = signal_commits["metal : fix q5_k mul_mv register spill"]
    assert _has(spill, "fixes slowness") and spill.is_optimization


def test_fusing_is_a_speed_purpose_but_guarding_a_fusion_is_not(signal_commits: dict) -> None:
    fuse = signal_commits["ggml-cpu: fuse RMS_NORM + MUL"]
    assert _has(fuse, "title fuses operations") and fuse.is_optimization
    guard = signal_commits["CUDA: check for buffer overlap before fusing"]
    assert not _has(guard, "fuses") and not guard.is_optimization


def test_gpu_feature_mentioning_speed_in_passing(signal_commits: dict) -> None:
    c = signal_commits["metal : add CONV_2D_DW support"]
    assert _has(c, "in passing") and not c.is_optimization
    assert speed_words("add perf cases to test-backend-ops") == set()


def test_new_data_type_simd_code_is_the_feature(signal_commits: dict) -> None:
    c = signal_commits["ggml : sync llama.cpp (Q9_X)"]
    assert _has(c, "new data type (GGML_TYPE_Q9_X)") and not c.is_optimization


def test_build_time_is_not_run_time(signal_commits: dict) -> None:
    c = signal_commits["vulkan : incremental shader builds"]
    assert not _has(c, "wasted work") and _has(c, "housekeeping") and not c.is_optimization


def test_side_fix_beside_a_speed_title_costs_nothing(signal_commits: dict) -> None:
    c = signal_commits["ggml-cpu: speed up the q4_0 dot product"]
    assert not _has(c, "mentions a fix") and c.is_optimization


def test_application_work_nobody_uses_is_wasted(signal_commits: dict) -> None:
    c = signal_commits["whisper : don't compute token timestamps when they are not printed"]
    assert _has(c, "title removes wasted work")


def test_numbers_retuned_in_kernel_code_are_tuning(signal_commits: dict) -> None:
    retune = signal_commits["Update dgemm_kernel_4x8_haswell.S"]
    assert _has(retune, "retunes numeric constants of kernel code") and retune.is_optimization
    build = signal_commits["Update Makefile.system for the new buffer"]
    assert not _has(build, "retunes") and not build.is_optimization  # numbers of a build file are not a kernel


def test_improving_a_kernel_is_an_implementation_title_unless_it_is_for_accuracy(signal_commits: dict) -> None:
    z14 = signal_commits["Improve the z14 SGEMVT kernel"]
    assert _has(z14, "title introduces a SIMD/kernel implementation") and z14.is_optimization
    accuracy = signal_commits["Improve the accuracy of the exp kernel"]
    assert not accuracy.is_optimization


def test_plural_optimizations_after_an_identifier_are_work_not_a_name(signal_commits: dict) -> None:
    c = signal_commits["CUDA: small mul_mat_vec optimizations"]
    assert _has(c, "message speaks of performance (optimizations)")
    power = signal_commits["POWER9: Use default param values from POWER8 on AIX"]
    assert not _has(power, "message speaks of performance")  # "KERNEL.POWER8 optimization" is still a name


def test_one_call_instead_of_many_removes_work(signal_commits: dict) -> None:
    c = signal_commits["ggml : group all experts in a single mul_mat_id"]
    assert _has(c, "title removes wasted work") and c.is_optimization


def test_a_trailing_fix_clause_is_not_the_purpose_but_a_leading_fix_is(signal_commits: dict) -> None:
    scale = signal_commits["ggml : scale caching for k quants + misc fixes"]
    assert _has(scale, "a fix follows the title's main change") and not _has(scale, "title reads as a fix")
    crash = signal_commits["ggml : fix crash in the q4_0 dot + cleanup"]
    assert _has(crash, "title reads as a fix") and not crash.is_optimization


def test_a_threading_library_named_as_a_condition_is_not_a_purpose(signal_commits: dict) -> None:
    c = signal_commits["Return the buffer pointer when OpenMP or Windows"]
    assert not _has(c, "title speaks of threading") and not c.is_optimization
    assert signal_commits["enabled smp for ger.c and zger.c, but only for 64bit binaries"].is_optimization


def test_an_optimization_switched_off_is_not_a_speedup(signal_commits: dict) -> None:
    c = signal_commits["SYCL: disable reorder optimization by default (llama/1)"]
    assert not _has(c, "speaks of performance") and not c.is_optimization
    assert signal_commits["vulkan: disable FA mask_opt on GCN to improve performance"].is_optimization


def test_a_benchmark_title_measures_speed(signal_commits: dict) -> None:
    c = signal_commits["[CUDA] MatMulNBits benchmark (#2)"]
    assert not _has(c, "speaks of performance") and not c.is_optimization


def test_fixes_whose_aim_is_speed_and_fusion_titles(signal_commits: dict) -> None:
    fixes = signal_commits["llama : minor fixes for up llama load model speed (#3)"]
    assert not _has(fixes, "fix/revert") and fixes.is_optimization
    fusion = signal_commits["unet fusion for stable diffusion webui (#4)"]
    assert not _has(fusion, "mentions a fix") and fusion.is_optimization


@pytest.mark.parametrize(
    "title",
    [
        "scale caching for k quants + misc fixes",
        "ggml : fix crash in the q4_0 dot + cleanup",
        "a + b fix",
        "sgemm; fix tail",
        "   x, and fix it",
        "use level3_gemm3m_thread.c, also fix sync & misc",
        "`code_span` and path/to/file.c: unroll by 4",
        "",
        "____ . / _a",
    ],
)
def test_linear_title_scans_match_their_regex_definitions(title: str) -> None:
    """The linear forms (a hostile 20 kB title took 6 s with the regexes they replace) say the same."""
    from miners.classify import _IDENT_RX, _trailing_clause

    assert _IDENT_RX.sub(" ", title) == re.sub(r"\S*[_/.]\w\S*", " ", title)
    clause = re.compile(r"\w.{8,}?(?:\s\+\s|;\s|,\s+(?:also|and)\s|\s&\s)")
    for end in range(len(title) + 1):
        assert _trailing_clause(title, end) == bool(clause.search(title, 0, end)), end


@pytest.mark.parametrize(
    ("text", "claims"),
    [
        # a multiplier beside an instruction, a thread, register or unroll count is how many, not how fast
        ("ggml-hexagon: use rmpy x8 for faster q4_0 dot", []),
        ("pp512 | 8 threads (x4) | 12.3 t/s, faster", []),
        ("unroll x4 for better performance", []),
        ("8x unrolled loop, better performance", []),
        ("keep 8 registers x8 in flight, faster", []),
        ("2x faster with 4 threads", [2.0]),
        ("performance improved by x2", [2.0]),
        ("Q8_0 prefill speed up x1.21 at p=512", [1.21]),
        # a negative percentage is a regression, not a speedup; a range's dash is no sign
        ("| q4_0 | tg128 | -29.2% perf |", []),
        ("perf: +10% on pp512, -29.2% on tg128", [1.1]),
        ("10-20% faster on K1", [1.2]),
        ("This change results in 5% - 15% improvement", [1.15]),
        ("333829.0 6.3 -29.2% Performance with this patch", []),
    ],
)
def test_counts_and_regressions_are_not_speedups(text: str, claims: list[float]) -> None:
    assert parse_perf_claims(text) == claims


@pytest.mark.parametrize(
    ("files", "title", "operator"),
    [
        (["ggml/src/ggml-cpu/arch/riscv/quants.c"], "ggml-cpu: optimize RVV vec_dot", "quant_dot"),
        (["src/ggml-quants.c"], "ggml : faster dot product on NEON", "quant_dot"),
        (["ggml/src/ggml-cpu/ops.cpp"], "riscv: ggml_vec_dot_iq1_s_q8_K with RVV", "quant_dot"),
        (["ggml/src/ggml-cpu/ops.cpp"], "add ggml_vec_dot_tq1_0_q8_K", "quant_dot"),
        (["ggml/src/ggml-cpu/ops.cpp"], "vectorize ggml_vec_dot_mxfp4_q8_0", "quant_dot"),
        (["ggml/src/ggml-cpu/vec.cpp"], "faster ggml_vec_dot_f16 on RVV", "dot"),
        (["kernel/riscv64/dot_rvv.c"], "optimize dot", "dot"),
    ],
)
def test_ggml_quantized_dot_kernels_are_quant_dot(files: list[str], title: str, operator: str) -> None:
    assert [str(o) for o in detect_operators(files, title, "")][:1] == [operator]


def test_v6_and_v7_classes(signal_commits: dict) -> None:
    """The classes classifier v6 and v7 close, from blind7's and blind8's misses; blind9 judged them."""
    fusion = signal_commits["Mul/Relu fusion - more patterns (#5)"]
    assert _has(fusion, "title fuses operations") and fusion.is_optimization  # the fusion is the subject
    tool = signal_commits["Add TensorRT perf tool (#6)"]
    assert _has(tool, "instrumentation") and not tool.is_optimization
    rework = signal_commits["Rework CPU LayerNorm kernel to support arbitrary axes (#7)"]
    assert _has(rework, "feature as its purpose") and not rework.is_optimization
    prefetch = signal_commits["Added prefetch to SGEMV and DGEMV."]
    assert _has(prefetch, "technique on gemv") and prefetch.is_optimization
    softfp = signal_commits["arm: add hardfp support in vfp dot kernels"]
    assert _has(softfp, "other than an ISA") and not softfp.is_optimization
    flag = signal_commits["changed default optimization flag from O2 to O1 for MIPS"]
    assert not _has(flag, "message speaks of performance") and not flag.is_optimization
    refactor = signal_commits["ggml : refactor the quantization helpers (#8)"]
    assert _has(refactor, "housekeeping ('refactor')") and not refactor.is_optimization
    bounds = signal_commits["cuda: launch_bounds and larger tiles for the q4_K mmq kernel (#9)"]
    assert _has(bounds, "GPU performance mechanism") and bounds.is_optimization


@pytest.mark.parametrize(
    ("title", "operators"),
    [
        ("Add CPU autodetection for Zen5", []),  # "add" the verb names no operator
        ("increase max threads to 512", []),
        ("reduce memory use of the graph", []),
        ("use the thread pool in the scheduler", []),
        ("faster vector add kernel for RVV", ["elementwise"]),
        ("maxpool with RVV", ["pool"]),
        ("vectorize fp16 to fp32 conversion", ["quantize"]),
        ("webgpu: tile the mulmat shader", ["gemm"]),
        ("non-contiguous mat-vec-mul shader", ["gemv"]),
        ("faster reduce_sum on NEON", ["reduce"]),
    ],
)
def test_operator_names_in_prose_need_a_kernel_word(title: str, operators: list[str]) -> None:
    assert [str(o) for o in detect_operators([], title, "")] == operators


def test_bare_operator_names_still_count_in_file_names() -> None:
    assert [str(o) for o in detect_operators(["kernel/x86_64/add.c"], "tune it", "")] == ["elementwise"]
    assert [str(o) for o in detect_operators(["kernel/arm64/max.S"], "tune it", "")] == ["reduce"]


def test_v8_classes(signal_commits: dict) -> None:
    """Classifier v8's classes, from blind9's misses (blind10 judged them)."""
    regime = signal_commits["cuda : add a warp-per-row rwkv kernel for single-token decode (#10)"]
    assert _has(regime, "GPU performance mechanism or target") and regime.is_optimization
    capped = signal_commits["ggml : limit n_threads to the number of rows (#11)"]
    assert _has(capped, "title speaks of threading") and capped.is_optimization
    overlap = signal_commits["Reset the queue earlier to allow overlap with the compute (#12)"]
    assert not _has(overlap, "feature as its purpose")  # allowing overlap is no capability
