"""The static check on candidate code (real clang -E), the cflag allow-list and compiler diagnostics."""

from __future__ import annotations

from pathlib import Path

import pytest

from evaluator.safety import Violation, check_directives, check_preprocessed
from evaluator.targets import load_target
from evaluator.toolchain import CompileFailed, Toolchain, check_cflags, parse_diagnostics

SIG = "void saxpy(int n, float a, const float *x, float *y)"


def violations(code: str, tmp_path: Path) -> list[Violation]:
    found = check_directives(code)
    if found:
        return found
    pre = Toolchain(tmp_path / "objs").preprocess(code, load_target("k1-x60"), "emulator", tmp_path)
    return check_preprocessed(pre, "saxpy")


ACCEPTED = {
    "rvv_kernel": f"""
#include <riscv_vector.h>
#include <stddef.h>
static const float ONE[1] = {{1.0f}};
typedef struct {{ int lo, hi; }} range_t;
enum {{ UNROLL = 2 }};
static inline __attribute__((always_inline)) float twice(float v) {{ return v * 2.0f * ONE[0]; }}
{SIG} {{
    static const int k = 1;
    #pragma clang loop unroll(disable)
    for (size_t vl; n > 0; n -= vl, x += vl, y += vl) {{
        vl = __riscv_vsetvl_e32m8(n);
        vfloat32m8_t vx = __riscv_vle32_v_f32m8(x, vl);
        vfloat32m8_t vy = __riscv_vle32_v_f32m8(y, vl);
        __riscv_vse32_v_f32m8(y, __riscv_vfmacc_vf_f32m8(vy, a * k, vx, vl), vl);
    }}
    (void)twice;
}}""",
    "vector_asm": f"""{SIG} {{
    __asm__ volatile("vsetvli zero, zero, e32, m1, ta, ma\\n\\tnop" ::: "memory");
    for (int i = 0; i < n; i++) y[i] += a * x[i];
}}""",
    "malloc_scratch": f"""#include <stdlib.h>
#include <string.h>
{SIG} {{
    float *tmp = malloc(sizeof(float) * (n + 1));
    memcpy(tmp, x, sizeof(float) * n);
    for (int i = 0; i < n; i++) y[i] += a * tmp[i];
    free(tmp);
}}""",
}

REJECTED = {
    "system": ("#include <stdlib.h>\n" + SIG + ' { system("id"); }', "`system`"),
    "macro_built_name": ("#define CAT(p, q) p##q\n" + SIG + ' { CAT(sys, tem)("id"); }', "`system`"),
    "fork_bomb": ("#include <unistd.h>\n" + SIG + " { for (;;) fork(); }", "#include <unistd.h>"),
    "fork_declared": ("int fork(void);\n" + SIG + " { for (;;) fork(); }", "`fork`"),
    "popen": ("FILE *popen(const char *, const char *);\n" + SIG + ' { popen("id", "r"); }', "`popen`"),
    "syscall": ("long syscall(long, ...);\n" + SIG + " { syscall(57); }", "`syscall`"),
    "socket": ("int socket(int, int, int);\n" + SIG + " { socket(2, 1, 0); }", "`socket`"),
    "ecall_asm": (SIG + ' { __asm__ volatile("li a7, 93\\n ecall"); }', "`ecall`"),
    "data_directive": (SIG + ' { __asm__ volatile(".word 0x00000073"); }', "`.word`"),
    "register_asm": (SIG + ' { register long a7 __asm__("a7") = 93; (void)a7; }', "`a7`"),
    "stdio": ("#include <stdio.h>\n" + SIG + " { }", "#include <stdio.h>"),
    "local_include": ('#include "secrets.h"\n' + SIG + " { }", '#include "secrets.h"'),
    "digraph_include": ('%:include "/etc/hostname"\n' + SIG + " { }", '#include "/etc/hostname"'),
    "line_directive": ("#line 1000\n" + SIG + " { }", "#line"),
    "calls_reference": (
        SIG.replace("saxpy", "eok_ref_saxpy") + ";\n" + SIG + " { eok_ref_saxpy(n, a, x, y); }",
        "`eok_ref_saxpy`",
    ),
    "printf_forgery": ("int printf(const char *, ...);\n" + SIG + ' { printf("{\\"ok\\": true}"); }', "`printf`"),
    "exit": ("#include <stdlib.h>\n" + SIG + " { exit(0); }", "`exit`"),
    "constructor": ("__attribute__((constructor)) static void boot(void) {}\n" + SIG + " { }", "`constructor`"),
    "mutable_global": ("float cache[4096];\n" + SIG + " { cache[0] = a; }", "mutable global state"),
    "aligned_mutable_global": ("static float buf[64] __attribute__((aligned(64)));\n" + SIG + " { }", "mutable global"),
    "function_static": (SIG + " { static int calls; calls++; }", "static variables inside functions must be const"),
    "exported_helper": (
        "float helper(float v) { return v; }\n" + SIG + " { }",
        "helper function `helper` must be static",
    ),
    "environ": ("extern char **environ;\n" + SIG + " { (void)environ; }", "extern objects are not allowed"),
    "wrap_malloc": ("void *__wrap_malloc(unsigned long n) { return 0; }\n" + SIG + " { }", "`__wrap_malloc`"),
}


