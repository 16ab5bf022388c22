"""Evaluate a candidate kernel: a cascade of cheap checks first, then correctness, then timing.

    flags allow-list -> static check -> compile + link -> correctness run (every size, sandboxed)
    -> timing (cost model cycles under qemu, or real seconds on a board / this host)

Every stage can stop the cascade with a status and a short `feedback` an LLM can act on.

Two baselines time the same reference (docs/TASKS.md, "Two baselines"): the plain one (`clang -O3`,
strict FP: what `speedup` divides by) and the competent one (the flags the task's tolerance allows,
`toolchain.competent_cflags`: what `competent_speedup` divides by, and what headline figures quote).
Both divide the same candidate time, so they rank candidates of one task identically.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import tempfile
import time
from enum import StrEnum
from functools import cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from core.errors import EokError
from core.settings import Settings, get_settings
from evaluator import harness, safety
from evaluator.runners import Runner, get_runner
from evaluator.runners.qemu import QemuRunner, model_available, model_cache_dir
from evaluator.sandbox import OOM_MARKER, Limits, RunOutput
from evaluator.targets import TargetProfile, load_target
from evaluator.tasks import KernelTask
from evaluator.toolchain import (
    Build,
    CompileDiagnostic,
    CompileFailed,
    Toolchain,
    check_cflags,
    competent_cflags,
    compiler_version,
)

BASELINE_CACHE_VERSION = "2"


class EvalStatus(StrEnum):
    OK = "ok"
    WRONG = "wrong"
    COMPILE_ERROR = "compile_error"
    TIMEOUT = "timeout"
    CRASHED = "crashed"
    REJECTED = "rejected"


class Candidate(BaseModel):
    code: str
    cflags: list[str] = []
    label: str = "candidate"

    @property
    def code_hash(self) -> str:
        return hashlib.sha256((self.code + "\0" + " ".join(self.cflags)).encode()).hexdigest()[:16]


class EvalResult(BaseModel):
    status: EvalStatus
    speedup: float | None = None  # over the plain baseline (the reference at clang -O3, strict FP)
    baseline_cycles: float | None = None
    candidate_cycles: float | None = None
    baseline_seconds: float | None = None
    candidate_seconds: float | None = None
    # Over the competent baseline (the reference with the flags its tolerance allows): the honest figure.
    # None when the competent build failed the task's own check (then the rule gave it too much).
    competent_speedup: float | None = None
    competent_cycles: float | None = None
    competent_seconds: float | None = None
    competent_cflags: list[str] = []
    measurement: Literal["modeled", "measured", "native"] | None = None  # None when nothing was timed
    max_error: float | None = None
    norm_error: float | None = None
    feedback: str = ""
    compile_errors: list[CompileDiagnostic] = []
    sizes_checked: int = 0
    duration_s: float = 0.0
    code_hash: str = ""
    worker: str | None = None  # the Ray node that ran the evaluation (None: this process)
    # Context, for records and reports.
    task: str = ""
    target: str = ""
    runner: str = ""
    label: str = ""
    model: str | None = None  # cost model id when measurement == "modeled"
    approximate: bool = False  # the cost model is a proxy for this core
    # Roofline of the candidate's modeled run (docs/COSTMODEL.md): what bound it ("compute", "L2", "DRAM"),
    # what it achieved per cycle and the target's ceilings.
    bound: str | None = None
    flops_per_cycle: float | None = None
    bytes_per_cycle: float | None = None  # loads + stores the kernel made
    dram_bytes_per_cycle: float | None = None
    peak_flops_per_cycle: float | None = None
    peak_dram_bytes_per_cycle: float | None = None
    limit_hit: str | None = None  # time | cpu | memory | output when a limit stopped the run
    # Non-zero expected elements per output at the last size checked: a task whose expected output is all
    # zeros could not tell a kernel that writes zeros from a correct one.
    reference_nonzero: dict[str, int] = {}
    stages_s: dict[str, float] = Field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == EvalStatus.OK


class _Stop(Exception):
    """Ends the cascade early with a finished result."""

    def __init__(self, result: EvalResult) -> None:
        super().__init__(result.feedback)
        self.result = result


class Evaluator:
    """Evaluates candidates for (task, target, runner). Thread-safe: every evaluation has its own dir."""

    def __init__(self, settings: Settings | None = None, *, seed: int = 1, keep_workdirs: bool = False) -> None:
        self.settings = settings or get_settings()
        self.seed = seed
        self.keep_workdirs = keep_workdirs
        cache = self.settings.home / "cache"
        self.toolchain = Toolchain(cache / "objects")
        self.baseline_dir = cache / "baselines"
        self.baseline_dir.mkdir(parents=True, exist_ok=True)

    # ----------------------------------------------------------------------------------- public API

    def evaluate(
        self,
        task: KernelTask,
        target: TargetProfile,
        candidate: Candidate,
        runner: str | Runner | None = None,
        *,
        timing: bool = True,
    ) -> EvalResult:
        """Run the cascade; `timing=False` stops after the correctness check (no speedup)."""
        run = self._runner(runner, target)
        target = self._effective_target(run, target)
        t0 = time.monotonic()
        result = EvalResult(
            status=EvalStatus.OK,
            code_hash=candidate.code_hash,
            task=task.name,
            target=target.key,
            runner=run.name,
            label=candidate.label,
        )
        workdir = Path(tempfile.mkdtemp(prefix="eok-eval-"))
        build: Build | None = None
        try:
            build = self._prepare(task, target, candidate, run, workdir, result)
            self._check(task, target, run, build, result)
            if timing:
                self._time(task, target, run, build, result)
            else:
                result.feedback = f"correct on {result.sizes_checked} sizes (not timed)"
        except _Stop as stop:
            result = stop.result
        finally:
            if build is not None:
                with contextlib.suppress(Exception):
                    run.release(build)
            if not self.keep_workdirs:
                shutil.rmtree(workdir, ignore_errors=True)
        result.duration_s = time.monotonic() - t0
        return result

    def baseline(self, task: KernelTask, target: TargetProfile, runner: str | Runner | None = None) -> EvalResult:
        """The reference built with the target's baseline flags, evaluated as a candidate; cached on disk."""
        run = self._runner(runner, target)
        target = self._effective_target(run, target)
        path = self.baseline_dir / f"{self._baseline_key(task, target, run)}.json"
        if path.exists():
            with contextlib.suppress(ValueError, OSError):
                return EvalResult.model_validate_json(path.read_text())
        cand = Candidate(code=task.reference_code, label="baseline")
        result = self.evaluate(task, target, cand, run)
        if result.status == EvalStatus.WRONG:  # the task's fault, not a candidate's: say which field
            tol = task.tolerance
            result.feedback = (
                f"{task.directory / 'task.toml'}: field 'tolerance' (rtol {tol.rtol:g}, atol {tol.atol:g}) fails "
                f"the reference against itself built with the baseline flags: {result.feedback}"
            )
        if result.ok:
            if result.measurement == "modeled":
                result.baseline_cycles = result.candidate_cycles
            result.speedup = 1.0 if result.speedup is not None else None
            _atomic_write(path, result.model_dump_json(indent=1))
        return result

    # ------------------------------------------------------------------------------------- stages

    def _runner(self, runner: str | Runner | None, target: TargetProfile) -> Runner:
        if runner is None:
            runner = "native" if not target.is_riscv else self.settings.default_runner
        run = get_runner(runner, self.settings) if isinstance(runner, str) else runner
        run.check(target)
        return run

    @staticmethod
    def _effective_target(run: Runner, target: TargetProfile) -> TargetProfile:
        # A native run builds for this host whatever target was asked for; the result says "host".
        return load_target("host") if run.build_kind == "host" else target

    def _limits(self) -> Limits:
        return Limits(wall_s=self.settings.eval_timeout_s, memory_mb=self.settings.eval_memory_mb)

    def _prepare(
        self,
        task: KernelTask,
        target: TargetProfile,
        cand: Candidate,
        run: Runner,
        workdir: Path,
        result: EvalResult,
    ) -> Build:
        t = time.monotonic()
        flags, problem = check_cflags(cand.cflags)
        if problem:
            raise _Stop(_with(result, status=EvalStatus.REJECTED, feedback=f"rejected: {problem}"))
        violations = safety.check_directives(cand.code, frozenset(target.extra_headers))
        if not violations:
            try:
                prelude = harness.candidate_prelude(task)
                pre = self.toolchain.preprocess(cand.code, target, run.build_kind, workdir, flags, prelude)
            except CompileFailed as e:
                raise _Stop(_compile_error(result, e, cand.code)) from None
            violations = safety.check_preprocessed(pre, task.function_name, frozenset(target.extra_headers))
        result.stages_s["static_check"] = time.monotonic() - t
        if violations:
            more = f" (+{len(violations) - 3} more)" if len(violations) > 3 else ""
            text = "; ".join(str(v) for v in violations[:3])
            raise _Stop(_with(result, status=EvalStatus.REJECTED, feedback=f"rejected: {text}{more}"))
        t = time.monotonic()
        try:
            build = self.toolchain.build(task, target, run.build_kind, cand.code, flags, workdir)
        except CompileFailed as e:
            raise _Stop(_compile_error(result, e, cand.code)) from None
        result.stages_s["compile"] = time.monotonic() - t
        # The machine code itself: what the text check could not see (nothing of it has run yet).
        violations = safety.check_object((workdir / "candidate.o").read_bytes(), task.function_name)
        if violations:
            text = "; ".join(str(v) for v in violations[:3])
            raise _Stop(_with(result, status=EvalStatus.REJECTED, feedback=f"rejected: {text}"))
        return build

    def _check(self, task: KernelTask, target: TargetProfile, run: Runner, build: Build, result: EvalResult) -> None:
        t = time.monotonic()
        out = run.execute(build, ["check", str(self.seed)], target, self._limits())
        result.stages_s["check"] = time.monotonic() - t
        record = _record(out, "check")
        if record is None:
            raise _Stop(_run_failure(result, out, "correctness check"))
        result.max_error = _num(record.get("max_abs_err"))
        result.norm_error = _num(record.get("norm_err"))
        result.sizes_checked = int(record.get("sizes_checked", 0))
        result.reference_nonzero = {str(k): int(v) for k, v in (record.get("ref_nonzero") or {}).items()}
        if not record.get("ok"):
            raise _Stop(_with(result, status=EvalStatus.WRONG, feedback=_wrong_feedback(task, record)))

    def _time(self, task: KernelTask, target: TargetProfile, run: Runner, build: Build, result: EvalResult) -> None:
        t = time.monotonic()
        result.competent_cflags = competent_cflags(task)
        try:
            if run.measurement == "modeled":
                self._time_modeled(task, target, run, build, result)
            else:
                self._time_measured(task, run, target, build, result)
        finally:
            result.stages_s["timing"] = time.monotonic() - t
        result.feedback = _ok_feedback(result)

    def _time_modeled(
        self, task: KernelTask, target: TargetProfile, run: Runner, build: Build, result: EvalResult
    ) -> None:
        if not isinstance(run, QemuRunner) or not target.cost_model:
            result.feedback = "correct; this target has no cost model, so there is no timing"
            return
        if not model_available():
            result.feedback = "correct; the cost model (evaluator/costmodel/) is not installed, so no timing"
            return
        key = f"{self._baseline_key(task, target, run)}-model"
        base = self._cached_json(key)
        try:
            if base is None:
                base = self._model(run, build, target, "base").model_dump()
                _atomic_write(self.baseline_dir / f"{key}.json", json.dumps(base))
            cand = self._model(run, build, target, "cand")
        except EokError as e:
            result.feedback = f"correct; modeled timing failed: {e.message}"
            return
        clock = target.clock_ghz * 1e9
        result.measurement = "modeled"
        result.baseline_cycles = float(base["cycles"])
        result.candidate_cycles = cand.cycles
        result.baseline_seconds = result.baseline_cycles / clock if clock else None
        result.candidate_seconds = cand.cycles / clock if clock else None
        result.speedup = result.baseline_cycles / cand.cycles if cand.cycles > 0 else None
        result.model = cand.model
        result.approximate = cand.approximate or bool(base.get("approximate"))
        result.bound = cand.bound
        result.flops_per_cycle = cand.flops_per_cycle
        result.bytes_per_cycle = cand.bytes_per_cycle
        result.dram_bytes_per_cycle = cand.dram_bytes_per_cycle
        result.peak_flops_per_cycle = cand.peak_flops_per_cycle
        result.peak_dram_bytes_per_cycle = cand.peak_dram_bytes_per_cycle
        comp = self._competent_model(task, target, run, build, key)
        if comp is not None and cand.cycles > 0:
            comp = min(comp, result.baseline_cycles)  # flags that slow the reference down go unused
            result.competent_cycles = comp
            result.competent_seconds = comp / clock if clock else None
            result.competent_speedup = comp / cand.cycles

    def _competent_model(
        self, task: KernelTask, target: TargetProfile, run: QemuRunner, build: Build, key: str
    ) -> float | None:
        """Modeled cycles of the competent baseline, once it passed the task's check; cached on disk."""
        cached = self._cached_json(f"{key}-comp")
        if cached is None:
            ok = self._competent_correct(task, target, run)
            cached = {"cycles": self._model(run, build, target, "comp").cycles if ok else None}
            _atomic_write(self.baseline_dir / f"{key}-comp.json", json.dumps(cached))
        return float(cached["cycles"]) if cached.get("cycles") else None

    def _competent_correct(self, task: KernelTask, target: TargetProfile, run: Runner) -> bool:
        """The competent flags change rounding; a baseline is quoted only if it meets the task's tolerance."""
        path = self.baseline_dir / f"{self._baseline_key(task, target, run)}-comp-check.json"
        with contextlib.suppress(OSError, ValueError):
            return bool(json.loads(path.read_text())["ok"])
        cand = Candidate(code=task.reference_code, cflags=competent_cflags(task), label="competent baseline")
        ok = self.evaluate(task, target, cand, run, timing=False).ok
        _atomic_write(path, json.dumps({"ok": ok}))
        return ok

    def _model(self, run: QemuRunner, build: Build, target: TargetProfile, which: str) -> Any:
        from evaluator.costmodel import model_kernel_cycles

        argv = run.model_argv(build, target, which, self._limits())
        return model_kernel_cycles(
            build.binary,
            argv,
            model_cache_dir(self.settings.home),
            mcpu=target.cost_model,
            timeout_s=self.settings.eval_timeout_s,
        )

    def _time_measured(
        self, task: KernelTask, run: Runner, target: TargetProfile, build: Build, result: EvalResult
    ) -> None:
        out = run.execute(build, ["bench"], target, self._limits())
        record = _record(out, "bench")
        if record is None:
            raise _Stop(_run_failure(result, out, "timing run"))
        base_ns, cand_ns = _num(record.get("base_ns")), _num(record.get("cand_ns"))
        comp_ns = _num(record.get("comp_ns"))
        result.measurement = run.measurement
        result.baseline_seconds = base_ns * 1e-9 if base_ns is not None else None
        result.candidate_seconds = cand_ns * 1e-9 if cand_ns is not None else None
        if base_ns and cand_ns:
            result.speedup = base_ns / cand_ns
        if comp_ns and cand_ns and self._competent_correct(task, target, run):
            comp_ns = min(comp_ns, base_ns or comp_ns)  # flags that slow the reference down go unused
            result.competent_seconds = comp_ns * 1e-9
            result.competent_speedup = comp_ns / cand_ns

    # ------------------------------------------------------------------------------------ caching

    def _baseline_key(self, task: KernelTask, target: TargetProfile, run: Runner) -> str:
        parts = [
            BASELINE_CACHE_VERSION,
            harness.HARNESS_VERSION,
            task.content_hash,
            target.model_dump_json(),
            run.name,
            run.build_kind,
            compiler_version(),
            str(self.seed),
            _costmodel_fingerprint() if run.measurement == "modeled" else "",
            " ".join(competent_cflags(task)),
        ]
        digest = hashlib.sha256("\0".join(parts).encode()).hexdigest()[:20]
        return f"{task.name}-{target.key}-{run.name}-{digest}"

    def _cached_json(self, key: str) -> dict[str, Any] | None:
        path = self.baseline_dir / f"{key}.json"
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            return None


