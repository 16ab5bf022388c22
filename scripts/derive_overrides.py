#!/usr/bin/env python3
"""Derive a target's measured vector-instruction overrides from rvv-bench's published instruction tables.

For every vector load and store the core's table publishes (cycles per instruction at vl = VLMAX, per SEW x
LMUL: evaluator/costmodel/calibration/instructions.json), llvm-mca-22's price under the target's scheduling
model (its BlockRThroughput for that instruction under that vtype) is compared with the measurement. An
instruction gets an override for the vtypes where its price is off by more than --threshold (elsewhere
LLVM's price, with its latencies, stays) (docs/COSTMODEL.md "Measured instruction overrides"). Masked forms and
scalar rows are left out; instructions llvm-mca cannot read are reported.

    python scripts/derive_overrides.py --core x60                 # print the comparison and the TOML
    python scripts/derive_overrides.py --core x60 --write         # replace the block in k1-x60.toml
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from evaluator.costmodel.calibration import catalog, instruction_tables
from evaluator.targets import TARGETS_DIR, load_target

BEGIN = "# --- measured vector overrides: scripts/derive_overrides.py writes this block; do not edit by hand ---"
END = "# --- end of measured vector overrides ---"
_VTYPE_RE = re.compile(r"^e(\d+)(mf?\d)$")
# Vector loads and stores only: their price is occupancy of the load/store pipe, which an override keeps.
# An overridden instruction leaves llvm-mca, and with it its latency to a dependent instruction: arithmetic
# keeps LLVM's price (vadd.vv is measured at 1 cycle at m1 where LLVM says 2, but a chain of dependent
# vadds needs LLVM's latency).
_MEMORY_RE = re.compile(r"^v[ls](?:e\d+|se\d+|seg\d|sseg\d|[uo]xei\d+|[uo]xseg\d)")


def mca_text(row: str) -> str:
    """rvv-bench's row text ('vsseg2e8.v v8,(t0)') in the syntax llvm-mca reads."""
    mnemonic, _, operands = row.partition(" ")
    return f"{mnemonic} {', '.join(p.strip() for p in operands.split(','))}".strip()


def llvm_prices(rows: dict[str, dict[str, float]], mca_cpu: str) -> dict[tuple[str, str], float]:
    """(row, vtype) -> llvm-mca's cycles per instruction (BlockRThroughput), one llvm-mca run per row."""
    out: dict[tuple[str, str], float] = {}
    with tempfile.TemporaryDirectory(prefix="eok-derive-") as tmp:
        for row, cells in rows.items():
            lines, names = [], []
            for vtype in cells:
                sew, lmul = _VTYPE_RE.match(vtype).groups()  # type: ignore[union-attr]
                name = f"r{len(names)}"
                names.append((name, vtype))
                lines += [f"# LLVM-MCA-BEGIN {name}", f"# LLVM-MCA-RISCV-LMUL {lmul.upper()}"]
                lines += [f"# LLVM-MCA-RISCV-SEW E{sew}", mca_text(row), f"# LLVM-MCA-END {name}"]
            path = Path(tmp) / "row.s"
            path.write_text("\n".join(lines) + "\n")
            argv = ["llvm-mca-22", "-mtriple=riscv64", f"-mcpu={mca_cpu}", "-iterations=10", "-json"]
            run = subprocess.run([*argv, str(path)], capture_output=True, text=True, check=False)
            if run.returncode != 0 or not run.stdout.strip():
                print(f"  llvm-mca cannot read {row!r}: left out", file=sys.stderr)
                continue
            got = {
                r["Name"]: float(r["SummaryView"]["BlockRThroughput"]) for r in json.loads(run.stdout)["CodeRegions"]
            }
            for name, vtype in names:
                if name in got:
                    out[(row, vtype)] = got[name]
    return out


def derive(core: str, threshold: float) -> tuple[list[dict], list[str]]:
    table = instruction_tables()[core]["vlmax"]
    rows = {
        row: {v: c for v, c in cells.items() if c and _VTYPE_RE.match(v)}
        for row, cells in table.items()
        if _MEMORY_RE.match(row) and "v0.t" not in row
    }
    target = load_target(catalog()["cores"][core]["target"])
    prices = llvm_prices(rows, target.costmodel.mca_cpu if target.costmodel else "spacemit-x60")
    source = instruction_tables()["sources"]["results"]
    page = f"{catalog()['cores'][core]['dir']}/index.html"
    overrides, report = [], []
    for row, cells in rows.items():
        ratios = [prices[(row, v)] / c for v, c in cells.items() if (row, v) in prices]
        if not ratios:
            continue
        report.append(f"{row.split()[0]:22s} llvm/measured {min(ratios):6.2f} .. {max(ratios):6.2f}")
        off = {v: c for v, c in cells.items() if (row, v) in prices and _off(prices[(row, v)] / c, threshold)}
        mnemonic = row.split()[0]
        if not off or any(o["mnemonic"] == re.escape(mnemonic) for o in overrides):
            continue  # agrees everywhere, or a second row of the same instruction (the first one counts)
        overrides.append(
            {
                "mnemonic": re.escape(mnemonic),
                "cycles": off,  # only the vtypes where LLVM's price is off: elsewhere LLVM keeps its latencies
                "source": f"{source['repository']} {source['commit'][:12]} {page} row '{row}' (vl=VLMAX)",
            }
        )
    return overrides, report


def _off(ratio: float, threshold: float) -> bool:
    return max(ratio, 1 / ratio) > threshold


def toml_block(overrides: list[dict]) -> str:
    lines = [BEGIN]
    for o in overrides:
        cells = ", ".join(f"{v} = {c:g}" for v, c in o["cycles"].items())
        lines += ["[[costmodel.vector_overrides]]", f"mnemonic = {json.dumps(o['mnemonic'])}"]
        lines += [f"cycles = {{ {cells} }}", f"source = {json.dumps(o['source'])}"]
    return "\n".join([*lines, END]) + "\n"


def write(target_key: str, block: str) -> Path:
    path = TARGETS_DIR / f"{target_key}.toml"
    text = path.read_text()
    if BEGIN in text:
        text = text[: text.index(BEGIN)] + text[text.index(END) + len(END) + 1 :]
    path.write_text(text.rstrip("\n") + "\n\n" + block)
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--core", default="x60", choices=sorted(instruction_tables().keys() - {"sources"}))
    parser.add_argument("--threshold", type=float, default=1.3, help="override when llvm-mca is off by more")
    parser.add_argument("--write", action="store_true", help="write the block into the core's target TOML")
    args = parser.parse_args()
    overrides, report = derive(args.core, args.threshold)
    print("\n".join(report), file=sys.stderr)
    block = toml_block(overrides)
    if args.write:
        path = write(catalog()["cores"][args.core]["target"], block)
        print(f"{len(overrides)} overrides written to {path}", file=sys.stderr)
    else:
        print(block)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
