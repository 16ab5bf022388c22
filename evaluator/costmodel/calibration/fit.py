"""`eok calibrate`: fit a target's cost-model figures to one board's timings of the calibration kernels.

    plan = calibration_plan(profile)                      # kernel/size pairs: L1, L2 and DRAM of the target
    measured = {p.key: board.measure(p) for p in plan}    # board.py: over SSH, or a modeled stand-in
    result = fit(profile, plan, measured, tracer)         # fitted figures, before/after error per pair
    text = target_toml(base_path, result, host)           # the base target file with the fitted values

Method (docs/COSTMODEL.md, "eok calibrate"). Each figure is first taken from the pair that isolates it:
- an instruction class's scale (segment stores, strided accesses) from an L1-resident kernel dominated by that
  class: secant steps on the scale until the modeled cycles of that pair match the board's (at most 5);
- each bandwidth (L2 refill, DRAM read, write-only and in-place) from a kernel bound by it on the target:
  the bandwidth times modeled/measured, repeated until it holds (the roofline term is 1/bandwidth);
then the bandwidths get three rounds of coordinate descent (golden section on log bandwidth, within x2 of
the start) on the sum of squared log errors over every pair, keeping a step only when it lowers the sum.
The class scales multiply the target's measured overrides of that class, or, where the target has none,
the published instruction table of its core (evaluator/costmodel/calibration/instructions.json).
"""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from core.errors import InvalidInput
from evaluator.costmodel.calibration import catalog, instruction_tables
from evaluator.costmodel.calibration.board import Pair, Tracer, human_size
from evaluator.costmodel.model import Machine, machine_for
from evaluator.targets import TargetProfile, VectorOverride

BANDWIDTHS = ("l2_mixed_bytes_per_cycle", "dram_gbps", "dram_write_gbps", "dram_rmw_gbps")
DESCENT_ROUNDS = 3
SECANT_STEPS = 5
CONVERGED = 0.001  # relative: a figure whose pair is matched this closely needs no further step


@dataclass(frozen=True)
class InstructionClass:
    """Instructions whose measured price is scaled together, and the kernel that isolates them."""

    name: str
    pattern: str  # matched against whole mnemonics
    kernel: str
    impl: str


CLASSES = (
    InstructionClass("segment_stores", r"vs(?:s)?seg\d+e\d+\.v", "ascii_to_utf16", "rvv_vsseg_m1"),
    InstructionClass("strided", r"v[ls]se\d+\.v", "memreverse", "rvv_vsse_m1"),
)


