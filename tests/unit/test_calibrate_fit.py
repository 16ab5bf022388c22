"""eok calibrate without qemu: a target given by path is priced with its own figures, the file the fit writes
keeps the base and annotates what changed, and a bandwidth a pair is not bound by is reported, not invented."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from evaluator.costmodel import machine_for, machines
from evaluator.costmodel.calibration.board import Pair
from evaluator.costmodel.calibration.fit import (
    Figures,
    FitResult,
    _isolate_bandwidth,
    base_figures,
    class_overrides,
    machine_with,
    target_toml,
)
from evaluator.targets import TARGETS_DIR, load_target


def test_a_target_given_by_path_is_priced_with_its_own_figures(tmp_path: Path) -> None:
    builtin_gbps = load_target("k1-x60").costmodel.dram_gbps
    text = (TARGETS_DIR / "k1-x60.toml").read_text()
    text = re.sub(r"^dram_gbps = [0-9.]+", f"dram_gbps = {builtin_gbps / 2}", text, count=1, flags=re.M)
    path = tmp_path / "slow-dram.toml"
    path.write_text(text)
    mine, builtin = machine_for(load_target(str(path))), machines()["spacemit-x60"]
    assert mine.name == builtin.name == "spacemit-x60"
    assert mine.dram_bytes_per_cycle == pytest.approx(builtin.dram_bytes_per_cycle / 2)
    assert machine_for(load_target("k1-x60")) == builtin


def test_the_written_file_keeps_the_base_and_annotates_each_fitted_value() -> None:
    profile = load_target("k1-x60")
    base, classes = base_figures(profile), class_overrides(profile)
    fitted = Figures(
        {**base.bandwidths, "dram_write_gbps": 12.5, "l2_mixed_bytes_per_cycle": 9.0}, {"segment_stores": 2.0}
    )
    sources = {"dram_write_gbps": "memset/rvv_tail_m8@1Mi", "l2_mixed_bytes_per_cycle": "memcpy/rvv_tail_m8@128Ki",
               "segment_stores": "ascii_to_utf16/rvv_vsseg_m1@8Ki"}  # fmt: skip
    result = FitResult(base, fitted, sources, [], classes, machine_with(profile, fitted, classes))
    text = target_toml(TARGETS_DIR / "k1-x60.toml", result, "bpi-f3", "2026-12-02")
    data = tomllib.loads(text)
    assert data["key"] == "k1-x60" and data["costmodel"]["dram_write_gbps"] == 12.5
    assert (
        "dram_write_gbps = 12.5  # fitted by eok calibrate on bpi-f3, 2026-12-02, from memset/rvv_tail_m8@1Mi" in text
    )
    assert "rvv-bench memset at 1 MiB" not in text  # the replaced value's old comment went with it
    assert "l2_ways" in profile.costmodel.assumed  # fitted figures leave the assumed list; the rest stay
    assert data["costmodel"]["assumed"] == [a for a in profile.costmodel.assumed if a != "l2_mixed_bytes_per_cycle"]
    vsseg = [o for o in data["costmodel"]["vector_overrides"] if o["mnemonic"] == "vsseg2e8\\.v"]
    assert len(vsseg) == 1 and vsseg[0]["cycles"]["e8m2"] == 24.0  # 12 measured, x2
    others = [o for o in data["costmodel"]["vector_overrides"] if o["mnemonic"] == "vle8\\.v"]
    mine = [o.model_dump(exclude_defaults=True) for o in profile.costmodel.vector_overrides]
    assert others == [o for o in mine if o["mnemonic"] == "vle8\\.v"]
    strided = [o for o in data["costmodel"]["vector_overrides"] if o["mnemonic"] == "vsse8\\.v"]
    assert strided and strided[0]["cycles"]["e8m1"] == 33.81  # the published table's first vsse8 row, scale 1


def test_a_bandwidth_its_pair_is_not_bound_by_is_kept() -> None:
    pair = Pair("memcpy", "rvv_tail_m8", 1 << 17, "L2", "l2_mixed_bytes_per_cycle")
    core, traffic = 18_000.0, 262_144.0

    def roofline(_: Pair, f: Figures) -> float:  # the model's max(core, traffic / bandwidth) for one unit
        return max(core, traffic / f.bandwidths["l2_mixed_bytes_per_cycle"])

    slow = Figures({"l2_mixed_bytes_per_cycle": 16.0})
    assert _isolate_bandwidth(pair, "l2_mixed_bytes_per_cycle", 32_768.0, slow, roofline)
    assert slow.bandwidths["l2_mixed_bytes_per_cycle"] == pytest.approx(8.0, rel=1e-4)
    fast = Figures({"l2_mixed_bytes_per_cycle": 16.0})  # the board is faster than the core can ask for
    assert not _isolate_bandwidth(pair, "l2_mixed_bytes_per_cycle", 12_000.0, fast, roofline)
    assert fast.bandwidths["l2_mixed_bytes_per_cycle"] < 1e3  # not pushed towards infinity
