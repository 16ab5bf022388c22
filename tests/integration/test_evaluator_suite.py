"""Every task (bundled suite + EOK_TASK_DIRS): its reference passes its own harness on qemu k1-x60 and natively,
and so does its competent baseline (the reference with the FP flags its tolerance allows) on qemu k1-x60.

The evaluations run two at a time in one session fixture (the machine has two cores); each task then
gets its own test result.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from core.settings import Settings, get_settings
from evaluator.evaluate import Candidate, EvalResult, EvalStatus, Evaluator
from evaluator.targets import load_target
from evaluator.tasks import KernelTask, list_tasks
from evaluator.toolchain import competent_cflags

# One session fixture evaluates 3 x 53 references (~3 min on a quiet 2-core machine): more than the
# default per-test limit when the machine is shared.
pytestmark = [pytest.mark.qemu, pytest.mark.timeout(1800)]

TASKS = list_tasks(get_settings())
RUNNERS = {"qemu": "k1-x60", "native": "host"}
# "competent": the reference with the flags its tolerance allows (the competent baseline), on qemu k1-x60
TARGETS = {**RUNNERS, "competent": "k1-x60"}


@pytest.fixture(scope="session")
def suite_results(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], EvalResult]:
    home: Path = tmp_path_factory.getbasetemp() / "eok-evaluator-home"
    evaluator = Evaluator(Settings(home=home, eval_timeout_s=120))

    def evaluate(job: tuple[KernelTask, str]) -> tuple[tuple[str, str], EvalResult]:
        task, runner = job
        flags = competent_cflags(task) if runner == "competent" else []
        cand = Candidate(code=task.reference_code, cflags=flags, label="reference")
        run = "qemu" if runner == "competent" else runner
        return (task.name, runner), evaluator.evaluate(task, load_target(TARGETS[runner]), cand, run, timing=False)

    jobs = [(t, r) for t in TASKS for r in TARGETS]
    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(pool.map(evaluate, jobs))


@pytest.mark.parametrize("runner", sorted(TARGETS))
@pytest.mark.parametrize("task", TASKS, ids=[t.name for t in TASKS])
def test_reference_passes_its_own_harness(
    suite_results: dict[tuple[str, str], EvalResult], task: KernelTask, runner: str
) -> None:
    r = suite_results[(task.name, runner)]
    assert r.status == EvalStatus.OK, f"{task.name} on {runner}: {r.feedback}"
    assert r.sizes_checked == len(task.sizes)
    # An expected output that is all zeros cannot tell a kernel writing zeros from a correct one.
    assert r.reference_nonzero and all(n > 0 for n in r.reference_nonzero.values()), r.reference_nonzero


def test_the_suite_is_large() -> None:
    assert len(TASKS) >= 40
