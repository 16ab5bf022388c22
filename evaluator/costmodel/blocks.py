"""Stage 2: the executed TBs as blocks (TB x vtype x vl class), and the units llvm-mca prices."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

import numpy as np

from core.errors import EokError
from evaluator.costmodel.elf import Disassembly, tb_insns
from evaluator.costmodel.loops import Loop, loop_mask
from evaluator.costmodel.mca import Segment, Unit
from evaluator.costmodel.memory import MemoryStats
from evaluator.costmodel.trace import VL_EQ_VLMAX_BIT, RegionTrace, Vtype, decode_vtype


@dataclass(frozen=True)
class Blocks:
    """The region's distinct blocks, which block each executed TB was, and what each block does per run."""

    segments: list[Segment]
    ids: np.ndarray  # block id of every executed TB, in order
    instructions: int  # dynamic instructions
    # Per execution of each block (rows = blocks): TRAFFIC_FIELDS, from the memory plugin and the vl.
    traffic: np.ndarray


TRAFFIC_FIELDS = (
    "bytes", "l2_bytes", "dram_bytes", "flops",
    "dram_write_bytes", "dram_alloc_bytes", "l2_write_bytes", "l2_alloc_bytes", "scattered_stores",
    "one_line_scattered_stores",
)  # fmt: skip


def executed_blocks(trace: RegionTrace, dis: Disassembly, vlen: int = 256, memory: MemoryStats | None = None) -> Blocks:
    """Distinct blocks (TB x vtype x vl class), the block of every executed TB, and their traffic.

    A TB run with vl < VLMAX (qemu's VL_EQ_VLMAX flag clear) keeps the price of its LMUL: on the X60 a vl=1
    and a vl=VLMAX instruction take the same time (rvv-bench's X60 page; docs/COSTMODEL.md "Cost follows
    LMUL, not vl"). Its vl, from the element accesses the memory plugin counted for its first plain vector
    load or store, only counts its FLOPs.
    """
    uniq, inverse = np.unique(trace.keys, return_inverse=True)
    inverse = inverse.ravel()
    runs = np.bincount(inverse, minlength=len(uniq))
    raw: list[Segment] = []
    for key in uniq.tolist():
        pc, flags = key >> 16, key & 0xFFFF
        insns = tb_insns(dis, trace.tb_addrs[pc])
        vtype = decode_vtype(flags) if any(i.is_vector for i in insns) else None
        raw.append(Segment(insns, vtype))
    check_vtype_layout(uniq, inverse, raw)
    addrs = [trace.tb_addrs[k >> 16] for k in uniq.tolist()]
    full = [bool((k & 0xFFFF) >> VL_EQ_VLMAX_BIT & 1) for k in uniq.tolist()]
    vls = _vector_lengths(raw, addrs, full, runs, vlen, memory)
    segments = raw
    per_run = np.array([_traffic(s, vl) for s, vl in zip(raw, vls, strict=True)]).reshape(len(raw), len(TRAFFIC_FIELDS))
    if memory is not None:
        per_run[:, [0, 1, 2, 4, 5, 6, 7, 8, 9]] = _memory_per_run(raw, addrs, runs, memory)
    index: dict[Segment, int] = {}  # a scalar TB is one block whatever vtype it ran under
    remap = np.array([index.setdefault(s, len(index)) for s in segments], dtype=np.int64)
    weight = np.zeros(len(index))
    np.add.at(weight, remap, runs)
    traffic = np.zeros((len(index), len(TRAFFIC_FIELDS)))
    np.add.at(traffic, remap, per_run * runs[:, None])
    traffic /= np.maximum(weight, 1)[:, None]
    ids = remap[inverse]
    lengths = np.array([len(b.insns) for b in index], dtype=np.int64)
    return Blocks(list(index), ids, int(lengths[ids].sum()), traffic)


# Plain vector loads/stores: one element access per active element, so accesses / runs = vl. Segment, whole-
# register, mask and fault-only-first forms are left out.
_PLAIN_VMEM_RE = re.compile(r"^v[ls](?:e|se|uxei|oxei|sxei|lxei)\d+\.v\s")
_LMUL_VALUE = {"MF8": 0.125, "MF4": 0.25, "MF2": 0.5, "M1": 1.0, "M2": 2.0, "M4": 4.0, "M8": 8.0}


def vlmax(vtype: Vtype, vlen: int) -> float:
    return vlen * _LMUL_VALUE[vtype.lmul] / int(vtype.sew[1:])


def _vector_lengths(
    raw: list[Segment],
    addrs: list[tuple[int, ...]],
    full: list[bool],
    runs: np.ndarray,
    vlen: int,
    memory: MemoryStats | None,
) -> list[float | None]:
    """vl of every (TB, flags) key: VLMAX when full, else measured from the plugin's element counts."""
    out: list[float | None] = [vlmax(s.vtype, vlen) if s.vtype else None for s in raw]
    if memory is None:
        return out
    probe: dict[int, list[int]] = {}  # pc of a plain vector memory insn -> keys whose TB holds it
    for k, (seg, a) in enumerate(zip(raw, addrs, strict=True)):
        for insn, pc in zip(seg.insns, a, strict=True):
            if _PLAIN_VMEM_RE.match(insn.text) and "v0.t" not in insn.text:
                probe.setdefault(pc, []).append(k)
    for k, seg in enumerate(raw):
        if full[k] or seg.vtype is None:
            continue
        for insn, pc in zip(seg.insns, addrs[k], strict=True):
            keys = probe.get(pc) if _PLAIN_VMEM_RE.match(insn.text) else None
            stats = memory.of(pc) if keys else None
            if stats is None or keys is None:
                continue
            partial = [j for j in keys if not full[j]]
            full_elems = sum(float(runs[j]) * (out[j] or 0.0) for j in keys if full[j])
            elems = (float(stats[0]) - full_elems) / max(float(runs[partial].sum()), 1.0)
            out[k] = float(min(max(elems, 1.0), vlmax(seg.vtype, vlen)))
            break
    return out


