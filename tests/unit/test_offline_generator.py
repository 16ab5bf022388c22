"""The offline generator and its C transformations, without running anything on qemu.

Covers: the C scanner (loops, innermost detection, pragmas, restrict, prefetch strip-mining), which
family claims which task (read from signatures and references, not names), the generator's contract
(never a repeated or tried key, technique -> knob mapping, default first, None when exhausted,
deterministic for a seeded rng), and the fast-math rule (only when rtol >= 1e-5). Compiles use the
real clang-22 (syntax only), no mocks.
"""

from __future__ import annotations

import random
import shutil
import subprocess
from pathlib import Path

import pytest

from agent.offline.base import ThoughtRef, Variant
from agent.offline.families.elementwise import parse_map
from agent.offline.families.gemm import layout as gemm_layout
from agent.offline.families.gemv import layout as gemv_layout
from agent.offline.families.reduction import classify
from agent.offline.generator import OfflineGenerator
from agent.offline.generic import (
    CParseError,
    add_restrict,
    fast_math_allowed,
    find_loops,
    insert_loop_pragmas,
    insert_prefetch,
    tokenize,
)
from evaluator.targets import load_target
from evaluator.tasks import list_tasks, load_task
from evaluator.toolchain import check_cflags
from knowledge.taxonomy import Technique

TARGET = load_target("k1-x60")
TASKS = {t.name: t for t in list_tasks()}
CLANG = shutil.which("clang-22")


def thought(technique: Technique | str, tid: str = "t1") -> ThoughtRef:
    return ThoughtRef(id=tid, technique=Technique(technique))


def syntax_ok(code: str, tmp_path: Path, flags: list[str] | None = None) -> str:
    """clang-22 -fsyntax-only for the X60 with -Werror on pragma/flag problems; '' when clean."""
    assert CLANG, "clang-22 is required (apt-get install clang-22)"
    src = tmp_path / "k.c"
    src.write_text(code)
    argv = [CLANG, "--target=riscv64-linux-gnu", "-mcpu=spacemit-x60", "-O3", *(flags or []),
            "-Werror=unknown-pragmas", "-Werror=ignored-pragmas", "-Werror=unused-command-line-argument",
            "-fsyntax-only", str(src)]  # fmt: skip
    res = subprocess.run(argv, capture_output=True, text=True)
    return "" if res.returncode == 0 else res.stderr


# ------------------------------------------------------------------------------------- C scanning

NESTED = """
#include <stddef.h>
/* a for ( in a comment must not count */
static float helper(const float *v, int n) { float s = 0; for (int i = 0; i < n; i++) s += v[i]; return s; }
void kern(int m, int n, const float *a, float *out, float scale)
{
    const char *text = "for (;;) { not code";
    for (int r = 0; r < m; r++) {
        float acc = 0.0f;
        if (n > 0)
            for (int c = 0; c < n; c++)
                acc += a[r * n + c];
        int k = 0;
        while (k < 2) { k++; }
        out[r] = acc * scale + helper(a, n);
    }
}
"""


def test_loops_are_found_with_their_extent_and_innermost_flag() -> None:
    toks = tokenize(NESTED)
    loops = find_loops(toks)
    assert [lp.index_var for lp in loops] == ["i", "r", "c"]
    assert [lp.innermost for lp in loops] == [True, False, True]
    outer = loops[1]
    assert toks[outer.body_first].text == "{" and toks[outer.body_last].text == "}"
    # the strings and comments that mention `for` were not taken as loops
    assert sum(t.text == "for" for t in toks) == 3


def test_pragmas_go_before_innermost_loops_only_and_compile(tmp_path: Path) -> None:
    out = insert_loop_pragmas(NESTED, ["vectorize(enable)", "unroll_count(4)"])
    lines = out.splitlines()
    pragma_lines = [i for i, ln in enumerate(lines) if ln.strip().startswith("#pragma clang loop")]
    assert len(pragma_lines) == 2
    for i in pragma_lines:
        assert lines[i + 1].lstrip().startswith("for (int i") or lines[i + 1].lstrip().startswith("for (int c")
    assert "for (int r" not in "".join(lines[i + 1] for i in pragma_lines)
    assert syntax_ok(out, tmp_path) == ""
    # applying twice does not stack a second pragma on the same loop
    assert insert_loop_pragmas(out, ["unroll_count(2)"]).count("#pragma clang loop") == 2


