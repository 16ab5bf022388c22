"""scripts/eval_classifier.py: the label file's checks and the comparison of the miner's thought tags with a
labeller's (what a labelled commit set is judged by), on hand-made verdicts: no repository is read."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

from core.settings import PROJECT_ROOT

_spec = importlib.util.spec_from_file_location("eval_classifier", PROJECT_ROOT / "scripts" / "eval_classifier.py")
assert _spec and _spec.loader
eval_classifier = importlib.util.module_from_spec(_spec)
sys.modules["eval_classifier"] = eval_classifier  # its dataclasses look their module up there
_spec.loader.exec_module(eval_classifier)
Labelled, Predicted = eval_classifier.Labelled, eval_classifier.Predicted

HEADER = "sha\trepo\tlabel\toperators\ttechniques\tborderline\treason\n"


def test_a_label_file_with_tags_is_read_and_an_unknown_tag_names_its_line(tmp_path: Path) -> None:
    good = tmp_path / "good.tsv"
    good.write_text(
        HEADER + "a1\to/r\toptimization\tgemm,dot\tvectorize\tyes\tfaster gemm\nb2\to/r\tother\t\t\tno\tfix\n"
    )
    rows = eval_classifier.read_labels(str(good))
    assert rows[0].operators == ("gemm", "dot") and rows[0].techniques == ("vectorize",) and rows[0].borderline
    assert rows[1].operators == () and not rows[1].borderline
    bad = tmp_path / "bad.tsv"
    bad.write_text(HEADER + "a1\to/r\toptimization\tgemm\tvectorize\tno\tok\nb2\to/r\toptimization\tmatmul\t\tno\tx\n")
    with pytest.raises(SystemExit, match=re.escape("line 3: unknown operators matmul")):
        eval_classifier.read_labels(str(bad))
    latin = tmp_path / "latin.tsv"
    latin.write_bytes(HEADER.encode() + b"a1\to/r\tother\t\t\tno\tcaf\xe9\n")
    with pytest.raises(SystemExit, match="not UTF-8 text"):
        eval_classifier.read_labels(str(latin))


def test_thought_tags_are_scored_only_where_both_call_it_an_optimization() -> None:
    labels = [
        Labelled("a", "o/r", "optimization", "", ("gemm",), ("vectorize", "unroll")),
        Labelled("b", "o/r", "optimization", "", ("quantize",), ("vectorize",)),
        Labelled("c", "o/r", "optimization", "", ("dot",), ("unroll",)),  # the miner says other: not scored
        Labelled("d", "o/r", "other", ""),
    ]
    preds = {
        "a": Predicted(True, 3.0, "a", ("gemm", "copy"), ("vectorize",)),
        "b": Predicted(True, 2.0, "b", ("elementwise",), ("vectorize",)),
        "c": Predicted(False, 0.0, "c"),
        "d": Predicted(True, 2.5, "d", ("dot",), ("unroll",)),
    }
    result = eval_classifier.evaluate(labels, preds)
    assert (result["tp"], result["fn"], result["fp"], result["tn"]) == (2, 1, 1, 0)
    tags = result["tags"]
    assert tags["commits"] == 2
    # operators: the miner said gemm, copy, elementwise (3), of which gemm was labelled; the labeller named 2
    assert tags["operators"]["precision"] == pytest.approx(1 / 3, abs=1e-3)
    assert tags["operators"]["recall"] == 0.5
    # techniques: said vectorize twice, both labelled; the labeller named 3
    assert tags["techniques"]["precision"] == 1.0
    assert tags["techniques"]["recall"] == pytest.approx(2 / 3, abs=1e-3)
    primary = tags["primary_operator_named"]
    assert primary["of"] == 2 and primary["share"] == 0.5
    assert [(m["sha"], m["miner"], m["labelled"]) for m in primary["misses"]] == [("b", "elementwise", ["quantize"])]


def test_borderline_commits_get_their_own_figures() -> None:
    labels = [
        Labelled("a", "o/r", "optimization", "", borderline=True),
        Labelled("b", "o/r", "optimization", ""),
        Labelled("c", "o/r", "other", ""),
    ]
    preds = {"a": Predicted(False, 0.0, "a"), "b": Predicted(True, 2.0, "b"), "c": Predicted(False, 0.0, "c")}
    result = eval_classifier.evaluate(labels, preds)
    assert result["recall"] == 0.5 and result["misses"][0]["borderline"]
    assert result["without_borderline"]["commits"] == 2 and result["without_borderline"]["recall"] == 1.0
    assert "tags" not in result  # no commit carries tags


def test_the_committed_label_sets_are_well_formed_and_frozen() -> None:
    """Each labelled set in tests/data/commits reads cleanly (labels, taxonomy tags) and is the file whose
    checksum its README recorded before any classifier ran on it: a label edited later would fail here."""
    import hashlib

    folder = PROJECT_ROOT / "tests" / "data" / "commits"
    readme = (folder / "README.md").read_text()
    sets = sorted(folder.glob("*.tsv"))
    assert len(sets) >= 3
    for path in sets:
        rows = eval_classifier.read_labels(str(path))
        assert len(rows) >= 200 and len({r.sha for r in rows}) == len(rows), path.name
        assert {r.label for r in rows} == {"optimization", "other"}, path.name
        assert all(not (r.operators or r.techniques) for r in rows if r.label == "other"), path.name
        assert hashlib.sha256(path.read_bytes()).hexdigest() in readme, f"{path.name} changed after it was frozen"
