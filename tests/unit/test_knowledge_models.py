"""Graph records: validation names the field, relationships are a closed set, migrations parse."""

from __future__ import annotations

import pytest

from core.errors import InvalidInput
from knowledge.migrations import SCHEMA_FILE, load_migrations
from knowledge.models import NODE_TYPES, Relationship, Thought, validate_records
from knowledge.store import _check_relationship
from knowledge.taxonomy import Isa, Technique, parse_enum


def test_invalid_record_names_source_row_and_field() -> None:
    rows = [
        {"id": "t1", "idea_id": "i1", "title": "ok", "technique": "unroll"},
        {"id": "t2", "idea_id": "i1", "title": "bad", "technique": "magic"},
    ]
    with pytest.raises(InvalidInput) as e:
        validate_records(Thought, rows, "thoughts.json")
    assert "thoughts.json" in e.value.message
    assert "record 1" in e.value.message
    assert "'technique'" in e.value.message


def test_missing_field_and_bad_sha_are_named() -> None:
    with pytest.raises(InvalidInput, match="'title'"):
        validate_records(Thought, [{"id": "t", "idea_id": "i", "technique": "unroll"}], "x")
    with pytest.raises(InvalidInput, match="'sha'"):
        validate_records(NODE_TYPES["Commit"], [{"sha": "not-hex!", "repo": "r", "title": "t"}], "x")


def test_unknown_property_is_rejected() -> None:
    with pytest.raises(InvalidInput, match="'colour'"):
        validate_records(Thought, [{"id": "t", "idea_id": "i", "title": "t", "technique": "unroll", "colour": 1}], "x")


def test_relationships_are_a_closed_set() -> None:
    ok = Relationship(type="HAS_THOUGHT", start_label="Idea", start_key="i", end_label="Thought", end_key="t")
    _check_relationship(ok)
    with pytest.raises(InvalidInput, match="expected Idea->Thought"):
        _check_relationship(ok.model_copy(update={"start_label": "Commit"}))
    with pytest.raises(InvalidInput, match="SIMILAR_TO"):
        _check_relationship(
            Relationship(type="SIMILAR_TO", start_label="Task", start_key="a", end_label="Target", end_key="b")
        )


def test_parse_enum_lists_allowed_values() -> None:
    assert parse_enum(Isa, " RVV ", "isa") == Isa.RVV
    with pytest.raises(InvalidInput) as e:
        parse_enum(Technique, "loop-magic", "technique")
    assert "unroll" in (e.value.hint or "")


def test_schema_file_has_increasing_versions_and_a_constraint_per_node_key() -> None:
    steps = load_migrations(SCHEMA_FILE)
    assert [s.version for s in steps] == sorted({s.version for s in steps})
    text = "\n".join(stmt for s in steps for stmt in s.statements)
    for label, model in NODE_TYPES.items():
        assert f"FOR (n:{label}) REQUIRE n.{model.key_field} IS UNIQUE" in text
    assert "CREATE FULLTEXT INDEX" in text
    assert "CREATE VECTOR INDEX" in text
