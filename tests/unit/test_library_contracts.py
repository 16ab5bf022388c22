"""Library-grade task contracts and the library baseline's plumbing (issue 21, items 2 and 3), without running
anything: the task format's `[[library]]`, `modes`, `derived` and scalar `values`, the sizes the evaluator
draws for such tasks, the adapter's C, and the bootstrap's medians."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from agent.bootstrap import PairRow, Yardsticks
from core.errors import InvalidInput
from evaluator import harness, verdict
from evaluator.tasks import load_task
from evaluator.upstream.baseline import ConfiguredLibrary, LibraryBaseline
from evaluator.upstream.built import BuiltLibrary

VARIANTS = {
    "sdot_blas": "cblas_sdot",
    "saxpy_blas": "cblas_saxpy",
    "snrm2_blas": "cblas_snrm2",
    "sgemv_t_blas": "cblas_sgemv",
    "sgemm_blas": "cblas_sgemm",
    "sgemm_kernel_blas": "sgemm_kernel",
    "q8_0_q8_0_dot_ggml": "ggml_vec_dot_q8_0_q8_0",
}


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_each_library_grade_variant_maps_to_its_routine(name: str) -> None:
    task = load_task(name)
    assert [r.routine for r in task.library] == [VARIANTS[name]]
    assert VARIANTS[name] + "(" in task.library[0].adapter and VARIANTS[name] + "(" in task.library[0].header


def test_drawn_sizes_of_sgemm_blas_are_valid_calls() -> None:
    task = load_task("sgemm_blas")
    listed = {(s["transa"], s["transb"]) for s in task.sizes}
    drawn = verdict.heldout_sizes(task, 256, 8 << 20, 12345)
    drawn += [verdict.secret_size(task, seed) for seed in range(20)]  # type: ignore[list-item]
    assert len(drawn) > 10
    for z in drawn:
        assert (z["transa"], z["transb"]) in listed  # modes: taken together from one listed size
        assert z["lda"] > max(z["m"], z["k"]) and z["ldb"] > max(z["k"], z["n"]) and z["ldc"] > z["m"]  # derived


def test_drawn_sizes_of_sdot_blas_keep_listed_increments_and_vary_n() -> None:
    task = load_task("sdot_blas")
    pairs = {(s["incx"], s["incy"]) for s in task.sizes}
    drawn = verdict.heldout_sizes(task, 256, 8 << 20, 7)
    assert {(z["incx"], z["incy"]) for z in drawn} <= pairs
    assert {z["n"] for z in drawn} - {s["n"] for s in task.sizes}  # unlisted lengths
    assert verdict.complete_size(load_task("sdot"), {"n": 5}, random.Random(1)) == {"n": 5}  # others untouched


def test_scalar_values_reach_the_harness_per_listed_size() -> None:
    task = load_task("saxpy_blas")
    assert task.args["alpha"].values == [0.0, 1.5, 0.0, -0.75]
    source = harness.generate(task)
    assert "eok_svalues_0[] = {0.0, 1.5, 0.0, -0.75}" in source and "eok_svalues_0, 4}" in source


def _spec(tmp_path: Path, extra: str, args: str = "") -> Path:
    d = tmp_path / "t"
    d.mkdir()
    (d / "task.toml").write_text(
        'name = "t"\ncategory = "blas"\noperator = "dot"\ndtype = "f32"\ndescription = "d"\n'
        'signature = "float t(int n, const float *x, int incx)"\n'
        f"{extra}\nsizes = [{{ n = 4, incx = 1, bench = true }}]\n"
        f'[args.x]\nkind = "in"\ncount = "n * incx"\n{args}'
    )
    (d / "reference.c").write_text("float t(int n, const float *x, int incx) { return x[0]; }\n")
    return d


@pytest.mark.parametrize(
    ("extra", "args", "field"),
    [
        ('modes = ["incy"]', "", "modes.0"),
        ('derived = { incx = "m + 1" }', "", "derived.incx"),
        ('modes = ["incx"]\nderived = { incx = "1" }', "", "derived.incx"),
        ("", "values = [1.0]\n", "args.x.values"),
        ('[[library]]\nname = "mkl"\nroutine = "f"\nheader = "h"\nadapter = "a"', "", "library.0.name"),
    ],
)
def test_bad_library_grade_fields_name_the_field(tmp_path: Path, extra: str, args: str, field: str) -> None:
    tables = extra.startswith("[[library]]")  # an array of tables goes after the args' tables
    d = _spec(tmp_path, "", args + "\n" + extra) if tables else _spec(tmp_path, extra, args)
    with pytest.raises(InvalidInput, match=rf"field '{field}'"):
        load_task(d)


def test_the_adapter_is_the_task_s_signature_calling_the_routine() -> None:
    task = load_task("sdot")
    built = BuiltLibrary(
        library="openblas", commit="f" * 40, target="k1-x60", clone="/x", archives=[], include_dirs=[], cflags=[]
    )
    lib = LibraryBaseline(ConfiguredLibrary(built, Path("/x/eok-library.json"), "fp"), task.library[0], task)
    src = lib.adapter_source
    assert "float eok_lib_sdot(int n, const float *x, const float *y) {" in src
    assert "float cblas_sdot(int n, const float *x, int incx, const float *y, int incy);" in src
    assert "return cblas_sdot(n, x, 1, y, 1);" in src and lib.label == "openblas@ffffffffff"


def _row(task: str, competent: float | None, library: float | None, label: str | None = None) -> PairRow:
    return PairRow(
        task=task,
        target="k1-x60",
        run_id=task,
        status="done",
        best_speedup=9.0,
        best_competent_speedup=competent,
        best_speedup_over_library=library,
        library_label=label,
    )


def test_the_bootstrap_reports_the_median_over_the_library_where_tasks_have_one() -> None:
    rows = [
        _row("sdot", 1.2, 0.9, "openblas@0123456789"),
        _row("saxpy", 1.1, 1.5, "openblas@0123456789"),
        _row("q8_0_q8_0_dot", 2.0, 1.1, "ggml@abcdef0123"),
        _row("relu", 3.0, None),
    ]
    y = Yardsticks.of(rows)
    assert (y.median_over_library, y.library_pairs) == (1.1, 3)
    assert (y.median_over_competent, y.competent_pairs) == (pytest.approx(1.6), 4)
    assert y.libraries == ["ggml@abcdef0123", "openblas@0123456789"]
    assert "median best speedup over the library 1.10x over 3 runs" in y.lines()[1]
    assert "the EoK paper's yardstick" in y.lines()[1]
    assert len(Yardsticks.of([_row("relu", 3.0, None)]).lines()) == 1  # no library: no library line


def test_the_run_report_and_final_table_show_the_speedup_over_the_library(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import io

    from rich.console import Console

    from agent.report import write_artifacts, yardstick
    from agent.types import RunOutcome
    from knowledge.models import Experience, ExperienceStatus, Run
    from service.cli import optimize

    label = "openblas@0123456789"
    best = Experience(
        id="r-0001",
        task_id="sdot",
        target_key="k1-x60",
        status=ExperienceStatus.OK,
        code="float sdot(int n, const float *x, const float *y) { return 0; }",
        speedup=6.95,
        competent_speedup=1.12,
        speedup_over_library=1.05,
        library_label=label,
    )
    run = Run(
        id="r",
        task_id="sdot",
        target_key="k1-x60",
        budget=2,
        best_speedup=6.95,
        best_competent_speedup=1.12,
        best_speedup_over_library=1.05,
        library_label=label,
    )
    assert yardstick(1.12, 6.95, 1.05, label) == f"1.12x over competent, 6.95x over -O3, 1.05x over {label}"
    write_artifacts(tmp_path, RunOutcome(run=run, best=best))
    report = (tmp_path / "report.md").read_text()
    assert f"Over the library: 1.050x over {label}" in report
    assert f"**Best kernel: 1.120x over the competent baseline, 6.950x over clang -O3, 1.050x over {label}**" in report
    buf = io.StringIO()
    monkeypatch.setattr(optimize, "console", Console(file=buf, width=100, color_system=None))
    optimize._print_outcome(RunOutcome(run=run, best=best))
    assert f"over the library: 1.05x over {label}" in buf.getvalue()
    assert f"6.95x over -O3, 1.05x over {label}" in buf.getvalue()
    plain = Run(id="p", task_id="sdot", target_key="k1-x60", budget=2, best_speedup=6.95, best_competent_speedup=1.12)
    unconfigured = best.model_copy(update={"speedup_over_library": None, "library_label": None})
    write_artifacts(tmp_path / "plain", RunOutcome(run=plain, best=unconfigured))
    plain_report = (tmp_path / "plain" / "report.md").read_text()
    assert "Over the library" not in plain_report and "over openblas" not in plain_report  # only where configured
