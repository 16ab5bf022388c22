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
from typing import TYPE_CHECKING

from core.errors import EokError, Unavailable
from evaluator.costmodel import scoreboard
from evaluator.costmodel.elf import Insn
from evaluator.costmodel.trace import Vtype

if TYPE_CHECKING:
    from evaluator.targets import VectorOverride  # target data; the model only reads it

MCA = "llvm-mca-22"
MODEL_VERSION = 8  # bump when the costing method changes, so cached costs are not reused
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
    vtype: Vtype | None  # the vtype it ran (and is priced) under, whatever its vl

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


# The most a strip-mining vsetvli cost per strip on a BPI-F3 in the fit set's pairs (a vsetvli per strip vs
# hoisted, 16 KiB): utf8_count m8 +6.7 cycles (m1 +5.0, memset m1 +3.3, memcpy m1 +1.7, m8 +0.1). LLVM's
# latencies would charge a long chain's whole drain (sdot m8: +73 cycles a strip), which no measurement shows.
DRAIN_CAP = 7.0
_STRIP_VSETVL_RE = re.compile(r"^vsetvli?\s+\w+,\s*(?!zero\b|x0\b)\w+,")


def drains_per_iteration(segments: Sequence[Segment]) -> bool:
    """True when a loop body strip-mines: a `vsetvli` taking its AVL from a register waits for the vector
    instructions before it to finish, so strips do not overlap. rvv-bench on a BPI-F3, a vsetvli per strip
    against one hoisted out of the loop: memset m1 2.21x, utf8_count m8 1.22x slower, memcpy m8 unchanged
    (one strip's loads and stores already fill the vector pipe). A `vsetvli rd, zero` (VLMAX) does not:
    cpufp's loop, one per iteration, runs at the measured peak (33.4 GFLOPS). docs/COSTMODEL.md."""
    return any(_STRIP_VSETVL_RE.match(i.text) for seg in segments for i in seg.insns)


def override_cycles(insn: Insn, vtype: Vtype | None, overrides: Sequence[VectorOverride]) -> float | None:
    """The measured vector-unit cycles of `insn` under `vtype` when a target override covers it, else None."""
    mnemonic = insn.text.split(" ", 1)[0]
    if not (insn.is_vector or mnemonic.startswith("vset")):
        return None
    cell = f"{vtype.sew}{vtype.lmul}".lower() if vtype else "e8m1"
    for o in overrides:
        if cell in o.cycles and re.fullmatch(o.mnemonic, mnemonic):
            return o.cycles[cell]
    return None


def assumed_overrides(segments: Sequence[Segment], overrides: Sequence[VectorOverride]) -> list[str]:
    """The override cells marked assumed that these blocks run, as "vl[uo]xei8.v e8m1 cycles" (sorted)."""
    out: set[str] = set()
    for seg in segments:
        for i in seg.insns:
            if override_cycles(i, seg.vtype, overrides) is None:
                continue
            cell = f"{seg.vtype.sew}{seg.vtype.lmul}".lower() if seg.vtype else "e8m1"
            mnemonic = i.text.split(" ", 1)[0]
            for o in overrides:
                if cell in o.cycles and re.fullmatch(o.mnemonic, mnemonic):
                    if cell in o.assumed:
                        out.add(f"{o.mnemonic.replace(chr(92), '')} {cell} cycles")
                    break
    return sorted(out)


def streams(
    segments: Sequence[Segment], split: bool, overrides: Sequence[VectorOverride] = ()
) -> dict[str, tuple[list[str], float]]:
    """llvm-mca input lines and override cycles per stream: {"v": vector, "s": scalar} when split, else
    {"c": one in-order stream}. An instruction a target override prices leaves the vector stream's llvm-mca
    input (a `vset*` stays scalar) and its measured cycles are added to that stream instead."""
    names = ("v", "s") if split else ("c",)
    lines: dict[str, list[str]] = {n: [] for n in names}
    extra: dict[str, float] = dict.fromkeys(names, 0.0)
    vec_name = "v" if split else "c"
    for seg in segments:
        kept: list[Insn] = []
        for i in seg.insns:
            cycles = override_cycles(i, seg.vtype, overrides)
            if cycles is not None:
                extra[vec_name] += cycles
            if cycles is None or not i.is_vector:
                kept.append(i)
        vec = [i.text for i in kept if i.is_vector]
        if not split:
            lines["c"] += (_instrument(seg.vtype) if vec else []) + [i.text for i in kept]
            continue
        if vec:
            lines["v"] += _instrument(seg.vtype) + vec
        lines["s"] += [i.text for i in kept if not i.is_vector]
    return {n: (lines[n], extra[n]) for n in names if extra[n] > 0 or any(not x.startswith("#") for x in lines[n])}


