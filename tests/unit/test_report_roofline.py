"""The run report shows the best kernel's evaluation feedback, which carries the modeled roofline."""

from __future__ import annotations

from pathlib import Path

from agent.report import write_artifacts
from agent.types import RunOutcome
from evaluator.evaluate import EvalResult, EvalStatus, roofline_note
from knowledge.models import Experience, ExperienceStatus, Run


def test_roofline_note_names_the_bound_and_the_ceilings() -> None:
    r = EvalResult(
        status=EvalStatus.OK,
        bound="DRAM",
        flops_per_cycle=1.12,
        dram_bytes_per_cycle=4.37,
        peak_flops_per_cycle=16.0,
        peak_dram_bytes_per_cycle=4.38,
    )
    assert roofline_note(r) == "; DRAM-bound: 4.37 of 4.38 DRAM B/cycle, 1.12 of 16 FLOP/cycle"
    assert roofline_note(EvalResult(status=EvalStatus.OK)) == ""  # not modeled: nothing to say


def test_report_carries_the_best_kernels_roofline(tmp_path: Path) -> None:
    feedback = "correct on 6 sizes; 1.20x the baseline's speed; DRAM-bound: 4.37 of 4.38 DRAM B/cycle"
    best = Experience(
        id="x1",
        task_id="sgemv_n",
        target_key="k1-x60",
        status=ExperienceStatus.OK,
        code="void f(){}",
        speedup=1.2,
        feedback=feedback,
    )
    run = Run(id="r1", task_id="sgemv_n", target_key="k1-x60", budget=1, best_speedup=1.2)
    paths = write_artifacts(tmp_path, RunOutcome(run=run, best=best))
    assert f"Evaluation: {feedback}" in Path(paths.get("report", tmp_path / "report.md")).read_text()
