"""The plan guard's readers: plan Details as tokens, a procedure call's arguments, and the regex bound."""

from __future__ import annotations

import re
import time

import pytest

from service.api.plan_guard import (
    REGEX_MAX_CHARS,
    call_arguments,
    check_regex_text,
    details_tokens,
    regex_plan_problem,
    regex_problem,
    vector_k_problem,
)


def _op(details: str) -> dict:
    return {"operatorType": "ProcedureCall@neo4j", "args": {"Details": details}}


def test_call_arguments_split_at_top_level_commas_only() -> None:
    name, args = call_arguments(
        "db.index.vector.queryNodes(substring($autostring_0, $k, $autoint_1), $autoint_2, $autolist_3)"
        " :: (node :: NODE)"
    )
    assert name == "db.index.vector.queryNodes"
    assert [" ".join(t.text for t in a) for a in args] == [
        "substring ( $autostring_0 , $k , $autoint_1 )",
        "$autoint_2",
        "$autolist_3",
    ]
    _, quoted = call_arguments("f('a,(b', `x,)y`, [1, 2], {a: 1, b: 2}) :: (x :: INT)")
    assert len(quoted) == 4


@pytest.mark.parametrize(
    ("details", "params", "allowed"),
    [
        ("db.index.vector.queryNodes($autostring_0, $k, t.embedding_vector) :: (node :: NODE)", {"k": 10}, True),
        ("db.index.vector.queryNodes($autostring_0, $k, t.embedding_vector) :: (node :: NODE)", {"k": 1001}, False),
        ("db.index.vector.queryNodes($autostring_0, $k, t.embedding_vector) :: (node :: NODE)", {"k": True}, False),
        ("db.index.vector.queryNodes($autostring_0, $autoint_1, $v) :: (node :: NODE)", {"autoint_1": 5}, False),
        ("db.index.vector.queryNodes(substring($autostring_0, $k, $autoint_1), $autoint_2, $v)", {"k": 1}, False),
        ("db.index.vector.queryNodes($autostring_0, $k + $autoint_1, $v) :: (node :: NODE)", {"k": 1}, False),
        ("db.index.vector.queryNodes($autostring_0, toInteger($k), $v) :: (node :: NODE)", {"k": 1}, False),
        ("db.index.vector.queryNodes($autostring_0, $k) :: (node :: NODE)", {"k": 1}, False),
        ("db.index.vector.queryNodes($autostring_0, $k, $v", {"k": 1}, False),
    ],
)
def test_vector_k_must_be_one_bounded_request_parameter(details: str, params: dict, allowed: bool) -> None:
    assert (vector_k_problem(_op(details), params) is None) is allowed


def test_backticked_names_and_strings_hide_no_operator() -> None:
    tokens = details_tokens("$autostring_0 AS `x =~ y`, 'a =~ b' AS `it``s`")
    assert not any(t.kind == "op" and t.text == "=~" for t in tokens)
    assert regex_plan_problem({"args": {"Details": "$autostring_0 AS `$s =~ ($re + 'a')`"}}) is None


@pytest.mark.parametrize(
    ("details", "allowed"),
    [
        ("cache[n.title] =~ $re", True),
        ("$s =~ $autostring_0 AS m", True),
        ("x =~ ($autostring_1 + $re) AS m", False),
        ("x =~ $re + $autostring_1 AS m", False),
        ("x =~ re AS m", False),
        ("x =~ $p.re AS m", False),
    ],
)
def test_a_plan_regex_takes_one_literal_or_parameter(details: str, allowed: bool) -> None:
    assert (regex_plan_problem({"args": {"Details": details}}) is None) is allowed


@pytest.mark.parametrize(
    "pattern",
    [
        "(.*a){8}",
        "(x+x+)+y",
        "(a|aa)*b",
        ".*a.*a.*a!",
        "a**",
        "(?i).*gemv.*",
        r"(a)\1",
        r"\p{L}+",
        "[[a]b]+",
        "[a&&b]+",
        "x" * (REGEX_MAX_CHARS + 1),
        "a{2,}b?",
        "(?x)a",
        "a{1,2",
    ],
)
def test_super_linear_or_unreadable_patterns_are_refused(pattern: str) -> None:
    assert regex_problem(pattern) is not None