def test_pragma_after_an_if_on_the_same_line_gets_its_own_line(tmp_path: Path) -> None:
    code = "void f(int n, float *y) { if (n > 1) for (int i = 0; i < n; i++) y[i] = 0.0f; }\n"
    out = insert_loop_pragmas(code, ["unroll_count(2)"])
    assert "\n#pragma clang loop unroll_count(2)\n" in out
    assert syntax_ok(out, tmp_path) == ""


def test_restrict_goes_on_pointer_params_of_the_definition_only(tmp_path: Path) -> None:
    out = add_restrict(NESTED, "kern")
    assert "void kern(int m, int n, const float *restrict a, float *restrict out, float scale)" in out
    assert "static float helper(const float *v, int n)" in out  # helpers untouched
    assert syntax_ok(out, tmp_path) == ""
    with pytest.raises(CParseError):
        add_restrict(NESTED, "missing")


def test_prefetch_strip_mines_canonical_innermost_loops(tmp_path: Path) -> None:
    task = TASKS["sgemv_t"]
    out = insert_prefetch(task.reference_code, 256, {"col", "x", "a", "y"})
    assert out.count("__builtin_prefetch") == 8  # two streams (col, x), four lines each
    assert "&col[(i_blk1)] + 256" in out and "&x[(i_blk1)] + 448" in out
    assert syntax_ok(out, tmp_path) == ""
    # a loop whose bound has a side effect is left alone
    odd = "void f(int n, float *y) { for (int i = 0; i < n--; i++) y[i] = 0.0f; }\n"
    assert insert_prefetch(odd, 256, {"y"}) == odd


# ------------------------------------------------------------------------------- family detection


def test_reductions_are_recognised_from_the_reference() -> None:
    got = {name: classify(t) for name, t in TASKS.items() if classify(t)}
    assert got == {"sdot": "dot", "snrm2": "nrm2", "sasum": "asum", "reduce_sum": "sum", "reduce_max": "max"}


def test_gemm_layouts_are_read_from_counts_and_strides() -> None:
    found = {name: gemm_layout(t) for name, t in TASKS.items() if gemm_layout(t)}
    assert set(found) == {"sgemm_64", "sgemm_nt", "sgemm_skinny_m4", "sgemm_square_96", "sgemm_tall_n16"}
    assert found["sgemm_nt"].trans_b and not found["sgemm_64"].trans_b
    assert found["sgemm_64"].alpha is None and found["sgemm_square_96"].beta == "beta"
    assert (found["sgemm_64"].a, found["sgemm_64"].b, found["sgemm_64"].c) == ("A", "B", "C")


def test_gemv_forms_follow_the_storage_order() -> None:
    found = {name: gemv_layout(t) for name, t in TASKS.items() if gemv_layout(t)}
    assert set(found) == {"sgemv_n", "sgemv_t"}
    assert found["sgemv_n"].form == "axpy" and found["sgemv_t"].form == "dot"
    assert found["sgemv_n"].line == "m"  # column-major: lines are columns of m elements


def test_elementwise_maps_are_parsed_and_others_rejected() -> None:
    spec = parse_map(TASKS["saxpy"])
    assert spec.loads == ["x", "y"] and [p for p, _ in spec.stores] == ["y"]
    assert parse_map(TASKS["hardswish"]).loads == ["x"]
    gen_names = {n for n, t in TASKS.items() if "rvv_elementwise" in OfflineGenerator(t, TARGET).families()}
    assert gen_names == {"saxpy", "sscal", "relu", "hardswish", "fp16_to_fp32", "fp32_to_fp16"}


