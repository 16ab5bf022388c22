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

Optional columns: `borderline` (yes/no: the figures are repeated without those commits) and, for
optimizations, `operators` and `techniques` (comma-separated taxonomy values, knowledge/taxonomy.py). With
them, `eval` also compares what the miner would store: on commits both call optimizations, the operators and
techniques of the thoughts it distils (as they land in the graph), as precision and recall of the tags and
whether the primary thought's operator is one the labeller named.
"""

from __future__ import annotations

import argparse
import csv
import io
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
    operators: tuple[str, ...] = ()
    techniques: tuple[str, ...] = ()
    borderline: bool = False


@dataclass(frozen=True)
class Predicted:
    """The miner's verdict on one commit, and the tags of the thoughts it would store from it."""

    is_optimization: bool
    score: float
    title: str
    operators: tuple[str, ...] = ()  # of the distilled thoughts, the primary one's first
    techniques: tuple[str, ...] = ()


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
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise SystemExit(f"labels {path!r}: not UTF-8 text (byte {e.start}); save the file as UTF-8") from None
    rows: list[Labelled] = []
    for n, row in enumerate(csv.DictReader(io.StringIO(text, newline=""), delimiter="\t"), 2):
        missing = [k for k in ("sha", "repo", "label") if not row.get(k)]
        if missing:
            raise SystemExit(f"labels {path!r} line {n}: empty field(s) {', '.join(missing)}")
        reason = row.get("reason") or ""
        ops = _tags(row.get("operators"), "operators", path, n)
        techs = _tags(row.get("techniques"), "techniques", path, n)
        borderline = (row.get("borderline") or "no").strip().lower() == "yes"
        rows.append(
            Labelled(row["sha"].strip(), row["repo"].strip(), row["label"].strip(), reason, ops, techs, borderline)
        )
    return rows


def _tags(value: str | None, column: str, path: str, line: int) -> tuple[str, ...]:
    """A comma-separated list of taxonomy values; an unknown one stops the run, naming its line."""
    from knowledge.taxonomy import Operator, Technique

    allowed = {e.value for e in (Operator if column == "operators" else Technique)}
    tags = tuple(t.strip() for t in (value or "").split(",") if t.strip())
    unknown = [t for t in tags if t not in allowed]
    if unknown:
        raise SystemExit(
            f"labels {path!r} line {line}: unknown {column} {', '.join(unknown)}; use knowledge/taxonomy.py's values"
        )
    return tags


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


def predictions(repos: dict[str, str], labels: list[Labelled]) -> dict[str, Predicted]:
    """sha -> the miner's verdict from its own classification path, with the thoughts it would distil."""
    from miners import gitwalk
    from miners.pipeline import classify_commits
    from miners.profiles import detect_library

    out: dict[str, Predicted] = {}
    tagged = any(r.operators or r.techniques for r in labels)  # distilling thoughts is needed only then
    for name, path in repos.items():
        shas = [r.sha for r in labels if r.repo == name]
        if not shas:
            continue
        handle = gitwalk.open_repository(path, Path("/nonexistent"), name)
        profile = detect_library(name, set())
        warnings = gitwalk.WalkWarnings()
        raws = list(gitwalk.read_commits(handle, shas, warnings))
        for m in classify_commits(handle, profile, raws, warnings):
            c = m.classification
            ops, techs = _thought_tags(name, m) if tagged else ((), ())
            out[m.raw.sha] = Predicted(c.is_optimization, c.score, m.raw.title, ops, techs)
        for w in warnings.messages:
            print(f"warning: {name}: {w}", file=sys.stderr)
    return out


def _thought_tags(repo: str, m) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Operators and techniques of the thoughts the pipeline would store from this commit (none when it
    evidences no CPU thought), the primary thought's operator first."""
    from miners.distill import evidence_thoughts
    from miners.pipeline import evidence_of

    ev = evidence_of(repo, m)
    if ev is None:
        return (), ()
    drafts = evidence_thoughts(ev)
    ops = dict.fromkeys(d.operator.value for d in drafts)
    techs = dict.fromkeys(d.technique.value for d in drafts)
    return tuple(ops), tuple(techs)


