"""`eok optimize`'s live and final tables lead with the speedup over the competent baseline (issue 24, item 1)."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from agent.report import yardstick
from agent.types import ProgressEvent, RunOutcome
from knowledge.models import Experience, ExperienceStatus, Run
from service.cli import optimize

NOTE = "weak baseline: its reference calls scalar libm expf, which clang cannot vectorize here"


def _render(renderable, width: int = 80) -> str:
    buf = io.StringIO()
    Console(file=buf, width=width, color_system=None).print(renderable)
    return buf.getvalue()


def test_yardstick_leads_with_competent_and_labels_both() -> None:
    assert yardstick(1.12, 6.95) == "1.12x over competent, 6.95x over -O3"
    assert yardstick(None, 6.95) == "6.95x over -O3"  # no competent figure (a failed competent build)
    assert yardstick(None, None) == "-"


def test_the_live_table_shows_both_speedups_and_the_weak_baseline_note() -> None:
    progress = optimize._Progress(budget=12, note=NOTE)
    for n, (competent, plain) in enumerate([(0.2, 1.1), (1.12, 6.95), (0.9, 5.5)], 1):
        best = (1.12, 6.95) if n >= 2 else (0.2, 1.1)
        progress.update(
            ProgressEvent(
                run_id="r",
                kind="evaluation",
                direction="starter:lmul",
                evaluations=n,
                budget=12,
                status="ok",
                speedup=plain,
                competent_speedup=competent,
                best_speedup=best[1],
                best_competent_speedup=best[0],
            )
        )
    text = _render(progress.table())
    assert "evaluations 3/12   best 1.12x over competent, 6.95x over -O3" in text
    assert "best: competent / -O3" in text and "1.12x / 6.95x" in text
    assert "scalar libm expf" in text


def test_the_final_summary_leads_with_competent_and_says_the_baseline_is_weak(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    buf = io.StringIO()
    monkeypatch.setattr(optimize, "console", Console(file=buf, width=80, color_system=None))
    best = Experience(
        id="x", task_id="softmax", target_key="k1-x60", status=ExperienceStatus.OK, speedup=6.95, competent_speedup=1.12
    )
    run = Run(id="r", task_id="softmax", target_key="k1-x60", budget=4, best_speedup=6.95, best_competent_speedup=1.12)
    run.baseline_note = NOTE
    lineage = [{"depth": 0, "status": "ok", "speedup": 6.95, "competent_speedup": 1.12, "commits": []}]
    optimize._print_outcome(RunOutcome(run=run, best=best, lineage=lineage))
    text = buf.getvalue()
    assert "best kernel: 1.12x over the competent baseline, 6.95x over -O3" in text
    assert "over competent" in text and "over -O3" in text and "scalar libm expf" in text
    assert "1.12x / 6.95x" in text  # the lineage too
