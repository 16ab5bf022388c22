"""The analysts' Cypher byte cap refuses a huge row by a lower bound of its JSON size, before converting it."""

from __future__ import annotations

import json
import random
import tracemalloc

from service.api.cypher import json_size_floor, to_json


def _value(rng: random.Random, depth: int = 0) -> object:
    kind = rng.choice(["int", "float", "str", "bytes", "none", "bool"] + (["list", "dict"] if depth < 3 else []))
    if kind == "int":
        return rng.randint(-(10**12), 10**12)
    if kind == "float":
        return rng.choice([rng.uniform(-1e6, 1e6), float("nan"), 0.5])
    if kind == "str":
        return "".join(rng.choice('ab"\\é\n') for _ in range(rng.randint(0, 12)))
    if kind == "bytes":
        return bytes(rng.randint(0, 255) for _ in range(rng.randint(0, 10)))
    if kind == "none":
        return None
    if kind == "bool":
        return rng.random() < 0.5
    if kind == "list":
        return [_value(rng, depth + 1) for _ in range(rng.randint(0, 6))]
    return {f"k{i}": _value(rng, depth + 1) for i in range(rng.randint(0, 5))}


def test_the_floor_never_exceeds_the_real_size() -> None:
    rng = random.Random(7)
    for _ in range(3000):
        row = {"a": _value(rng), "b": _value(rng)}
        real = len(json.dumps({k: to_json(v) for k, v in row.items()}, default=str))
        assert json_size_floor(row, 10**9) <= real, row


def test_a_huge_list_is_over_the_cap_without_visiting_its_elements() -> None:
    huge = list(range(5_000_000))
    tracemalloc.start()
    try:
        assert json_size_floor({"r": huge}, 4 * 2**20) > 4 * 2**20
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # Visiting the elements would copy their 5 million references onto the walk's stack (40 MB).
    assert peak < 2**20, peak
    assert json_size_floor({"r": [1, 2, 3]}, 4 * 2**20) == len(json.dumps({"r": [1, 2, 3]}))
