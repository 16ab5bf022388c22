"""The plan view's operator tree (POST /cypher/plan): Neo4j's raw plan reshaped, bounded in size, no recursion."""

from __future__ import annotations

from service.api.cypher import PLAN_MAX_DEPTH, PLAN_MAX_OPERATORS, plan_tree


def _op(name: str, children: list[dict] | None = None, **args: object) -> dict:
    # as Bolt sends it (the driver's summary.plan / summary.profile): the arguments under `args`
    return {"operatorType": f"{name}@neo4j", "args": args, "identifiers": ["t"], "children": children or []}


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
    # cut at the depth bound (the answer's JSON nests once per level), well before the operator cap
    assert count == PLAN_MAX_DEPTH < PLAN_MAX_OPERATORS and deepest is not None and deepest.get("cut") is True


def test_a_wide_plan_is_cut_at_the_operator_cap() -> None:
    raw = _op("Union", [_op("Leaf") for _ in range(2 * PLAN_MAX_OPERATORS)])
    tree = plan_tree(raw)
    assert len(tree["children"]) == PLAN_MAX_OPERATORS - 1 and tree.get("cut") is True


def test_a_profiled_plan_has_the_measures_and_marks_the_operator_with_most_db_hits() -> None:
    scan = {**_op("NodeByLabelScan", Details="t:Thought", EstimatedRows=25, Time=2_500_000), "dbHits": 26}
    scan.update(rows=25, pageCacheHits=3, pageCacheMisses=1)
    expand = {**_op("Expand(All)", [scan], EstimatedRows=4.5), "dbHits": 40, "rows": 7}
    root = {**_op("ProduceResults", [expand]), "dbHits": 0, "rows": 7}
    tree = plan_tree(root, measured=True)
    out_expand, out_scan = tree["children"][0], tree["children"][0]["children"][0]
    assert (out_scan["rows"], out_scan["db_hits"], out_scan["page_cache_hits"], out_scan["page_cache_misses"]) == (
        25,
        26,
        3,
        1,
    )
    assert out_scan["time_ms"] == 2.5 and out_scan["estimated_rows"] == 25.0  # Neo4j reports nanoseconds
    assert out_expand["time_ms"] is None and out_expand["page_cache_hits"] is None  # not reported: null
    assert [op.get("slowest", False) for op in (tree, out_expand, out_scan)] == [False, True, False]
    assert "db_hits" not in plan_tree(root)  # EXPLAIN: estimates only
