"""ISA attribution, operators and speedup claims on a real ggml-like history built by the test."""

from __future__ import annotations

import re

import pytest

from miners import gitwalk
from miners.classify import parse_claims, parse_perf_claims
from miners.pipeline import classify_commits
from miners.profiles import GGML
from tests.support.gitrepos import ATTRIBUTION, RENAME_TITLE, build_attribution_repo


@pytest.fixture(scope="module")
def mined(tmp_path_factory: pytest.TempPathFactory) -> dict:
    path = tmp_path_factory.mktemp("attr") / "ggml"
    build_attribution_repo(path)
    handle = gitwalk.open_repository(str(path), path / "cache")
    warnings = gitwalk.WalkWarnings()
    out = classify_commits(handle, GGML, gitwalk.walk_commits(handle, ["HEAD"], warnings), warnings)
    return {m.raw.title: m for m in out}


def test_isas_come_from_vector_code_not_guards_or_names(mined: dict) -> None:
    got = {
        t: ([str(i) for i in m.classification.isas], [str(o) for o in m.classification.operators])
        for t, m in mined.items()
        if m.classification.is_optimization
    }
    assert got == ATTRIBUTION


def test_cpu_names_are_not_speedups_and_figures_keep_their_span(mined: dict) -> None:
    c = mined["ggml : faster q8_0 dot on SpacemiT X60 (1.6x vs the x86 port, X100 too)"].classification
    assert c.perf_claims == [1.6]
    assert [(x.value, x.plausible) for x in c.claims] == [(1.6, True)]
    assert "1.6x vs the x86 port" in c.claims[0].span


def test_a_rename_to_the_riscv_prefix_adds_no_intrinsics(mined: dict) -> None:
    rename = mined[RENAME_TITLE].classification
    assert not rename.is_optimization
    assert not any("SIMD intrinsic" in r for r in rename.reasons), rename.reasons


@pytest.mark.parametrize(
    ("text", "values"),
    [
        ("2.3x faster on SpacemiT X60", [2.3]),
        ("faster than x86 and x64 builds; X100 cores", []),
        ("x1.5 faster on X60", [1.5]),
        ("improves performance on the A100 and H100", []),
    ],
)
def test_names_never_parse_as_figures(text: str, values: list[float]) -> None:
    assert parse_perf_claims(text) == values


def test_implausible_figures_are_flagged_not_believed() -> None:
    (big,) = parse_claims("sgemm is now 86x faster")
    assert big.value == 86 and not big.plausible and "implausible" in big.flag
    (lone,) = parse_claims("12x faster")
    assert not lone.plausible and "benchmark" in lone.flag
    (backed,) = parse_claims("12x speedup\n| pp512 | 100 t/s | 1200 t/s |")
    assert backed.plausible and backed.span == "12x speedup"
    assert parse_perf_claims("sgemm is now 86x faster, 1.2x on small sizes") == [1.2]


def test_retrieval_prior_ignores_implausible_figures() -> None:
    from knowledge.retrieval import _outcome_prior

    def prior(x: float | None) -> float:
        return _outcome_prior("Thought", {"node": {"prior_speedup": x, "evidence_commits": 2}})

    assert prior(86.0) == prior(None) < prior(1.8)


def test_classifier_misses_vendor_backends_squashed_reviews_and_performance_bugs(tmp_path) -> None:
    from miners.profiles import ONNXRUNTIME
    from tests.support.gitrepos import _commit, init_repo

    repo = init_repo(tmp_path / "ggml")
    ime = "".join(
        f"static inline void ime_tile_{i}(const int8_t *a, int32_t *c) {{ c[{i}] += a[{i}]; }}\n" for i in range(40)
    )
    _commit(repo, "ggml : initial", {"ggml/src/ggml-cpu/repack.cpp": "int x;\n"}, 1_700_000_000)
    _commit(
        repo,
        "ggml: riscv: add riscv spacemit backend (llama/15288)\n\n* ggml: add spacemit backend\n\n"
        "* fixed for review comments, file renamed and format\n\n* add new line at end of file\n",
        {"ggml/src/ggml-cpu/spacemit/ime.cpp": ime},
        1_700_000_100,
    )
    _commit(
        repo,
        "ggml-cpu: fix performance bug in q4_0 repack",
        {"ggml/src/ggml-cpu/repack.cpp": "int x;\nint y;\n"},
        1_700_000_200,
    )
    handle = gitwalk.open_repository(str(tmp_path / "ggml"), tmp_path / "cache")
    warnings = gitwalk.WalkWarnings()
    got = {
        m.raw.title: m.classification
        for m in classify_commits(handle, GGML, gitwalk.walk_commits(handle, ["HEAD"], warnings), warnings)
    }
    backend = got["ggml: riscv: add riscv spacemit backend (llama/15288)"]
    assert backend.is_optimization and backend.isas == ["rvv"], backend.reasons
    assert not any("fix" in r for r in backend.reasons)  # the review rounds of a squashed PR are not its purpose
    perf_bug = got["ggml-cpu: fix performance bug in q4_0 repack"]
    assert perf_bug.is_optimization and any("fixes slowness" in r for r in perf_bug.reasons), perf_bug.reasons
    # ONNX Runtime's GPU kernels are kernel code (and GPU code)
    assert ONNXRUNTIME.kernel_arch("onnxruntime/contrib_ops/cuda/bert/attention_softmax.cu") == ""
    assert ONNXRUNTIME.kernel_arch("onnxruntime/core/providers/cuda/math/matmul.cc") == ""