# ---------------------------------------------------------------------------------------- helpers


@cache
def _costmodel_fingerprint() -> str:
    """Changes when the cost model's code changes, so cached baseline cycles are never stale."""
    folder = Path(__file__).resolve().parent
    files = [*sorted((folder / "costmodel").glob("*.py")), folder / "costmodel" / "memsim.c"]
    files += sorted((folder / "targets").glob("*.toml"))
    return hashlib.sha256(b"".join(f.read_bytes() for f in files)).hexdigest()[:16]


def _with(result: EvalResult, **changes: Any) -> EvalResult:
    return result.model_copy(update=changes)


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_suffix(f".{os.getpid()}.{time.monotonic_ns()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _num(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, str):
        return {"nan": float("nan"), "inf": float("inf"), "-inf": float("-inf")}.get(value)
    return float(value)


def _fmt(value: Any) -> str:
    v = _num(value)
    return "?" if v is None else f"{v:.6g}"


def _record(out: RunOutput, mode: str) -> dict[str, Any] | None:
    """The harness's JSON record, if the run finished and printed one."""
    if out.timed_out or out.flooded or out.returncode != 0:
        return None
    for line in reversed(out.stdout.splitlines()):
        if line.startswith("{"):
            with contextlib.suppress(ValueError):
                record = json.loads(line)
                if record.get("mode") == mode:
                    return record
    return None


def _compile_error(result: EvalResult, e: CompileFailed, code: str) -> EvalResult:
    lines = code.splitlines()
    parts = []
    for d in e.diagnostics[:3]:
        where = f"line {d.line}:{d.col}: " if d.line else ""
        src = f" | {lines[d.line - 1].strip()[:80]}" if 0 < d.line <= len(lines) else ""
        parts.append(f"{where}{d.message}{src}")
    more = f" (+{len(e.diagnostics) - 3} more)" if len(e.diagnostics) > 3 else ""
    return _with(
        result,
        status=EvalStatus.COMPILE_ERROR,
        compile_errors=e.diagnostics,
        feedback="compile error: " + "; ".join(parts) + more,
    )


def _where(stderr: str) -> str:
    """From the harness's progress lines: which kernel was running at which size."""
    for line in reversed(stderr.splitlines()):
        if line.startswith("eok: trial "):
            words = line.split()
            who = "the reference" if words[-1] == "reference" else "the candidate"
            return f" while running {who} at size {words[5]}"
    return ""


def _run_failure(result: EvalResult, out: RunOutput, stage: str) -> EvalResult:
    limit = out.limit_hit
    where = _where(out.stderr)
    if out.timed_out:
        return _with(
            result,
            status=EvalStatus.TIMEOUT,
            limit_hit="time",
            feedback=f"timeout: no result within the {out.wall_s:.0f} s limit{where} (infinite loop or far too slow?)",
        )
    if limit == "cpu":
        return _with(result, status=EvalStatus.TIMEOUT, limit_hit="cpu", feedback=f"timeout: CPU-time limit hit{where}")
    if limit == "output":
        return _with(
            result,
            status=EvalStatus.CRASHED,
            limit_hit="output",
            feedback="crashed: output limit hit (flooding output)",
        )
    if limit == "memory":
        line = next((ln for ln in out.stderr.splitlines() if OOM_MARKER in ln), "memory allocation failed")
        return _with(
            result,
            status=EvalStatus.CRASHED,
            limit_hit="memory",
            feedback=f"crashed: memory limit hit{where}: {line.removeprefix('eok: ')}",
        )
    if "decode_save_opc" in out.stderr or ("qemu" in out.stderr and "Assertion" in out.stderr):
        # qemu 7.2 aborts translating some valid RVV code (seen: vfncvt.rtz.* inside a loop); not the
        # candidate's fault, but it cannot be checked here, so say what to avoid.
        return _with(
            result,
            status=EvalStatus.CRASHED,
            feedback="crashed: qemu-user 7.2 aborted while translating the code (an emulator bug known for "
            "vfncvt.rtz.* / float-to-narrower-int conversions); use another conversion sequence" + where,
        )
    if out.violation:
        return _with(
            result,
            status=EvalStatus.CRASHED,
            feedback=f"sandbox violation: a system call outside the allow-list (processes, network, ...){where}",
        )
    if out.signal:
        name = signal.Signals(out.signal).name if out.signal in signal.Signals._value2member_map_ else str(out.signal)
        hint = {
            "SIGSEGV": "invalid memory access (out-of-bounds index or pointer?)",
            "SIGBUS": "misaligned or invalid access",
            "SIGILL": "illegal instruction (an extension this core lacks?)",
            "SIGFPE": "arithmetic exception (integer division by zero?)",
            "SIGABRT": "aborted (failed assert?)",
        }.get(name, "killed by a signal")
        return _with(result, status=EvalStatus.CRASHED, feedback=f"crashed: {name}, {hint}{where}")
    harness_error = next((ln for ln in out.stderr.splitlines() if ln.startswith("eok: harness error")), "")
    detail = harness_error or (out.stderr.strip().splitlines() or [""])[-1][:200]
    return _with(
        result,
        status=EvalStatus.CRASHED,
        feedback=f"crashed: {stage} exited with code {out.returncode} and no result{where}. {detail}".strip(),
    )


def _size_text(size: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in size.items())


def _wrong_feedback(task: KernelTask, record: dict[str, Any]) -> str:
    f = record.get("failure") or {}
    size = _size_text(f.get("size", {}))
    arg, idx = f.get("arg", "?"), f.get("index", 0)
    what = f.get("what")
    tol = task.tolerance
    if what == "ret_mismatch":
        return f"wrong at size {size}: returned {_fmt(f.get('got'))}, expected {_fmt(f.get('want'))}"
    if what == "wrote_past_end":
        return f"wrong at size {size}: wrote past the end of {arg} (element {arg}[{idx}]; it has {f.get('count')})"
    if what == "wrote_before_start":
        return f"wrong at size {size}: wrote before the start of {arg} (element {arg}[{idx}])"
    if what == "input_modified":
        return f"wrong at size {size}: modified the input {arg} (element {arg}[{idx}])"
    if what == "norm":
        return (
            f"wrong at size {size}: {arg} as a whole is off: normalized error {_fmt(f.get('norm'))} > "
            f"{_fmt(f.get('tol'))} although each element is within atol (all zeros, or wrong scale?)"
        )
    unwritten = " (never written: still the poison value)" if f.get("unwritten") else ""
    return (
        f"wrong at size {size}: {arg}[{idx}] = {_fmt(f.get('got'))}, expected {_fmt(f.get('want'))}{unwritten}; "
        f"{f.get('bad')} of {f.get('compared')} elements differ by more than {tol.atol:g} + {tol.rtol:g}*|expected|"
    )


def roofline_note(r: EvalResult) -> str:
    """'; DRAM-bound: 3.1 of 4.4 DRAM B/cycle, 1.0 of 16 FLOP/cycle' (empty when not modeled)."""
    if r.bound is None or r.peak_dram_bytes_per_cycle is None or r.peak_flops_per_cycle is None:
        return ""
    return (
        f"; {r.bound}-bound: {r.dram_bytes_per_cycle or 0:.2f} of {r.peak_dram_bytes_per_cycle:.2f} DRAM B/cycle, "
        f"{r.flops_per_cycle or 0:.2f} of {r.peak_flops_per_cycle:.0f} FLOP/cycle"
    )


def _ok_feedback(result: EvalResult) -> str:
    if result.feedback:  # timing could not be done; say why
        return result.feedback
    sizes = f"correct on {result.sizes_checked} sizes"
    if result.speedup is None:
        return sizes
    faster = f"{result.speedup:.2f}x the plain baseline's speed"
    if result.competent_speedup is not None:
        faster += f", {result.competent_speedup:.2f}x the competent baseline's"
    if result.measurement == "modeled":
        approx = ", approximate model" if result.approximate else ""
        comp = f", competent {result.competent_cycles:.0f}" if result.competent_cycles else ""
        return (
            f"{sizes}; {faster} (modeled cycles {result.candidate_cycles:.0f} vs baseline "
            f"{result.baseline_cycles:.0f}{comp}{approx}){roofline_note(result)}"
        )
    comp = f", competent {result.competent_seconds * 1e6:.2f}" if result.competent_seconds else ""
    return (
        f"{sizes}; {faster} ({result.measurement} {result.candidate_seconds * 1e6:.2f} us vs baseline "
        f"{result.baseline_seconds * 1e6:.2f}{comp} us per call)"
    )
