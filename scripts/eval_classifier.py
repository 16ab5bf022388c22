"""Check the commit classifier against hand labels kept outside the repository.

    python scripts/eval_classifier.py sample --repo OWNER/NAME=PATH [--repo ...] --n 40 --seed 7 \\
        --exclude OLD.tsv [--exclude ...] --out NEW.tsv --sheet NEW.txt
    python scripts/eval_classifier.py eval LABELS.tsv --repo OWNER/NAME=PATH [--repo ...] [--json]

`sample` draws N non-merge commits per repository uniformly at random (a fixed seed, the population
sorted by sha, commits already labelled in any --exclude file left out) and writes a TSV to fill in
(`sha  repo  label  reason`, label `?`) plus a review sheet with each commit's message, file stats and
the start of its diff. It never runs the classifier, so labelling is blind to the verdicts.

`eval` reads a labelled TSV (label `optimization` or `other`), classifies exactly those commits with the
miner's own walk -> triage -> patch -> classify path, and prints precision, recall (with 95% Wilson
intervals) and every miss. The library profile comes from the repository name (`auto`).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import random
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

# Run as a file (`python scripts/eval_classifier.py`), sys.path[0] is scripts/: the miners package lives one up.
REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

LABELS = ("optimization", "other")
SHEET_DIFF_LINES = 160


@dataclass(frozen=True)
class Labelled:
    sha: str
    repo: str
    label: str
    reason: str


def parse_repo_args(values: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for v in values:
        name, sep, path = v.partition("=")
        if not sep or not name or not path:
            raise SystemExit(f"--repo {v!r}: expected OWNER/NAME=PATH, e.g. OpenMathLib/OpenBLAS=/src/openblas.git")
        if not Path(path).exists():
            raise SystemExit(f"--repo {v!r}: no such path {path!r}")
        out[name] = path
    return out


def read_labels(path: str) -> list[Labelled]:
    p = Path(path)
    if not p.is_file():
        raise SystemExit(f"labels {path!r}: no such file")
    rows: list[Labelled] = []
    with p.open(newline="") as fh:
        for n, row in enumerate(csv.DictReader(fh, delimiter="\t"), 2):
            missing = [k for k in ("sha", "repo", "label") if not row.get(k)]
            if missing:
                raise SystemExit(f"labels {path!r} line {n}: empty field(s) {', '.join(missing)}")
            reason = row.get("reason") or ""
            rows.append(Labelled(row["sha"].strip(), row["repo"].strip(), row["label"].strip(), reason))
    return rows


def _git(path: str, *args: str) -> str:
    proc = subprocess.run(["git", f"--git-dir={_git_dir(path)}", *args], capture_output=True, check=False)
    return proc.stdout.decode("utf-8", errors="replace")


def _git_dir(path: str) -> str:
    p = Path(path)
    return str(p / ".git") if (p / ".git").exists() else str(p)


# ---------------------------------------------------------------------------------------------------------
# sample


def sample(repos: dict[str, str], n: int, seed: int, exclude: list[str]) -> list[tuple[str, str]]:
    taken = {r.sha for path in exclude for r in read_labels(path)}
    rng = random.Random(seed)
    picked: list[tuple[str, str]] = []
    for name, path in repos.items():
        population = sorted(set(_git(path, "rev-list", "--no-merges", "HEAD").split()) - taken)
        if len(population) < n:
            raise SystemExit(f"--n {n}: {name} has only {len(population)} unlabelled non-merge commits")
        picked += [(name, sha) for sha in rng.sample(population, n)]
    return picked


def review_text(path: str, sha: str) -> str:
    head = _git(path, "show", "--no-color", "--stat=120,80", "--format=%H%n%an  %ad%n%n%B", sha).rstrip()
    diff = _git(path, "show", "--no-color", "-U2", "--format=", sha).split("\n")
    if len(diff) > SHEET_DIFF_LINES:
        diff = [*diff[:SHEET_DIFF_LINES], f"... ({len(diff) - SHEET_DIFF_LINES} more diff lines)"]
    return f"{head}\n\n" + "\n".join(diff).rstrip()


def cmd_sample(args: argparse.Namespace) -> None:
    repos = parse_repo_args(args.repo)
    picked = sample(repos, args.n, args.seed, args.exclude or [])
    with open(args.out, "w", newline="") as fh:
        w = csv.writer(fh, delimiter="\t", lineterminator="\n")
        w.writerow(["sha", "repo", "label", "reason"])
        for name, sha in picked:
            w.writerow([sha, name, "?", ""])
    with open(args.sheet, "w") as fh:
        for i, (name, sha) in enumerate(picked):
            fh.write(f"\n{'=' * 100}\n#{i} {name}\n{review_text(repos[name], sha)}\n")
    print(f"{len(picked)} commits -> {args.out} (to label), {args.sheet} (to read)")


# ---------------------------------------------------------------------------------------------------------
# eval


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson score interval of a proportion k/n (sensible for small n, unlike the normal one)."""
    if n == 0:
        return (0.0, 1.0)
    p = k / n
    den = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return (max(0.0, mid - half), min(1.0, mid + half))


