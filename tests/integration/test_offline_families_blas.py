"""Offline generator variants on real clang-22 and qemu k1-x60 (cost model), no mocks.

- every generic flag and pragma is accepted by clang-22 for the X60 (board and emulator flags) and
  has the effect it claims (LMUL, reassociation);
- the generic default variant is correct for every task of the suite;
- the BLAS-like RVV families (reduction, elementwise, gemv, gemm, the packed GEMM micro-kernel): the default
  and the extremes of every knob are correct at every size of their tasks (tails included: the harness checks
  all sizes), the defaults beat the baseline on the modeled X60, and (slow) random knob combinations are correct.

Evaluations run two at a time (the machine has two cores) in session fixtures; each case then gets
its own test result.
"""

from __future__ import annotations

import random
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from agent.offline.base import KnobValue, Variant
from agent.offline.generator import OfflineGenerator
from core.settings import Settings
from evaluator.evaluate import Candidate, EvalResult, EvalStatus, Evaluator
from evaluator.targets import load_target
from evaluator.tasks import KernelTask, list_tasks

pytestmark = pytest.mark.qemu

TARGET = load_target("k1-x60")
TASKS = list_tasks()
BY_NAME = {t.name: t for t in TASKS}
BLAS = ("rvv_reduction", "rvv_elementwise", "rvv_gemv", "rvv_gemm", "rvv_gemm_packed")
CLANG = shutil.which("clang-22") or "clang-22"


def family_of(task: KernelTask) -> str | None:
    fams = [f for f in OfflineGenerator(task, TARGET).families() if f in BLAS]
    return fams[0] if fams else None


FAMILY_TASKS = [t for t in TASKS if family_of(t)]
# Timed against the baselines: all but sgemm_kernel_blas, whose baselines (its reference at the 128 x 24 x 128
# bench size, 506,596 modeled cycles) take ~10 s of CI to model; its speedups are in docs/TASKS.md.
TIMED_TASKS = [t for t in FAMILY_TASKS if t.name != "sgemm_kernel_blas"]


def _evaluator(tmp_path_factory: pytest.TempPathFactory) -> Evaluator:
    home: Path = tmp_path_factory.getbasetemp() / "eok-offline-home"
    return Evaluator(Settings(home=home, eval_timeout_s=120))


def _run_all(evaluator: Evaluator, jobs: list[tuple[str, KernelTask, Variant]], timing: bool) -> dict[str, EvalResult]:
    def one(job: tuple[str, KernelTask, Variant]) -> tuple[str, EvalResult]:
        key, task, v = job
        cand = Candidate(code=v.code, cflags=v.cflags, label=key)
        return key, evaluator.evaluate(task, TARGET, cand, "qemu", timing=timing)

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(pool.map(one, jobs))


def _explain(r: EvalResult, v: Variant) -> str:
    return f"{r.status}: {r.feedback}\nknobs={v.knobs} cflags={v.cflags}\n{v.code}"


# --------------------------------------------------------------------------- flags on real clang-22

EMULATOR = [f"-march={TARGET.emulator_march}", f"-mtune={TARGET.mtune}"]
BOARD = [f"-mcpu={TARGET.mcpu}"]


def _asm(code: str, flags: list[str], isa: list[str], tmp_path: Path) -> str:
    src = tmp_path / "k.c"
    src.write_text(code)
    argv = [CLANG, "--target=riscv64-linux-gnu", *isa, "-O3", *flags, "-S", "-o", "-", str(src),
            "-Werror=unused-command-line-argument", "-Werror=ignored-optimization-argument",
            "-Werror=unknown-pragmas", "-Werror=ignored-pragmas", "-Werror=unknown-warning-option"]  # fmt: skip
    res = subprocess.run(argv, capture_output=True, text=True)
    assert res.returncode == 0, f"{flags}: {res.stderr}"
    return res.stdout


@pytest.mark.parametrize("isa", [BOARD, EMULATOR], ids=["mcpu-spacemit-x60", "emulator-march"])
def test_every_generic_knob_value_is_accepted_by_clang22(isa: list[str], tmp_path: Path) -> None:
    gen = OfflineGenerator(BY_NAME["sdot"], TARGET)
    for knob in gen.knobs("generic"):
        for value in knob.values:
            v = gen.render("generic", {knob.name: value})
            _asm(v.code, v.cflags, isa, tmp_path)


