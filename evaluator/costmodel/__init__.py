"""Modeled cycles of one kernel call on a SpacemiT core, without a board (docs/COSTMODEL.md).

Stages, in the order a modeled run goes through them:

    trace.py   qemu-riscv64 runs the harness with TB logging; the region between the markers is cut out
    elf.py     symbols and instruction text of the executed code (llvm-objdump-22)
    loops.py   dynamic loops found in the TB trace
    blocks.py  blocks (TB x vtype) and the units priced: loop bodies and the TBs between them
    mca.py     core cycles per unit from llvm-mca-22's spacemit-x60 model, cached on disk
    model.py   the pipeline and the public entry points below
    bench.py   builds and the whole-trace yardstick for scripts/bench_costmodel.py and the tests
"""

from evaluator.costmodel.model import (
    TARGETS,
    ModelBreakdown,
    ModeledTiming,
    TargetModel,
    model_kernel_breakdown,
    model_kernel_cycles,
    trace_kernel,
)

__all__ = [
    "TARGETS",
    "ModelBreakdown",
    "ModeledTiming",
    "TargetModel",
    "model_kernel_breakdown",
    "model_kernel_cycles",
    "trace_kernel",
]
