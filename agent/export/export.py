"""The export itself: refuse early, write one commit on a new branch, then build, test and benchmark."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.export import ggml, openblas
from agent.export.git import branch_worktree, check_clone, commit
from agent.export.routines import ExportRefused, GgmlRoutine, OpenBlasRoutine, ggml_routine, openblas_routine
from agent.export.runfolder import RunRecord, read_run, resolve
from core.errors import EokError
from evaluator.tasks import KernelTask

Progress = Callable[[str], None]
EXPORT_LIBRARIES = ("openblas", "ggml")
NOT_IMPROVED = (
    "the run's best is not 1% faster than its task's competent baseline (its report proposes no kernel); "
    "whether it beats the library's kernel is for the library's benchmark to say"
)


@dataclass
class ExportResult:
    """What an export did and found; `good` only when the library's own tests of the routine all passed."""

    run: str
    task: str
    library: str
    routine: str
    clone: str
    branch: str
    base: str  # the clone's HEAD the branch starts from
    commit: str
    files: list[str]
    message: str
    tests: dict[str, Any] | None = None  # passed, failed, failed_cases, command
    cycles_before: float | None = None  # the library's benchmark of the routine, modeled, at HEAD
    cycles_after: float | None = None  # the same benchmark on the branch
    bench_size: int | None = None
    problem: str | None = None  # why the export is not good (a failed test, a failed build)
    notes: list[str] = field(default_factory=list)

    @property
    def good(self) -> bool:
        t = self.tests or {}
        return self.problem is None and t.get("failed", 1) == 0 and t.get("passed", 0) > 0

    @property
    def delete_hint(self) -> str:
        return f"git -C {self.clone} branch -D {self.branch}"


def _silent(_: str) -> None:
    pass


def export_run(
    run: str,
    library: str,
    clone: Path,
    *,
    home: Path,
    progress: Progress = _silent,
    verify: bool = True,
) -> ExportResult:
    """Export run `run` (id or folder) into `clone` of `library`; see the package docstring."""
    if library not in EXPORT_LIBRARIES:
        raise ExportRefused(f"cannot export to {library!r}", f"choose one of: {', '.join(EXPORT_LIBRARIES)}")
    clone = Path(clone).expanduser().resolve()
    record = read_run(resolve(run, home))
    task = record.load_task()
    routine = openblas_routine(task) if library == "openblas" else ggml_routine(task)
    _check_flags(record, library)
    branch = f"eok/{record.task}-{record.run}"
    base = check_clone(clone, branch)
    files = _plan(record, routine, clone)
    result = ExportResult(
        run=record.run,
        task=record.task,
        library=library,
        routine=routine.routine,
        clone=str(clone),
        branch=branch,
        base=base,
        commit="",
        files=[str(p) for p in files],
        message=commit_message(record, library, routine, files, base),
        bench_size=bench_size(task, routine),
    )
    if not record.best.get("improved", True):
        result.notes.append(NOT_IMPROVED)
    before = _build(library, clone, record.target, home, progress, "before (HEAD)") if verify else None
    with branch_worktree(clone, branch, home / "export") as tree:
        result.commit = commit(tree, files, result.message)
        progress(f"export: committed {result.commit[:10]} on {branch} ({', '.join(result.files)})")
        if verify:
            _verify(result, before, tree, record.target, routine, home, progress)
    return result


def bench_size(task: KernelTask, routine: OpenBlasRoutine | GgmlRoutine) -> int:
    """The library benchmark's size: the task's bench size (ggml's counts values, the task's blocks of 32; a
    GEMM micro-kernel's: the order of the square sgemm whose driver calls it with that many rows, bm)."""
    size = task.bench_size
    if isinstance(routine, OpenBlasRoutine) and routine.packed:
        return size["bm"]
    return size["nb"] * 32 if "nb" in size else size["n"]


def _plan(record: RunRecord, routine: OpenBlasRoutine | GgmlRoutine, clone: Path) -> dict[Path, str]:
    if isinstance(routine, OpenBlasRoutine):
        return openblas.plan(record, routine, clone)
    return ggml.plan(record, routine, clone)


def _check_flags(record: RunRecord, library: str) -> None:
    """A kernel measured with extra flags would be other code under the library's own compile line."""
    extra = record.best.get("cflags") or []
    if extra:
        raise ExportRefused(
            f"run {record.run}'s best kernel was measured with extra flags {' '.join(extra)}, which {library} does "
            "not compile its kernel files with: inside the library it would be other code than was measured",
            "export a run whose best needs no extra flags (an RVV intrinsics family), or optimize again",
        )


def _build(library: str, tree: Path, target: str, home: Path, progress: Progress, label: str):
    from evaluator.upstream.build import build_library

    progress(f"export: building {library} {label}")
    return build_library(library, tree, target, progress=progress, home=home)