def test_ideas_group_close_thoughts_of_two_or_more_changes_and_grow_incrementally() -> None:
    import numpy as np

    from knowledge.taxonomy import Technique
    from miners.distill import ThoughtFacts, group_ideas

    T = Technique.MULTI_ACCUMULATOR

    def fact(tid: str, change: str, idea: str = "idea:multi_accumulator") -> ThoughtFacts:
        return ThoughtFacts(tid, T, "dot", "rvv", change, "r", idea, "", "")

    def unit(*v: float) -> np.ndarray:
        a = np.array(v, dtype="float32")
        return a / np.linalg.norm(a)

    facts = [fact("t1", "c1"), fact("t2", "c2"), fact("t3", "c3"), fact("t4", "c1")]
    vecs = np.stack([unit(1, 0.1, 0), unit(1, 0, 0.1), unit(0, 1, 0), unit(0.1, 0, 1)])
    groups = group_ideas(facts, vecs)
    assert list(groups) == ["idea:multi_accumulator:c1"]  # t1 and t2: close, two changes
    assert groups["idea:multi_accumulator:c1"].members == ["t1", "t2"] and groups["idea:multi_accumulator:c1"].changed
    # Next run: the group is in the graph; a new close thought joins it, the id stays, far ones stay loose.
    facts2 = [fact("t1", "c1", "idea:multi_accumulator:c1"), fact("t2", "c2", "idea:multi_accumulator:c1")]
    facts2 += [fact("t5", "c5"), fact("t6", "c6")]
    vecs2 = np.stack([unit(1, 0.1, 0), unit(1, 0, 0.1), unit(1, 0.05, 0.05), unit(0, 0, 1)])
    again = group_ideas(facts2, vecs2)
    assert list(again) == ["idea:multi_accumulator:c1"] and again["idea:multi_accumulator:c1"].members == [
        "t1",
        "t2",
        "t5",
    ]


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("vfmaq_f32(acc, a, b)", "vfmaq_f32 -> __riscv_vfmacc_vv_f32m1"),
        ("vld1q_s8(p)", "vld1q_s8 -> __riscv_vle8_v_i8m1"),
        ("_mm256_set1_ps(1.0f)", "_mm256_set1_ps -> __riscv_vfmv_v_f_f32m1"),
        ("_mm512_loadu_pd(p)", "_mm512_loadu_pd -> __riscv_vle64_v_f64m1"),
        ("svwhilelt_b32(i, n)", "svwhilelt_b32 -> __riscv_vsetvl_e32m1(n - i)"),
        ("vaddvq_s32(v)", "vaddvq_s32 -> __riscv_vredsum_vs_i32m1_i32m1"),
        ("vdotq_s32(acc, a, b)", "vdotq_s32 -> __riscv_vwmacc_vv_i16m2"),
        ("vfmadd231pd %zmm0, %zmm1, %zmm2", "vfmadd231pd -> __riscv_vfmacc_vv_f64m1"),
        ("xvmaddasp 0, 1, 2", "xvmaddasp -> __riscv_vfmacc_vv_f32m1"),
    ],
)
def test_rvv_translation_table(code: str, expected: str) -> None:
    from knowledge.rvv_translation import rvv_equivalents

    got = rvv_equivalents(code)
    assert len(got) == 1 and got[0].startswith(expected), got
    assert rvv_equivalents("__riscv_vle32_v_f32m1(p, vl)") == []  # RVV code needs no translation