# ------------------------------------------------------------------------------------------------ runs


class McaBatch:
    """Regions for one llvm-mca process (one iteration count); names map to total cycles after `run`."""

    def __init__(self, iterations: int, info: bool = False, pressure: bool = False) -> None:
        self.iterations = iterations
        self.info = info or pressure  # also read each region's BlockRThroughput and per-instruction latencies
        self.pressure = pressure  # also read the pipes each instruction occupies (for the scoreboard)
        self.regions: dict[str, list[str]] = {}
        self.summaries: dict[str, tuple[float, list[int]]] = {}
        self.pipes: dict[str, list[tuple[tuple[str, int], ...]]] = {}  # region -> per instruction
        self.units: dict[str, int] = {}  # pipe -> how many units of it the core has

    def add(self, name: str, lines: list[str]) -> None:
        self.regions[name] = lines

    def start(self, workdir: Path, mcpu: str) -> subprocess.Popen[str] | None:
        if not self.regions:
            return None
        self.path = workdir / f"units-{self.iterations}{'-pressure' if self.pressure else ''}.s"  # one file each
        text: list[str] = []
        for name, lines in self.regions.items():
            text += [f"# LLVM-MCA-BEGIN {name}", *lines, f"# LLVM-MCA-END {name}"]
        self.path.write_text("\n".join(text) + "\n")
        argv = [MCA, "-mtriple=riscv64", f"-mcpu={mcpu}", f"-iterations={self.iterations}", "-json"]
        argv += [f.replace("-instruction-info=0", "-instruction-info=1") if self.info else f for f in MCA_FLAGS]
        if self.pressure:
            argv = [f.replace("-resource-pressure=0", "-resource-pressure=1") for f in argv]
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
        if self.pressure:
            self._read_pipes(json.loads(out))
        lines = self.path.read_text().splitlines()
        bad = {lines[int(n) - 1] for n in _ERROR_LINE_RE.findall(err) if 0 < int(n) <= len(lines)}
        bad |= set(_SKIPPED_NOTE_RE.findall(err))  # no scheduling class: reported by mnemonic only
        return cycles, bad

    def _read_pipes(self, report: dict) -> None:
        # llvm-mca names the units of a pipe "SMX60_LS.\x00", "SMX60_LS.\x01": one pipe of two units.
        names = [n.split(".")[0] for n in report.get("TargetInfo", {}).get("Resources", [])]
        self.units = {n: names.count(n) for n in names}
        for r in report["CodeRegions"]:
            count = len(r.get("InstructionInfoView", {}).get("InstructionList", []))
            used: list[dict[str, int]] = [{} for _ in range(count)]
            for p in r.get("ResourcePressureView", {}).get("ResourcePressureInfo", []):
                i, res = int(p["InstructionIndex"]), int(p["ResourceIndex"])
                if i < count and res < len(names):  # index `count` is the totals row
                    used[i][names[res]] = used[i].get(names[res], 0) + round(float(p["ResourceUsage"]))
            self.pipes[r["Name"]] = [tuple(u.items()) for u in used]

    def ops(self, name: str) -> list[scoreboard.Op] | None:
        """The region's instructions for the scoreboard; None when llvm-mca skipped some of them."""
        lines = [x for x in self.regions.get(name, []) if not x.startswith("#")]
        latencies, pipes = self.summaries.get(name, (0.0, []))[1], self.pipes.get(name, [])
        if not lines or len(latencies) != len(lines) or len(pipes) != len(lines):
            return None
        return [scoreboard.make_op(x, lat, p) for x, lat, p in zip(lines, latencies, pipes, strict=True)]


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


def unit_key(unit: Unit, mcpu: str, decoupled: bool, scales: tuple[float, float], extra: object = None) -> str:
    def seg(s: Segment) -> list[object]:
        return [[i.text for i in s.insns], s.vtype.asm if s.vtype else None]

    payload = [MODEL_VERSION, mcpu, llvm_version(), unit.kind, decoupled, list(scales), extra]
    payload += [[seg(s) for s in unit.body], [seg(s) for s in unit.context]]
    return hashlib.sha256(json.dumps(payload).encode()).hexdigest()


# ------------------------------------------------------------------------------------------------ costs


