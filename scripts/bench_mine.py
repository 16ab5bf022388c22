"""Time `eok mine` (no LLM) over a full history against plain `git log --numstat -z` in the same run.

    python scripts/bench_mine.py PATH_TO_GIT_REPO [--name NAME] [--repeat N] [--warmup] [--json]

Each repetition runs `git log --numstat`, then `eok mine` (a fresh process, into the configured Neo4j
under a fresh repository name, so it always walks the whole history), then `git log --numstat` again;
its ratio is the mine's wall time over the faster of the two git runs around it, so load changes on a
shared machine hit both sides. CPU seconds (user + system, children included) are printed too: unlike
wall time they do not depend on what else runs, and their ratio says how much work mining adds to the
walk itself (the Neo4j server's own CPU is not included). `--warmup` mines once first, untimed (model
and embedding caches, OS page cache). Prints per-run figures, the median ratio (target <= 1.5) and the
counts of the last run.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import time
import uuid
from typing import Any


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _git_dir(repo: str) -> str:
    out = subprocess.run(
        ["git", "-C", repo, "rev-parse", "--absolute-git-dir"], capture_output=True, text=True, check=False
    )
    if out.returncode != 0:
        raise SystemExit(f"{repo!r} is not a git repository: {out.stderr.strip()}")
    return out.stdout.strip()


def time_git_log(git_dir: str) -> tuple[float, float, int]:
    """(wall s, cpu s, commits) of plain `git log --numstat -z` over the whole history.

    On a damaged repository (a snapshot without its largest blobs) git stops at the first commit it cannot
    diff; like the miner, the baseline then goes on after that commit (`--no-walk --stdin` over the rest),
    so both sides read the same readable history.
    """
    cpu0, began = _children_cpu(), time.perf_counter()
    log = ["git", f"--git-dir={git_dir}", "log", "--numstat", "-z"]
    proc = subprocess.run(log, capture_output=True)
    commits = len(_SHA_LINE_RX.findall(proc.stdout))
    if proc.returncode != 0:
        order = subprocess.run(["git", f"--git-dir={git_dir}", "rev-list", "HEAD"], capture_output=True).stdout.split()
        at, skipped = 0, []  # `at`: where in `order` the last run started
        while proc.returncode != 0:
            printed = _SHA_LINE_RX.findall(proc.stdout)
            # git died in the last commit whose header it printed, or (nothing printed) in the first one
            bad = order.index(printed[-1], at) if printed else at
            skipped.append(order[bad].decode())
            at = bad + 1
            if at >= len(order):
                break
            rest = b"\n".join(order[at:]) + b"\n"
            proc = subprocess.run([*log, "--no-walk=unsorted", "--stdin"], input=rest, capture_output=True)
        commits = len(order) - len(skipped)
        print(f"warning: git log --numstat skipped {len(skipped)} unreadable commit(s)", file=sys.stderr)
    return time.perf_counter() - began, _children_cpu() - cpu0, commits


_SHA_LINE_RX = re.compile(rb"(?:^|\n|\0)commit ([0-9a-f]{40,64})")


def time_mine(repo: str, name: str) -> tuple[float, float, dict[str, Any]]:
    """(wall s, cpu s, report) of `eok mine REPO --name NAME --json` in a fresh process."""
    cpu0, began = _children_cpu(), time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", "from service.cli import main; main()", "mine", repo, "--name", name, "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    elapsed, cpu = time.perf_counter() - began, _children_cpu() - cpu0
    if proc.returncode != 0:
        raise SystemExit(f"eok mine failed ({proc.returncode}): {proc.stderr.strip()[-2000:]}")
    return elapsed, cpu, json.loads(proc.stdout)


def one_run(repo: str, git_dir: str, prefix: str) -> dict[str, Any]:
    load = os.getloadavg()[0]
    g1, g1_cpu, commits = time_git_log(git_dir)
    m, m_cpu, report = time_mine(repo, f"{prefix}-{uuid.uuid4().hex[:8]}")
    g2, g2_cpu, _ = time_git_log(git_dir)
    base, base_cpu = min(g1, g2), min(g1_cpu, g2_cpu)
    return {
        "load_1min": round(load, 2),
        "git_log_numstat_s": round(g1, 2),
        "git_log_numstat_again_s": round(g2, 2),
        "eok_mine_s": round(m, 2),
        "eok_mine_internal_s": report["seconds"],
        "ratio": round(m / base, 2),
        "ratio_internal": round(report["seconds"] / base, 2),
        "git_log_cpu_s": round(base_cpu, 2),
        "eok_mine_cpu_s": round(m_cpu, 2),
        "cpu_ratio": round(m_cpu / base_cpu, 2),
        "commits_git": commits,
        "report": report,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("repo")
    ap.add_argument("--name", default="bench", help="graph name prefix (a unique suffix is added per run)")
    ap.add_argument("--repeat", type=int, default=1, help="timed runs (the median ratio is reported)")
    ap.add_argument("--warmup", action="store_true", help="mine once first, untimed")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.repeat < 1:
        raise SystemExit("--repeat: give N >= 1")
    git_dir = _git_dir(args.repo)
    if args.warmup:
        time_mine(args.repo, f"{args.name}-warmup-{uuid.uuid4().hex[:8]}")
    runs = [one_run(args.repo, git_dir, args.name) for _ in range(args.repeat)]
    last = runs[-1]["report"]
    result = {
        "repository": args.repo,
        "runs": [{k: v for k, v in r.items() if k != "report"} for r in runs],
        "median_ratio": statistics.median(r["ratio"] for r in runs),
        "median_cpu_ratio": statistics.median(r["cpu_ratio"] for r in runs),
        "target_ratio": 1.5,
        "commits_git": runs[-1]["commits_git"],
        "commits_read": last["commits_read"],
        "candidates": last["candidates"],
        "optimization_commits": last["optimization_commits"],
        "optimization_by_isa": last["optimization_by_isa"],
        "thoughts": last["thoughts_created"] + last["thoughts_updated"],
        "thoughts_created": last["thoughts_created"],
        "mirrored_commits": last["mirrored_commits"],
        "ideas": last["ideas_created"] + last["ideas_updated"],
        "embedded": last["embedded"],
        "timings": last["timings"],
        "warnings": len(last["warnings"]),
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return
    for i, r in enumerate(result["runs"], 1):
        print(f"run {i}: " + "  ".join(f"{k}={v}" for k, v in r.items() if k != "commits_git"))
    for k, v in result.items():
        if k != "runs":
            print(f"{k:24s} {v}")


if __name__ == "__main__":
    main()
