"""Cost instruction sequences with llvm-mca-22, many at once, with an on-disk cache.

A *unit* is what gets one cost: a loop body (one or more TBs, costed as steady-state cycles per iteration)
or a single TB after its dynamic predecessor (costed as the cycles it adds to a single pass).

Decoupled vector unit. llvm-mca's in-order pipeline retires every instruction in program order, so a 1-cycle
`addi` waits for a 5-cycle `vfmacc` issued before it. That makes cpufp's measured X60 loop (23-24 independent
`vfmacc.vf` e32 m1 + `vsetvli` + `addi` + `bnez`, 33.4 GFLOPS/core, i.e. ~1 vfmacc per cycle) model at
30 cycles per iteration (0.8 vfmacc per cycle), about 23 % short of the hardware. The X60 vector unit has
its own register file and pipes (VFP, VIEU, VLS), so scalar instructions do not wait for vector write-back.
We therefore cost the vector instructions and the scalar instructions (vsetvl* included: they issue on
IEUA) of a unit as two llvm-mca streams and take the slower one. Units where the scalar side reads a vector
result (vmv.x.s, vfmv.f.s, vcpop.m, vfirst.m, csrr vl...) stay one in-order stream, because there the
scalar pipeline really waits for the vector unit.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import sqlite3
import subprocess
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from core.errors import EokError, Unavailable
from evaluator.costmodel.elf import Insn
from evaluator.costmodel.trace import Vtype

MCA = "llvm-mca-22"
MODEL_VERSION = 3  # bump when the costing method changes, so cached costs are not reused
STEADY_ITERATIONS = 8  # (T(body x2) - T(body)) / N is exact from N=2 on for X60 loops: docs/COSTMODEL.md
UNSUPPORTED_COST = 1.0  # cycles charged per instruction llvm-mca cannot model
# llvm-mca gives linking jumps (calls) 100 cycles of latency by default; the callee's own instructions are
# in the trace, so a call costs what the jump costs (WriteJal: 1 cycle on IEUA).
MCA_FLAGS = ["-call-latency=1", "-instruction-info=0", "-resource-pressure=0", "-skip-unsupported-instructions=any"]

_ERROR_LINE_RE = re.compile(r"^[^:\n]+\.s:(\d+):\d+: error:", re.MULTILINE)
_SKIPPED_NOTE_RE = re.compile(r"^note: instruction:\s+(\S+)", re.MULTILINE)


@dataclass(frozen=True)
class Segment:
    """One TB's instructions and the vtype they run under (None: no vector instruction, or vill)."""

    insns: tuple[Insn, ...]
    vtype: Vtype | None  # the vtype it is priced at (a shorter-vl TB: the smallest LMUL holding its vl)
    vl_lmul: str | None = None  # the LMUL it ran under, when priced below it for a short vl

    @property
    def has_vector(self) -> bool:
        return any(i.is_vector for i in self.insns)


@dataclass(frozen=True)
class Unit:
    kind: str  # "loop": steady-state cycles per iteration; "pass": cycles added after `context`
    body: tuple[Segment, ...]
    context: tuple[Segment, ...] = ()


@dataclass(frozen=True)
class UnitCost:
    cycles: float
    unsupported: int  # instructions of the body llvm-mca could not model (charged UNSUPPORTED_COST each)


def require_mca() -> None:
    if shutil.which(MCA) is None:
        raise Unavailable(f"{MCA} not found", hint="apt-get install llvm-22 (Debian bookworm-security)")


@lru_cache(maxsize=1)
def llvm_version() -> str:
    require_mca()
    out = subprocess.run([MCA, "--version"], capture_output=True, text=True, check=False).stdout
    match = re.search(r"LLVM version (\S+)", out)
    return match.group(1) if match else out.strip()[:40]


# ---------------------------------------------------------------------------------------------- streams


def _instrument(vtype: Vtype | None) -> list[str]:
    # Always state the vtype, so a region never inherits it from the region before it (cache keys stay
    # honest). vill blocks can only hold whole-register ops, which do not depend on it.
    lmul, sew = (vtype.lmul, vtype.sew) if vtype else ("M1", "E8")
    return [f"# LLVM-MCA-RISCV-LMUL {lmul}", f"# LLVM-MCA-RISCV-SEW {sew}"]


