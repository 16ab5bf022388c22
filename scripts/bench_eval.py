#!/usr/bin/env python3
"""Seconds per evaluation on the emulated K1, this tree against an older one, side by side in one run.

Each evaluation is a fresh candidate (the offline generator's default kernel for the task plus a unique
comment, so nothing is served from the object cache): static check + compile + correctness on every
size + modeled X60 timing. The two trees are measured alternately, one evaluation at a time, so load
drift on a shared machine hits both alike. Also prints the modeled cycles each tree gives the same
honest kernel (the hardened evaluation must keep them within 2%) and the ratio of the medians (target:
at most 1.3x the old tree's).

    python scripts/bench_eval.py --before /path/to/old/checkout [--task sdot --task sgemm_64] [--n 6]

Without --before only this tree is measured. The old tree needs its own dependencies importable from
the same interpreter (a clone of this repository at an older commit is enough).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]


def _worker(task_name: str, home: Path, index: int) -> None:
    """One evaluation in this process's tree; prints a JSON line."""
    from agent.offline import OfflineGenerator
    from core.settings import Settings
    from evaluator.evaluate import Candidate, Evaluator
    from evaluator.targets import load_target
    from evaluator.tasks import load_task

    evaluator = Evaluator(Settings(home=home))
    task, target = load_task(task_name), load_target("k1-x60")
    variant = OfflineGenerator(task, target).default()
    evaluator.baseline(task, target, "qemu")  # cached once per home, as in a run
    code = f"{variant.code}\n/* bench candidate {index} {time.time_ns()} */\n"
    t0 = time.perf_counter()
    r = evaluator.evaluate(task, target, Candidate(code=code, cflags=variant.cflags), "qemu")
    seconds = time.perf_counter() - t0
    record = {"status": str(r.status), "seconds": seconds, "cycles": r.candidate_cycles, "feedback": r.feedback}
    print(json.dumps(record))


def _one(tree: Path, task: str, home: Path, index: int) -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    argv = [sys.executable, str(Path(__file__).resolve()), "--worker", task, str(home), str(index)]
    out = subprocess.run(argv, cwd=tree, env=env, capture_output=True, text=True, check=False)
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    if out.returncode != 0 or not lines:
        raise SystemExit(f"{tree}: evaluation failed: {(out.stderr.strip().splitlines() or ['?'])[-1]}")
    record: dict[str, object] = json.loads(lines[-1])
    if record["status"] != "ok":
        raise SystemExit(f"{tree}: {task} not ok: {record['feedback']}")
    return record


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", type=Path, help="checkout of the tree to compare with")
    ap.add_argument("--task", action="append", help="task (repeatable); default sdot and sgemm_64")
    ap.add_argument("--n", type=int, default=6, help="evaluations per task and tree")
    ap.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        _worker(args.worker[0], Path(args.worker[1]), int(args.worker[2]))
        return
    trees = {"after": HERE, **({"before": args.before.resolve()} if args.before else {})}
    homes = {name: Path(tempfile.mkdtemp(prefix=f"eok-bench-eval-{name}-")) for name in trees}
    print(f"{'task':10s} {'tree':7s} {'median s':>9s} {'min s':>7s} {'cycles':>10s}")
    for task in args.task or ["sdot", "sgemm_64"]:
        for name, tree in trees.items():  # warm-up: compile caches and the cached baseline
            _one(tree, task, homes[name], -1)
        runs: dict[str, list[dict[str, object]]] = {name: [] for name in trees}
        for i in range(args.n):
            for name, tree in trees.items():
                runs[name].append(_one(tree, task, homes[name], i))
        medians = {}
        for name, rows in runs.items():
            secs = [float(r["seconds"]) for r in rows]  # type: ignore[arg-type]
            medians[name] = statistics.median(secs)
            cycles = statistics.median(float(r["cycles"] or 0) for r in rows)  # type: ignore[arg-type]
            print(f"{task:10s} {name:7s} {medians[name]:9.2f} {min(secs):7.2f} {cycles:10.0f}")
        if "before" in medians:
            ratio = medians["after"] / medians["before"]
            c_after = statistics.median(float(r["cycles"] or 0) for r in runs["after"])  # type: ignore[arg-type]
            c_before = statistics.median(float(r["cycles"] or 0) for r in runs["before"])  # type: ignore[arg-type]
            drift = 100 * (c_after - c_before) / c_before if c_before else float("nan")
            print(f"{task:10s} after/before {ratio:.2f}x (target <= 1.3x); modeled cycles {drift:+.2f}% (limit 2%)")


if __name__ == "__main__":
    main()
