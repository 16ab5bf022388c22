"""Checking the cost model: build marked C sources, run the whole region through llvm-mca as one stream.

Used by scripts/bench_costmodel.py and the cost-model tests. `whole_trace_cycles` is the yardstick for the
loop/pass decomposition: it simulates every dynamic instruction of the region in one llvm-mca run, which is
exact for the machine model but too slow beyond ~1e5 instructions.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from pathlib import Path

from core.errors import Unavailable
from evaluator.costmodel import model, scoreboard
from evaluator.costmodel.blocks import executed_blocks
from evaluator.costmodel.mca import MCA, MCA_FLAGS, McaBatch, streams

CLANG = "clang-22"
QEMU = "qemu-riscv64"
X60_QEMU_CPU = "rv64,v=true,vlen=256,elen=64,vext_spec=v1.0"


def build(source: Path, out: Path, defines: dict[str, object] | None = None, include: Path | None = None) -> Path:
    """Compile one marked C source the way the evaluator links harnesses: static, non-PIE, clang-22."""
    if shutil.which(CLANG) is None:
        raise Unavailable(f"{CLANG} not found", hint="apt-get install clang-22 lld-22")
    argv = [CLANG, "--target=riscv64-linux-gnu", "-mcpu=spacemit-x60", "-O2", "-static", "-no-pie"]
    argv += ["-fuse-ld=lld", "-Wno-unused-command-line-argument", f"-I{include or source.parent}"]
    argv += [f"-D{k}={v}" for k, v in (defines or {}).items()]
    subprocess.run([*argv, str(source), "-o", str(out), "-lm"], check=True, capture_output=True, text=True)
    return out


def qemu_argv(binary: Path, qemu_cpu: str = X60_QEMU_CPU) -> list[str]:
    return [QEMU, "-cpu", qemu_cpu, str(binary.resolve())]


def whole_trace_cycles(binary: Path, argv: list[str], decoupled: bool = True) -> dict[str, float]:
    """Total cycles of the region's full dynamic instruction stream, per stream.

    In-order: one llvm-mca stream "c", exact for the machine model. Decoupled: vector "v" (llvm-mca) and
    scalar "s" (the scalar scoreboard, as the model prices it) over the whole region with no
    synchronisation at all, so max(v, s) is a lower bound (perfect overlap).
    """
    binary = binary.resolve()
    trace, dis, _ = model.trace_kernel(binary, argv, timeout_s=120.0, max_log_bytes=1 << 30)
    blocks = executed_blocks(trace, dis)
    executed = [blocks.segments[i] for i in blocks.ids.tolist()]
    with tempfile.TemporaryDirectory(prefix="eok-whole-") as tmp:
        work = Path(tmp)
        totals: dict[str, float] = {}
        for name, (lines, _) in streams(executed, decoupled).items():
            if name == "s":
                batch = McaBatch(1, pressure=True)
                batch.add("s", lines)
                batch.finish(batch.start(work, "spacemit-x60"))
                ops = batch.ops("s")
                if ops is not None:
                    totals[name] = scoreboard.pass_cycles(ops, batch.units)
                    continue
            path = work / f"{name}.s"
            path.write_text("\n".join(lines) + "\n")
            argv_mca = [MCA, "-mtriple=riscv64", "-mcpu=spacemit-x60", "-iterations=1", "-json"]
            argv_mca += [*MCA_FLAGS]
            out = subprocess.run([*argv_mca, str(path)], capture_output=True, text=True, check=True).stdout
            totals[name] = int(json.loads(out)["CodeRegions"][0]["SummaryView"]["TotalCycles"])
    return totals
