"""How close do honest, reordered kernels come to each task's tolerance on random inputs?

Every evaluation draws its inputs from a fresh secret seed, so a tolerance that an honest kernel meets
only on most inputs turns a correct kernel into a `wrong` experience now and then (and poisons the
memory with it). This script checks every suite task with float outputs: it evaluates the reference
built with reassociation and FP contraction (what vectorized float reductions do: the competent
baseline's flags plus -fassociative-math where the task allows reordering at all) against the
reference, correctness only, on `--evals` fresh seeds, and prints the worst ratio of error to bound
(|got - want| / (atol + rtol*|want|), and the normalized error / its bound) seen on any element.

A ratio near 1 means honest kernels fail on some inputs: widen the tolerance (with the reason in the
task file) or change the inputs. The suite test tests/unit/test_suite_specs.py keeps the margins that
this script measured in mind; run it after changing a task:

    .venv/bin/python scripts/audit_tolerances.py [--target host|k1-x60] [--evals 20] [--tasks sdot,...]

With `--offline` (and `--target k1-x60`) it audits the offline generator's default kernel of each task
instead: the vector approximations (exp, tanh, erf by polynomials) on the full-range inputs (docs/TASKS.md,
"Full-range contracts"), where the reference's own reorderings say little.
"""

from __future__ import annotations

import argparse
import math
import sys
import time

import numpy as np

from agent.offline.generator import OfflineGenerator
from evaluator import verdict
from evaluator.evaluate import Candidate, Evaluator
from evaluator.targets import load_target
from evaluator.tasks import C_TYPES, list_tasks
from evaluator.toolchain import competent_cflags

REORDER = ["-O3", "-fassociative-math", "-fno-signed-zeros", "-fno-trapping-math", "-ffp-contract=fast"]


class Worst:
    """The largest error/bound ratios the comparison saw (installed around verdict's comparisons)."""

    def __init__(self) -> None:
        self.elem = 0.0
        self.norm = 0.0

    def install(self) -> None:
        original_buffer, original_ret = verdict._compare_buffer, verdict._compare_ret

        def buffer(task, p, call, got, want, stats, tol):  # type: ignore[no-untyped-def]
            fp16 = task.args[p.name].compare == "fp16"
            if p.type.kind == "float" or fp16:
                g, w = verdict._values(p, got, fp16), verdict._values(p, want, fp16)
                with np.errstate(invalid="ignore", over="ignore"):
                    d = np.where((g == w) | (np.isnan(g) & np.isnan(w)), 0.0, np.abs(g - w))
                    step = verdict._SMALLEST_SUBNORMAL.get("F16" if fp16 else p.type.code, 0.0)
                    bound = verdict.element_bound(tol, w, step)  # exact specials: 0 or one rounding step
                    ratio = np.where(d == 0, 0.0, d / np.where(bound > 0, bound, np.inf))
                    if len(ratio):
                        self.elem = max(self.elem, float(np.nan_to_num(ratio, nan=np.inf).max()))
                    fw = np.where(np.isfinite(w), w, 0.0)
                    den = float(np.sum(fw * fw))
                    if den > 0 and tol.norm_bound > 0:
                        norm = math.sqrt(float(np.sum(np.nan_to_num(d) ** 2)) / den)
                        self.norm = max(self.norm, norm / tol.norm_bound)
            return original_buffer(task, p, call, got, want, stats, tol)

        def ret(task, call, got_raw, want_raw, stats):  # type: ignore[no-untyped-def]
            g, w = verdict._ret_value(task, got_raw), verdict._ret_value(task, want_raw)
            step = verdict._SMALLEST_SUBNORMAL[C_TYPES[task.return_type].code]
            bound = float(verdict.element_bound(task.tolerance, np.array([w]), step)[0])
            if g != w and bound > 0 and not (math.isnan(g) and math.isnan(w)):
                self.elem = max(self.elem, abs(g - w) / bound)
            return original_ret(task, call, got_raw, want_raw, stats)

        verdict._compare_buffer = buffer
        verdict._compare_ret = ret


def floats_compared(task) -> bool:  # type: ignore[no-untyped-def]
    tol = task.tolerance
    return tol.rtol > 0 or tol.atol > 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", default="host")
    ap.add_argument("--evals", type=int, default=20)
    ap.add_argument("--tasks", default="")
    ap.add_argument(
        "--offline",
        action="store_true",
        help="audit the offline generator's default kernel (vector approximations: exp, tanh, erf) instead",
    )
    args = ap.parse_args()
    target = load_target(args.target)
    tasks = [t for t in list_tasks() if floats_compared(t)]
    if args.tasks:
        wanted = set(args.tasks.split(","))
        tasks = [t for t in tasks if t.name in wanted]
    evaluator = Evaluator()
    worst = Worst()
    worst.install()
    print(f"{'task':<22} {'flags':<10} {'evals':>5} {'elem err/bound':>15} {'norm/bound':>11}  verdicts")
    risky = []
    for task in tasks:
        flags = REORDER if task.tolerance.rtol >= 1e-4 else ["-O3", *competent_cflags(task)]
        worst.elem = worst.norm = 0.0
        statuses: dict[str, int] = {}
        t0 = time.monotonic()
        cand = Candidate(code=task.reference_code, cflags=flags, label="reordered reference")
        if args.offline:
            v = OfflineGenerator(task, target).default()
            cand = Candidate(code=v.code, cflags=v.cflags, label="offline default")
        for _ in range(args.evals):
            r = evaluator.evaluate(task, target, cand, timing=False)
            statuses[r.status.value] = statuses.get(r.status.value, 0) + 1
        kind = "offline" if args.offline else "reorder" if flags is REORDER else "contract"
        seen = ", ".join(f"{k} {v}" for k, v in sorted(statuses.items()))
        print(
            f"{task.name:<22} {kind:<10} {args.evals:>5} {worst.elem:>15.3f} {worst.norm:>11.3f}  {seen}"
            f"  ({time.monotonic() - t0:.0f} s)",
            flush=True,
        )
        if worst.elem > 0.25 or worst.norm > 0.25:
            risky.append(task.name)
    print(f"\nmargin under 4x (worst ratio > 0.25): {', '.join(risky) or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
