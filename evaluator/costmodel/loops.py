"""Find the dynamic loops in a TB trace: stretches where the same sequence of TBs repeats back to back.

A loop body can span several TBs (every vsetvl*, call or internal branch ends a qemu TB), so looking for TBs
that repeat themselves is not enough. For each execution we take the distance to the previous execution of
the same TB; inside a loop whose body has k TBs (each once per iteration) that distance is k at every
position. A run of positions where it stays k for at least k steps is k-periodic, and its first k TBs are
the body. Nested loops resolve to the innermost one; outer-loop glue stays outside (costed per TB).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Loop:
    body: tuple[int, ...]  # TB ids of one iteration, rotated to start at the smallest id
    iterations: int  # complete iterations executed in this stretch
    start: int  # first trace position of the stretch
    stop: int  # one past the last position covered by complete iterations


def previous_distance(ids: np.ndarray) -> np.ndarray:
    """For each position, the distance back to the previous execution of the same id (0 if none)."""
    n = len(ids)
    order = np.argsort(ids, kind="stable")
    same = ids[order[1:]] == ids[order[:-1]]
    dist = np.zeros(n, dtype=np.int64)
    later, earlier = order[1:][same], order[:-1][same]
    dist[later] = later - earlier
    return dist


def find_loops(ids: np.ndarray, max_body: int = 256) -> list[Loop]:
    """Periodic stretches of the trace, earliest first, never overlapping."""
    if len(ids) < 2:
        return []
    dist = previous_distance(ids)
    change = np.flatnonzero(np.diff(dist)) + 1
    starts = np.concatenate(([0], change))
    stops = np.concatenate((change, [len(ids)]))
    loops: list[Loop] = []
    covered_until = 0
    for s, e in zip(starts.tolist(), stops.tolist(), strict=True):
        k = int(dist[s])
        if k == 0 or k > max_body or e - s < k:
            continue
        first = s - k  # the first iteration precedes the run of equal distances
        if first < covered_until:
            continue
        iterations = (e - first) // k
        body = ids[first : first + k].tolist()
        pivot = body.index(min(body))
        loops.append(Loop(tuple(body[pivot:] + body[:pivot]), iterations, first, first + iterations * k))
        covered_until = first + iterations * k
    return loops


def loop_mask(n: int, loops: list[Loop]) -> np.ndarray:
    """True at trace positions covered by some loop's complete iterations."""
    delta = np.zeros(n + 1, dtype=np.int64)
    for lp in loops:
        delta[lp.start] += 1
        delta[lp.stop] -= 1
    return np.cumsum(delta[:-1]) > 0