def calibration_plan(profile: TargetProfile) -> list[Pair]:
    """The pairs timed on the board, sized to the target's caches: working sets of a quarter of the L1D (L1),
    half the L2 (L2) and twice the L2 (DRAM: a stream through an LRU cache half its size misses every line).
    Each bandwidth's pair is bound by it on the X60 model and on the published BPI-F3 figures."""
    l1, l2 = profile.l1d_kb * 1024, profile.l2_kb * 1024
    small = l1 // 4
    return [
        Pair("memcpy", "rvv_tail_m8", small, "L1"),
        Pair("memcpy", "rvv_tail_m8", l2 // 4, "L2", "l2_mixed_bytes_per_cycle"),  # n bytes copied: 2n move
        Pair("memcpy", "rvv_tail_m8", l2, "DRAM", "dram_gbps"),
        Pair("memset", "rvv_tail_m8", 2 * l2, "DRAM", "dram_write_gbps"),
        Pair("byteswap32", "rvv_vrgather_m1", 2 * l2 // 4, "DRAM", "dram_rmw_gbps"),  # n counts 32-bit words
        *(Pair(c.kernel, c.impl, small, "L1", c.name) for c in CLASSES),
    ]


@dataclass
class Figures:
    """The fitted values: bandwidths as the target file states them, class scales on the base prices."""

    bandwidths: dict[str, float]
    scales: dict[str, float] = field(default_factory=dict)


@dataclass
class FitResult:
    base: Figures
    fitted: Figures
    sources: dict[str, str]  # figure -> the pair it was isolated by ("memcpy/rvv_tail_m8@1Mi")
    pairs: list[dict]  # per pair: measured, modeled before and after, their error factors
    class_overrides: dict[str, list[VectorOverride]]  # per class: the overrides the scale multiplies
    machine: Machine  # the fitted machine
    notes: list[str] = field(default_factory=list)  # figures the board's timings could not pin down
    unbound: list[str] = field(default_factory=list)  # their names

    def to_json(self) -> dict:
        params = {
            name: {
                "before": self.base.bandwidths[name],
                "after": self.fitted.bandwidths[name],
                "from": self.sources.get(name),
            }
            for name in BANDWIDTHS
        }
        for name, scale in self.fitted.scales.items():
            params[f"scale:{name}"] = {"before": 1.0, "after": scale, "from": self.sources.get(name)}
        return {"parameters": params, "pairs": self.pairs, "notes": self.notes}


def base_figures(profile: TargetProfile) -> Figures:
    c = _costdata(profile)
    return Figures({
        "l2_mixed_bytes_per_cycle": c.l2_mixed_bytes_per_cycle or c.l2_bytes_per_cycle,
        "dram_gbps": c.dram_gbps,
        "dram_write_gbps": c.dram_write_gbps or c.dram_gbps,
        "dram_rmw_gbps": c.dram_rmw_gbps or c.dram_gbps,
    })  # fmt: skip


def _costdata(profile: TargetProfile):
    if not profile.cost_model or profile.costmodel is None:
        raise InvalidInput(f"target {profile.key!r} has no cost model to calibrate", "use a RISC-V target, e.g. k1-x60")
    return profile.costmodel


def class_overrides(profile: TargetProfile) -> dict[str, list[VectorOverride]]:
    """Per class, the measured prices its scale multiplies: the target's overrides of that class, else the
    published instruction table of the target's core (the first row per instruction, every vtype)."""
    own = list(_costdata(profile).vector_overrides)
    core = next((k for k, c in catalog()["cores"].items() if c["target"] == profile.key), None)
    table = instruction_tables().get(core, {}).get("vlmax", {}) if core else {}
    source = instruction_tables().get("sources", {}).get("results", {})
    out: dict[str, list[VectorOverride]] = {}
    for cls in CLASSES:
        chosen = [o for o in own if re.fullmatch(cls.pattern, _plain(o.mnemonic))]
        if not chosen:
            for row, cells in table.items():
                mnemonic = row.split()[0]
                if re.fullmatch(cls.pattern, mnemonic) and not any(_plain(o.mnemonic) == mnemonic for o in chosen):
                    where = f"{source.get('repository', 'rvv-bench-results')} {str(source.get('commit', ''))[:12]}"
                    chosen.append(VectorOverride(mnemonic=re.escape(mnemonic), cycles=dict(cells),
                                                 source=f"{where} {core} row '{row}' (vl=VLMAX)"))  # fmt: skip
        if chosen:
            out[cls.name] = chosen
    return out


def _plain(mnemonic_regex: str) -> str:
    return mnemonic_regex.replace("\\", "")


def machine_with(profile: TargetProfile, figures: Figures, classes: dict[str, list[VectorOverride]]) -> Machine:
    """The profile's machine with these bandwidths and its class prices scaled."""
    base = machine_for(profile)
    b, clock = figures.bandwidths, profile.clock_ghz
    in_class = {_plain(o.mnemonic) for group in classes.values() for o in group}
    overrides = [o for o in base.overrides if _plain(o.mnemonic) not in in_class]
    for name, group in classes.items():
        s = figures.scales.get(name, 1.0)
        overrides += [o.model_copy(update={"cycles": {k: v * s for k, v in o.cycles.items()}}) for o in group]
    dram = b["dram_gbps"] / clock  # a read stream's figure is also a copy's (model.Bandwidth.of)
    return replace(
        base,
        l2=replace(base.l2, mixed=b["l2_mixed_bytes_per_cycle"]),
        dram=replace(
            base.dram, read=dram, mixed=dram, write=b["dram_write_gbps"] / clock, in_place=b["dram_rmw_gbps"] / clock
        ),
        overrides=tuple(overrides),
    )


def fit(
    profile: TargetProfile,
    plan: list[Pair],
    measured: dict[str, float],
    tracer: Tracer,
    progress: Callable[[str], None] = lambda _: None,
) -> FitResult:
    """Fit the bandwidths and class scales of `profile` to `measured` (cycles per pair key)."""
    classes = class_overrides(profile)
    base = base_figures(profile)
    figures = Figures(dict(base.bandwidths), {name: 1.0 for name in classes})
    sources: dict[str, str] = {}
    notes: list[str] = []
    unbound: list[str] = []  # bandwidths no pair was bound by on this board: still not measured

    def model(pair: Pair, f: Figures) -> float:
        return tracer.cycles(pair, machine_with(profile, f, classes))

    before = {p.key: tracer.cycles(p, machine_for(profile)) for p in plan}  # the target as it stands
    for pair in plan:
        if pair.isolates in classes:
            figures.scales[pair.isolates] = _secant_scale(pair, measured[pair.key], figures, model)
            sources[pair.isolates] = pair.label
            progress(f"fit {pair.isolates} x{figures.scales[pair.isolates]:.3f} from {pair.label}")
    for pair in plan:
        if pair.isolates in BANDWIDTHS:
            bound = _isolate_bandwidth(pair, pair.isolates, measured[pair.key], figures, model)
            sources[pair.isolates] = pair.label
            progress(f"fit {pair.isolates} = {figures.bandwidths[pair.isolates]:.4g} from {pair.label}")
            if not bound:
                unbound.append(pair.isolates)
                kept = figures.bandwidths[pair.isolates]
                notes.append(f"{pair.isolates}: {pair.label} is not bound by it on this board; {kept:.4g} is where "
                             "the model still depended on it")  # fmt: skip
                progress(f"note: {notes[-1]}")
    _descend(plan, measured, figures, model)
    after = {p.key: model(p, figures) for p in plan}
    rows = [_row(p, measured[p.key], before[p.key], after[p.key]) for p in plan]
    return FitResult(base, figures, sources, rows, classes, machine_with(profile, figures, classes), notes, unbound)


def _secant_scale(pair: Pair, target: float, f: Figures, model: Callable[[Pair, Figures], float]) -> float:
    """The class scale at which the pair's modeled cycles equal the measured ones (secant on cycles)."""
    name = pair.isolates or ""
    s0, c0 = 1.0, model(pair, f)
    s1 = max(0.05, min(20.0, target / c0)) if c0 > 0 else 1.0
    for _ in range(SECANT_STEPS):
        f.scales[name] = s1
        c1 = model(pair, f)
        if abs(c1 / target - 1) < CONVERGED or c1 == c0:
            break
        s0, c0, s1 = s1, c1, max(0.05, min(20.0, s1 + (target - c1) * (s1 - s0) / (c1 - c0)))
    return f.scales[name]


def _isolate_bandwidth(pair: Pair, name: str, target: float, f: Figures, model) -> bool:
    """bandwidth x modeled/measured until the pair matches: exact once the pair is bound by that figure.
    False when a step stops moving the pair (it is bound by something else there): that step is undone, so
    the figure stays where the pair last depended on it."""
    c = model(pair, f)
    for _ in range(12):
        if c <= 0 or abs(c / target - 1) < CONVERGED / 10:
            return True
        last = f.bandwidths[name]
        f.bandwidths[name] = last * c / target
        moved = model(pair, f)
        if abs(moved - c) <= 1e-9 * c:
            f.bandwidths[name] = last
            return False
        c = moved
    return True


def _loss(plan: list[Pair], measured: dict[str, float], f: Figures, model) -> float:
    return sum(math.log(model(p, f) / measured[p.key]) ** 2 for p in plan if measured[p.key] > 0)


def _descend(plan: list[Pair], measured: dict[str, float], f: Figures, model) -> None:
    """Coordinate descent on log bandwidth over all pairs (core cycles stay fixed: each step is cheap)."""
    golden = (math.sqrt(5) - 1) / 2
    for _ in range(DESCENT_ROUNDS):
        for name in BANDWIDTHS:
            start, best = f.bandwidths[name], _loss(plan, measured, f, model)

            def at(x: float, name: str = name) -> float:
                f.bandwidths[name] = math.exp(x)
                return _loss(plan, measured, f, model)

            lo, hi = math.log(start / 2), math.log(start * 2)
            for _ in range(30):
                a, b = hi - golden * (hi - lo), lo + golden * (hi - lo)
                if at(a) <= at(b):
                    hi = b
                else:
                    lo = a
            x = (lo + hi) / 2
            f.bandwidths[name] = math.exp(x) if at(x) < best * (1 - 1e-9) else start


def _row(pair: Pair, measured: float, before: float, after: float) -> dict:
    return {
        "kernel": pair.kernel, "impl": pair.impl, "n": pair.n, "level": pair.level, "isolates": pair.isolates,
        "measured_cycles": measured, "modeled_before": before, "modeled_after": after,
        "error_before": _error(before, measured), "error_after": _error(after, measured),
    }  # fmt: skip


def _error(modeled: float, measured: float) -> float:
    return max(modeled / measured, measured / modeled) if modeled > 0 and measured > 0 else math.inf


# ------------------------------------------------------------------------------------------ the file


def target_toml(base_path: Path, result: FitResult, host: str, date: str) -> str:
    """The base target file with the fitted values, each annotated with where it came from."""
    note = f"fitted by eok calibrate on {host}, {date}"
    text = base_path.read_text()
    for name in BANDWIDTHS:
        text = _set_value(text, name, result.fitted.bandwidths[name], f"{note}, from {result.sources.get(name)}")
    text = _measured_now(text, [n for n in BANDWIDTHS if n in result.sources and n not in result.unbound], note)
    classes = {o_name: group for o_name, group in result.class_overrides.items()}
    text = _drop_overrides(text, {_plain(o.mnemonic) for group in classes.values() for o in group})
    blocks = []
    for name, group in classes.items():
        s = result.fitted.scales.get(name, 1.0)
        blocks.append(f"# {name}: x{s:.4g} of the prices below' sources; {note}, from {result.sources.get(name)}")
        for o in group:
            cells = ", ".join(f"{v} = {c * s:.4g}" for v, c in o.cycles.items())
            source = _quote(f"{note} (x{s:.4g}) from: {o.source}")
            blocks += ["[[costmodel.vector_overrides]]", f"mnemonic = {_quote(o.mnemonic)}"]
            blocks += [f"cycles = {{ {cells} }}", f"source = {source}"]
            if o.assumed:  # scaling a derived figure does not make it measured
                blocks.append(f"assumed = {_quote_list(o.assumed)}")
    header = f"# Calibrated copy of {base_path.name}: {note}.\n# Pass it with --target to eok eval / eok optimize.\n"
    text = header + text.rstrip("\n") + "\n\n" + "\n".join(blocks) + "\n"
    TargetProfile.model_validate(tomllib.loads(text))  # a file we write must load
    return text


def _set_value(text: str, name: str, value: float, note: str) -> str:
    """Replace `name = ...` in [costmodel] (dropping its old comment's continuation lines), or add it."""
    lines = text.splitlines()
    start = next((i for i, x in enumerate(lines) if x.strip() == "[costmodel]"), None)
    if start is None:
        raise InvalidInput("the base target has no [costmodel] table")
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("[")), len(lines))
    new = f"{name} = {value:.4g}  # {note}"
    pattern = re.compile(rf"^{name}\s*=")
    for i in range(start + 1, end):
        if pattern.match(lines[i]):
            j = i + 1
            while j < end and lines[j].startswith(" ") and lines[j].strip().startswith("#"):
                j += 1
            return "\n".join([*lines[:i], new, *lines[j:]]) + "\n"
    anchor = next((i for i in range(start + 1, end) if lines[i].startswith("dram_gbps")), start)
    return "\n".join([*lines[: anchor + 1], new, *lines[anchor + 1 :]]) + "\n"


