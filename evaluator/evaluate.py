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
import math
import os
import secrets
import shutil
import signal
import statistics
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field

from core.errors import EokError
from core.settings import Settings, get_settings
from evaluator import harness, safety, verdict
from evaluator.runners import Runner, get_runner
from evaluator.runners.qemu import QemuRunner, model_available, model_cache_dir
from evaluator.sandbox import OOM_MARKER, Limits, RunOutput, read_written
from evaluator.targets import TargetProfile, load_target
from evaluator.tasks import KernelTask
from evaluator.toolchain import (
    MAX_DATA_BYTES,
    Build,
    CompileDiagnostic,
    CompileFailed,
    Toolchain,
    check_cflags,
    competent_cflags,
    compiler_version,
)
from evaluator.upstream.baseline import LibraryBaseline, configured_libraries, library_baseline
from evaluator.verdict import looks_forged

if TYPE_CHECKING:
    from evaluator.costmodel import ModeledTiming

BASELINE_CACHE_VERSION = "2"
MODEL_CALLS = 2  # timed calls in the modeled run, each on fresh inputs: the cycles are their mean
WARMUP_CALLS = 2  # untimed-for-the-median calls before the timed ones on a board or this host
TIMED_ID, BASE_ID, LIB_ID = 1000, 2000, 3000  # call ids: timed calls, the baselines' and the library's cached ones
TIMED_BYTES = 64 << 20  # inputs of all timed calls together on a board or this host, at most
DATA_DEPENDENT_SPREAD = 0.005  # baseline cycles differing more between two inputs: model it per evaluation
EXIT_FAULT = 87  # the harness's exit code after a fault in a guard page or a read-only input


class EvalStatus(StrEnum):
    OK = "ok"
    WRONG = "wrong"
    COMPILE_ERROR = "compile_error"
    TIMEOUT = "timeout"
    CRASHED = "crashed"
    REJECTED = "rejected"
    STATE_ACROSS_CALLS = "state_across_calls"  # right alone, wrong after other calls in the same process
    INVALID_OUTPUT = "invalid_output"  # the result stream is not the harness's (printed, forged, cut short)
    SANDBOX_VIOLATION = "sandbox_violation"  # touched a guard page or wrote a read-only input
    MEMORY = "memory"  # hit the memory limit
    GENERALIZATION_FAILED = "generalization_failed"  # wrong on held-out sizes and seeds (the agent's gate)
    COMPILER_CRASH = "compiler_crash"  # the compiler or linker crashed on the candidate
    COMPILE_TIMEOUT = "compile_timeout"  # compiling took longer than the candidate's compile time limit
    TOO_LARGE = "too_large"  # past a size limit: compile memory, object file, loaded code and data
    MODEL_ERROR = "model_error"  # modeled below the model's own lower bound: the model's fault, never a speedup


class Candidate(BaseModel):
    code: str
    cflags: list[str] = []
    label: str = "candidate"

    @property
    def code_hash(self) -> str:
        text = self.code + "\0" + " ".join(self.cflags)
        return hashlib.sha256(text.encode(errors="surrogatepass")).hexdigest()[:16]


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
    # Over a built library's own routine (docs/EVALUATION.md, "The library as a baseline"), where the task
    # maps to one and that library is configured for the target: "openblas@0123456789", its time, the
    # speedup; or, instead of a time, why the library has none (its kernel fails the task's check, or
    # did not link or run): a finding, never dropped.
    library_label: str | None = None
    library_routine: str | None = None
    library_cycles: float | None = None
    library_seconds: float | None = None
    speedup_over_library: float | None = None
    library_problem: str | None = None
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
    # How far the modeled speedup can be trusted (evaluator/costmodel/confidence.py): the model's measured
    # error on published kernels of this core (a factor: speedup / f .. speedup x f) and the figures without
    # a measurement that this result rests on.
    speedup_error: float | None = None
    speedup_error_worst: float | None = None
    rests_on: list[str] = []
    limit_hit: str | None = None  # time | cpu | memory | output when a limit stopped the run
    # Non-zero expected elements per output at the last size checked: a task whose expected output is all
    # zeros could not tell a kernel that writes zeros from a correct one.
    reference_nonzero: dict[str, int] = {}
    stages_s: dict[str, float] = Field(default_factory=dict)
    # For the agent's jobs (EvalJob.summary): the experience's summary this verdict gives and its embedding,
    # computed where the evaluation ran (evaluator.executor.with_summary); the vector stays out of dumps.
    summary: str | None = None
    summary_vector: list[float] | None = Field(None, exclude=True, repr=False)
    summary_model: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == EvalStatus.OK


class _Stop(Exception):
    """Ends the cascade early with a finished result."""

    def __init__(self, result: EvalResult) -> None:
        super().__init__(result.feedback)
        self.result = result


@dataclass
class _Session:
    """The calls of one evaluation and what the trusted side expects of them."""

    check: list[verdict.Call]
    timed: list[verdict.Call] = field(default_factory=list)
    base_calls: list[verdict.Call] = field(default_factory=list)  # the baseline's modeled run, when not cached
    base_key: str = ""
    base_model: dict[str, Any] | None = None
    expected: dict[int, verdict.Expected] = field(default_factory=dict)
    stats: verdict.Stats = field(default_factory=verdict.Stats)
    library: LibraryBaseline | None = None  # the built library timed beside the baselines, if any
    lib_key: str = ""
    lib_cached: dict[str, Any] | None = None  # its modeled figures from an earlier evaluation
    lib_calls: list[verdict.Call] = field(default_factory=list)  # its modeled run, when not cached

    def all_calls(self) -> list[verdict.Call]:
        return [*self.check, *self.timed, *self.base_calls, *self.lib_calls]


