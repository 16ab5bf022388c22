"""Time `eok mine` (no LLM) over a full history against plain `git log --numstat` in the same run.

    python scripts/bench_mine.py PATH_TO_OPENBLAS_GIT [--name NAME] [--json]

The mine runs into the configured Neo4j (EOK_* settings) under a fresh repository name per run, so it
always walks the whole history. Prints both timings, their ratio (target <= 1.5) and the counts.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import uuid


def time_git_log(repo: str) -> tuple[float, int]:
    git_dir = subprocess.run(
        ["git", "-C", repo, "rev-parse", "--git-dir"], capture_output=True, text=True, check=True
    ).stdout.strip()
    began = time.perf_counter()
    proc = subprocess.run(
        [
            "git",
            f"--git-dir={git_dir}" if git_dir.startswith("/") else f"--git-dir={repo}/{git_dir}",
            "log",
            "--numstat",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        check=False,
    )
    return time.perf_counter() - began, proc.stdout.count(b"\ncommit ") + 1


def time_mine(repo: str, name: str) -> tuple[float, dict]:
    began = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", "from service.cli import main; main()", "mine", repo, "--name", name, "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    elapsed = time.perf_counter() - began
    if proc.returncode != 0:
        raise SystemExit(f"eok mine failed ({proc.returncode}): {proc.stderr.strip()[-2000:]}")
    return elapsed, json.loads(proc.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("repo")
    ap.add_argument("--name", default=None, help="graph name prefix (a unique suffix is added)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    name = f"{args.name or 'bench'}-{uuid.uuid4().hex[:8]}"
    git_s, git_commits = time_git_log(args.repo)
    mine_s, report = time_mine(args.repo, name)
    git_s2, _ = time_git_log(args.repo)  # again after, so load changes during the run show
    base = min(git_s, git_s2)
    result = {
        "repository": args.repo,
        "git_log_numstat_s": round(git_s, 2),
        "git_log_numstat_again_s": round(git_s2, 2),
        "eok_mine_s": round(mine_s, 2),
        "eok_mine_internal_s": report["seconds"],
        "ratio_process": round(mine_s / base, 2),
        "ratio_internal": round(report["seconds"] / base, 2),
        "target_ratio": 1.5,
        "commits_git": git_commits,
        "commits_read": report["commits_read"],
        "candidates": report["candidates"],
        "optimization_commits": report["optimization_commits"],
        "optimization_by_isa": report["optimization_by_isa"],
        "thoughts": report["thoughts_created"] + report["thoughts_updated"],
        "ideas": report["ideas_created"] + report["ideas_updated"],
        "timings": report["timings"],
        "warnings": len(report["warnings"]),
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return
    for k, v in result.items():
        print(f"{k:28s} {v}")


if __name__ == "__main__":
    main()