@dataclass(frozen=True)
class Pricing:
    """How a target's core turns llvm-mca's X60 streams into its cycles (docs/COSTMODEL.md "Targets")."""

    scalar_scale: float = 1.0  # multiplies the scalar stream
    vector_scale: float = 1.0  # multiplies the vector stream
    ooo_issue: int = 0  # > 0: an out-of-order core of that issue width
    issue: int = 2  # instructions issued per cycle at most: no unit runs faster (in-order dual issue: X60)
    overrides: tuple[VectorOverride, ...] = ()  # measured instruction classes (targets/*.toml)
    strip_cycles: float = 0.0  # fewest cycles an iteration of a strip-mining loop takes (fitted; 0: no floor)

    def key(self) -> object:
        return [self.ooo_issue, self.issue, [o.model_dump() for o in self.overrides], self.strip_cycles]


def cost_units(
    units: Sequence[Unit],
    mcpu: str,
    cache: CostCache | None,
    decoupled: bool = True,
    scalar_scale: float = 1.0,
    vector_scale: float = 1.0,
    ooo_issue: int = 0,
    pricing: Pricing | None = None,
) -> tuple[list[UnitCost], int]:
    """Cost every unit (cached ones are not re-simulated). Returns (costs in order, units simulated).

    `scalar_scale` / `vector_scale` multiply the scalar / vector stream of split units (a target's core
    against the X60 whose model prices them; docs/COSTMODEL.md "Targets"). `ooo_issue` > 0: an out-of-order
    core of that issue width, whose loops run at their resource throughput or their loop-carried
    dependence chain, whichever is slower, instead of llvm-mca's in-order schedule. `pricing` gives all of
    these at once, with the issue width and the target's measured instruction overrides.
    """
    require_mca()
    pricing = pricing or Pricing(scalar_scale, vector_scale, ooo_issue)
    scales = (pricing.scalar_scale, pricing.vector_scale)
    keys = [unit_key(u, mcpu, decoupled, scales, pricing.key()) for u in units]
    known = cache.get_many(set(keys)) if cache else {}
    todo = {k: u for k, u in zip(keys, units, strict=True) if k not in known}
    if todo:
        fresh = _simulate(todo, mcpu, decoupled, pricing)
        if cache:
            cache.put_many(fresh)
        known.update(fresh)
    return [known[k] for k in keys], len(todo)