@pytest.mark.parametrize(
    ("name", "width"),
    [
        ("svwhilelt_b64", 64),
        ("svwhilelt_b16", 16),
        ("svwhilelt_b8", 8),
        ("svwhilelo_b32", 32),
        ("_mm512_mask_fmadd_pd", 64),
        ("_mm512_maskz_loadu_epi16", 16),
        ("_mm512_mask_add_ps", 32),
        ("_mm256_hadd_pd", 64),
        ("vhaddpd", 64),
        ("_mm512_reduce_add_pd", 64),
        ("vaddvq_f64", 64),
    ],
)
def test_rvv_translations_keep_the_element_width(name: str, width: int) -> None:
    """Predicates, masks and horizontal adds become vl and reductions at the width of the lanes they govern."""
    from knowledge.rvv_translation import rvv_equivalent

    got = rvv_equivalent(name) or ""
    widths = {int(w) for w in re.findall(r"(?:_e|_[fiu])(\d+)m\d", got)}
    assert widths == {width}, got


def _rvv_kernel(op: str, body: str) -> str:
    return (
        "#include <riscv_vector.h>\n"
        f"void {op}_k(long n, float a, float *x, float *y) {{\n"
        "    for (size_t vl; n > 0; n -= vl, x += vl, y += vl) {\n"
        "        vl = __riscv_vsetvl_e32m8(n);\n"
        "        vfloat32m8_t vx = __riscv_vle32_v_f32m8(x, vl);\n"
        "        vfloat32m8_t vy = __riscv_vle32_v_f32m8(y, vl);\n"
        f"{body}"
        "    }\n}\n"
    )


def test_a_commit_adding_several_kernels_gives_each_its_own_thought(tmp_path) -> None:
    from miners.distill import build_thoughts
    from miners.pipeline import evidence_of
    from miners.profiles import OPENBLAS
    from tests.support.gitrepos import _commit, init_repo

    repo = init_repo(tmp_path / "openblas")
    _commit(repo, "Initial import", {"README": "BLAS\n"}, 1_700_000_000)
    files = {
        "kernel/riscv64/axpy_rvv.c": _rvv_kernel(
            "axpy", "        vy = __riscv_vfmacc_vf_f32m8(vy, a, vx, vl);\n        __riscv_vse32_v_f32m8(y, vy, vl);\n"
        ),
        "kernel/riscv64/nrm2_rvv.c": _rvv_kernel(
            "nrm2",
            "        vfloat32m8_t sq = __riscv_vfmul_vv_f32m8(vx, vx, vl);\n"
            "        vfloat32m1_t s = __riscv_vfredusum_vs_f32m8_f32m1(sq, __riscv_vfmv_v_f_f32m1(0, 1), vl);\n"
            "        *y += __riscv_vfmv_f_s_f32m1_f32(s);\n",
        ),
        "kernel/riscv64/scal_rvv.c": _rvv_kernel(
            "scal", "        vx = __riscv_vfmul_vf_f32m8(vx, a, vl);\n        __riscv_vse32_v_f32m8(x, vx, vl);\n"
        ),
    }
    _commit(repo, "Add RVV kernels for level 1 BLAS on the x280 (vectorized)", files, 1_700_000_100)
    handle = gitwalk.open_repository(str(tmp_path / "openblas"), tmp_path / "cache")
    warnings = gitwalk.WalkWarnings()
    (m,) = [
        x
        for x in classify_commits(handle, OPENBLAS, gitwalk.walk_commits(handle, ["HEAD"], warnings), warnings)
        if x.classification.is_optimization
    ]
    ev = evidence_of("OpenMathLib/OpenBLAS", m)
    assert ev is not None
    thoughts = [t for t in build_thoughts([ev]).values() if t.technique.value == "vectorize"]
    by_op = {t.operator.value: t for t in thoughts}
    assert set(by_op) == {"axpy", "nrm2", "elementwise"}, sorted(by_op)
    for op, stem in (("axpy", "axpy_rvv.c"), ("nrm2", "nrm2_rvv.c"), ("elementwise", "scal_rvv.c")):
        t = by_op[op]
        assert t.isa.value == "rvv"
        assert stem in t.example_code.split("\n", 1)[0], (op, t.example_code[:80])
        assert t.description.count(f"in {op} code") == 1
    assert len({t.id for t in thoughts}) == 3  # one primary id, the others suffixed with their operator
    assert sum(t.id.count(":") == 3 for t in thoughts) == 1