def test_a_renamed_task_is_still_recognised(tmp_path: Path) -> None:
    """Detection uses the signature and reference, not the task name."""
    src = TASKS["sdot"].directory
    dst = tmp_path / "inner_product"
    dst.mkdir()
    toml = (src / "task.toml").read_text().replace('name = "sdot"', 'name = "inner_product"')
    toml = toml.replace("float sdot(", "float inner_product(")
    (dst / "task.toml").write_text(toml)
    (dst / "reference.c").write_text((src / "reference.c").read_text().replace("sdot(", "inner_product("))
    task = load_task(dst)
    gen = OfflineGenerator(task, TARGET)
    assert gen.families()[0] == "rvv_reduction"
    assert "float inner_product(int n, const float *x, const float *y)" in gen.default().code


# ---------------------------------------------------------------------------------- the generator


def drain(
    gen: OfflineGenerator, technique: Technique, parent: Variant | None, seed: int, limit: int = 400
) -> list[str]:
    rng, tried, keys = random.Random(seed), set(), []
    for _ in range(limit):
        p = gen.propose(thought(technique), parent, rng, tried)
        if p is None:
            return keys
        assert p.variant.key not in tried
        tried.add(p.variant.key)
        keys.append(p.variant.key)
    raise AssertionError(f"no exhaustion after {limit} proposals")


def test_default_is_the_first_family_default() -> None:
    gen = OfflineGenerator(TASKS["sdot"], TARGET)
    d = gen.default()
    assert d.family == "rvv_reduction"
    assert d.knobs == {k.name: k.default for k in gen.knobs("rvv_reduction")}
    assert "#include <riscv_vector.h>" in d.code and "float sdot(int n, const float *x, const float *y)" in d.code
    generic_only = OfflineGenerator(TASKS["prefix_scan"], TARGET)
    assert generic_only.families() == ["generic"] and generic_only.default().family == "generic"


def test_family_default_first_then_single_knob_moves_of_the_technique() -> None:
    gen = OfflineGenerator(TASKS["sgemm_square_96"], TARGET)
    rng = random.Random(1)
    first = gen.propose(thought(Technique.UNROLL), None, rng, set())
    assert first is not None and first.variant.key == gen.default().key
    tried = {first.variant.key}
    base = first.variant.knobs
    for _ in range(2):
        p = gen.propose(thought(Technique.UNROLL), first.variant, rng, tried)
        assert p is not None
        changed = {k for k in base if p.variant.knobs[k] != base[k]}
        assert changed == {"unroll"}, p.mutation
        tried.add(p.variant.key)
    # register_blocking turns mr or nv, one step first
    p = gen.propose(thought(Technique.REGISTER_BLOCKING), first.variant, rng, tried)
    assert p is not None
    changed = {k for k in base if p.variant.knobs[k] != base[k]}
    assert changed in ({"mr"}, {"nv"})
    knob = gen.knobs("rvv_gemm")
    values = {k.name: k.values for k in knob}
    name = changed.pop()
    assert abs(values[name].index(p.variant.knobs[name]) - values[name].index(base[name])) == 1


def test_a_tried_default_is_skipped_for_a_move_from_it() -> None:
    gen = OfflineGenerator(TASKS["saxpy"], TARGET)
    tried = {gen.default().key}
    p = gen.propose(thought(Technique.VECTOR_LENGTH), None, random.Random(0), tried)
    assert p is not None and p.variant.family == "rvv_elementwise"
    assert p.variant.knobs["lmul"] in (2, 8) and p.mutation.startswith("lmul: 4 ->")


def test_a_technique_the_family_lacks_falls_back_to_generic_or_a_random_knob() -> None:
    gen = OfflineGenerator(TASKS["sdot"], TARGET)
    p = gen.propose(thought(Technique.PREFETCH), None, random.Random(0), set())
    assert p is not None and p.variant.family == "generic" and p.variant.knobs["prefetch"] > 0
    fam_parent = gen.default()
    q = gen.propose(thought(Technique.PREFETCH), fam_parent, random.Random(0), {fam_parent.key})
    assert q is not None and q.variant.family == "rvv_reduction"
    assert sum(q.variant.knobs[k] != fam_parent.knobs[k] for k in fam_parent.knobs) == 1