def _verify(
    result: ExportResult,
    before: Any,
    tree: Path,
    target: str,
    routine: OpenBlasRoutine | GgmlRoutine,
    home: Path,
    progress: Progress,
) -> None:
    """Build the branch, run the routine's library tests on it, benchmark both builds; fills `result`."""
    from evaluator.upstream.library_tests import run_library_benchmark, run_library_tests

    try:
        after = _build(result.library, tree, target, home, progress, f"after ({result.branch})")
    except EokError as e:
        result.problem = f"the library does not build with the exported kernel: {e.message}"
        return
    progress(f"export: running {result.library}'s own tests for {routine.routine} under qemu")
    try:
        t = run_library_tests(after, routine.routine, progress=progress)
    except EokError as e:  # the tests did not build against the exported kernel
        result.problem = f"the library's tests of {routine.routine} did not run: {e.message}"
        return
    result.tests = {
        "passed": t.passed,
        "failed": t.failed,
        "failed_cases": list(t.failed_cases),
        "command": t.command,
    }
    if t.failed or not t.passed:
        cases = ", ".join(t.failed_cases[:5]) or "no case ran"
        result.problem = f"{t.failed} of {t.passed + t.failed} library tests of {routine.routine} failed: {cases}"
        result.problem += _at_head(before, routine.routine, t.failed_cases, progress)
        return  # the cycles of a wrong kernel are no figure to print beside the library's
    progress(f"export: {result.library}'s benchmark of {routine.routine} at size {result.bench_size}, before and after")
    try:
        result.cycles_before = run_library_benchmark(before, routine.routine, result.bench_size)
        result.cycles_after = run_library_benchmark(after, routine.routine, result.bench_size)
    except EokError as e:  # no benchmark driver for this routine: the tests still judge the export
        result.notes.append(f"no library benchmark: {e.message}")


def _at_head(before: Any, routine: str, failed: list[str], progress: Progress) -> str:
    """Whether the same cases fail at HEAD: then the export cannot be judged, whoever is at fault (the
    library, the emulator); it is still not called good."""
    from evaluator.upstream.library_tests import run_library_tests

    progress("export: the same tests at HEAD, to tell the export's failures from the library's own")
    try:
        head = run_library_tests(before, routine, progress=progress)
    except EokError as e:
        return f" (at HEAD they do not run either: {e.message})"
    same = sorted(set(failed) & set(head.failed_cases))
    if same:
        return f"; they fail at HEAD too ({', '.join(same[:5])}): the library's tests cannot judge this export here"
    return f"; at HEAD they pass ({head.passed} passed): the exported kernel breaks them"


def commit_message(
    record: RunRecord, library: str, routine: OpenBlasRoutine | GgmlRoutine, files: dict[Path, str], base: str
) -> str:
    """Subject, the figures the run measured, what changed and the rule it follows, and the thoughts."""
    b = record.best
    if isinstance(routine, OpenBlasRoutine):
        name = next(p.name for p in files if p.suffix == ".c")
        original = next(t for p, t in files.items() if p.suffix == ".c").split('#include "', 1)[1].split('"', 1)[0]
        subject = f"kernel/riscv64: {routine.routine} for {record.target} from EoK run {record.run}"
        change = (
            f"{routine.entry} now names {name}. The calls inside the task's contract ({routine.contract}) run "
            f"the run's kernel; every other call runs the previous kernel, {original}, which {name} compiles "
            "under another name (#include of the original file with CNAME redefined). Its builds for "
            f"{', '.join(routine.not_this)} compile the original unchanged."
        )
    else:
        subject = f"ggml-cpu: RVV branch of {routine.routine} from EoK run {record.run}"
        change = (
            f"The `#if defined(__riscv_v)` branch of {routine.routine} now calls the run's kernel, placed just "
            f"before the function under the same condition ({routine.contract}); the scalar fallback is kept."
        )
    thoughts = [
        f"  - {t['thought']}: {t.get('thought_title') or '-'}" + (f" ({t['technique']})" if t.get("technique") else "")
        for t in record.thoughts()
    ] or ["  - none credited: the kernel came from the generator's own moves"]
    lines = [
        subject,
        "",
        f"EoK run {record.run} optimized the task {record.task} for {record.target}; its best kernel "
        f"(step {b.get('step')}, experience {b.get('experience')}) measured:",
        *(f"  - {s}" for s in record.speedups()),
        f"  ({record.error_bar()})",
        *(["", *_wrap(f"Note: {NOT_IMPROVED}.")] if not b.get("improved", True) else []),
        "",
        *_wrap(change),
        "",
        "Thoughts it came from (root first):",
        *thoughts,
        "",
        f"The kernel was measured as built by: clang-22 {' '.join(record.flags)}",
        f"Base: {base}. Exported with `eok export {record.run} --to {library}`.",
    ]
    return "\n".join(lines) + "\n"


def _wrap(text: str, width: int = 72) -> list[str]:
    import textwrap

    return textwrap.wrap(text, width)
