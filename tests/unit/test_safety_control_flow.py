"""The object check's control-flow rule, on objects clang-22 really compiles: a kernel calls functions
but never takes the address of code (the red team reached libc's write/_exit and the harness's region
markers with `(fn)((char *)&free + offset)`) and never jumps through a register."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from evaluator.safety import check_object

HONEST = """
#include <math.h>
#include <stdlib.h>
#include <string.h>
static float helper(float v) { return expf(v); }
void k(int n, const float *x, float *y) {
    float *tmp = malloc((size_t)n * sizeof(float));
    memcpy(tmp, x, (size_t)n * sizeof(float));
    for (int i = 0; i < n; i++) y[i] = helper(tmp[i]);
    free(tmp);
    switch (n & 7) { case 0: y[0] += 1; break; case 1: y[0] += 2; break; case 2: y[0] += 5; break;
                     case 3: y[0] += 7; break; case 4: y[0] += 9; break; case 5: y[0] += 11; break; default: break; }
}
"""
OFFSET_FROM_LIBC = """
#include <stdlib.h>
void k(int n, const float *x, float *y) {
    void (*ex)(int) = (void (*)(int))((char *)&free + 0x430C);
    ex(0);
}
"""
OFFSET_FROM_ITSELF = """
void k(int n, const float *x, float *y) {
    void (*marker)(void) = (void (*)(void))((char *)&k - 0x1D98);
    marker();
    for (int i = 0; i < n; i++) y[i] = x[i];
}
"""
TABLE_OF_LIBC = """
#include <math.h>
static float (*const pick[2])(float) = {expf, logf};
void k(int n, const float *x, float *y) { for (int i = 0; i < n; i++) y[i] = pick[i & 1](x[i]); }
"""


def compile_object(tmp_path: Path, code: str) -> bytes:
    src, obj = tmp_path / "k.c", tmp_path / "k.o"
    src.write_text(code)
    cmd = ["clang-22", "--target=riscv64-linux-gnu", "-march=rv64gcv", "-O3", "-fno-jump-tables", "-c", str(src)]
    subprocess.run([*cmd, "-o", str(obj)], check=True, capture_output=True)
    return obj.read_bytes()


def test_an_honest_kernel_with_calls_helpers_and_a_switch_passes(tmp_path: Path) -> None:
    assert check_object(compile_object(tmp_path, HONEST), "k") == []


@pytest.mark.parametrize(
    ("code", "named"),
    [(OFFSET_FROM_LIBC, "free"), (OFFSET_FROM_ITSELF, "k"), (TABLE_OF_LIBC, "expf")],
    ids=["offset-from-libc", "offset-from-itself", "table-of-libc"],
)
def test_taking_the_address_of_code_is_rejected(tmp_path: Path, code: str, named: str) -> None:
    found = [str(v) for v in check_object(compile_object(tmp_path, code), "k")]
    assert any(f"takes the address of `{named}`" in v for v in found), found
    assert any("indirect jump or call" in v for v in found), found