def needs_coupling(segments: Iterable[Segment]) -> bool:
    """True when the scalar side reads a vector result, so the two pipelines cannot run apart."""
    return any(i.to_scalar for seg in segments for i in seg.insns)


def streams(segments: Sequence[Segment], split: bool) -> dict[str, list[str]]:
    """llvm-mca input lines: {"v": vector, "s": scalar} when split, else {"c": one in-order stream}."""
    out: dict[str, list[str]] = {"v": [], "s": []} if split else {"c": []}
    for seg in segments:
        vec = [i.text for i in seg.insns if i.is_vector]
        if not split:
            out["c"] += (_instrument(seg.vtype) if vec else []) + [i.text for i in seg.insns]
            continue
        if vec:
            out["v"] += _instrument(seg.vtype) + vec
        out["s"] += [i.text for i in seg.insns if not i.is_vector]
    return {name: lines for name, lines in out.items() if any(not x.startswith("#") for x in lines)}


# ------------------------------------------------------------------------------------------------ runs


class McaBatch:
    """Regions for one llvm-mca process (one iteration count); names map to total cycles after `run`."""

    def __init__(self, iterations: int, info: bool = False) -> None:
        self.iterations = iterations
        self.info = info  # also read each region's BlockRThroughput and per-instruction latencies
        self.regions: dict[str, list[str]] = {}
        self.summaries: dict[str, tuple[float, list[int]]] = {}

    def add(self, name: str, lines: list[str]) -> None:
        self.regions[name] = lines

    def start(self, workdir: Path, mcpu: str) -> subprocess.Popen[str] | None:
        if not self.regions:
            return None
        self.path = workdir / f"units-{self.iterations}.s"
        text: list[str] = []
        for name, lines in self.regions.items():
            text += [f"# LLVM-MCA-BEGIN {name}", *lines, f"# LLVM-MCA-END {name}"]
        self.path.write_text("\n".join(text) + "\n")
        argv = [MCA, "-mtriple=riscv64", f"-mcpu={mcpu}", f"-iterations={self.iterations}", "-json"]
        argv += [f.replace("-instruction-info=0", "-instruction-info=1") if self.info else f for f in MCA_FLAGS]
        return subprocess.Popen([*argv, str(self.path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def finish(self, proc: subprocess.Popen[str] | None) -> tuple[dict[str, int], set[str]]:
        """(total cycles per region, instruction texts and mnemonics llvm-mca could not model)."""
        if proc is None:
            return {}, set()
        out, err = proc.communicate()
        if proc.returncode != 0 or not out.strip():
            raise EokError(
                f"{MCA} failed on the cost-model input: {err.strip()[:400]}",
                hint="report the instruction it names; the cost model cannot price it",
            )
        # Regions whose instructions were all skipped are missing from the output: they cost 0 here.
        regions = json.loads(out)["CodeRegions"]
        cycles = {r["Name"]: int(r["SummaryView"]["TotalCycles"]) for r in regions}
        if self.info:
            for r in regions:
                lat = [int(i["Latency"]) for i in r.get("InstructionInfoView", {}).get("InstructionList", [])]
                self.summaries[r["Name"]] = (float(r["SummaryView"]["BlockRThroughput"]), lat)
        lines = self.path.read_text().splitlines()
        bad = {lines[int(n) - 1] for n in _ERROR_LINE_RE.findall(err) if 0 < int(n) <= len(lines)}
        bad |= set(_SKIPPED_NOTE_RE.findall(err))  # no scheduling class: reported by mnemonic only
        return cycles, bad


# ------------------------------------------------------------------------------------------------ cache


class CostCache:
    """unit key -> cost, in one SQLite file under cache_dir (safe for several evaluator processes)."""

    def __init__(self, cache_dir: Path) -> None:
        cache_dir.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(cache_dir / "x60-mca-costs.sqlite", timeout=30.0)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("CREATE TABLE IF NOT EXISTS unit_cost (key TEXT PRIMARY KEY, cycles REAL, unsupported INTEGER)")

    def get_many(self, keys: Iterable[str]) -> dict[str, UnitCost]:
        found: dict[str, UnitCost] = {}
        keys = list(keys)
        for i in range(0, len(keys), 500):
            chunk = keys[i : i + 500]
            marks = ",".join("?" * len(chunk))
            rows = self.db.execute(f"SELECT key, cycles, unsupported FROM unit_cost WHERE key IN ({marks})", chunk)
            found.update({k: UnitCost(c, u) for k, c, u in rows})
        return found

    def put_many(self, costs: dict[str, UnitCost]) -> None:
        with self.db:
            self.db.executemany(
                "INSERT OR REPLACE INTO unit_cost VALUES (?, ?, ?)",
                [(k, c.cycles, c.unsupported) for k, c in costs.items()],
            )

    def close(self) -> None:
        self.db.close()


def unit_key(unit: Unit, mcpu: str, decoupled: bool, scales: tuple[float, float]) -> str:
    def seg(s: Segment) -> list[object]:
        return [[i.text for i in s.insns], s.vtype.asm if s.vtype else None]

    payload = [MODEL_VERSION, mcpu, llvm_version(), unit.kind, decoupled, list(scales)]
    payload += [[seg(s) for s in unit.body], [seg(s) for s in unit.context]]
    return hashlib.sha256(json.dumps(payload).encode()).hexdigest()


# ------------------------------------------------------------------------------------------------ costs


def cost_units(
    units: Sequence[Unit],
    mcpu: str,
    cache: CostCache | None,
    decoupled: bool = True,
    scalar_scale: float = 1.0,
    vector_scale: float = 1.0,
    ooo_issue: int = 0,
) -> tuple[list[UnitCost], int]:
    """Cost every unit (cached ones are not re-simulated). Returns (costs in order, units simulated).

    `scalar_scale` / `vector_scale` multiply the scalar / vector stream of split units (a target's core
    against the X60 whose model prices them; docs/COSTMODEL.md "Targets"). `ooo_issue` > 0: an out-of-order
    core of that issue width, whose loops run at their resource throughput or their loop-carried
    dependence chain, whichever is slower, instead of llvm-mca's in-order schedule.
    """
    require_mca()
    scales = (scalar_scale, vector_scale)
    keys = [unit_key(u, mcpu, decoupled, scales) + (f"-ooo{ooo_issue}" if ooo_issue else "") for u in units]
    known = cache.get_many(set(keys)) if cache else {}
    todo = {k: u for k, u in zip(keys, units, strict=True) if k not in known}
    if todo:
        fresh = _simulate(todo, mcpu, decoupled, scales, ooo_issue)
        if cache:
            cache.put_many(fresh)
        known.update(fresh)
    return [known[k] for k in keys], len(todo)


def _simulate(
    todo: dict[str, Unit], mcpu: str, decoupled: bool, scales: tuple[float, float], ooo_issue: int = 0
) -> dict[str, UnitCost]:
    steady, single = McaBatch(STEADY_ITERATIONS, info=ooo_issue > 0), McaBatch(1)
    plans: dict[str, tuple[Unit, list[str], list[str]]] = {}
    for n, (key, unit) in enumerate(todo.items()):
        split = decoupled and not needs_coupling(unit.body + unit.context)
        if unit.kind == "loop":
            body = streams(unit.body, split)
            for s, lines in body.items():
                steady.add(f"u{n}{s}1", lines)
                steady.add(f"u{n}{s}2", lines + lines)
            plans[key] = (unit, list(body), [])
        else:
            whole, ctx = streams(unit.context + unit.body, split), streams(unit.context, split)
            for s, lines in whole.items():
                single.add(f"u{n}{s}w", lines)
            for s, lines in ctx.items():
                single.add(f"u{n}{s}c", lines)
            plans[key] = (unit, list(whole), list(ctx))
    with tempfile.TemporaryDirectory(prefix="eok-mca-") as tmp:
        procs = [(batch, batch.start(Path(tmp), mcpu)) for batch in (steady, single)]
        (cyc_a, bad_a), (cyc_b, bad_b) = (batch.finish(proc) for batch, proc in procs)
    cycles, bad = {**cyc_a, **cyc_b}, bad_a | bad_b

    def scaled(name: str, stream: str) -> float:
        return cycles.get(name, 0) * {"s": scales[0], "v": scales[1]}.get(stream, 1.0)

    out: dict[str, UnitCost] = {}
    for n, (key, (unit, first, second)) in enumerate(plans.items()):
        if unit.kind == "loop" and ooo_issue:
            value = _out_of_order(n, first, steady, scales, ooo_issue)
        elif unit.kind == "loop":
            per_stream = [(scaled(f"u{n}{s}2", s) - scaled(f"u{n}{s}1", s)) / STEADY_ITERATIONS for s in first]
            value = max(per_stream, default=0.0)
        else:
            total = max((scaled(f"u{n}{s}w", s) for s in first), default=0.0)
            before = max((scaled(f"u{n}{s}c", s) for s in second), default=0.0)
            value = max(total - before, 0.0)
        unsupported = sum(1 for seg in unit.body for i in seg.insns if _unsupported(i, bad))
        out[key] = UnitCost(value + unsupported * UNSUPPORTED_COST, unsupported)
    return out


def _out_of_order(n: int, names: list[str], steady: McaBatch, scales: tuple[float, float], issue: int) -> float:
    """Cycles per iteration of loop unit n on an out-of-order core: the slowest of its resource throughput
    per stream (the X60 model's resources, scaled), its issue width, and its loop-carried dependences."""
    bounds, total = [0.0], 0
    for s in names:
        rthru, latencies = steady.summaries.get(f"u{n}{s}1", (0.0, []))
        lines = [x for x in steady.regions[f"u{n}{s}1"] if not x.startswith("#")]
        bounds.append(rthru * {"s": scales[0], "v": scales[1]}.get(s, 1.0))
        if len(latencies) == len(lines):
            bounds.append(recurrence(lines, latencies))
        total += len(lines)
    return max(*bounds, total / issue)


_REG_RE = re.compile(r"^(?:ra|sp|gp|tp|t[0-6]|s\d+|a[0-7]|f[tsa]\d+|x\d+|f\d+|v\d+)$")
# Instructions whose first operand is read, not written: stores (scalar, vector, segment) and branches.
_NO_DEST = re.compile(
    r"^(?:c\.)?(?:s[bhwd]|fs[hwd]|vs(?:e\d+|se\d+|[uo]xei\d+|\dr|m|seg\d+e\d+|sseg\d+e\d+|[uo]xseg\d+ei\d+)\.v"
    r"|b(?:eq|ne|lt|ge|ltu|geu|eqz|nez|lez|gez|ltz|gtz|gt|le|gtu|leu)|j|jr|ret)$"
)
_ACCUMULATES = re.compile(r"^v\w*(?:macc|msac|madd|msub)\.")  # read their destination too


def _operands(line: str) -> tuple[str | None, list[str]]:
    """(register written, registers read) of one instruction's text."""
    mnemonic, _, ops = line.partition(" ")
    regs = [r for op in re.split(r"[,()\s]+", ops) if _REG_RE.match(r := op.strip())]
    first = ops.split(",")[0].strip()
    if not regs or _NO_DEST.match(mnemonic) or first != regs[0]:
        return None, regs
    return regs[0], [*regs[1:], regs[0]] if _ACCUMULATES.match(mnemonic) else regs[1:]


def recurrence(lines: list[str], latencies: list[int], repeats: int = 16) -> float:
    """The loop-carried dependence chain per iteration, with unlimited resources: the body is replayed
    `repeats` times, each instruction starting when its register sources are ready."""
    ready: dict[str, float] = {}
    ends: list[float] = []
    operands = [_operands(line) for line in lines]
    for _ in range(repeats):
        for (dest, sources), lat in zip(operands, latencies, strict=True):
            start = max((ready.get(r, 0.0) for r in sources), default=0.0)
            if dest:
                ready[dest] = start + lat
        ends.append(max(ready.values(), default=0.0))
    half = repeats // 2
    return (ends[-1] - ends[half - 1]) / (repeats - half)


def _unsupported(insn: Insn, bad: set[str]) -> bool:
    return insn.text in bad or insn.text.split(" ", 1)[0] in bad