def test_generic_lmul_and_reassociation_flags_do_what_they_say(tmp_path: Path) -> None:
    gen = OfflineGenerator(BY_NAME["sdot"], TARGET)

    def asm(**knobs: KnobValue) -> str:
        v = gen.render("generic", knobs)
        return _asm(v.code, v.cflags, BOARD, tmp_path)

    assert "e32, m8" in asm(lmul=8) and "e32, m8" not in asm(lmul=1)
    # the float sum is only vectorized when reassociation is allowed (or forced by the pragma)
    assert "vfmacc" in asm(fast_math="reassoc") or "vfmadd" in asm(fast_math="reassoc")
    plain = asm(fast_math="off")
    assert "vfmacc" not in plain and "vfmadd" not in plain
    # the prefetch blocks keep the loop vectorizable
    assert "vfmacc" in asm(prefetch=256) or "vfmadd" in asm(prefetch=256)


# ------------------------------------------------------------------------ generic default, all tasks


@pytest.fixture(scope="session")
def generic_default_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[EvalResult, Variant]]:
    jobs = [(t.name, t, OfflineGenerator(t, TARGET).render("generic", {})) for t in TASKS]
    results = _run_all(_evaluator(tmp_path_factory), jobs, timing=False)
    return {name: (results[name], v) for name, _, v in jobs}


@pytest.mark.parametrize("task", TASKS, ids=[t.name for t in TASKS])
def test_generic_default_is_correct(generic_default_results: dict, task: KernelTask) -> None:
    r, v = generic_default_results[task.name]
    assert r.status == EvalStatus.OK, _explain(r, v)
    assert r.sizes_checked == len(task.sizes)


# --------------------------------------------------------------------------------- family variants


def _representative(task: KernelTask) -> list[tuple[str, Variant]]:
    """Default, then each knob at its first and last value (the others at default) when valid."""
    gen = OfflineGenerator(task, TARGET)
    family = family_of(task)
    assert family
    space = next(s for s in gen.spaces if s.name == family)
    default = space.defaults()
    out = [(f"{task.name}:default", gen.render(family, default))]
    for knob in space.knobs:
        for value in {knob.values[0], knob.values[-1]} - {knob.default}:
            setting = {**default, knob.name: value}
            if space.valid(setting):
                out.append((f"{task.name}:{knob.name}={value}", gen.render(family, setting)))
    return out


def _random_combos(task: KernelTask, count: int, seed: int) -> list[tuple[str, Variant]]:
    gen = OfflineGenerator(task, TARGET)
    family = family_of(task)
    assert family
    space = next(s for s in gen.spaces if s.name == family)
    rng, out, seen = random.Random(seed), [], set()
    for _ in range(200):
        setting = {k.name: rng.choice(k.values) for k in space.knobs}
        v = gen.render(family, setting)
        if space.valid(setting) and v.key not in seen:
            seen.add(v.key)
            out.append((f"{task.name}:random{len(out)}", v))
            if len(out) == count:
                break
    return out


@pytest.fixture(scope="session")
def family_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[EvalResult, Variant]]:
    cases = [c for t in FAMILY_TASKS for c in _representative(t)]
    results = _run_all(_evaluator(tmp_path_factory), [(k, BY_NAME[k.split(":")[0]], v) for k, v in cases], False)
    return {k: (results[k], v) for k, v in cases}


def test_the_blas_families_cover_their_tasks() -> None:
    names = {t.name: family_of(t) for t in FAMILY_TASKS}
    assert names == {
        "sdot": "rvv_reduction", "snrm2": "rvv_reduction", "sasum": "rvv_reduction",
        "reduce_sum": "rvv_reduction", "reduce_max": "rvv_reduction",
        "saxpy": "rvv_elementwise", "sscal": "rvv_elementwise", "relu": "rvv_elementwise",
        "hardswish": "rvv_elementwise", "fp16_to_fp32": "rvv_elementwise", "fp32_to_fp16": "rvv_elementwise",
        "sgemv_n": "rvv_gemv", "sgemv_t": "rvv_gemv",
        "sgemm_64": "rvv_gemm", "sgemm_nt": "rvv_gemm", "sgemm_skinny_m4": "rvv_gemm",
        "sgemm_square_96": "rvv_gemm", "sgemm_tall_n16": "rvv_gemm",
        "sgemm_kernel_blas": "rvv_gemm_packed",
    }  # fmt: skip


@pytest.mark.parametrize("task", FAMILY_TASKS, ids=[t.name for t in FAMILY_TASKS])
def test_family_default_and_knob_extremes_are_correct(family_results: dict, task: KernelTask) -> None:
    mine = {k: rv for k, rv in family_results.items() if k.split(":")[0] == task.name}
    assert len(mine) >= 3
    for key, (r, v) in mine.items():
        assert r.status == EvalStatus.OK, f"{key}: {_explain(r, v)}"
        assert r.sizes_checked == len(task.sizes)


