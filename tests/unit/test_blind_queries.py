"""The blind retrieval query sets are well formed: enough queries, real labels, valid regexes, no repeats.

The set is written without seeing the ranking and frozen before ranking changes; this test guards its shape
only, never its content against the ranking.
"""

from __future__ import annotations

import json
import re
from enum import StrEnum
from pathlib import Path

import pytest

from knowledge.taxonomy import Isa, Operator, Technique

QUERY_DIR = Path(__file__).resolve().parents[1] / "data" / "retrieval"
# blind sets in the order they were written; each judged one round of ranking rules and then became a
# development set (docs/MINERS.md): set 4 judged the third round, set 5 the miner's relabel (v5 -> v7)
BLIND_SETS = (
    "k1_queries_blind.json",
    "k1_queries_heldout2.json",
    "k1_queries_heldout3.json",
    "k1_queries_heldout4.json",
    "k1_queries_heldout5.json",  # written 2026-12-03 23:28, frozen before any ranking ran on it
)
ENUM_FIELDS: dict[str, type[StrEnum]] = {"isa": Isa, "operator": Operator, "technique": Technique}
RULE_FIELDS = {*ENUM_FIELDS, "text"}


@pytest.fixture(scope="module", params=BLIND_SETS)
def query_set(request: pytest.FixtureRequest) -> dict:
    return json.loads((QUERY_DIR / request.param).read_text())


def test_at_least_forty_queries_with_a_reason(query_set: dict) -> None:
    queries = query_set["queries"]
    assert len(queries) >= 40
    assert query_set["about"].strip()
    for q in queries:
        assert q["query"].strip(), q
        assert q["why"].strip(), q["query"]


def test_rules_name_only_known_fields_and_enum_values(query_set: dict) -> None:
    for q in query_set["queries"]:
        rule = q["rule"]
        assert rule, f"empty rule would judge everything relevant: {q['query']}"
        assert set(rule) <= RULE_FIELDS, f"unknown rule field in {q['query']}: {set(rule) - RULE_FIELDS}"
        for field, enum in ENUM_FIELDS.items():
            values = rule.get(field, [])
            assert isinstance(values, list), f"{field} must be a list in {q['query']}"
            known = {member.value for member in enum}
            assert set(values) <= known, f"{field} values not in taxonomy for {q['query']}: {set(values) - known}"


def test_every_text_rule_compiles(query_set: dict) -> None:
    for q in query_set["queries"]:
        if "text" in q["rule"]:
            re.compile(q["rule"]["text"], re.IGNORECASE)


def test_no_duplicate_queries(query_set: dict) -> None:
    # Case and spacing differences do not make a new query.
    normalised = [" ".join(q["query"].casefold().split()) for q in query_set["queries"]]
    repeated = {text for text in normalised if normalised.count(text) > 1}
    assert not repeated, repeated
