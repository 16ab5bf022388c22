"""scripts/eval_retrieval.py: the bootstrap interval a ranking change is judged against, and the query-set checks."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

from core.settings import PROJECT_ROOT

_spec = importlib.util.spec_from_file_location("eval_retrieval", PROJECT_ROOT / "scripts" / "eval_retrieval.py")
assert _spec and _spec.loader
eval_retrieval = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(eval_retrieval)


def test_the_bootstrap_interval_holds_the_mean_and_narrows_with_more_queries() -> None:
    values = [1.0, 0.8, 0.6, 0.0, 0.4, 1.0, 0.2, 0.6]
    low, high = eval_retrieval.bootstrap_interval(values, samples=2000)
    mean = sum(values) / len(values)
    assert low < mean < high and low >= 0.0 and high <= 1.0
    wide = high - low
    low4, high4 = eval_retrieval.bootstrap_interval(values * 4, samples=2000)
    assert high4 - low4 < wide  # four times the queries: about half the width
    assert eval_retrieval.bootstrap_interval(values, samples=2000) == (low, high)  # a fixed seed: reproducible
    assert eval_retrieval.bootstrap_interval([0.6] * 10, samples=500) == pytest.approx((0.6, 0.6))


def test_the_project_query_sets_load_and_a_broken_one_is_refused(tmp_path: Path) -> None:
    for path in (PROJECT_ROOT / "tests" / "data" / "retrieval").glob("k1_queries*.json"):
        assert len(eval_retrieval.load_queries(path)) >= 20, path
    broken = tmp_path / "q.json"
    broken.write_text(json.dumps({"queries": [{"query": "RVV dot"}]}))
    with pytest.raises(ValueError, match="query 1 needs"):
        eval_retrieval.load_queries(broken)
    broken.write_text(json.dumps({"queries": [{"query": "RVV dot", "rule": {"text": "vfmacc("}}]}))
    with pytest.raises(re.error):
        eval_retrieval.load_queries(broken)


def test_the_paired_difference_counts_queries_that_moved_and_cancels_their_difficulty() -> None:
    before = [0.0, 0.2, 1.0, 0.4, 0.6, 0.8]
    after = [0.2, 0.4, 1.0, 0.6, 0.8, 0.6]
    paired = eval_retrieval.paired_difference(after, before)
    assert (paired["better"], paired["worse"]) == (4, 1)
    assert paired["mean"] == pytest.approx(0.1)
    low, high = paired["interval_95"]
    assert low < paired["mean"] < high
    # the differences vary less than the precisions do: a narrower interval than the separate ones
    b_low, b_high = eval_retrieval.bootstrap_interval(before)
    assert high - low < b_high - b_low
