#!/usr/bin/env python3
"""How fast and how faithful the X60 cost model is.

    python scripts/bench_costmodel.py               speed: plain qemu vs modeled run, cold vs warm cache
    python scripts/bench_costmodel.py --validate    also the accuracy tables quoted in docs/COSTMODEL.md
    python scripts/bench_costmodel.py --memory      only the memory tables (STREAM-like, read sweep, before/after)

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

from evaluator.costmodel import machines, model_kernel_breakdown  # noqa: E402
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
        no_mem = [model_kernel_breakdown(binary, qemu_argv(binary), Path(cache), memory=False) for _ in range(3)]
    hot = min(warm, key=lambda r: r.seconds["total"])
    hot_no_mem = min(no_mem, key=lambda r: r.seconds["total"])
    t = cold.timing
    print(f"\n== {label}: {t.instructions:,} dynamic instructions, {t.blocks_executed:,} TBs, {t.unique_blocks} unique")
    print(f"   modeled cycles {t.cycles:,.0f}  ({t.cycles / CLOCK_GHZ / 1e3:,.1f} us at {CLOCK_GHZ} GHz), {t.model}")
    print(f"   loops {len(cold.loops)}, units {cold.units_total}, TB log {cold.log_bytes / 2**20:.1f} MiB")
    print(f"   {'':24}{'total s':>9}{'qemu s':>9}{'trace s':>9}{'mca s':>9}{'units run':>11}{'TBs/s':>12}")
    print(f"   {'plain qemu (no model)':24}{plain:9.3f}")
    runs = (("modeled, cold cache", cold), ("modeled, warm cache", hot), ("warm, memory stage off", hot_no_mem))
    for name, run in runs:
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


K1_CLOCK_GHZ = 1.6  # the k1-x60 target's clock, which turns its DRAM GB/s into bytes per cycle
STREAM_BYTES = {1: ("copy", 8), 2: ("scale", 8), 3: ("add", 12), 4: ("triad", 12)}  # STREAM's own counting


def memory_tables(out: Path) -> None:
    """STREAM-like kernels and a read sweep on the K1 model, beside the figures the model was given."""
    k1 = machines()["spacemit-x60"]

    def run(stem: str, memory: bool = True, **defines: object) -> object:
        name = stem + "".join(f"_{k}{v}" for k, v in sorted(defines.items()))
        path = out / name
        if not path.exists():
            build(DATA / f"{stem}.c", path, defines)
        return model_kernel_breakdown(path, qemu_argv(path), out / "cache", memory=memory).timing

    n = 1 << 20  # 4 MiB per array: 8x the L2
    print(
        f"\n== STREAM-like, N={n:,} floats per array (4 MiB), RVV m4; DRAM figure given to the model: "
        f"{k1.dram_bytes_per_cycle * K1_CLOCK_GHZ:.1f} GB/s = {k1.dram_bytes_per_cycle:.2f} B/cycle"
    )
    print("   cited: 10.66 GB/s theoretical (32-bit LPDDR4X-2666), 'realistic 6-8 GB/s' (estimate, all cores)")
    print(f"   {'kernel':8}{'cycles/elem':>13}{'STREAM GB/s':>13}{'DRAM GB/s':>11}{'bound':>8}")
    for kernel, (name, counted) in STREAM_BYTES.items():
        t = run("stream", KERNEL=kernel, N=n)
        per = t.cycles / n  # type: ignore[attr-defined]
        stream_gbs = counted / per * K1_CLOCK_GHZ
        dram_gbs = t.dram_bytes_per_cycle * K1_CLOCK_GHZ  # type: ignore[attr-defined]
        print(f"   {name:8}{per:13.3f}{stream_gbs:13.2f}{dram_gbs:11.2f}{t.bound:>8}")  # type: ignore[attr-defined]

    print("\n== read sweep (sum of N floats, RVV m4): bytes read per cycle by working set")
    print(
        f"   levels given: L1 {k1.geometry.l1_bytes // 1024} KiB, L2 {k1.geometry.l2_bytes // 1024} KiB "
        f"at {k1.l2_bytes_per_cycle:.1f} B/cycle (read, fitted), DRAM {k1.dram_bytes_per_cycle:.2f} B/cycle"
    )
    print(f"   {'working set':>12}{'B/cycle':>9}{'GB/s@1.6':>10}{'bound':>9}{'L1-only model':>15}")
    for kib in (8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 16384, 65536):
        elems = kib * 1024 // 4
        t, flat = run("stream", KERNEL=0, N=elems), run("stream", memory=False, KERNEL=0, N=elems)
        rate = kib * 1024 / t.cycles  # type: ignore[attr-defined]
        flat_rate = kib * 1024 / flat.cycles  # type: ignore[attr-defined]
        print(f"   {kib:>8} KiB{rate:9.2f}{rate * K1_CLOCK_GHZ:10.2f}{t.bound:>9}{flat_rate:15.2f}")  # type: ignore[attr-defined]

    print("\n== before (memory stage off: every access an L1 hit, cost by LMUL) / after")
    print(f"   {'kernel':34}{'before':>12}{'after':>12}{'bound':>9}")
    cases = [
        ("saxpy m4, 16 KiB (cycles/elem)", "saxpy", {"LMUL": 4, "N": 2048}, 2048),
        ("saxpy m4, 16 MiB (cycles/elem)", "saxpy", {"LMUL": 4, "N": 2 << 20}, 2 << 20),
        ("saxpy n=7, m8 (cycles)", "saxpy", {"LMUL": 8, "N": 7}, 1),
        ("saxpy n=7, m1 (cycles)", "saxpy", {"LMUL": 1, "N": 7}, 1),
        ("sgemm 16x512x512 unblocked", "gemm_block", {"BLOCKED": 0}, 1),
        ("sgemm 16x512x512 blocked KB=32", "gemm_block", {"BLOCKED": 1}, 1),
    ]
    for label, stem, defines, per in cases:
        before, after = run(stem, memory=False, **defines), run(stem, **defines)
        b, a = before.cycles / per, after.cycles / per  # type: ignore[attr-defined]
        digits = 3 if per > 1 else 0
        print(f"   {label:34}{b:12,.{digits}f}{a:12,.{digits}f}{after.bound:>9}")  # type: ignore[attr-defined]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dim", type=int, default=128, help="sgemm size for the speed run (default 128: ~1e6 insns)")
    parser.add_argument("--validate", action="store_true", help="also print the accuracy tables")
    parser.add_argument("--memory", action="store_true", help="only the memory tables")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="eok-bench-") as tmp:
        out = Path(tmp)
        if args.memory:
            memory_tables(out)
            return
        sgemm = build(DATA / "sgemm.c", out / "sgemm", {"DIM": args.dim})
        speed(sgemm, f"sgemm {args.dim}x{args.dim}x{args.dim} (RVV m2)")
        softmax = build(DATA / "softmax_libm.c", out / "softmax", {"N": 4096})
        speed(softmax, "softmax 4096 with libm expf (scalar, calls into libm)")
        if args.validate:
            validate(out)
            memory_tables(out)


if __name__ == "__main__":
    main()
