"""The X60's scalar pipeline as an in-order scoreboard: what llvm-mca's in-order model gets wrong.

llvm-mca's in-order pipeline writes results back in program order, so a 1-cycle `addi` waits for a
4-cycle load issued before it. The X60 does not: rvv-bench's scalar byte-copy loop (a load, a store, three
`addi`, a branch per byte) runs at 3.0 cycles per byte on a BPI-F3, i.e. at the dual-issue limit of its six
instructions, where llvm-mca gives 8.0 (docs/COSTMODEL.md "Scalar pipeline"). Here an instruction issues
in program order, at most `issue` a cycle, once its source registers are ready (LLVM's X60 latencies) and
a unit of each pipe it uses is free (LLVM's X60 resources and occupancies, as llvm-mca reports them);
results complete out of order. A store reads its data register late: a value loaded for a copy does not
hold the store back (assumed from the same measured loop, which would otherwise take ~5 cycles a byte).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

STORE_DATA_SLACK = 3  # cycles after issue a store reads its data register (assumed: measured byte copy)
_STORE_RE = re.compile(r"^(?:c\.)?f?s[bhwd](?:sp)?$")
_REG_RE = re.compile(r"^(?:zero|ra|sp|gp|tp|t[0-6]|s\d+|a[0-7]|f[tsa]\d+|x\d+|f\d+|v\d+)$")
_NO_DEST_RE = re.compile(
    r"^(?:c\.)?(?:s[bhwd]|fs[hwd]|b(?:eq|ne|lt|ge|ltu|geu|eqz|nez|lez|gez|ltz|gtz|gt|le|gtu|leu)|j|jr|ret|fence.*)$"
)


@dataclass(frozen=True)
class Op:
    """One instruction as the scoreboard sees it."""

    dest: str | None
    sources: tuple[str, ...]
    store_data: str | None  # a store's data register (read late)
    latency: int
    pipes: tuple[tuple[str, int], ...]  # (pipe, cycles it is occupied)


def make_op(line: str, latency: int, pipes: tuple[tuple[str, int], ...]) -> Op:
    mnemonic, _, operands = line.partition(" ")
    regs = [r for part in re.split(r"[,()\s]+", operands) if _REG_RE.match(r := part.strip())]
    regs = [r for r in regs if r not in ("zero", "x0")]
    first = operands.split(",")[0].strip()
    if _STORE_RE.match(mnemonic):
        data = first if first in regs else None
        return Op(None, tuple(r for r in regs if r != data), data, latency, pipes)
    if _NO_DEST_RE.match(mnemonic) or not regs or first != regs[0]:
        return Op(None, tuple(regs), None, latency, pipes)
    return Op(regs[0], tuple(regs[1:]), None, latency, pipes)


def run(ops: list[Op], units: dict[str, int], repeats: int, issue: int = 2) -> tuple[float, float]:
    """Replay `ops` `repeats` times; (cycle the last instruction issued, cycle the last result is ready)."""
    ready: dict[str, int] = {}
    free: dict[str, list[int]] = {p: [0] * n for p, n in units.items()}
    cycle, slots, done = 0, 0, 0
    for _ in range(repeats):
        for op in ops:
            t = max([cycle, *(ready.get(r, 0) for r in op.sources)])
            if op.store_data is not None:
                t = max(t, ready.get(op.store_data, 0) - STORE_DATA_SLACK)
            for pipe, _busy in op.pipes:
                t = max(t, min(free.get(pipe, [0])))
            if t == cycle and slots >= issue:
                t += 1
            slots = slots + 1 if t == cycle else 1
            cycle = t
            for pipe, busy in op.pipes:
                pool = free.setdefault(pipe, [0])
                k = pool.index(min(pool))
                pool[k] = t + max(busy, 1)
            if op.dest:
                ready[op.dest] = t + op.latency
            done = max(done, t + op.latency)
    return float(cycle), float(done)


def loop_cycles(ops: list[Op], units: dict[str, int], issue: int = 2, iterations: int = 8) -> float:
    """Steady-state cycles per iteration: the difference of two run lengths (fill and drain cancel)."""
    if not ops:
        return 0.0
    one, two = run(ops, units, iterations, issue)[0], run(ops, units, 2 * iterations, issue)[0]
    return (two - one) / iterations


def pass_cycles(ops: list[Op], units: dict[str, int], issue: int = 2) -> float:
    """Cycles of one pass, until the last result is ready (a block added after its context costs the
    difference of two such passes)."""
    return run(ops, units, 1, issue)[1] if ops else 0.0
