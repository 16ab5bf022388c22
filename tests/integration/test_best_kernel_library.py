"""best.c is a file a library can build to the code that was measured (issue 24, item 2).

The run's flags change the code (sdot at -O3 alone is a scalar loop; -ffast-math vectorizes it), so best.c
carries its build line and refuses to compile without it. Built the way a library would, with a plain
`clang-22 -O2 --target=riscv64 -c` plus the printed line, it must give the evaluator's object code.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from agent.report import library_source, write_artifacts
from agent.types import RunOutcome
from evaluator.targets import load_target
from evaluator.tasks import load_task
from evaluator.toolchain import CLANG, Toolchain, check_cflags
from knowledge.models import Experience, ExperienceStatus, Run

FLAGS = ["-ffast-math", "-mrvv-max-lmul=m2"]  # a flag the evaluator translates, and one that changes the code


def _outcome(task_dir: Path, code: str) -> RunOutcome:
    best = Experience(
        id="r1-0003",
        task_id=load_task(task_dir).name,
        target_key="k1-x60",
        run_id="r1",
        step=3,
        code=code,
        cflags=FLAGS,
        status=ExperienceStatus.OK,
        speedup=6.95,
        competent_speedup=1.12,
    )
    run = Run(
        id="r1",
        task_id=best.task_id,
        target_key="k1-x60",
        budget=4,
        best_speedup=6.95,
        best_competent_speedup=1.12,
        settings=f'{{"task_path": "{task_dir}", "runner": "qemu"}}',
    )
    rows = [
        {
            "step": s,
            "code": code if s == 3 else f"/* step {s} */\n{code}",
            "parent_step": None,
            "change": "-",
            "status": "ok",
            "reason": "-",
            "speedup": 1.0,
            "cflags": [],
        }
        for s in range(4)
    ]
    return RunOutcome(run=run, best=best, candidates=rows, history=[1.0, 1.0, 1.0, 6.95])


def _text(obj: Path) -> str:
    """The object's code and relocations, without the header that names the file."""
    out = subprocess.run(["llvm-objdump-22", "-d", "-r", str(obj)], capture_output=True, text=True, check=True)
    return out.stdout.split("Disassembly of section", 1)[1]


@pytest.fixture
def user_task(tmp_path: Path) -> Path:
    """sdot copied as a user's own task given by path (not a suite name: `eok eval sdot2` would not find it)."""
    src = load_task("sdot").directory
    dst = tmp_path / "tasks" / "sdot2"
    shutil.copytree(src, dst)
    spec = dst / "task.toml"
    spec.write_text(spec.read_text().replace('name = "sdot"', 'name = "sdot2"'))
    return dst


def test_best_c_builds_as_a_library_would_to_the_measured_code(tmp_path: Path, user_task: Path) -> None:
    task = load_task(user_task)
    # The kernel body only: its prototype and headers come from best.c's prelude, as the evaluator gives them.
    code = task.reference_code
    outcome = _outcome(user_task, code)
    run_dir = tmp_path / "run"
    paths = write_artifacts(run_dir, outcome)
    best = Path(paths["code"])
    assert best.read_text() == library_source(outcome)

    # The evaluator's own build of the same candidate.
    flags, problem = check_cflags(FLAGS)
    assert problem is None
    work = tmp_path / "eval"
    work.mkdir()
    Toolchain(tmp_path / "cache").build(task, load_target("k1-x60"), "emulator", code, flags, work)
    measured = _text(work / "candidate.o")

    printed = next(ln for ln in best.read_text().splitlines() if ln.lstrip(" *").startswith(CLANG))
    argv = shlex.split(printed.lstrip(" *"))
    assert argv[0] == CLANG and argv[-2:] == ["-c", "best.c"]
    library = [CLANG, "-O2", "--target=riscv64", *argv[1:-2], "-c", "best.c", "-o", "lib.o"]
    done = subprocess.run(library, cwd=run_dir, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert _text(run_dir / "lib.o") == measured
    assert "vsetvli" in measured  # the flags were honoured: -O3 alone keeps sdot's ordered sum scalar

    # Without the line the file does not build (rather than silently building other, slower code).
    bare = subprocess.run(
        [CLANG, "-O2", "--target=riscv64", "-c", "best.c", "-o", "bare.o"], cwd=run_dir, capture_output=True, text=True
    )
    assert bare.returncode != 0 and "build best.c with the line at its top" in bare.stderr


def test_every_candidate_is_kept_and_the_report_reproduces_a_task_given_by_path(
    tmp_path: Path, user_task: Path
) -> None:
    outcome = _outcome(user_task, load_task(user_task).reference_code)
    run_dir = tmp_path / "run"
    report = Path(write_artifacts(run_dir, outcome)["report"]).read_text()
    kept = sorted(p.name for p in (run_dir / "candidates").iterdir())
    assert kept == ["000.c", "001.c", "002.c", "003.c"]
    assert (run_dir / "candidates" / "001.c").read_text().startswith("/* step 1 */")
    assert "[2](candidates/002.c)" in report  # the candidate table links each one
    # The best kernel alone: by the task's directory (its name is not a suite task) and its exact code.
    line = next(ln for ln in report.splitlines() if ln.endswith("# the best kernel alone"))
    assert line.startswith(f"eok eval {user_task} --target k1-x60 --candidate {run_dir / 'candidates' / '003.c'}")
    assert "--cflags '-ffast-math -mrvv-max-lmul=m2'" in line
    assert f"eok optimize {user_task} " in report


def test_the_report_leads_every_figure_with_the_competent_speedup(tmp_path: Path, user_task: Path) -> None:
    outcome = _outcome(user_task, load_task(user_task).reference_code)
    outcome.candidates[3].update(speedup=6.95, competent_speedup=1.12, direction="idea-lmul", direction_title="LMUL")
    outcome.run.baseline_note = "weak baseline: its reference calls scalar libm expf"
    report = Path(write_artifacts(tmp_path / "run", outcome)["report"]).read_text()
    assert "**Best kernel: 1.120x over the competent baseline, 6.950x over clang -O3**" in report
    assert "**Note: weak baseline: its reference calls scalar libm expf.**" in report
    assert "| LMUL | 1 | 1.120x / 6.950x |" in report  # the directions table
    assert "| 1.120x / 6.950x |" in report.split("## Evaluated candidates")[1]
    assert "weak baseline: its reference calls scalar libm expf" in (tmp_path / "run" / "best.c").read_text()