@pytest.fixture(scope="session")
def family_default_timings(tmp_path_factory: pytest.TempPathFactory) -> dict[str, EvalResult]:
    jobs = [(t.name, t, OfflineGenerator(t, TARGET).default()) for t in TIMED_TASKS]
    jobs.append(("sdot:inloop", BY_NAME["sdot"], OfflineGenerator(BY_NAME["sdot"], TARGET).render(
        "rvv_reduction", {"reduce": "inloop"})))  # fmt: skip
    return _run_all(_evaluator(tmp_path_factory), jobs, timing=True)


@pytest.mark.parametrize("task", TIMED_TASKS, ids=[t.name for t in TIMED_TASKS])
def test_family_default_beats_the_baseline_on_the_modeled_x60(family_default_timings: dict, task: KernelTask) -> None:
    r = family_default_timings[task.name]
    assert r.status == EvalStatus.OK and r.measurement == "modeled", r.feedback
    if r.bound in ("DRAM", "L2"):
        # relu at its bench size streams from DRAM, saxpy and sscal from L2 (at the measured 4.9 B/cycle of a
        # BPI-F3's L2 read stream): the autovectorized baseline already saturates that level, so no kernel
        # can beat it by much; it must simply not lose (within noise).
        assert r.speedup is not None and r.speedup >= 0.98, r.feedback
    else:
        assert r.speedup is not None and r.speedup > 1.05, r.feedback


def test_a_reduction_per_chunk_is_slower_than_one_at_the_end(family_default_timings: dict) -> None:
    """X60 table: vfredusum costs 15-57 cycles, so reducing every chunk never beats accumulating vectors. At
    sdot's bench size (128 KiB) both are bound by the L2 read stream (4.9 B/cycle measured on a BPI-F3), which
    hides the reductions; the in-loop form never wins."""
    end, inloop = family_default_timings["sdot"], family_default_timings["sdot:inloop"]
    assert end.candidate_cycles and inloop.candidate_cycles
    assert end.bound == "L2" and inloop.candidate_cycles >= 0.99 * end.candidate_cycles


@pytest.mark.slow
@pytest.mark.parametrize("task", FAMILY_TASKS, ids=[t.name for t in FAMILY_TASKS])
def test_random_knob_combinations_are_correct(task: KernelTask, tmp_path_factory: pytest.TempPathFactory) -> None:
    # Two combinations per task (seeded): over the family tasks that is dozens of knob interplays, at
    # half the CI minutes of four.
    cases = _random_combos(task, count=2, seed=11)
    results = _run_all(_evaluator(tmp_path_factory), [(k, task, v) for k, v in cases], timing=False)
    for key, v in cases:
        assert results[key].status == EvalStatus.OK, f"{key}: {_explain(results[key], v)}"


GENERIC_MOVES_PER_TASK = 2


def _generic_moves(index: int, task: KernelTask) -> list[tuple[str, str, object]]:
    """(key, knob, value): the task's share of the generic knobs, rotating over the suite so every knob is
    moved on many tasks without moving all eight on each (that was ~5 CI minutes)."""
    knobs = OfflineGenerator(task, TARGET).knobs("generic")
    rng = random.Random(task.name)
    picked = [knobs[(GENERIC_MOVES_PER_TASK * index + j) % len(knobs)] for j in range(GENERIC_MOVES_PER_TASK)]
    moves = []
    for knob in picked:
        value = rng.choice([v for v in knob.values if v != knob.default])
        moves.append((f"{task.name}:{knob.name}={value}", knob.name, value))
    return moves


def test_generic_moves_cover_every_knob_on_many_tasks() -> None:
    moved: dict[str, int] = {}
    for i, task in enumerate(TASKS):
        for _, name, _ in _generic_moves(i, task):
            moved[name] = moved.get(name, 0) + 1
    every = {k.name for t in TASKS for k in OfflineGenerator(t, TARGET).knobs("generic")}
    assert set(moved) == every and min(moved.values()) >= 8, moved  # fast_math: only where tolerance allows


@pytest.mark.slow
@pytest.mark.parametrize("index,task", list(enumerate(TASKS)), ids=[t.name for t in TASKS])
def test_generic_single_knob_moves_are_correct(
    index: int, task: KernelTask, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A seeded non-default value of the task's share of the generic knobs (fast-math only where the
    tolerance allows)."""
    gen = OfflineGenerator(task, TARGET)
    cases = [(key, task, gen.render("generic", {name: value})) for key, name, value in _generic_moves(index, task)]
    results = _run_all(_evaluator(tmp_path_factory), cases, timing=False)
    for key, _, v in cases:
        assert results[key].status == EvalStatus.OK, f"{key}: {_explain(results[key], v)}"