def tag_agreement(labels: list[Labelled], preds: dict[str, Predicted]) -> dict:
    """On commits both call optimizations and the labeller tagged: precision and recall of the miner's
    thought tags against the labels (pooled over commits), and how often its primary operator was named."""
    both = [r for r in labels if r.label == "optimization" and preds[r.sha].is_optimization]
    out: dict = {"commits": len(both)}
    for field in ("operators", "techniques"):
        rows = [(set(getattr(r, field)), set(getattr(preds[r.sha], field))) for r in both if getattr(r, field)]
        hit = sum(len(t & p) for t, p in rows)
        said = sum(len(p) for _, p in rows)
        named = sum(len(t) for t, _ in rows)
        out[field] = {
            "tagged_commits": len(rows),
            "precision": round(hit / said, 3) if said else None,
            "precision_95ci": [round(x, 3) for x in wilson(hit, said)],
            "recall": round(hit / named, 3) if named else None,
            "recall_95ci": [round(x, 3) for x in wilson(hit, named)],
        }
    primary = [(r, preds[r.sha].operators[0]) for r in both if r.operators and preds[r.sha].operators]
    agree = sum(op in r.operators for r, op in primary)
    out["primary_operator_named"] = {
        "of": len(primary),
        "share": round(agree / len(primary), 3) if primary else None,
        "share_95ci": [round(x, 3) for x in wilson(agree, len(primary))],
        "misses": [
            {"sha": r.sha, "repo": r.repo, "miner": op, "labelled": list(r.operators), "title": preds[r.sha].title}
            for r, op in primary
            if op not in r.operators
        ],
    }
    return out


def evaluate(labels: list[Labelled], preds: dict[str, Predicted]) -> dict:
    tp = fp = fn = tn = 0
    misses: list[dict] = []
    for r in labels:
        if r.label not in LABELS:
            raise SystemExit(f"label {r.label!r} of {r.sha[:12]}: use one of {', '.join(LABELS)}")
        if r.sha not in preds:
            raise SystemExit(f"commit {r.sha[:12]} ({r.repo}) was not found in the repository given for it")
        truth = r.label == "optimization"
        p = preds[r.sha]
        pred = p.is_optimization
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
            misses.append(
                {
                    "kind": kind,
                    "sha": r.sha,
                    "repo": r.repo,
                    "score": p.score,
                    "title": p.title,
                    "why": r.reason,
                    "borderline": r.borderline,
                }
            )
    prec_n, rec_n = tp + fp, tp + fn
    result = {
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
    if any(r.borderline for r in labels) and not all(r.borderline for r in labels):
        clear = evaluate([r for r in labels if not r.borderline], preds)
        result["without_borderline"] = {
            k: clear[k] for k in ("commits", "precision", "precision_95ci", "recall", "recall_95ci")
        }
    if any(r.operators or r.techniques for r in labels):
        result["tags"] = tag_agreement(labels, preds)
    return result


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
        if k not in ("misses", "tags"):
            print(f"{k:26s} {v}")
    for m in result["misses"]:
        head = f"{m['kind']:15s} {m['sha'][:10]} {m['repo']:22s} score {m['score']:+.1f}"
        mark = " [borderline]" if m["borderline"] else ""
        print(f"{head}  {m['title'][:70]}  ({m['why']}){mark}")
    if "tags" in result:
        tags = result["tags"]
        print(f"\nthought tags on the {tags['commits']} commits both call optimizations:")
        for field in ("operators", "techniques"):
            t = tags[field]
            prec, rec = f"{t['precision']} {t['precision_95ci']}", f"{t['recall']} {t['recall_95ci']}"
            print(f"  {field:11s} precision {prec}  recall {rec}")
        prim = tags["primary_operator_named"]
        print(f"  primary operator named by the labeller: {prim['share']} of {prim['of']} {prim['share_95ci']}")
        for m in prim["misses"]:
            print(
                f"    {m['sha'][:10]} miner {m['miner']:12s} labelled {','.join(m['labelled']):20s} {m['title'][:40]}"
            )


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