@pytest.mark.parametrize("task", ["sdot", "sgemv_t", "prefix_scan", "relu"])
@pytest.mark.parametrize("technique", [Technique.UNROLL, Technique.VECTOR_LENGTH, Technique.PREFETCH])
def test_proposals_never_repeat_and_end_with_none(task: str, technique: Technique) -> None:
    gen = OfflineGenerator(TASKS[task], TARGET)
    keys = drain(gen, technique, gen.default(), seed=3)
    assert len(keys) == len(set(keys)) and keys
    assert len(keys) <= gen.space_size()


def test_proposals_are_deterministic_for_a_seeded_rng() -> None:
    gen = OfflineGenerator(TASKS["sgemm_nt"], TARGET)
    parent = gen.default()
    assert drain(gen, Technique.REGISTER_BLOCKING, parent, seed=7) == drain(
        OfflineGenerator(TASKS["sgemm_nt"], TARGET), Technique.REGISTER_BLOCKING, parent, seed=7
    )


def test_generic_technique_moves_turn_the_tagged_knob() -> None:
    gen = OfflineGenerator(TASKS["prefix_scan"], TARGET)
    base = gen.default()
    expect = {
        Technique.VECTOR_LENGTH: "lmul",
        Technique.UNROLL: "unroll",
        Technique.PREFETCH: "prefetch",
        Technique.FUSION: "fp_contract",
        Technique.VECTORIZE: "vectorize",
        Technique.ALIGNMENT: "restrict",
        Technique.MEMORY_ACCESS: "restrict",
    }
    for technique, knob in expect.items():
        p = gen.propose(thought(technique), base, random.Random(0), {base.key})
        assert p is not None, technique
        changed = {k for k in base.knobs if p.variant.knobs[k] != base.knobs[k]}
        assert changed == {knob}, (technique, p.mutation)


def test_render_and_knobs_name_unknown_families_clearly() -> None:
    from core.errors import InvalidInput

    gen = OfflineGenerator(TASKS["relu"], TARGET)
    with pytest.raises(InvalidInput, match="rvv_gemm"):
        gen.knobs("rvv_gemm")


# ------------------------------------------------------------------------------------- fast math


def test_fast_math_only_where_the_tolerance_admits_it() -> None:
    assert fast_math_allowed(TASKS["sdot"]) and not fast_math_allowed(TASKS["reduce_max"])
    for name in ("reduce_max", "relu", "fp16_to_fp32", "sscal"):
        task = TASKS[name]
        assert task.tolerance.rtol < 1e-5
        gen = OfflineGenerator(task, TARGET)
        parent = gen.render("generic", {})
        for technique in (Technique.REDUCTION, Technique.MULTI_ACCUMULATOR):
            rng, tried = random.Random(0), {parent.key}
            while (p := gen.propose(thought(technique), parent, rng, tried)) is not None:
                tried.add(p.variant.key)
                flags = " ".join(p.variant.cflags)
                assert "fast-math" not in flags and "associative" not in flags, (name, flags)


def test_every_generic_flag_set_passes_the_evaluator_allow_list() -> None:
    gen = OfflineGenerator(TASKS["sdot"], TARGET)
    for knob in gen.knobs("generic"):
        for value in knob.values:
            v = gen.render("generic", {knob.name: value})
            flags, problem = check_cflags(v.cflags)
            assert problem is None, (knob.name, value, problem)
            assert len(flags) == len(v.cflags)


def test_space_size_counts_family_and_generic_grids() -> None:
    gen = OfflineGenerator(TASKS["sdot"], TARGET)
    generic = 1
    for k in gen.knobs("generic"):
        generic *= len(k.values)
    assert gen.space_size() > generic  # plus the family's valid settings
    assert OfflineGenerator(TASKS["prefix_scan"], TARGET).space_size() == generic // 3  # no fast-math there


def test_every_task_gets_a_default() -> None:
    for task in TASKS.values():
        v = OfflineGenerator(task, TARGET).default()
        assert task.function_name in v.code and v.key