# FP work per element (vector: times vl), for the FLOPs/cycle figure.
_FMA_RE = re.compile(r"^(?:vf(?:w)?n?m(?:acc|sac|add|sub)|f(?:n)?m(?:add|sub))\.")
_FP_RE = re.compile(
    r"^(?:vf(?:w)?(?:add|sub|rsub|mul|div|rdiv|sqrt|min|max)|vfred\w*|f(?:add|sub|mul|div|sqrt|min|max))\."
)


def _traffic(seg: Segment, vl: float | None) -> list[float]:
    flops = 0.0
    for insn in seg.insns:
        width = (vl or 1.0) if insn.is_vector else 1.0
        if _FMA_RE.match(insn.text):
            flops += 2 * width
        elif _FP_RE.match(insn.text):
            flops += width
    return [0.0, 0.0, 0.0, flops, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]


def _memory_per_run(
    raw: list[Segment], addrs: list[tuple[int, ...]], runs: np.ndarray, memory: MemoryStats
) -> np.ndarray:
    """Bytes accessed, L2<->L1 bytes, DRAM bytes, DRAM bytes written, DRAM lines stores allocated, L1->L2
    bytes written, L1 lines stores allocated (in bytes), scattered vector stores executed whose elements
    span more than one line and those whose elements all fell in one line, per run of each key (an insn's
    counts split by runs).

    A line a store misses on is allocated without being read (the simulated cache still holds it): rvv-bench's
    memcpy at 1 MiB moves 7.0 GB/s on a BPI-F3, which a read of every destination line would have cost a
    third of (docs/COSTMODEL.md "DRAM"). Evictions are what is written.
    """
    runs_at: Counter[int] = Counter()
    for a, r in zip(addrs, runs.tolist(), strict=True):
        for pc in a:
            runs_at[pc] += r
    line = memory.line
    out = np.zeros((len(addrs), 9))
    for k, a in enumerate(addrs):
        for insn, pc in zip(raw[k].insns, a, strict=True):
            s = memory.of(pc)
            if s is None:
                continue
            accesses, nbytes, stores, l1_fills, l2_fills, l1_wb, l2_wb, scattered, multi_line = s.tolist()
            allocated = l1_allocated = 0
            if stores and stores == accesses:  # a store instruction: its fills are write allocations
                allocated, l1_allocated, l1_fills, l2_fills = l2_fills, l1_fills, 0, 0
            share = 1.0 / runs_at[pc]
            counts = [nbytes, (l1_fills + l1_wb) * line, (l2_fills + l2_wb) * line, l2_wb * line, allocated * line]
            out[k] += share * np.array([*counts, l1_wb * line, l1_allocated * line, 0.0, 0.0])
            if _scattered_store(insn.text, stores, scattered):  # its executions, split by the lines they span
                spanning = min(multi_line * share, 1.0)
                out[k, 7:9] += (spanning, 1.0 - spanning)
    return out


_VECTOR_STORE_RE = re.compile(r"^vs(?:se|uxei|oxei|sseg\d+e|[uo]xseg\d+ei)\d+\.v\s")


def _scattered_store(text: str, stores: int, scattered: int) -> bool:
    """A strided or indexed vector store whose elements mostly do not follow one another in memory (a
    stride of one element either way, e.g. memreverse's stride -1, writes whole lines and is not one)."""
    return bool(_VECTOR_STORE_RE.match(text)) and stores > 0 and 2 * scattered > stores


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


def costing_units(
    blocks: list[Segment], ids: np.ndarray, loops: list[Loop], traffic: np.ndarray | None = None
) -> tuple[list[Unit], list[float], np.ndarray]:
    """Units, their weights and their traffic per run (TRAFFIC_FIELDS): each loop body x its iterations,
    every other TB x (predecessor, TB) count."""
    if traffic is None:
        traffic = np.zeros((len(blocks), len(TRAFFIC_FIELDS)))
    loop_weight: Counter[tuple[int, ...]] = Counter()
    for lp in loops:
        loop_weight[lp.body] += lp.iterations
    units = [Unit("loop", tuple(blocks[i] for i in body)) for body in loop_weight]
    weights = [float(w) for w in loop_weight.values()]
    unit_traffic = [traffic[list(body)].sum(axis=0) for body in loop_weight]
    rest = np.flatnonzero(~loop_mask(len(ids), loops))
    if len(rest):
        prev = np.where(rest > 0, ids[np.maximum(rest - 1, 0)], -1)
        pairs, counts = np.unique(np.stack([prev, ids[rest]], axis=1), axis=0, return_counts=True)
        for (p, b), count in zip(pairs.tolist(), counts.tolist(), strict=True):
            units.append(Unit("pass", (blocks[b],), (blocks[p],) if p >= 0 else ()))
            weights.append(float(count))
            unit_traffic.append(traffic[b])
    return units, weights, np.array(unit_traffic).reshape(len(units), len(TRAFFIC_FIELDS))
