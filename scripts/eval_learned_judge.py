"""Would a learned judge beat the classifier's rules? Reproduces the check in docs/MINERS.md.

    python scripts/eval_learned_judge.py --train tests/data/commits/blind7.tsv --train ...blind8.tsv \\
        --train ...blind9.tsv --test tests/data/commits/blind10.tsv --repo OWNER/NAME=PATH [--repo ...]

A logistic regression over what the rules already see (the weight of each kind of reason the classifier
gives, its score, the repository) and, in a second variant, the title's words. It is trained on the
--train sets, its regularisation C and decision threshold picked by 5-fold cross-validation on them (F1),
and scored once on the --test set beside the rules' own verdicts. scikit-learn is needed (it comes with
sentence-transformers); nothing here is used by the miner.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))
sys.path.insert(0, str(REPO_ROOT / "scripts"))

import eval_classifier  # noqa: E402  (the label reader and the repository arguments)

_REASON = re.compile(r"([+-]\d+\.\d)\s+(.*)")


def features(repos: dict[str, str], labels: list) -> list[tuple[dict[str, float], int, int, str]]:
    """(features, label, the rules' verdict, title) per labelled commit, from the miner's own path."""
    from miners import gitwalk
    from miners.pipeline import classify_commits
    from miners.profiles import detect_library

    mined = {}
    for name, path in repos.items():
        shas = [r.sha for r in labels if r.repo == name]
        if not shas:
            continue
        handle = gitwalk.open_repository(path, Path("/nonexistent"), name)
        warnings = gitwalk.WalkWarnings()
        raws = list(gitwalk.read_commits(handle, shas, warnings))
        mined.update((m.raw.sha, m) for m in classify_commits(handle, detect_library(name, set()), raws, warnings))
    out = []
    for r in labels:
        if r.sha not in mined:
            raise SystemExit(f"commit {r.sha[:12]} ({r.repo}) was not found in the repository given for it")
        c = mined[r.sha].classification
        f: Counter[str] = Counter({"score": c.score, f"repo:{r.repo}": 1.0})
        for reason in c.reasons:
            m = _REASON.match(reason)
            kind = re.sub(r"\s*\(.*$", "", m.group(2) if m else reason).strip()[:60]
            f[f"reason:{kind}"] += float(m.group(1)) if m else 1.0
        out.append((dict(f), int(r.label == "optimization"), int(c.is_optimization), mined[r.sha].raw.title))
    return out


def with_words(f: dict[str, float], title: str) -> dict[str, float]:
    return {**f, **{f"word:{w}": 1.0 for w in set(re.findall(r"[a-z][a-z0-9_+]{2,}", title.lower()))}}


def scores(truth: list[int], pred: list[int]) -> tuple[float, float]:
    tp = sum(t and p for t, p in zip(truth, pred, strict=True))
    return tp / max(sum(pred), 1), tp / max(sum(truth), 1)


def f1(truth: list[int], pred: list[int]) -> float:
    p, r = scores(truth, pred)
    return 2 * p * r / (p + r) if p + r else 0.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--train", action="append", required=True, help="a labelled TSV to train on (repeatable)")
    ap.add_argument("--test", required=True, help="the labelled TSV to score once")
    ap.add_argument("--repo", action="append", required=True, help="OWNER/NAME=PATH (repeatable)")
    args = ap.parse_args()
    try:
        import numpy as np
        from sklearn.feature_extraction import DictVectorizer
        from sklearn.linear_model import LogisticRegression
        from sklearn.model_selection import StratifiedKFold
    except ImportError:
        raise SystemExit("scikit-learn is missing: install it into .venv (pip install scikit-learn)") from None
    repos = eval_classifier.parse_repo_args(args.repo)
    train = features(repos, [r for path in args.train for r in eval_classifier.read_labels(path)])
    test = features(repos, eval_classifier.read_labels(args.test))
    y, y_test = np.array([t[1] for t in train]), [t[1] for t in test]
    p, r = scores(y_test, [t[2] for t in test])
    print(f"rules on the test set: precision {p:.3f}, recall {r:.3f}")
    for words in (False, True):
        rows = [with_words(t[0], t[3]) if words else t[0] for t in train]
        rows_test = [with_words(t[0], t[3]) if words else t[0] for t in test]
        vec = DictVectorizer()
        x, x_test = vec.fit_transform(rows), vec.transform(rows_test)
        for c in (0.03, 0.1, 0.3, 1.0):
            oof = np.zeros(len(y))
            for fit, held in StratifiedKFold(5, shuffle=True, random_state=0).split(x, y):
                oof[held] = LogisticRegression(C=c, max_iter=2000).fit(x[fit], y[fit]).predict_proba(x[held])[:, 1]
            cut = max(np.arange(0.2, 0.7, 0.05), key=lambda t: f1(list(y), list(oof >= t)))
            model = LogisticRegression(C=c, max_iter=2000).fit(x, y)
            p, r = scores(y_test, list(model.predict_proba(x_test)[:, 1] >= cut))
            print(
                f"learned ({'reasons + title words' if words else 'reasons'}, C={c}, threshold {cut:.2f}): "
                f"precision {p:.3f}, recall {r:.3f}"
            )


if __name__ == "__main__":
    main()
