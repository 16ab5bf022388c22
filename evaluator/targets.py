"""Target machines as data: evaluator/targets/<key>.toml, one file per core type (sources inside)."""

from __future__ import annotations

import tomllib
from functools import cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from core.errors import InvalidInput, NotFound

TARGETS_DIR = Path(__file__).resolve().parent / "targets"


class VectorOverride(BaseModel):
    """Measured cycles of an instruction that replace LLVM's price for it, per vtype it runs under ("e8m2",
    "e32mf2", ...). The cycles occupy the vector unit: they are added to the vector stream and the
    instruction leaves llvm-mca's input. A `vset*` entry adds vector time while staying a scalar instruction.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    mnemonic: str  # regular expression matched against the whole mnemonic, e.g. "vsseg2e8\\.v"
    cycles: dict[str, float]  # vtype ("e8m1") -> cycles per instruction, as measured
    source: str  # where the figure was measured (or "assumed: ..."), shown by docs/COSTMODEL.md
    # vtypes whose cycles no measurement gives (derived from a measured one): a result that runs one says so
    assumed: list[str] = []


class CostData(BaseModel):
    """What the cost model needs beyond the profile: memory levels and the core's scaling against the X60.

    Every figure carries its source or the word "assumed" in the TOML comments; docs/COSTMODEL.md explains
    how each is used.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    mca_cpu: str = "spacemit-x60"  # the llvm-mca-22 scheduling model the core is priced with
    approximate: bool = False  # True: not this core's own model
    l1d_ways: int  # associativity of the simulated L1D (LRU)
    l2_ways: int
    l2_bytes_per_cycle: float  # L2 -> L1 fills of one core, reading
    l2_write_bytes_per_cycle: float | None = None  # L1 -> L2 write-backs of a stream that only writes
    l2_mixed_bytes_per_cycle: float | None = None  # all L1 <-> L2 traffic of a stream that reads and writes
    l2_rmw_bytes_per_cycle: float | None = None  # lines read and written back in place, both ways counted
    dram_gbps: float  # DRAM bandwidth one core sustains, GB/s (read streams, and streams that read and write)
    dram_write_gbps: float | None = None  # a stream that only writes (None: dram_gbps)
    dram_rmw_gbps: float | None = None  # lines read and written back in place, both ways counted (None: dram_gbps)
    # Share of the smaller of a unit's core time and its DRAM time that does not overlap the other when the unit
    # copies (reads and writes DRAM, not in place): cycles = max(core, ...) + this x min(core, DRAM copy time).
    # 0: a pure roofline. docs/COSTMODEL.md "DRAM copies: core time overlaps only partly".
    dram_copy_exposed: float = 0.0
    # Fewest cycles an iteration of a strip-mining loop (a vsetvli taking its AVL from a register) takes on an
    # in-order core, however little vector work the strip holds (0: no floor). docs/COSTMODEL.md "vsetvli drains
    # the vector unit".
    strip_vsetvl_cycles: float = 0.0
    peak_flops_per_cycle: float  # f32, one core: the roofline's compute ceiling
    scalar_scale: float = 1.0  # multiplies X60 scalar-stream cycles
    vector_scale: float = 1.0  # multiplies X60 vector-stream cycles
    vector_overrides: list[VectorOverride] = []  # measured instruction classes LLVM's model misprices
    # Cycles a strided or indexed vector store adds when its unit's stores find their lines in L2 / in DRAM
    # (0: not modeled for this core). docs/COSTMODEL.md "Scattered stores beyond L1".
    scattered_store_l2_cycles: float = 0.0
    scattered_store_dram_cycles: float = 0.0
    # Figures with no measurement behind them (names of fields above, or of the profile's): every result that
    # rests on one says so (evaluator/costmodel/confidence.py).
    assumed: list[str] = []


class TargetProfile(BaseModel):
    """One core type: how to compile for it, how to emulate it, and the numbers a report quotes."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    key: str
    name: str
    description: str
    arch: Literal["riscv64", "host"]
    march: str  # the core's full ISA (board builds when mcpu is empty)
    mcpu: str  # clang -mcpu for board builds; "" when this clang has no such CPU
    mtune: str  # scheduling model used with -march builds
    emulator_march: str  # the subset qemu-user 7.2 can execute
    vlen: int
    dlen: int
    elen: int
    issue: int
    out_of_order: bool
    clock_ghz: float
    clock_ghz_max: float
    l1d_kb: int
    l2_kb: int
    cache_line: int
    baseline_cflags: list[str]
    qemu_cpu: str
    cost_model: str  # "" = none; else the mcpu key evaluator.costmodel prices (spacemit-x60, ...)
    modeled_exact: bool  # the cost model is this core's own model (not a proxy)
    costmodel: CostData | None = None  # required when cost_model is set
    extra_headers: list[str] = []  # headers a candidate may include on this target beyond the default list
    # Physical ceilings of one core, set generously above its peaks: no timing of real work beats them, so a
    # time that does was not of the work (a forged clock, a hidden region). 0: unknown, not checked.
    ceiling_flops_per_ns: float = 0.0
    ceiling_bytes_per_ns: float = 0.0
    sources: list[str] = []

    @property
    def is_riscv(self) -> bool:
        return self.arch == "riscv64"

    def isa_flags(self, build: Literal["emulator", "board", "host"]) -> list[str]:
        """Flags selecting ISA and tuning. Emulator builds avoid extensions qemu 7.2 cannot run."""
        if build == "host" or not self.is_riscv:
            return [f"-march={self.march}"] if self.march else []
        if build == "emulator":
            return [f"-march={self.emulator_march}", *([f"-mtune={self.mtune}"] if self.mtune else [])]
        if self.mcpu:
            return [f"-mcpu={self.mcpu}"]
        return [f"-march={self.march}", *([f"-mtune={self.mtune}"] if self.mtune else [])]


def load_target(key: str) -> TargetProfile:
    """The target named `key` (a file stem in evaluator/targets/), or a path to a target TOML."""
    path = Path(key) if key.endswith(".toml") else TARGETS_DIR / f"{key}.toml"
    if not path.is_file():
        known = ", ".join(t.key for t in list_targets())
        raise NotFound(f"unknown target {key!r}", f"known targets: {known}")
    return _load(path)


def list_targets() -> list[TargetProfile]:
    return [_load(p) for p in sorted(TARGETS_DIR.glob("*.toml"))]


@cache
def _load(path: Path) -> TargetProfile:
    try:
        target = TargetProfile.model_validate(tomllib.loads(path.read_text()))
    except tomllib.TOMLDecodeError as e:
        raise InvalidInput(f"{path}: not valid TOML: {e}") from None
    except ValidationError as e:
        err = e.errors()[0]
        field = ".".join(str(p) for p in err["loc"])
        raise InvalidInput(f"{path}: field '{field}': {err['msg']}", "see evaluator/targets/k1-x60.toml") from None
    if target.key != path.stem and path.parent == TARGETS_DIR:
        raise InvalidInput(f"{path}: field 'key': {target.key!r} differs from the file name {path.stem!r}")
    return target
