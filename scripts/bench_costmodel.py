#!/usr/bin/env python3
"""How fast and how faithful the X60 cost model is.

    python scripts/bench_costmodel.py               speed: plain qemu vs modeled run, cold vs warm cache
    python scripts/bench_costmodel.py --validate    also the accuracy tables quoted in docs/COSTMODEL.md

Kernels come from tests/data/costmodel and are built with clang-22 like the evaluator builds harnesses.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evaluator.costmodel import model_kernel_breakdown  # noqa: E402
from evaluator.costmodel.bench import build, qemu_argv, whole_trace_cycles  # noqa: E402

DATA = ROOT / "tests" / "data" / "costmodel"
CLOCK_GHZ = 2.0  # K1 FCBGA parts (reference/riscv-k1-k3.md 1.2)


def plain_qemu_seconds(binary: Path, repeats: int = 3) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run(qemu_argv(binary), cwd=binary.parent, check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def speed(binary: Path, label: str) -> None:
    plain = plain_qemu_seconds(binary)
    with tempfile.TemporaryDirectory(prefix="eok-bench-cache-") as cache:
        cold = model_kernel_breakdown(binary, qemu_argv(binary), Path(cache))
        warm = [model_kernel_breakdown(binary, qemu_argv(binary), Path(cache)) for _ in range(3)]
    hot = min(warm, key=lambda r: r.seconds["total"])
    t = cold.timing
    print(f"\n== {label}: {t.instructions:,} dynamic instructions, {t.blocks_executed:,} TBs, {t.unique_blocks} unique")
    print(f"   modeled cycles {t.cycles:,.0f}  ({t.cycles / CLOCK_GHZ / 1e3:,.1f} us at {CLOCK_GHZ} GHz), {t.model}")
    print(f"   loops {len(cold.loops)}, units {cold.units_total}, TB log {cold.log_bytes / 2**20:.1f} MiB")
    print(f"   {'':24}{'total s':>9}{'qemu s':>9}{'trace s':>9}{'mca s':>9}{'units run':>11}{'TBs/s':>12}")
    print(f"   {'plain qemu (no model)':24}{plain:9.3f}")
    for name, run in (("modeled, cold cache", cold), ("modeled, warm cache", hot)):
        s = run.seconds
        rate = t.blocks_executed / s["total"]
        print(
            f"   {name:24}{s['total']:9.3f}{s['qemu']:9.3f}{s['trace']:9.3f}{s['mca']:9.3f}"
            f"{run.units_simulated:11d}{rate:12,.0f}"
        )
    extra_cold, extra_warm = cold.seconds["total"] - plain, hot.seconds["total"] - plain
    print(f"   model overhead over plain qemu: cold {extra_cold:+.3f} s, warm {extra_warm:+.3f} s")


def validate(out: Path) -> None:
    def cycles(path: Path, decoupled: bool = True) -> float:
        return model_kernel_breakdown(path, qemu_argv(path), out / "cache", decoupled=decoupled).timing.cycles

    print("\n== FMA peak (e32 m1 vfmacc.vf; table: latency 5, occupancy 1; cpufp: 33.4 GFLOPS/core)")
    print(f"   {'kernel':28}{'vfmacc/cycle':>14}{'GFLOPS@2GHz':>13}{'in-order mca':>14}")
    cases = [(f"fma_peak ACC={a}", "fma_peak", {"ACC": a, "ITERS": 2000}, a * 2000) for a in (1, 2, 4, 8, 16)]
    cases.append(("cpufp-shaped asm (24 acc)", "fma_asm", {"ITERS": 500}, 24 * 500))
    for label, stem, defines, fmas in cases:
        path = build(DATA / f"{stem}.c", out / f"{stem}_{'_'.join(map(str, defines.values()))}", defines)
        rate, in_order = fmas / cycles(path), fmas / cycles(path, decoupled=False)
        print(f"   {label:28}{rate:14.3f}{rate * 16 * CLOCK_GHZ:13.1f}{in_order:14.3f}")

    n = 4096
    for stem in ("sdot", "saxpy"):
        print(f"\n== {stem}, N={n}: modeled cycles per element (decoupled)")
        print("   " + " " * 6 + "".join(f"ACC={a:<8}" for a in (1, 2, 4)))
        for lmul in (1, 2, 4, 8):
            row = []
            for acc in (1, 2, 4):
                defines = {"LMUL": lmul, "ACC": acc, "N": n}
                path = build(DATA / f"{stem}.c", out / f"{stem}_{lmul}_{acc}", defines)
                row.append(cycles(path) / n)
            print(f"   m{lmul:<5}" + "".join(f"{c:<12.3f}" for c in row))

    print("\n== loop/pass decomposition vs one llvm-mca run over the whole region")
    head = f"{'whole in-order':>16}{'units':>10}{'err':>8}{'whole max(v,s)':>16}{'units':>10}{'err':>8}"
    print(f"   {'kernel':28}{'insns':>8}{head}")
    for stem, defines in (
        ("sdot", {"STRIP": 1, "N": 4096}),
        ("branchy", {"N": 2048}),
        ("softmax_libm", {"N": 512}),
        ("sgemm", {"DIM": 32}),
        ("fma_asm", {"ITERS": 200}),
    ):
        path = build(DATA / f"{stem}.c", out / f"whole_{stem}", defines)
        whole_c = whole_trace_cycles(path, qemu_argv(path), decoupled=False)["c"]
        whole_d = max(whole_trace_cycles(path, qemu_argv(path), decoupled=True).values())
        run_c = model_kernel_breakdown(path, qemu_argv(path), out / "cache", decoupled=False)
        unit_d = cycles(path)
        unit_c = run_c.timing.cycles
        print(
            f"   {stem + ' ' + str(defines):28.28}{run_c.timing.instructions:8d}{whole_c:16,}{unit_c:10,.0f}"
            f"{unit_c / whole_c - 1:+8.1%}{whole_d:16,}{unit_d:10,.0f}{unit_d / whole_d - 1:+8.1%}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dim", type=int, default=128, help="sgemm size for the speed run (default 128: ~1e6 insns)")
    parser.add_argument("--validate", action="store_true", help="also print the accuracy tables")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="eok-bench-") as tmp:
        out = Path(tmp)
        sgemm = build(DATA / "sgemm.c", out / "sgemm", {"DIM": args.dim})
        speed(sgemm, f"sgemm {args.dim}x{args.dim}x{args.dim} (RVV m2)")
        softmax = build(DATA / "softmax_libm.c", out / "softmax", {"N": 4096})
        speed(softmax, "softmax 4096 with libm expf (scalar, calls into libm)")
        if args.validate:
            validate(out)


if __name__ == "__main__":
    main()
