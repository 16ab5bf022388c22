"""How far a modeled speedup can be trusted: the model's measured error on published silicon, and the
figures without a measurement that a result rests on (docs/COSTMODEL.md "Error bars").

The error bar is what scripts/bench_fidelity.py measured on the calibration kernels' TEST set (kernels
never fitted on): how far modeled speedups of vector over scalar code were from the published ones (the
median and the worst factor over kernels), written to calibration/fidelity_summary.json with
`bench_fidelity.py --write-summary`. A target with no published kernels of its own has no error bar, and
says so.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from evaluator.targets import TargetProfile

SUMMARY = Path(__file__).resolve().parent / "calibration" / "fidelity_summary.json"

# What each roofline bound rests on, by the target's figures (evaluator/targets/*.toml, [costmodel]).
_BOUND_FIGURES = {
    "compute": ("peak_flops_per_cycle",),
    "L2": ("l2_bytes_per_cycle", "l2_ways"),
    "DRAM": ("dram_gbps", "dram_write_gbps", "dram_rmw_gbps", "l2_ways"),
}


@dataclass(frozen=True)
class ErrorBar:
    """Modeled vs published speedups on the test set: a modeled speedup S is S / factor .. S x factor."""

    median: float  # median error factor over the test kernels (max(m/p, p/m) of the speedup)
    worst: float
    kernels: int
    basis: str  # which published measurements, e.g. "rvv-bench on a BPI-F3 (K1), 3 test kernels"

    def text(self) -> str:
        return f"x/{self.median:.2f} typical, x/{self.worst:.2f} worst ({self.basis})"


@cache
def _summary() -> dict:
    return json.loads(SUMMARY.read_text()) if SUMMARY.is_file() else {}


def error_bar(target_key: str) -> ErrorBar | None:
    """The model's measured speedup error for this target's core, or None when nothing was measured."""
    core = _summary().get("targets", {}).get(target_key)
    if not core or not core.get("kernels"):
        return None
    return ErrorBar(core["speedup_median"], core["speedup_worst"], core["kernels"], core["basis"])


def rests_on(target: str | TargetProfile, bound: str | None) -> list[str]:
    """The assumed figures (no measurement) a result with this roofline bound depends on: of the target as
    evaluated (a calibrated file given by path keeps the built-in's key but lists its own assumptions)."""
    if isinstance(target, str):
        from evaluator.targets import load_target  # target data only; late so the model does not load TOML early

        target = load_target(target)
    assumed = set(target.costmodel.assumed) if target.costmodel else set()
    figures = _BOUND_FIGURES.get(bound or "compute", ())
    out = [f for f in figures if f in assumed]
    if target.costmodel and target.costmodel.approximate:
        out += sorted(assumed - set(out))  # a proxy model: every unverified figure is named
    return out


def note(target_key: str, bound: str | None) -> str:
    """One line for a report: the error bar and what the figure rests on."""
    bar = error_bar(target_key)
    parts = [f"model error on published kernels: {bar.text()}" if bar else "model error: not measured for this core"]
    assumed = rests_on(target_key, bound)
    if assumed:
        parts.append(f"{bound or 'compute'}-bound: rests on assumed {', '.join(assumed)}")
    return "; ".join(parts)
