"""Modeled cycles of one kernel call on a SpacemiT core, without a board (docs/COSTMODEL.md).

Stages, in the order a modeled run goes through them:

    trace.py   qemu-riscv64 runs the harness with TB logging; the region between the markers is cut out
    memory.py  ...in the same run, memsim.c (a qemu TCG plugin) counts each instruction's cache traffic
    elf.py     symbols and instruction text of the executed code (llvm-objdump-22)
    loops.py   dynamic loops found in the TB trace
    blocks.py  blocks (TB x vtype x vl class), their traffic and FLOPs, and the units priced: loop bodies
               and the TBs between them
    mca.py     core cycles per unit from llvm-mca-22's spacemit-x60 model, cached on disk
    model.py   the pipeline, the target data (evaluator/targets/*.toml [costmodel]), the roofline per unit
               (max of core, L2 and DRAM time) and the public entry points below
    bench.py   builds and the whole-trace yardstick for scripts/bench_costmodel.py and the tests
"""

from evaluator.costmodel.model import (
    BOUNDS,
    Machine,
    ModelBreakdown,
    ModeledTiming,
    machine_for,
    machines,
    model_kernel_breakdown,
    model_kernel_cycles,
    trace_kernel,
)

__all__ = [
    "BOUNDS",
    "Machine",
    "ModelBreakdown",
    "ModeledTiming",
    "machine_for",
    "machines",
    "model_kernel_breakdown",
    "model_kernel_cycles",
    "trace_kernel",
]
