"""A cold offline run's first candidate is the generator's own vector kernel for the task, credited to no thought.

Without it, a run whose directions named only techniques the task's family has no knob for (LMUL and widening
for quantize_row_q8_0) tuned clang's auto-vectorized C for all 16 evaluations (1.05x) while a blank graph's
scattered directions wrote the vector kernel (5.67x): bench_ablation, 2026-12-03.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from agent.generation import OfflineCandidateGenerator
from agent.offline import OfflineGenerator
from agent.optimizer import Optimizer
from core.settings import Settings
from evaluator.targets import load_target
from evaluator.tasks import load_task


def seeds_for(task: str, tmp_path, generator=None, same_task=()) -> list:
    parts = SimpleNamespace(settings=Settings(home=tmp_path), store=None, embedder=None)
    opt = Optimizer(parts, generator=generator or OfflineCandidateGenerator())
    ctx = SimpleNamespace(same_task=list(same_task), transfers=[], similar_tasks=[])
    state = SimpleNamespace(task=load_task(task), target=load_target("k1-x60"), run=None, ctx=ctx)
    return opt._seeds(state)


@pytest.mark.parametrize("task,family", [("quantize_row_q8_0", "quant"), ("rmsnorm", "norm")])
def test_a_cold_run_is_seeded_with_the_plain_vector_kernel(tmp_path, task: str, family: str) -> None:
    seeds = seeds_for(task, tmp_path)
    plain = OfflineGenerator(load_task(task), load_target("k1-x60"), start="plain")
    assert [s.variant.family for s in seeds] == [family]
    assert seeds[0].variant.knobs == plain.knobs_at_start(family)
    assert seeds[0].key == plain.render(family, plain.knobs_at_start(family)).key  # proposals dedupe against it
    assert not seeds[0].variant.from_code  # no thought's code shaped it: nothing to credit


def test_no_hand_written_seed_when_experience_or_another_generator_decides(tmp_path) -> None:
    earlier = SimpleNamespace(code="int x;", cflags=[], key="k", variant={}, speedup=2.0)
    assert [s.description for s in seeds_for("quantize_row_q8_0", tmp_path, same_task=[earlier])] == [
        "earlier best for this task (2.00x)"
    ]
    llm = SimpleNamespace(name="llm")  # an LLM writes its own first kernel
    assert seeds_for("quantize_row_q8_0", tmp_path, generator=llm) == []