def predictions(repos: dict[str, str], labels: list[Labelled]) -> dict[str, tuple[bool, float, str]]:
    """sha -> (is_optimization, score, title) from the miner's own classification path."""
    from miners import gitwalk
    from miners.pipeline import classify_commits
    from miners.profiles import detect_library

    out: dict[str, tuple[bool, float, str]] = {}
    for name, path in repos.items():
        shas = [r.sha for r in labels if r.repo == name]
        if not shas:
            continue
        handle = gitwalk.open_repository(path, Path("/nonexistent"), name)
        profile = detect_library(name, set())
        warnings = gitwalk.WalkWarnings()
        raws = list(gitwalk.read_commits(handle, shas, warnings))
        for m in classify_commits(handle, profile, raws, warnings):
            out[m.raw.sha] = (m.classification.is_optimization, m.classification.score, m.raw.title)
        for w in warnings.messages:
            print(f"warning: {name}: {w}", file=sys.stderr)
    return out


def evaluate(labels: list[Labelled], preds: dict[str, tuple[bool, float, str]]) -> dict:
    tp = fp = fn = tn = 0
    misses: list[dict] = []
    for r in labels:
        if r.label not in LABELS:
            raise SystemExit(f"label {r.label!r} of {r.sha[:12]}: use one of {', '.join(LABELS)}")
        if r.sha not in preds:
            raise SystemExit(f"commit {r.sha[:12]} ({r.repo}) was not found in the repository given for it")
        truth = r.label == "optimization"
        pred, score, title = preds[r.sha]
        if truth and pred:
            tp += 1
        elif truth:
            fn += 1
        elif pred:
            fp += 1
        else:
            tn += 1
        if truth != pred:
            kind = "false negative" if truth else "false positive"
            misses.append({"kind": kind, "sha": r.sha, "repo": r.repo, "score": score, "title": title, "why": r.reason})
    prec_n, rec_n = tp + fp, tp + fn
    return {
        "commits": len(labels),
        "labelled_optimizations": rec_n,
        "predicted_optimizations": prec_n,
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "tn": tn,
        "precision": round(tp / prec_n, 3) if prec_n else None,
        "precision_95ci": [round(x, 3) for x in wilson(tp, prec_n)],
        "recall": round(tp / rec_n, 3) if rec_n else None,
        "recall_95ci": [round(x, 3) for x in wilson(tp, rec_n)],
        "misses": misses,
    }


def cmd_eval(args: argparse.Namespace) -> None:
    repos = parse_repo_args(args.repo)
    labels = read_labels(args.labels)
    unknown = sorted({r.repo for r in labels} - set(repos))
    if unknown:
        raise SystemExit(f"labels name repositories without a --repo path: {', '.join(unknown)}")
    result = evaluate(labels, predictions(repos, labels))
    if args.json:
        print(json.dumps(result, indent=2))
        return
    for k, v in result.items():
        if k != "misses":
            print(f"{k:26s} {v}")
    for m in result["misses"]:
        head = f"{m['kind']:15s} {m['sha'][:10]} {m['repo']:22s} score {m['score']:+.1f}"
        print(f"{head}  {m['title'][:70]}  ({m['why']})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("sample", help="draw a random sample to label")
    s.add_argument("--repo", action="append", required=True, help="OWNER/NAME=PATH (repeatable)")
    s.add_argument("--n", type=int, default=40, help="commits per repository")
    s.add_argument("--seed", type=int, required=True)
    s.add_argument("--exclude", action="append", help="a labelled TSV whose commits are left out (repeatable)")
    s.add_argument("--out", required=True, help="TSV to fill in")
    s.add_argument("--sheet", required=True, help="review sheet to read")
    e = sub.add_parser("eval", help="precision and recall on a labelled TSV")
    e.add_argument("labels")
    e.add_argument("--repo", action="append", required=True, help="OWNER/NAME=PATH (repeatable)")
    e.add_argument("--json", action="store_true")
    args = ap.parse_args()
    cmd_sample(args) if args.cmd == "sample" else cmd_eval(args)


if __name__ == "__main__":
    main()
