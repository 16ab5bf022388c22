#!/usr/bin/env python3
"""Evaluations per minute for a mid-size task on the emulated K1 (issue 3).

Each evaluation is a fresh candidate (a distinct source, so nothing is served from the object cache):
static check + compile + correctness on every size + modeled X60 timing. Prints the per-stage medians,
evaluations per minute (sequential and with two at a time, the agent's default), the target (one
evaluation <= 5 s on a 2-core machine), and the cost model's overhead over a plain qemu run of the same
binary in model mode (the floor: what emulation alone costs).

    python scripts/bench_eval.py [--task sgemm_square_96] [--n 12]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from agent.offline import OfflineGenerator
from core.settings import Settings
from evaluator.evaluate import Candidate, EvalResult, Evaluator
from evaluator.targets import load_target
from evaluator.tasks import load_task


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--task", default="sgemm_square_96")
    ap.add_argument("--n", type=int, default=12, help="evaluations per mode")
    args = ap.parse_args()
    home = Path(tempfile.mkdtemp(prefix="eok-bench-eval-"))
    evaluator = Evaluator(Settings(home=home), keep_workdirs=False)
    task, target = load_task(args.task), load_target("k1-x60")
    variant = OfflineGenerator(task, target).default()
    evaluator.baseline(task, target, "qemu")  # cached once, as in a run

    def one(i: int) -> EvalResult:
        code = f"{variant.code}\n/* bench candidate {i} {time.time_ns()} */\n"
        return evaluator.evaluate(task, target, Candidate(code=code, cflags=variant.cflags), "qemu")

    t0 = time.perf_counter()
    seq = [one(i) for i in range(args.n)]
    seq_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    with ThreadPoolExecutor(2) as pool:
        par = list(pool.map(one, range(args.n, 2 * args.n)))
    par_s = time.perf_counter() - t0
    assert all(r.ok for r in seq + par), [r.feedback for r in seq + par if not r.ok]

    stages = sorted({k for r in seq for k in r.stages_s})
    per_eval = [r.duration_s for r in seq]
    print(
        f"task {task.name} on {target.key}: {args.n} fresh candidates, speedup {seq[0].speedup:.2f}x "
        f"({seq[0].measurement}, {seq[0].model})"
    )
    for k in stages:
        print(f"  {k:12s} median {statistics.median(r.stages_s.get(k, 0.0) for r in seq):6.2f} s")
    print(f"one evaluation: median {statistics.median(per_eval):.2f} s, max {max(per_eval):.2f} s (target <= 5 s)")
    print(f"evaluations per minute: sequential {60 * args.n / seq_s:.1f}, two at a time {60 * args.n / par_s:.1f}")
    _model_overhead()


def _model_overhead() -> None:
    """The cost model's overhead over a plain qemu run of the same binary, from bench_costmodel.py."""
    script = Path(__file__).with_name("bench_costmodel.py")
    # This interpreter (the project's venv), not whatever python3 is first on PATH.
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=False)
    print("model overhead over a plain qemu run (scripts/bench_costmodel.py):")
    print("  " + (out.stdout.strip() or out.stderr.strip()).replace("\n", "\n  "))


if __name__ == "__main__":
    main()
