"""The plan view's operator tree (POST /cypher/plan): Neo4j's raw plan reshaped, bounded in size, no recursion."""

from __future__ import annotations

from service.api.cypher import PLAN_MAX_OPERATORS, plan_tree


def _op(name: str, children: list[dict] | None = None, **args: object) -> dict:
    return {"operatorType": f"{name}@neo4j", "arguments": args, "identifiers": ["t"], "children": children or []}


def test_operators_details_and_estimates_are_kept() -> None:
    raw = _op("ProduceResults", [_op("Expand(All)", [_op("NodeByLabelScan", Details="t:Thought", EstimatedRows=25)])])
    tree = plan_tree(raw)
    assert tree["operator"] == "ProduceResults" and tree["estimated_rows"] is None
    scan = tree["children"][0]["children"][0]
    assert scan == {
        "operator": "NodeByLabelScan",
        "details": "t:Thought",
        "estimated_rows": 25.0,
        "identifiers": ["t"],
        "children": [],
    }


def test_a_plan_deeper_than_the_bound_is_cut_without_recursion() -> None:
    raw = _op("Leaf")
    for _ in range(5000):  # far deeper than Python's recursion limit allows a recursive walk
        raw = _op("Apply", [raw], Details="x" * 5000)
    tree, count, deepest = plan_tree(raw), 0, None
    node = tree
    while node:
        count += 1
        assert len(node["details"]) <= 1000
        deepest = node
        node = node["children"][0] if node["children"] else None
    assert count == PLAN_MAX_OPERATORS and deepest is not None and deepest.get("cut") is True