def _timed_count(task: KernelTask) -> int:
    """Timed calls on a board or this host: 21, fewer when the bench size is large (each has own inputs)."""
    bench_bytes = sum(task.counts[task.bench_index][p.name] * p.type.size for p in task.buffers) or 1
    return max(5, min(21, TIMED_BYTES // bench_bytes))


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
        self.libraries = configured_libraries(self.settings.library)

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
        library = self._library(task, target, run, result) if timing else None
        workdir = Path(tempfile.mkdtemp(prefix="eok-eval-"))
        build: Build | None = None
        try:
            build = self._prepare(task, target, candidate, run, workdir, result, library)
            session = self._session(task, target, run, timing, library)
            self._check(task, target, run, build, result, session)
            if timing:
                self._time(task, target, run, build, result, session)
            else:
                result.feedback = f"correct on {result.sizes_checked} sizes (not timed)"
        except _Stop as stop:
            result = stop.result
        finally:
            if build is not None:
                with contextlib.suppress(Exception):
                    run.release(build)
                    run.release(build.trusted_build())
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

    def verify_generalization(
        self, task: KernelTask, target: TargetProfile, candidate: Candidate, runner: str | Runner | None = None
    ) -> EvalResult:
        """The held-out gate: correctness (no timing) on sizes and seeds never shown during a search.

        `ok`, or GENERALIZATION_FAILED with the reason; sizes the task cannot take are skipped.
        """
        bench_bytes = sum(task.counts[task.bench_index][p.name] * p.type.size for p in task.buffers)
        budget = min(max(8 * bench_bytes, 1 << 20), (self.settings.eval_memory_mb << 20) // 4)
        held = verdict.heldout_sizes(task, target.vlen, budget, verdict.secret_seed())
        if not held:
            return EvalResult(status=EvalStatus.OK, task=task.name, feedback="no held-out size fits this task")
        shown = task.model_copy(update={"sizes": held, "counts": [verdict.counts_at(task, z) for z in held]})
        shown = shown.model_copy(update={"bench_index": len(held) - 1})
        try:
            r = self.evaluate(shown, target, candidate, runner, timing=False)
        except EokError as e:  # the reference cannot take these sizes: not the candidate's fault
            return EvalResult(status=EvalStatus.OK, task=task.name, feedback=f"held-out sizes skipped: {e.message}")
        if r.ok:
            return _with(r, feedback=f"correct on {len(held)} held-out sizes")
        sizes = "; ".join(_size_text(z) for z in held)
        return _with(
            r,
            status=EvalStatus.GENERALIZATION_FAILED,
            feedback=f"generalization failed on held-out sizes ({sizes}): {r.feedback}"[:1000],
        )

    # ------------------------------------------------------------------------------------- stages

    def _session(
        self, task: KernelTask, target: TargetProfile, run: Runner, timing: bool, library: LibraryBaseline | None
    ) -> _Session:
        """Every call this evaluation will make: check calls, timed calls, the baselines' and the library's if
        not cached."""
        secret = verdict.secret_seed()
        session = _Session(check=verdict.check_calls(task, secret), library=library)
        if not timing:
            return session
        bench = task.sizes[task.bench_index]
        if library is not None:
            session.lib_key = f"{self._baseline_key(task, target, run)}-lib-{library.key}"
            session.lib_cached = self._cached_json(session.lib_key)
        if run.measurement != "modeled":
            n = WARMUP_CALLS + _timed_count(task)
            session.timed = verdict.fresh_calls(task, bench, secret, n, first_id=TIMED_ID)
            return session
        if not (isinstance(run, QemuRunner) and target.cost_model and model_available()):
            return session
        session.timed = verdict.fresh_calls(task, bench, secret, MODEL_CALLS, first_id=TIMED_ID)
        session.base_key = f"{self._baseline_key(task, target, run)}-model"
        session.base_model = self._cached_json(session.base_key)
        if session.base_model is None:  # fixed inputs: the cached baseline is reproducible
            session.base_calls = verdict.fresh_calls(task, bench, self.seed, MODEL_CALLS, first_id=BASE_ID)
        if library is not None and session.lib_cached is None:
            session.lib_calls = verdict.fresh_calls(task, bench, self.seed, MODEL_CALLS, first_id=LIB_ID)
        return session

    def _library(
        self, task: KernelTask, target: TargetProfile, run: Runner, result: EvalResult
    ) -> LibraryBaseline | None:
        """The configured built library whose routine this task maps to on this target, if it links."""
        if run.build_kind == "host" or not self.libraries:  # built for a RISC-V target, never for this host
            return None
        library = library_baseline(task, target.key, self.libraries)
        if library is None:
            return None
        result.library_label, result.library_routine = library.label, library.routine.routine
        if problem := self.toolchain.library_link_problem(task, target, run.build_kind, library):
            result.library_problem = f"the trusted binary with {library.routine.routine} does not link: {problem}"
            return None
        return library

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
        library: LibraryBaseline | None = None,
    ) -> Build:
        t = time.monotonic()
        flags, problem = check_cflags(cand.cflags)
        if problem:
            raise _Stop(_with(result, status=EvalStatus.REJECTED, feedback=f"rejected: {problem}"))
        if problem := _not_text(cand.code):
            raise _Stop(_with(result, status=EvalStatus.REJECTED, feedback=f"rejected: the candidate source {problem}"))
        try:
            violations = self._static_check(task, target, cand, run, workdir, flags)
        except CompileFailed as e:
            if e.kind == "error":
                raise _Stop(_compile_error(result, e, cand.code)) from None
            status = EvalStatus.TOO_LARGE if e.kind == "too_large" else EvalStatus.REJECTED
            raise _Stop(_with(result, status=status, feedback=f"{status.value}: {e.diagnostics[0].message}")) from None
        result.stages_s["static_check"] = time.monotonic() - t
        if violations:
            more = f" (+{len(violations) - 3} more)" if len(violations) > 3 else ""
            text = "; ".join(str(v) for v in violations[:3])
            raise _Stop(_with(result, status=EvalStatus.REJECTED, feedback=f"rejected: {text}{more}"))
        t = time.monotonic()
        try:
            build = self.toolchain.build(task, target, run.build_kind, cand.code, flags, workdir, library)
        except CompileFailed as e:
            raise _Stop(_compile_error(result, e, cand.code)) from None
        result.stages_s["compile"] = time.monotonic() - t
        # The machine code itself: what the text check could not see (nothing of it has run yet).
        obj = (workdir / "candidate.o").read_bytes()
        if problem := safety.object_too_large(obj, MAX_DATA_BYTES):
            raise _Stop(_with(result, status=EvalStatus.TOO_LARGE, feedback=f"too_large: {problem}"))
        violations = safety.check_object(obj, task.function_name)
        if violations:
            text = "; ".join(str(v) for v in violations[:3])
            raise _Stop(_with(result, status=EvalStatus.REJECTED, feedback=f"rejected: {text}"))
        return build

    def _static_check(
        self, task: KernelTask, target: TargetProfile, cand: Candidate, run: Runner, workdir: Path, flags: list[str]
    ) -> list[safety.Violation]:
        """The source and its preprocessed text against the allow-lists. Whatever a candidate does to the
        checking steps (crash the preprocessor, outlast its time limit, trip a bug in the checker) is a
        problem of the candidate: CompileFailed of kind crash or timeout, or a violation saying so."""
        extra = frozenset(target.extra_headers)
        try:
            violations = safety.check_directives(cand.code, extra)
            if violations:
                return violations
            prelude = harness.candidate_prelude(task)
            pre = self.toolchain.preprocess(cand.code, target, run.build_kind, workdir, flags, prelude)
            return safety.check_preprocessed(pre, task.function_name, extra, asm=target.is_riscv)
        except CompileFailed:
            raise
        except (ValueError, IndexError, KeyError, RecursionError, UnicodeError) as e:
            return [safety.Violation(0, f"the static check could not read this source ({type(e).__name__}: {e})")]

    def _check(
        self,
        task: KernelTask,
        target: TargetProfile,
        run: Runner,
        build: Build,
        result: EvalResult,
        session: _Session,
    ) -> None:
        """Every size against the reference, on inputs no candidate could know in advance."""
        t = time.monotonic()
        self._generate(task, target, run, build, result, session)
        calls = session.check
        got = self._run_calls(task, target, run, build, calls, "check", result, session)
        result.stages_s["check"] = time.monotonic() - t
        self._judge(task, target, run, build, calls, got, "the correctness check", result, session)
        last = session.expected[calls[-1].id]
        result.sizes_checked = len(task.sizes)
        nonzero = dict(session.stats.ref_nonzero)
        if task.return_type != "void":
            nonzero = {"return": verdict.ret_nonzero(task, last), **nonzero}
        result.reference_nonzero = nonzero
        result.max_error = session.stats.max_abs_err
        # the normalized error is of float output buffers: a task with none (a returned sum) has no such figure
        has_float_out = any(
            task.args[p.name].kind != "in" and (p.type.kind == "float" or task.args[p.name].compare == "fp16")
            for p in task.buffers
        )
        result.norm_error = session.stats.norm_err if has_float_out else None

    def _generate(
        self,
        task: KernelTask,
        target: TargetProfile,
        run: Runner,
        build: Build,
        result: EvalResult,
        session: _Session,
    ) -> None:
        """One run of the trusted binary: inputs and expected outputs of every call of this evaluation."""
        calls = session.all_calls()
        gen = verdict.generation_plan(calls)
        plan = build.workdir / "plan.gen"
        verdict.write_plan(plan, task, gen, with_seed=True)
        out = run.execute(build.trusted_build(), ["gen", plan.name], target, self._io_limits(task, gen, 2))
        plan.unlink()  # the seeds never stay where a candidate's process could read them
        if out.returncode != 0 or out.timed_out or out.flooded:
            detail = (out.stderr.strip().splitlines() or ["no message"])[-1][:200]
            raise EokError(
                f"the trusted harness (reference of {task.name}) failed: {detail}",
                "the task's reference or spec is at fault, not the candidate: check it with `eok tasks check`",
            )
        try:
            session.expected = verdict.expected_from(task, calls, out.stdout_bytes)
        except (verdict.Malformed, RuntimeError, KeyError) as e:
            raise EokError(f"the trusted harness wrote an unreadable result: {e}", "rerun; report it") from None
        inputs = build.workdir / "in"
        inputs.mkdir(exist_ok=True)
        inputs.chmod(0o755)
        for call_id, exp in session.expected.items():
            (inputs / f"{call_id}.bin").write_bytes(exp.image)

    def _io_limits(self, task: KernelTask, calls: list[verdict.Call], copies: int) -> Limits:
        """The run's limits, with room on stdout for `copies` images of every call's buffers."""
        per_buffer = 16 + 4096 + 256  # zone lengths, page rounding, canaries
        need = copies * sum(
            2 * verdict.FRAME_HEAD.size
            + 8 * (len(task.scalars) + 1)
            + sum(c.counts[p.name] * p.type.size + per_buffer for p in task.buffers)
            for c in calls
        )
        return replace(self._limits(), output_bytes=need + (64 << 10), flood_bytes=2 * need + (1 << 20))

    def _run_calls(
        self,
        task: KernelTask,
        target: TargetProfile,
        run: Runner,
        build: Build,
        calls: list[verdict.Call],
        name: str,
        result: EvalResult,
        session: _Session,
        *,
        trusted: bool = False,
    ) -> RunOutput:
        plan = build.workdir / f"plan.{name}"
        verdict.write_plan(plan, task, calls, with_seed=False)
        which = build.trusted_build() if trusted else build
        return run.execute(which, ["run", plan.name], target, self._io_limits(task, calls, 1))

    def _judge(
        self,
        task: KernelTask,
        target: TargetProfile,
        run: Runner,
        build: Build,
        calls: list[verdict.Call],
        out: RunOutput,
        stage: str,
        result: EvalResult,
        session: _Session,
        stream: bytes | None = None,
    ) -> dict[int, verdict.Got]:
        """The candidate's outputs of `calls` against the reference; stops the cascade on any failure.

        Calls that finished are compared first (in plan order), then how the process ended is judged.
        """
        got, problem = verdict.scan_results(task, calls, out.stdout_bytes if stream is None else stream)
        for i, call in enumerate(calls):
            if call.id not in got:
                break
            failure = verdict.compare(task, call, got[call.id], session.expected[call.id], session.stats)
            if failure is None:
                continue
            feedback = _wrong_feedback(task, failure)
            if i > 0 and self._right_alone(task, target, run, build, call, session):
                raise _Stop(
                    _with(
                        result,
                        status=EvalStatus.STATE_ACROSS_CALLS,
                        feedback=f"state across calls: right when called first, but after {i} earlier call(s) "
                        f"in the same process {feedback.removeprefix('wrong ')}; keep no state between calls",
                    )
                )
            raise _Stop(_with(result, status=EvalStatus.WRONG, feedback=feedback + _in_stage(stage)))
        fault = next((ln for ln in out.stderr.splitlines() if ln.startswith("eok: fault: ")), None)
        if fault and out.returncode == EXIT_FAULT:
            raise _Stop(_with(result, status=EvalStatus.SANDBOX_VIOLATION, feedback=_fault_feedback(fault, calls)))
        if out.timed_out or out.flooded or out.returncode != 0:
            raise _Stop(_run_failure(result, out, stage, _where(out.stderr, calls, session.check)))
        if problem:
            raise _Stop(_invalid(result, out, problem))
        if len(got) != len(calls):
            reason = f"the process ended after {len(got)} of {len(calls)} calls (exit() in the kernel?)"
            raise _Stop(_invalid(result, out, reason))
        if stream is None and looks_forged(out.stdout):
            raise _Stop(_invalid(result, out, "printed a result record"))
        return got

    def _right_alone(
        self,
        task: KernelTask,
        target: TargetProfile,
        run: Runner,
        build: Build,
        call: verdict.Call,
        session: _Session,
    ) -> bool:
        """Whether the candidate gets `call` right as the first call of a fresh process."""
        alone = self._run_calls(task, target, run, build, [call], "alone", EvalResult(status=EvalStatus.OK), session)
        try:
            got = verdict.results_from(task, [call], alone.stdout_bytes)
        except verdict.Malformed:
            return False
        if alone.returncode != 0 or call.id not in got:
            return False
        return verdict.compare(task, call, got[call.id], session.expected[call.id], verdict.Stats()) is None

    def _time(
        self,
        task: KernelTask,
        target: TargetProfile,
        run: Runner,
        build: Build,
        result: EvalResult,
        session: _Session,
    ) -> None:
        t = time.monotonic()
        result.competent_cflags = competent_cflags(task)
        try:
            if run.measurement == "modeled":
                self._time_modeled(task, target, run, build, result, session)
            else:
                self._time_measured(task, target, run, build, result, session)
        finally:
            result.stages_s["timing"] = time.monotonic() - t
        if beyond := _beyond_ceiling(task, target, result.candidate_seconds):
            raise _Stop(_with(result, status=EvalStatus.INVALID_OUTPUT, speedup=None, competent_speedup=None,
                              speedup_over_library=None, feedback=f"invalid output: {beyond}"))  # fmt: skip
        result.feedback = _ok_feedback(result)

    def _time_modeled(
        self,
        task: KernelTask,
        target: TargetProfile,
        run: Runner,
        build: Build,
        result: EvalResult,
        session: _Session,
    ) -> None:
        """Modeled cycles: the mean over every timed call, each on fresh inputs and each checked."""
        if not isinstance(run, QemuRunner) or not target.cost_model:
            result.feedback = "correct; this target has no cost model, so there is no timing"
            return
        if not model_available():
            result.feedback = "correct; the cost model (evaluator/costmodel/) is not installed, so no timing"
            return
        try:
            base = session.base_model
            if base is None:
                base = self._model_baseline(task, run, build, target, session)
                _atomic_write(self.baseline_dir / f"{session.base_key}.json", json.dumps(base))
            if base.get("spread", 0.0) > DATA_DEPENDENT_SPREAD:
                # The baseline's cycles depend on its inputs: model both on this evaluation's inputs too.
                base = {**base, "cycles": self._model(task, run, build, target, session.timed, "run")["cycles"]}
                if base.get("comp_cycles"):
                    base["comp_cycles"] = self._model(task, run, build, target, session.timed, "comp")["cycles"]
            cand = self._model(task, run, build, target, session.timed, "cand")
        except _candidate_fault() as e:  # the candidate's run went wrong: never an `ok` without timing
            feedback = f"invalid output: the modeled run failed: {e.message}"[:600]
            raise _Stop(_with(result, status=EvalStatus.INVALID_OUTPUT, feedback=feedback)) from None
        except EokError as e:  # the cost model or its tools failed: ours to fix, not the candidate's result
            raise EokError(f"modeled timing of {task.name} failed: {e.message}", e.hint) from None
        out = RunOutput(argv=[], returncode=0, stdout="", stderr="", wall_s=0.0)
        self._judge(task, target, run, build, session.timed, out, "the timed run", result, session, cand["stream"])
        clock = target.clock_ghz * 1e9
        result.measurement = "modeled"
        result.baseline_cycles = float(base["cycles"])
        result.candidate_cycles = float(cand["cycles"])
        result.baseline_seconds = result.baseline_cycles / clock if clock else None
        result.candidate_seconds = result.candidate_cycles / clock if clock else None
        result.speedup = result.baseline_cycles / result.candidate_cycles if result.candidate_cycles > 0 else None
        timing = cand["timing"]
        result.model = timing.model
        result.approximate = timing.approximate or bool(base.get("approximate"))
        result.bound = timing.bound
        result.flops_per_cycle = timing.flops_per_cycle
        result.bytes_per_cycle = timing.bytes_per_cycle
        result.dram_bytes_per_cycle = timing.dram_bytes_per_cycle
        result.peak_flops_per_cycle = timing.peak_flops_per_cycle
        result.peak_dram_bytes_per_cycle = timing.peak_dram_bytes_per_cycle
        _attach_confidence(result, target, timing.assumed_prices)
        if below := _below_lower_bound(timing):
            result.speedup = None
            feedback = f"model_error: {below}; not a speedup (the cost model is at fault: please report it)"
            raise _Stop(_with(result, status=EvalStatus.MODEL_ERROR, feedback=feedback))
        comp = base.get("comp_cycles")
        if comp and result.candidate_cycles > 0:
            comp = min(float(comp), result.baseline_cycles)  # flags that slow the reference down go unused
            result.competent_cycles = comp
            result.competent_seconds = comp / clock if clock else None
            result.competent_speedup = comp / result.candidate_cycles
        if session.library is not None and result.candidate_cycles > 0:
            self._library_modeled(task, target, run, build, result, session, base.get("spread", 0.0))

    def _library_modeled(
        self,
        task: KernelTask,
        target: TargetProfile,
        run: QemuRunner,
        build: Build,
        result: EvalResult,
        session: _Session,
        spread: float,
    ) -> None:
        """The library's routine timed like the baselines: checked on this evaluation's calls, modeled on
        fixed inputs (cached per library build), on this evaluation's inputs where the baseline's cycles
        depend on them. A library that fails the task's check or its run gets a problem, not a time."""
        lib = session.lib_cached
        if lib is None:
            problem = self._library_check(task, target, run, build, session)
            cycles = None
            if problem is None:
                cycles, problem = self._library_model(task, target, run, build, session, session.lib_calls)
            lib = {"cycles": cycles, "problem": problem}
            _atomic_write(self.baseline_dir / f"{session.lib_key}.json", json.dumps(lib))
        if lib.get("problem") is None and spread > DATA_DEPENDENT_SPREAD:
            cycles, problem = self._library_model(task, target, run, build, session, session.timed)
            lib = {"cycles": cycles, "problem": problem}
        if lib.get("problem"):
            result.library_problem = str(lib["problem"])
            return
        clock = target.clock_ghz * 1e9
        assert result.candidate_cycles is not None
        result.library_cycles = float(lib["cycles"])
        result.library_seconds = result.library_cycles / clock if clock else None
        result.speedup_over_library = result.library_cycles / result.candidate_cycles

    def _library_model(
        self,
        task: KernelTask,
        target: TargetProfile,
        run: QemuRunner,
        build: Build,
        session: _Session,
        calls: list[verdict.Call],
    ) -> tuple[float | None, str | None]:
        """(cycles per call, None) of the library's routine on `calls`, its outputs checked; else (None, why)."""
        try:
            m = self._model(task, run, build, target, calls, "lib")
        except EokError as e:
            return None, f"its modeled run failed: {e.message}"[:600]
        if problem := self._library_outputs(task, calls, m["stream"], session):
            return None, problem
        return float(m["cycles"]), None

    def _library_check(
        self, task: KernelTask, target: TargetProfile, run: Runner, build: Build, session: _Session
    ) -> str | None:
        """Why the library's routine fails the task's check on this evaluation's check calls (None: it passes)."""
        calls = session.check
        plan = build.workdir / "plan.lib"
        verdict.write_plan(plan, task, calls, with_seed=False)
        out = run.execute(build.trusted_build(), ["lib", plan.name], target, self._io_limits(task, calls, 1))
        problem = self._library_outputs(task, calls, out.stdout_bytes, session)
        if problem and problem.startswith("fails"):  # a wrong answer before anything else went wrong
            return problem
        if out.timed_out or out.flooded or out.returncode != 0:
            where = _where(out.stderr, calls, calls)
            return _run_failure(EvalResult(status=EvalStatus.OK), out, "the library's run", where).feedback
        return problem

    @staticmethod
    def _library_outputs(task: KernelTask, calls: list[verdict.Call], stream: bytes, session: _Session) -> str | None:
        """The first way the library's outputs of `calls` differ from the reference's (the task's own check)."""
        got, problem = verdict.scan_results(task, calls, stream)
        for call in calls:
            if call.id not in got:
                break
            failure = verdict.compare(task, call, got[call.id], session.expected[call.id], verdict.Stats())
            if failure is not None:
                return "fails the task's check: " + _wrong_feedback(task, failure).removeprefix("wrong ")
        if problem or len(got) != len(calls):
            return f"its run gave {len(got)} of {len(calls)} results ({problem or 'ended early'})"
        return None

    def _competent_correct(self, task: KernelTask, target: TargetProfile, run: Runner) -> bool:
        """The competent flags change rounding; a baseline is quoted only if it meets the task's tolerance."""
        path = self.baseline_dir / f"{self._baseline_key(task, target, run)}-comp-check.json"
        with contextlib.suppress(OSError, ValueError):
            return bool(json.loads(path.read_text())["ok"])
        cand = Candidate(code=task.reference_code, cflags=competent_cflags(task), label="competent baseline")
        ok = self.evaluate(task, target, cand, run, timing=False).ok
        _atomic_write(path, json.dumps({"ok": ok}))
        return ok

    def _model_baseline(
        self, task: KernelTask, run: QemuRunner, build: Build, target: TargetProfile, session: _Session
    ) -> dict[str, Any]:
        """Both baselines' cycles on fixed inputs (cached); the plain one call per run to see how they vary."""
        cycles = [self._model(task, run, build, target, [c], "run")["cycles"] for c in session.base_calls]
        mean = sum(cycles) / len(cycles)
        spread = (max(cycles) - min(cycles)) / mean if mean > 0 else 0.0
        comp = None
        if self._competent_correct(task, target, run):
            comp = self._model(task, run, build, target, session.base_calls, "comp")["cycles"]
        return {"cycles": mean, "spread": spread, "comp_cycles": comp}

    def _model(
        self,
        task: KernelTask,
        run: QemuRunner,
        build: Build,
        target: TargetProfile,
        calls: list[verdict.Call],
        mode: str,
    ) -> dict[str, Any]:
        """Cycles per call of `calls` under the cost model, its timing record, and the outputs the run wrote.

        mode: run (plain baseline) or comp (competent baseline) of the trusted binary, or cand.
        """
        from evaluator.costmodel import machine_for, model_kernel_cycles

        plan = build.workdir / f"plan.model-{mode}"
        verdict.write_plan(plan, task, calls, with_seed=False)
        # The run's uid may not write the work folder: its output file goes to a folder it may only add to.
        outbox = build.workdir / f"outbox-{secrets.token_hex(8)}"
        outbox.mkdir(mode=0o733)
        outbox.chmod(0o733)
        out_file = outbox / "out.bin"
        which = build if mode == "cand" else build.trusted_build()
        args = ["run" if mode == "cand" else mode, plan.name, str(out_file.relative_to(build.workdir))]
        argv = run.model_argv(which, target, args, self._limits())
        timing = model_kernel_cycles(
            which.binary,
            argv,
            model_cache_dir(self.settings.home),
            mcpu=machine_for(target),  # the target's own [costmodel] data, also for a target given by path
            timeout_s=self.settings.eval_timeout_s,
            regions=len(calls),
            cwd=build.workdir,
            writable=outbox,
        )
        # written by candidate code: a directory, a link or a FIFO there is no result (invalid output), not a crash
        stream = read_written(out_file)
        return {"cycles": timing.cycles / len(calls), "timing": timing, "stream": stream}

    def _time_measured(
        self,
        task: KernelTask,
        target: TargetProfile,
        run: Runner,
        build: Build,
        result: EvalResult,
        session: _Session,
    ) -> None:
        """Seconds per call on this host or the board: baseline and candidate on the same fresh inputs.

        Every timed call of the candidate has inputs of its own and its outputs are checked; the times
        themselves are measured inside the candidate's process (docs/EVALUATION.md says what remains).
        """
        calls = session.timed
        base_out = self._run_calls(task, target, run, build, calls, "base", result, session, trusted=True)
        cand_out = self._run_calls(task, target, run, build, calls, "timed", result, session)
        got = self._judge(task, target, run, build, calls, cand_out, "the timed run", result, session)
        try:
            base = verdict.results_from(task, calls, base_out.stdout_bytes) if base_out.returncode == 0 else {}
        except verdict.Malformed:
            base = {}
        timed = [c.id for c in calls[WARMUP_CALLS:]]
        if len(base) != len(calls):
            result.feedback = "correct; the baseline's timing run failed, so there is no timing"
            return
        base_ns = statistics.median(base[i].ns for i in timed)
        cand_ns = statistics.median(got[i].ns for i in timed)
        comp_ns = self._measured_competent(task, target, run, build, calls, result, session)
        result.measurement = run.measurement
        result.baseline_seconds = base_ns * 1e-9
        result.candidate_seconds = cand_ns * 1e-9
        if base_ns and cand_ns:
            result.speedup = base_ns / cand_ns
        if comp_ns and cand_ns:
            comp_ns = min(comp_ns, base_ns or comp_ns)  # flags that slow the reference down go unused
            result.competent_seconds = comp_ns * 1e-9
            result.competent_speedup = comp_ns / cand_ns
        if session.library is not None and cand_ns:
            self._library_measured(task, target, run, build, calls, result, session, cand_ns)

    def _library_measured(
        self,
        task: KernelTask,
        target: TargetProfile,
        run: Runner,
        build: Build,
        calls: list[verdict.Call],
        result: EvalResult,
        session: _Session,
        cand_ns: float,
    ) -> None:
        """Median seconds of the library's routine on the candidate's timed calls, checked (the check's
        verdict cached per library build, like the competent baseline's)."""
        checked = session.lib_cached
        if checked is None:
            checked = {"problem": self._library_check(task, target, run, build, session)}
            _atomic_write(self.baseline_dir / f"{session.lib_key}.json", json.dumps(checked))
        problem = checked.get("problem")
        if problem is None:
            plan = build.workdir / "plan.libtimed"
            verdict.write_plan(plan, task, calls, with_seed=False)
            out = run.execute(build.trusted_build(), ["lib", plan.name], target, self._io_limits(task, calls, 1))
            problem = self._library_outputs(task, calls, out.stdout_bytes, session)
        if problem:
            result.library_problem = str(problem)
            return
        lib = verdict.results_from(task, calls, out.stdout_bytes)
        lib_ns = statistics.median(lib[c.id].ns for c in calls[WARMUP_CALLS:])
        result.library_seconds = lib_ns * 1e-9
        result.speedup_over_library = lib_ns / cand_ns

    def _measured_competent(
        self,
        task: KernelTask,
        target: TargetProfile,
        run: Runner,
        build: Build,
        calls: list[verdict.Call],
        result: EvalResult,
        session: _Session,
    ) -> float | None:
        """Median seconds of the competent baseline on the same calls, if it passes the task's check."""
        if not self._competent_correct(task, target, run):
            return None
        plan = build.workdir / "plan.comp"
        verdict.write_plan(plan, task, calls, with_seed=False)
        out = run.execute(build.trusted_build(), ["comp", plan.name], target, self._io_limits(task, calls, 1))
        try:
            comp = verdict.results_from(task, calls, out.stdout_bytes) if out.returncode == 0 else {}
        except verdict.Malformed:
            return None
        if len(comp) != len(calls):
            return None
        return statistics.median(comp[c.id].ns for c in calls[WARMUP_CALLS:])

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


def _beyond_ceiling(task: KernelTask, target: TargetProfile, seconds: float | None) -> str | None:
    """Why a time per call is not a timing of the task's work: it beats what the core can compute or move."""
    if not seconds or seconds <= 0:
        return None
    ns = seconds * 1e9
    for what, amount, ceiling, unit in (
        ("compute", task.flops_at(), target.ceiling_flops_per_ns, "FLOP"),
        ("move", task.bytes_at(), target.ceiling_bytes_per_ns, "bytes"),
    ):
        if amount and ceiling and amount / ns > ceiling:
            return (
                f"{ns:.0f} ns per call means {amount / ns:.0f} {unit}/ns, more than one {target.key} core can "
                f"{what} ({ceiling:g} {unit}/ns, generously): the timing was not of the task's work"
            )
    return None


def _candidate_fault() -> type[EokError]:
    from evaluator.costmodel.trace import CandidateFault  # the cost model loads only where it is used

    return CandidateFault


def _not_text(code: str) -> str | None:
    """Why a candidate's source is not text clang and the check can read (None: it is)."""
    try:
        code.encode("utf-8")
    except UnicodeEncodeError as e:
        return f"is not UTF-8 text (character {e.start}: {code[e.start]!a}): save it as UTF-8"
    return None


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


_COMPILE_STATUS = {
    "crash": EvalStatus.COMPILER_CRASH,
    "timeout": EvalStatus.COMPILE_TIMEOUT,
    "too_large": EvalStatus.TOO_LARGE,
}


def _compile_error(result: EvalResult, e: CompileFailed, code: str) -> EvalResult:
    if e.kind in _COMPILE_STATUS:
        status = _COMPILE_STATUS[e.kind]
        return _with(result, status=status, feedback=f"{status.value}: {e.diagnostics[0].message}")
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


def _where(stderr: str, calls: list[verdict.Call], check: list[verdict.Call]) -> str:
    """From the harness's progress lines: which call (so which size) was running."""
    by_id = {c.id: c for c in [*calls, *check]}
    for line in reversed(stderr.splitlines()):
        words = line.split()
        if line.startswith("eok: call ") and len(words) > 2 and words[2].isdigit() and int(words[2]) in by_id:
            return f" while running the candidate at size {_size_text(by_id[int(words[2])].size)}"
    return ""


def _in_stage(stage: str) -> str:
    return "" if stage == "the correctness check" else f" (in {stage}, on inputs it had not seen before)"


def _fault_feedback(line: str, calls: list[verdict.Call]) -> str:
    """'eok: fault: call 3: accessed memory past the end of y (...)' as feedback with the size."""
    text = line.removeprefix("eok: fault: ")
    head, _, rest = text.partition(": ")
    call = next((c for c in calls if head == f"call {c.id}"), None)
    where = f" at size {_size_text(call.size)}" if call else ""
    return f"sandbox violation{where}: {rest or text} (a guard page or a read-only input)"[:400]


def _invalid(result: EvalResult, out: RunOutput, reason: str) -> EvalResult:
    """The result stream is not the harness's: the candidate printed, forged or cut it."""
    forged = looks_forged(out.stdout)
    why = "printed something shaped like a result record (verdicts come only from compared outputs)"
    why = why if forged else reason
    return _with(
        result,
        status=EvalStatus.INVALID_OUTPUT,
        feedback=f"invalid output: {why}; the kernel must not write to stdout or end the process",
    )


def _run_failure(result: EvalResult, out: RunOutput, stage: str, where: str) -> EvalResult:
    limit = out.limit_hit
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
            status=EvalStatus.MEMORY,
            limit_hit="memory",
            feedback=f"memory: limit hit{where}: {line.removeprefix('eok: ')}",
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
            status=EvalStatus.SANDBOX_VIOLATION,
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


def _wrong_feedback(task: KernelTask, f: verdict.Failure) -> str:
    size = _size_text(f.call.size)
    arg, idx = f.arg, f.index
    tol = task.tolerance
    if f.what == "ret_mismatch":
        return f"wrong at size {size}: returned {_fmt(f.got)}, expected {_fmt(f.want)}"
    if f.what == "wrote_past_end":
        return f"wrong at size {size}: wrote past the end of {arg} (element {arg}[{idx}]; it has {f.call.counts[arg]})"
    if f.what == "wrote_before_start":
        return f"wrong at size {size}: wrote before the start of {arg} (element {arg}[{idx}])"
    if f.what == "norm":
        return (
            f"wrong at size {size}: {arg} as a whole is off: normalized error {_fmt(f.norm)} > "
            f"{_fmt(f.tol)} although each element is within atol (all zeros, or wrong scale?)"
        )
    unwritten = " (never written: still the poison value)" if f.unwritten else ""
    if not math.isfinite(f.want) or (tol.exact_special and f.want == 0):
        # a special value of the contract (docs/TASKS.md, "Full-range contracts"): no tolerance applies
        return (
            f"wrong at size {size}: {arg}[{idx}] = {_fmt(f.got)}, expected exactly {_fmt(f.want)}{unwritten} "
            f"(inf, NaN{' and 0' if tol.exact_special else ''} must match exactly); {f.bad} of {f.compared} "
            "elements are wrong"
        )
    return (
        f"wrong at size {size}: {arg}[{idx}] = {_fmt(f.got)}, expected {_fmt(f.want)}{unwritten}; "
        f"{f.bad} of {f.compared} elements differ by more than {tol.atol:g} + {tol.rtol:g}*|expected|"
    )


def _attach_confidence(result: EvalResult, target: TargetProfile, assumed_prices: Sequence[str] = ()) -> None:
    from evaluator.costmodel import confidence  # the cost model loads only where it is used

    bar = confidence.error_bar(target.key)
    if bar is not None:
        result.speedup_error, result.speedup_error_worst = bar.median, bar.worst
    # Assumed target figures by bound, then any assumed instruction price the candidate's run used.
    result.rests_on = confidence.rests_on(target, result.bound) + list(assumed_prices)


def _below_lower_bound(timing: ModeledTiming) -> str | None:
    """Why the modeled cycles are below what the model's own ceilings allow for this work, or None: more
    FLOPs a cycle than the core's FMA peak, or more than two instructions a cycle (the composition prices
    every unit at least that; a result below it means a pricing error, as the padding trick once was)."""
    if timing.peak_flops_per_cycle and timing.flops_per_cycle > 1.001 * timing.peak_flops_per_cycle:
        return f"{timing.flops_per_cycle:.2f} FLOP/cycle modeled, above the core's {timing.peak_flops_per_cycle:.0f}"
    if timing.cycles and timing.instructions / timing.cycles > 4.001:  # no SpacemiT core issues more than 4
        return f"{timing.instructions / timing.cycles:.2f} instructions/cycle modeled, above any core's issue width"
    return None


def error_bar_note(r: EvalResult) -> str:
    """'; model error on published kernels x/1.25 (worst x/1.9); rests on assumed l2_ways' (or empty)."""
    parts = []
    if r.speedup_error is not None:
        parts.append(f"speedup within x/{r.speedup_error:.2f} typical, x/{r.speedup_error_worst or 0:.2f} worst "
                     "of published silicon (bench_fidelity test set)")  # fmt: skip
    elif r.measurement == "modeled":
        parts.append("model error: not measured for this core")
    if r.rests_on:
        parts.append(f"{r.bound or 'compute'}-bound, rests on assumed {', '.join(r.rests_on)}")
    return "".join(f"; {p}" for p in parts)


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
    if result.speedup_over_library is not None:
        faster += f", {result.speedup_over_library:.2f}x {result.library_label}'s {result.library_routine}"
    if result.measurement == "modeled":
        approx = ", approximate model" if result.approximate else ""
        comp = f", competent {result.competent_cycles:.0f}" if result.competent_cycles else ""
        lib = f", {result.library_label} {result.library_cycles:.0f}" if result.library_cycles else ""
        return (
            f"{sizes}; {faster} (modeled cycles {result.candidate_cycles:.0f} vs baseline "
            f"{result.baseline_cycles:.0f}{comp}{lib}{approx}){roofline_note(result)}{error_bar_note(result)}"
            f"{library_note(result)}"
        )
    comp = f", competent {result.competent_seconds * 1e6:.2f}" if result.competent_seconds else ""
    lib = f", {result.library_label} {result.library_seconds * 1e6:.2f}" if result.library_seconds else ""
    return (
        f"{sizes}; {faster} ({result.measurement} {result.candidate_seconds * 1e6:.2f} us vs baseline "
        f"{result.baseline_seconds * 1e6:.2f}{comp}{lib} us per call){library_note(result)}"
    )


def library_note(r: EvalResult) -> str:
    """'; no time for openblas@0123456789's snrm2: fails the task's check: ...' (empty when it has one)."""
    if not r.library_problem:
        return ""
    return f"; no time for {r.library_label}'s {r.library_routine}: {r.library_problem}"