@pytest.mark.parametrize(
    "pattern", ["(?i)sgemv_[nt]", "RISC-V: .*", r"\d{4}-\d{2}-\d{2}", "colou?r", "[^,]+", r"vf\w+", "a{1000000}b*"]
)
def test_linear_patterns_pass_and_run_in_linear_time(pattern: str) -> None:
    assert regex_problem(pattern) is None
    compiled = re.compile(pattern)  # Python's engine backtracks as Java's does
    subject = "x" * 200_000 + "!"
    began = time.monotonic()
    compiled.fullmatch(subject)
    assert time.monotonic() - began < 1.0, pattern


def test_the_text_check_reads_every_regex_before_planning() -> None:
    params = {"re": "(x+x+)+y", "ok": "x+y", "n": 3}
    assert check_regex_text("RETURN $s =~ $ok AS m", params) is None
    assert check_regex_text("RETURN $s =~ 'x+y' AS m", params) is None
    assert check_regex_text("RETURN $s =~ $re", params) is not None
    assert check_regex_text("RETURN $s =~ $n", params) is not None  # not a string
    assert check_regex_text("RETURN $s =~ $missing", params) is not None
    assert check_regex_text("RETURN 1 LIMIT size([x IN [1] WHERE $s =~ $re])", params) is not None
    assert check_regex_text("RETURN $s =~ 'x+' + 'x+' AS m", params) is not None
    assert check_regex_text("RETURN $s =~ /**/ 'x+y' AS m", params) is not None
    assert check_regex_text("RETURN $s =~ '\\u0028x+x+)+y' AS m", params) is not None  # escapes not decoded
    assert check_regex_text("// =~ 'a'\nRETURN $s =~ $re", params) is not None


def test_range_calls_must_state_their_size_and_stay_under_the_limit() -> None:
    from service.api.plan_guard import RANGE_MAX_ELEMENTS, check_range_text

    assert check_range_text("UNWIND range(1, 500) AS i RETURN i", {}) is None
    assert check_range_text("RETURN range(1, $n)", {"n": RANGE_MAX_ELEMENTS}) is None
    assert check_range_text("RETURN [x IN range(1, 1000) | [y IN RANGE (1, 1000) | x]]", {}) is None
    # nested ranges multiply; parameters and backquoted names are read; a bound Neo4j computes is refused
    assert "1,000,000" in check_range_text("RETURN [x IN range(1, 1001) | [y IN range(1, 1000) | x]]", {})
    assert "1,000,000" in check_range_text("RETURN reduce(s = 0, x IN range(1, $n) | s + x)", {"n": 10**10})
    assert "1,000,000" in check_range_text("RETURN `range`(1, 2000000)", {})
    assert "integer literals" in check_range_text('RETURN range(1, toInteger("9"))', {})
    assert "integer literals" in check_range_text("RETURN range(1, $n)", {"n": "9"})
    assert "integer literals" in check_range_text("RETURN range(1, $n)", {"n": True})
    assert check_range_text("RETURN range(10, 1, -1), range(1, 0)", {}) is None  # empty or short
    # Neo4j runs each of these as range(1, 2000000): comments before the parenthesis, escapes in the name,
    # Unicode spaces
    for written in (
        "range /* c */ (1, 2000000)",
        "range // c\n(1, 2000000)",
        "range/**/(1, 2000000)",
        "r\\u0061nge(1, 2000000)",
        "RaNgE\u2003(1, 2000000)",
        "range\u00a0(1, 2000000)",
    ):
        assert "1,000,000" in (check_range_text(f"RETURN {written} AS r", {}) or ""), written
    # over what the statement already holds (a saved query's path): no amplification
    assert check_range_text("MATCH path = (a)-->(b) UNWIND range(0, length(path)) AS d RETURN d", {}) is None
    assert check_range_text("RETURN range(0, size(l) - 1)", {}) is None
    assert "integer literals" in check_range_text("RETURN range(0, size([x IN $l | x]))", {})
