"""The offline RVV rewrite of each loop shape passes the evaluator on real clang-22 and qemu k1-x60.

One small task per shape (map, reduction, widening reduction, stencil of 5 taps and of t taps), the rewrite
at its default knobs, checked at every size of the task (tails included: 1, 7, 100 and 1001 elements);
correctness only, two evaluations at a time in one module fixture.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from agent.offline.generator import OfflineGenerator
from core.settings import Settings
from evaluator.evaluate import Candidate, EvalResult, EvalStatus, Evaluator
from evaluator.targets import load_target
from tests.support.loop_tasks import example, shape_task

pytestmark = pytest.mark.qemu

TARGET = load_target("k1-x60")
CASES = {"map": "map_i8", "reduction": "l1_dist", "widening": "i8dot", "stencil": "fir5", "taps": "fir_taps"}


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[EvalResult, str]]:
    root = tmp_path_factory.mktemp("loop-rewrite")
    evaluator = Evaluator(Settings(home=root / "home", eval_timeout_s=120))

    def one(shape: str) -> tuple[str, tuple[EvalResult, str]]:
        name = CASES[shape]
        task = example(name) if name in ("i8dot", "fir5") else shape_task(root, name)
        variant = OfflineGenerator(task, TARGET).default()
        assert variant.family == "rvv_loop", f"{name}: {variant.family}"
        cand = Candidate(code=variant.code, cflags=variant.cflags, label=f"rvv_loop-{shape}")
        return shape, (evaluator.evaluate(task, TARGET, cand, "qemu", timing=False), variant.code)

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(pool.map(one, CASES))


@pytest.mark.parametrize("shape", list(CASES))
def test_the_rewrite_of_each_shape_is_correct_at_every_size(results, shape: str) -> None:
    result, code = results[shape]
    assert result.status == EvalStatus.OK, f"{result.status}: {result.feedback}\n{code}"
