"""Published silicon figures the cost model is calibrated and judged on (docs/COSTMODEL.md, "Fidelity").

Data, all numbers taken from github.com/camel-cdr/rvv-bench-results (MIT) with their source:

    kernels.toml       hand-written: the cores, the kernels, the implementations we reproduce, the fit/test split
    figures.json       extracted by scripts/extract_calibration.py: per (core, kernel page, benchmark title) the
                       published sizes nearest n = 1 Ki, 16 Ki, 1 Mi and every series' value there
    instructions.json  extracted likewise: the instruction throughput tables (index.html) at vl=VLMAX and vl=1
    tasks/<kernel>/    our own implementations of the published series, as evaluator tasks + candidates

Units. rvv-bench times each call with rdcycle (`bench/bench.h`: the mean of the middle 60 % of 10-64 repeats
of one call, data written just before) and publishes `n / cycles`, where n is the benchmark's size: bytes
for memcpy, memset, utf8_count, LUT4, memreverse, input bytes for ascii_to_utf16, 32-bit words for
byteswap32, pixels for mandelbrot (whose image is isqrt(n) x isqrt(n) at 100 iterations at most). The pages
label the axis "Bytes/Cycle" for all of them; it is n per cycle. So a figure's cycles per call is
`n / value` and its cycles per unit of n is `1 / value`; that is what `Figure.cycles` and
`Figure.cycles_per_n` are. The instruction tables are cycles per instruction (rvv-bench
`instructions/rvv/main.c`: total cycles / (8 unrolled x 512 loops x 8 instructions)) for each SEW x LMUL.

Split (kernels.toml, fixed before any fitting, by kernel): `fit` and `test` kernels on the current X60,
X100 and A100 runs; every figure of the earlier BPI-F3 run (core `x60-2025`) is the second test set `test2`.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

HERE = Path(__file__).resolve().parent
TASKS = HERE / "tasks"
SETS = ("fit", "test", "test2")


@dataclass(frozen=True)
class Figure:
    """One published measurement: a series at one size on one core."""

    core: str  # x60, x100, a100, x60-2025
    target: str  # the EoK target that models it (evaluator/targets/<target>.toml)
    kernel: str
    label: str  # the series label as published
    impl: str | None  # our implementation of it (tasks/<kernel>/candidates/<impl>.c), None if not reproduced
    kind: str | None  # scalar | swar | vector (None when not reproduced)
    n: int  # the benchmark's size argument
    value: float  # as published: n per cycle
    set: str  # fit | test | test2
    source: dict  # repository, commit, file, title, series

    @property
    def cycles(self) -> float:
        """Published cycles per call."""
        return self.n / self.value

    @property
    def cycles_per_n(self) -> float:
        return 1.0 / self.value

    @property
    def key(self) -> str:
        return f"{self.core}/{self.kernel}/{self.label}/{self.n}"


@cache
def catalog() -> dict:
    return tomllib.loads((HERE / "kernels.toml").read_text())


def split_of(core: str, kernel: str) -> str:
    cat = catalog()
    if core == cat["split"]["second_test_set"]:
        return "test2"
    return "fit" if kernel in cat["split"]["fit"] else "test"


def _impl_for(kernel: str, label: str, core: str) -> tuple[str | None, str | None]:
    """Our implementation of a published series: its name, or the one whose `labels` name it for that core."""
    for impl, spec in catalog()["kernels"][kernel]["impls"].items():
        if spec.get("labels", {}).get(core, impl) == label and core in spec.get("cores", [core]):
            return impl, spec["kind"]
    return None, None


@cache
def load() -> tuple[Figure, ...]:
    """Every extracted figure (reproduced by one of our implementations or not), with its source."""
    data = json.loads((HERE / "figures.json").read_text())
    cores = catalog()["cores"]
    out = []
    for g in data["groups"]:
        for label, values in g["series"].items():
            impl, kind = _impl_for(g["kernel"], label, g["core"])
            for n, value in zip(g["sizes"], values, strict=True):
                if value is None or value <= 0:
                    continue
                src = {**g["source"], "title": g["title"], "series": label}
                out.append(Figure(g["core"], cores[g["core"]]["target"], g["kernel"], label, impl, kind, n, value,
                                  split_of(g["core"], g["kernel"]), src))  # fmt: skip
    return tuple(out)


def reproduced(figures: tuple[Figure, ...] | None = None) -> list[Figure]:
    """The figures one of our implementations reproduces: the ones the fidelity bench models."""
    return [f for f in (figures if figures is not None else load()) if f.impl is not None]


@cache
def instruction_tables() -> dict:
    """{core: {"vlmax"|"vl1": {instruction: {"e8m1": cycles, ...}}}} with `sources` at the top level."""
    data = json.loads((HERE / "instructions.json").read_text())
    out: dict = {"sources": data["sources"]}
    for t in data["tables"]:
        out.setdefault(t["core"], {})[t["vl"]] = t["cycles"]
    return out


def instruction_cycles(core: str, instruction: str, vtype: str, vl: str = "vlmax") -> float | None:
    """Published cycles per instruction, e.g. ("x60", "vsseg2e8.v", "e8m2") -> 12.0; None if not published."""
    rows = instruction_tables().get(core, {}).get(vl, {})
    for text, cells in rows.items():
        if text.split()[0] == instruction:
            return cells.get(vtype)
    return None


def model_figure(fig: Figure, cache: Path | None = None) -> float:
    """Modeled cycles per call of `fig` with the current cost model (calibration/fidelity.py; cached)."""
    from evaluator.costmodel.calibration.fidelity import model_figure as model

    return model(fig, cache)
