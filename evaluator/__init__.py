"""Evaluator: kernel tasks, targets, toolchains, sandboxed runners, correctness, timing and the X60 cost model.

Public API (see docs/TASKS.md for the task format):

    from evaluator.tasks import KernelTask, load_task, list_tasks
    from evaluator.targets import TargetProfile, load_target, list_targets
    from evaluator.evaluate import Candidate, EvalStatus, EvalResult, Evaluator
    from evaluator.runners import Runner, get_runner, QemuRunner, NativeRunner, SshRunner

    ev = Evaluator(settings)
    result = ev.evaluate(load_task("saxpy"), load_target("k1-x60"), Candidate(code=c_source), runner="qemu")
    base = ev.baseline(task, target, runner="qemu")          # cached on disk

Modules: tasks (spec loading/validation), targets (targets/*.toml), harness (C harness generator,
templates/harness.c.in), toolchain (clang-22 builds, cflag allow-list, diagnostics), safety (static
check of candidates), sandbox (limits, uid, netns), runners/ (qemu, native, ssh), evaluate (the
cascade), costmodel/ (modeled X60 cycles).
"""
