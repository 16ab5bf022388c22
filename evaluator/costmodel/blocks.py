"""Stage 2: the executed TBs as blocks (TB x vtype), and the units llvm-mca prices (loop bodies, the rest)."""

from __future__ import annotations

import re
from collections import Counter

import numpy as np

from core.errors import EokError
from evaluator.costmodel.elf import Disassembly, tb_insns
from evaluator.costmodel.loops import Loop, loop_mask
from evaluator.costmodel.mca import Segment, Unit
from evaluator.costmodel.trace import RegionTrace, Vtype, decode_vtype


def executed_blocks(trace: RegionTrace, dis: Disassembly) -> tuple[list[Segment], np.ndarray, int]:
    """Distinct (TB, vtype) blocks, the block id of every executed TB, and the dynamic instruction count."""
    uniq, inverse = np.unique(trace.keys, return_inverse=True)
    inverse = inverse.ravel()
    segments: list[Segment] = []
    for key in uniq.tolist():
        pc, flags = key >> 16, key & 0xFFFF
        insns = tb_insns(dis, trace.tb_addrs[pc])
        vtype = decode_vtype(flags) if any(i.is_vector for i in insns) else None
        segments.append(Segment(insns, vtype))
    check_vtype_layout(uniq, inverse, segments)
    index: dict[Segment, int] = {}  # a scalar TB is one block whatever vtype it ran under
    remap = np.array([index.setdefault(s, len(index)) for s in segments], dtype=np.int64)
    ids = remap[inverse]
    lengths = np.array([len(b.insns) for b in index], dtype=np.int64)
    return list(index), ids, int(lengths[ids].sum())


_VSET_IMM_RE = re.compile(r"^vseti?vli\s+\w+,\s*\w+,\s*(e\d+),\s*(mf?\d)")


def check_vtype_layout(uniq: np.ndarray, inverse: np.ndarray, segments: list[Segment]) -> None:
    """A TB right after `vsetvli ..., eSEW, mLMUL` must decode to that vtype, else qemu's flags moved."""
    ends_vset = np.array([bool(s.insns) and s.insns[-1].text.startswith("vset") for s in segments])
    after = np.flatnonzero(ends_vset[inverse[:-1]]) + 1
    for a, b in set(zip(inverse[after - 1].tolist(), inverse[after].tolist(), strict=True)):
        match = _VSET_IMM_RE.match(segments[a].insns[-1].text)
        got = decode_vtype(int(uniq[b]) & 0xFFFF)
        if match is None or got is None:
            continue  # register-form vsetvl or a vill result: nothing to compare with
        want = Vtype(sew=match.group(1).upper(), lmul=match.group(2).upper())
        if got != want:
            raise EokError(
                f"qemu TB flags after {segments[a].insns[-1].text!r} decode to {got.asm}, not {want.asm}",
                hint="this qemu-riscv64 lays out TB flags unlike qemu 7.2; use Debian 12's qemu-user 7.2",
            )


# -------------------------------------------------------------------------------------------- units


def costing_units(blocks: list[Segment], ids: np.ndarray, loops: list[Loop]) -> tuple[list[Unit], list[float]]:
    """Units and their weights: each loop body x its iterations, every other TB x (predecessor, TB) count."""
    loop_weight: Counter[tuple[int, ...]] = Counter()
    for lp in loops:
        loop_weight[lp.body] += lp.iterations
    units = [Unit("loop", tuple(blocks[i] for i in body)) for body in loop_weight]
    weights = [float(w) for w in loop_weight.values()]
    rest = np.flatnonzero(~loop_mask(len(ids), loops))
    if len(rest):
        prev = np.where(rest > 0, ids[np.maximum(rest - 1, 0)], -1)
        pairs, counts = np.unique(np.stack([prev, ids[rest]], axis=1), axis=0, return_counts=True)
        for (p, b), count in zip(pairs.tolist(), counts.tolist(), strict=True):
            units.append(Unit("pass", (blocks[b],), (blocks[p],) if p >= 0 else ()))
            weights.append(float(count))
    return units, weights
