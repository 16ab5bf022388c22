"""A run folder as export reads it: run.json (agent/report.py writes it) and the best candidate's code."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.export.routines import ExportRefused
from core.errors import InvalidInput
from evaluator.tasks import KernelTask, load_task


@dataclass
class RunRecord:
    """What export needs of a finished run: task, target, the best kernel's code, figures and lineage."""

    folder: Path
    run: str
    task: str
    task_path: str | None
    target: str
    code: str  # the best candidate exactly as the evaluator compiled it
    best: dict[str, Any]
    lineage: list[dict[str, Any]] = field(default_factory=list)

    @property
    def flags(self) -> list[str]:
        return list(self.best.get("build_flags") or [])

    @property
    def entry(self) -> str:
        """The kernel's C function name (the task's signature)."""
        return self.load_task().function_name

    def load_task(self) -> KernelTask:
        try:
            return load_task(self.task_path or self.task)
        except Exception as e:
            raise InvalidInput(
                f"{self.folder}: its task {self.task!r} cannot be loaded ({str(e).splitlines()[0]})",
                "export on a checkout that has the run's task",
            ) from None

    def kernel_source(self) -> str:
        """The kernel as a translation unit of its own: the headers and prototype the evaluator force-included
        (the prototype static: a library links only the routine's own symbol)."""
        from evaluator.harness import prototype

        return f"#include <stddef.h>\n#include <stdint.h>\nstatic {prototype(self.load_task())};\n\n{self.code}"

    def speedups(self) -> list[str]:
        """'2.410x over the competent baseline', ... (the library's when the run had one configured)."""
        b = self.best
        out = []
        if b.get("competent_speedup"):
            out.append(f"{b['competent_speedup']:.3f}x over the competent baseline")
        if b.get("speedup"):
            out.append(f"{b['speedup']:.3f}x over the plain baseline (the reference at clang -O3)")
        if b.get("library_speedup"):
            out.append(f"{b['library_speedup']:.3f}x over {b.get('library_label') or 'the library'}")
        return out

    def error_bar(self) -> str:
        """How far the figures can be trusted: the model's error on published kernels, when modeled."""
        if self.best.get("measurement") != "modeled":
            return f"{self.best.get('measurement')} on the target"
        from evaluator.costmodel import confidence

        bar = confidence.error_bar(self.target)
        return f"modeled cycles; model error {bar.text()}" if bar else "modeled; model error not measured for this core"

    def headline(self) -> str:
        return (
            f"EoK run {self.run}, task {self.task} on {self.target}: "
            + ", ".join(self.speedups())
            + f" ({self.error_bar()})"
        )

    def thoughts(self) -> list[dict[str, Any]]:
        """The thoughts that shaped the best kernel, root first, once each."""
        seen: dict[str, dict[str, Any]] = {}
        for row in self.lineage:
            if row.get("thought") and row["thought"] not in seen:
                seen[row["thought"]] = row
        return list(seen.values())


def resolve(run: str, home: Path) -> Path:
    """RUN as a run folder path or a run id under $EOK_HOME/runs."""
    path = Path(run).expanduser()
    if path.is_dir():
        return path.resolve()
    by_id = home / "runs" / run
    if by_id.is_dir():
        return by_id
    raise InvalidInput(f"{run}: no such run folder or run id under {home / 'runs'}", "see `eok optimize` output")


def read_run(folder: Path) -> RunRecord:
    """The run folder's record; one clear line when it is not a run folder or proposes no kernel."""
    path = folder / "run.json"
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise InvalidInput(
            f"{folder}: no run.json (not a run folder, or written before export existed)",
            f"rewrite it with `eok optimize --resume {folder.name}`",
        ) from None
    except ValueError as e:
        raise InvalidInput(f"{path}: not valid JSON ({e})", "rewrite it with `eok optimize --resume`") from None
    best = data.get("best")
    if not best:
        raise ExportRefused(
            f"run {data.get('run')} has no correct, timed candidate to export", "export a run that found one"
        )
    code_path = folder / best["code_file"]
    if not code_path.is_file():
        raise InvalidInput(f"{code_path}: the best candidate's code is missing", "rewrite with `eok optimize --resume`")
    return RunRecord(
        folder=folder,
        run=data["run"],
        task=data["task"],
        task_path=data.get("task_path"),
        target=data["target"],
        code=code_path.read_text(),
        best=best,
        lineage=data.get("lineage") or [],
    )