@pytest.mark.parametrize("case", sorted(ACCEPTED))
def test_plain_kernels_pass(case: str, tmp_path: Path) -> None:
    assert violations(ACCEPTED[case], tmp_path) == []


@pytest.mark.parametrize("case", sorted(REJECTED))
def test_escapes_and_cheats_are_rejected_with_a_line(case: str, tmp_path: Path) -> None:
    code, expected = REJECTED[case]
    found = violations(code, tmp_path)
    assert any(expected in v.message for v in found), [str(v) for v in found]
    assert all(v.line >= 1 for v in found if "source is larger" not in v.message)


def test_the_violation_points_at_the_right_line(tmp_path: Path) -> None:
    code = "#include <stdlib.h>\n\n" + SIG + ' {\n    int k = 0;\n    system("id");\n    (void)k;\n}\n'
    assert [v.line for v in violations(code, tmp_path)] == [5]


def test_oversized_source_is_rejected() -> None:
    assert "larger than" in check_directives("//" + "x" * (300 << 10))[0].message


@pytest.mark.parametrize(
    ("flags", "translated"),
    [
        (["-O2", "-funroll-loops", "-ffast-math"], ["-O2", "-funroll-loops", "-ffast-math"]),
        (["-mrvv-max-lmul=m4"], ["-mllvm", "-riscv-v-register-bit-width-lmul=4"]),
        (["-mllvm", "-force-vector-width=16"], ["-mllvm", "-force-vector-width=16"]),
        (["-fno-slp-vectorize", "-ffp-contract=on"], ["-fno-slp-vectorize", "-ffp-contract=on"]),
    ],
)  # fmt: skip
def test_allowed_flags(flags: list[str], translated: list[str]) -> None:
    assert check_cflags(flags) == (translated, None)


@pytest.mark.parametrize(
    "flags",
    [
        ["-Wl,--defsym=main=0"],
        ["-march=rv64gc"],
        ["-o", "/etc/passwd"],
        ["-fplugin=/tmp/x.so"],
        ["-mllvm", "-load=/tmp/x.so"],
        ["-include", "/etc/shadow"],
        ["-B/tmp"],
        ["-Deok_region_begin=main"],
        ["-DB=4"],  # macros belong in the source, where the static check sees them
        ["-Ufoo"],
        ["--sysroot=/"],
        ["-DX=$(id)"],
        ["-mllvm"],
    ],
)
def test_other_flags_are_rejected(flags: list[str]) -> None:
    out, reason = check_cflags(flags)
    assert out == [] and reason


def test_compiler_errors_become_diagnostics_with_candidate_line_numbers(tmp_path: Path) -> None:
    from evaluator.tasks import load_task

    code = SIG + " {\n    for (int i = 0; i < n; i++)\n        y[i] += a * undefined_thing[i];\n}\n"
    task = load_task("saxpy")
    with pytest.raises(CompileFailed) as info:
        Toolchain(tmp_path / "objs").build(task, load_target("k1-x60"), "emulator", code, [], tmp_path)
    diags = info.value.diagnostics
    assert diags[0].line == 3 and diags[0].col > 1
    assert "undefined_thing" in diags[0].message


def test_parse_diagnostics_prefers_the_candidate_file() -> None:
    stderr = (
        "eok_prototype.h:3:6: note: previous declaration is here\n"
        "candidate.c:7:12: error: conflicting types for 'saxpy'\n"
        "candidate.c:9:1: warning: unused variable 'k'\n"
    )
    [d] = parse_diagnostics(stderr)
    assert (d.line, d.col, d.message) == (7, 12, "conflicting types for 'saxpy'")