def _simulate(todo: dict[str, Unit], mcpu: str, decoupled: bool, pricing: Pricing) -> dict[str, UnitCost]:
    ooo_issue, scales = pricing.ooo_issue, (pricing.scalar_scale, pricing.vector_scale)
    steady, single = McaBatch(STEADY_ITERATIONS, info=ooo_issue > 0), McaBatch(1)
    board = McaBatch(1, pressure=True)  # scalar streams, priced by the scoreboard (scoreboard.py)
    plans: dict[str, tuple[Unit, dict[str, float], dict[str, float]]] = {}

    def add(batch: McaBatch, name: str, lines: list[str]) -> None:
        if any(not x.startswith("#") for x in lines):  # a stream of overridden instructions only: no region
            batch.add(name, lines)

    for n, (key, unit) in enumerate(todo.items()):
        split = decoupled and not needs_coupling(unit.body + unit.context)
        if unit.kind == "loop":
            body = streams(unit.body, split, pricing.overrides)
            for s, (lines, _) in body.items():
                add(steady, f"u{n}{s}1", lines)
                add(steady, f"u{n}{s}2", lines + lines)
            if "s" in body:
                add(board, f"u{n}sB", body["s"][0])
            if drains_per_iteration(unit.body):
                for s, (lines, _) in body.items():
                    if s != "s":  # the stream holding the vector instructions: one iteration alone
                        add(single, f"u{n}{s}D", lines)
            plans[key] = (unit, {s: x for s, (_, x) in body.items()}, {})
        else:
            whole = streams(unit.context + unit.body, split, pricing.overrides)
            ctx = streams(unit.context, split, pricing.overrides)
            # The scalar stream goes to the scoreboard's batch only: its single-pass llvm-mca cycles, the
            # fallback when llvm-mca skipped an instruction, come from that same run.
            for s, (lines, _) in whole.items():
                if s != "s":
                    add(single, f"u{n}{s}w", lines)
            for s, (lines, _) in ctx.items():
                if s != "s":
                    add(single, f"u{n}{s}c", lines)
            if "s" in whole:
                add(board, f"u{n}sW", whole["s"][0])
                add(board, f"u{n}sC", ctx["s"][0] if "s" in ctx else [])
            plans[key] = (unit, {s: x for s, (_, x) in whole.items()}, {s: x for s, (_, x) in ctx.items()})
    with tempfile.TemporaryDirectory(prefix="eok-mca-") as tmp:
        procs = [(batch, batch.start(Path(tmp), mcpu)) for batch in (steady, single, board)]
        results = [batch.finish(proc) for batch, proc in procs]
    cycles = {**results[0][0], **results[1][0], **results[2][0]}
    bad = results[0][1] | results[1][1] | results[2][1]
    scale = {"s": scales[0], "v": scales[1]}

    def scaled(name: str, stream: str, extra: float = 0.0) -> float:
        # Overridden instructions come with the core's own measured cycles: they are not scaled.
        return cycles.get(name, 0) * scale.get(stream, 1.0) + extra

    def loop_stream(n: int, s: str, extra: float) -> float:
        ops = board.ops(f"u{n}sB") if s == "s" else None
        if ops is not None:
            return scoreboard.loop_cycles(ops, board.units, pricing.issue) * scale[s] + extra
        steady = (scaled(f"u{n}{s}2", s) - scaled(f"u{n}{s}1", s)) / STEADY_ITERATIONS
        # A strip-mining vsetvli waits for the vector work before it: an iteration costs its own fill and
        # drain (region u{n}{s}D, present only for such bodies), but never more than DRAIN_CAP above the
        # steady state, the most a strip paid on silicon.
        drained = min(scaled(f"u{n}{s}D", s), steady + DRAIN_CAP) if f"u{n}{s}D" in cycles else steady
        return max(steady, drained) + extra

    def pass_stream(n: int, s: str, extra: float, ctx_extra: float | None) -> float:
        whole = board.ops(f"u{n}sW") if s == "s" else None
        before = board.ops(f"u{n}sC") if s == "s" and ctx_extra is not None else []
        if whole is not None and before is not None:
            t = scoreboard.pass_cycles(whole, board.units, pricing.issue)
            t0 = scoreboard.pass_cycles(before, board.units, pricing.issue)
            return (t - t0) * scale[s] + extra - (ctx_extra or 0.0)
        w, c = (f"u{n}sW", f"u{n}sC") if s == "s" else (f"u{n}{s}w", f"u{n}{s}c")
        return scaled(w, s, extra) - (scaled(c, s, ctx_extra) if ctx_extra is not None else 0.0)

    out: dict[str, UnitCost] = {}
    for n, (key, (unit, first, second)) in enumerate(plans.items()):
        insns = sum(len(seg.insns) for seg in unit.body)
        if unit.kind == "loop" and ooo_issue:
            value = _out_of_order(n, first, steady, scales, ooo_issue)
        elif unit.kind == "loop":
            value = max((loop_stream(n, s, x) for s, x in first.items()), default=0.0)
            if pricing.strip_cycles and drains_per_iteration(unit.body):
                # A strip-mining vsetvli's round trip: no strip takes less (target's strip_vsetvl_cycles).
                value = max(value, pricing.strip_cycles)
        else:
            # What the block adds to each stream, the larger of the two: the max of the totals minus the max
            # of the contexts would let a vector block after a scalar one of equal cost add ~0 (padding a
            # kernel with scalar work then made it faster: docs/COSTMODEL.md "Sound composition").
            added = [pass_stream(n, s, x, second.get(s)) for s, x in first.items()]
            value = max(max(added, default=0.0), 0.0)
        # No core issues more than `issue` instructions a cycle, vector ones included (X60: in-order dual
        # issue, the vector unit fed by the scalar front end), however the streams overlap.
        value = max(value, insns / max(pricing.issue, ooo_issue, 1))
        unsupported = sum(1 for seg in unit.body for i in seg.insns if _unsupported(i, bad))
        out[key] = UnitCost(value + unsupported * UNSUPPORTED_COST, unsupported)
    return out


def _out_of_order(n: int, extras: dict[str, float], steady: McaBatch, scales: tuple[float, float], issue: int) -> float:
    """Cycles per iteration of loop unit n on an out-of-order core: the slowest of its resource throughput
    per stream (the X60 model's resources plus the stream's overridden instructions, scaled), its issue
    width, and its loop-carried dependences."""
    bounds, total = [0.0], 0
    for s, extra in extras.items():
        rthru, latencies = steady.summaries.get(f"u{n}{s}1", (0.0, []))
        lines = [x for x in steady.regions.get(f"u{n}{s}1", []) if not x.startswith("#")]
        bounds.append(rthru * {"s": scales[0], "v": scales[1]}.get(s, 1.0) + extra)
        if lines and len(latencies) == len(lines):
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