def _measured_now(text: str, fitted: list[str], note: str) -> str:
    """Figures fitted on the board leave [costmodel] `assumed` (results no longer say they rest on no
    measurement, evaluator/costmodel/confidence.py)."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if re.match(r"^assumed\s*=", line):
            names = tomllib.loads(line.split("#", 1)[0])["assumed"]
            kept = [n for n in names if n not in fitted]
            if kept != names:
                lines[i] = (
                    f"assumed = {_quote_list(kept)}  # {note}: {', '.join(n for n in names if n in fitted)} measured"
                )
            break
    return "\n".join(lines) + "\n"


def _quote_list(names: list[str]) -> str:
    return "[" + ", ".join(_quote(n) for n in names) + "]"


def _drop_overrides(text: str, mnemonics: set[str]) -> str:
    """Remove the [[costmodel.vector_overrides]] entries of these mnemonics (they are written again, scaled)."""
    lines, out, i = text.splitlines(), [], 0
    while i < len(lines):
        if lines[i].strip() != "[[costmodel.vector_overrides]]":
            out.append(lines[i])
            i += 1
            continue
        j = i + 1
        while j < len(lines) and lines[j].strip() and not lines[j].startswith(("[", "#")):
            j += 1
        entry = tomllib.loads("\n".join(lines[i + 1 : j]))
        if _plain(entry.get("mnemonic", "")) not in mnemonics:
            out += lines[i:j]
        i = j
    return "\n".join(out) + "\n"


def _quote(s: str) -> str:
    import json

    return json.dumps(s)


def describe(pair: Pair) -> str:
    return f"{pair.kernel}/{pair.impl} n={human_size(pair.n)} ({pair.level})"
