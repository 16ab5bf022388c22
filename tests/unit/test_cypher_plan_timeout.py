"""A planning timeout blames LIMIT and SKIP only when the query has an expression there (issue 24: the first
saved query after a cold `db start` was told to fix a LIMIT it did not have)."""

from __future__ import annotations

import pytest

from service.api.cypher import ReadOnlyCypher, limit_skip_expressions


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("MATCH (n) RETURN n", False),
        ("MATCH (n) RETURN n LIMIT 10", False),
        ("MATCH (n) RETURN n SKIP $s LIMIT $k", False),
        ("match (n) return n limit 5;", False),
        ("MATCH (n) RETURN n LIMIT size(range(1, 100000000))", True),
        ("MATCH (n) RETURN n LIMIT 10 + 1", True),
        ("MATCH (n) RETURN n SKIP toInteger('5')", True),
        ("MATCH (n) RETURN n LIMIT $k.x", True),
        ("MATCH (n) RETURN n LIMIT\n  reduce(a = 0, x IN range(1, 9) | a + x)", True),
    ],
)
def test_limit_skip_expressions(query: str, expected: bool) -> None:
    assert limit_skip_expressions(query) is expected


def test_a_cold_planner_is_not_blamed_on_limit_and_skip() -> None:
    runner = ReadOnlyCypher(store=None, timeout_s=5.0, row_cap=10)  # type: ignore[arg-type]  # no query runs
    cold = runner._timeout(planning=True, query="MATCH (t:Thought) RETURN t.title LIMIT 20")
    assert "LIMIT" not in cold.message and "run it again" in cold.hint
    runaway = runner._timeout(planning=True, query="MATCH (t) RETURN t LIMIT size(range(1, 1000000000))")
    assert "LIMIT and SKIP" in runaway.message
