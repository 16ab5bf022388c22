"""Miniature library trees, written for EoK's tests, that follow OpenBLAS's and ggml's layouts and build rules.

CI has no network, and no registry package carries OpenBLAS's source; a real ggml (from a binding's source
distribution) takes minutes to compile on two cores. So the tests build these instead: a few files each,
laid out and driven like the real ones, so `build_library` and `run_library_tests` take the same path on
them as on a real clone (no "if miniature" anywhere):

OpenBLAS  Makefile with `libs`, Makefile.system (TARGET -> CORE, LIBNAME, a config.h made by a HOSTCC
          program), Makefile.riscv64 (the -march per CORE), kernel/riscv64/KERNEL.<CORE> naming SDOTKERNEL
          and friends, interface/ with the cblas_ entry points, cblas.h, and ctest/ testers xscblat1 and
          xscblat2 that print what OpenBLAS's ctest testers print and read sin2 the way they do. The GEMM
          micro-kernel's slot is laid out (param.h's unrolls per target, SGEMMKERNEL named by them, a
          kernel file in OpenBLAS's conventions) but not built: the miniature has no level-3 driver.
ggml      CMake with GGML_RVV, targets ggml-base, ggml-cpu (an RVV q8_0 dot) and ggml, include/ggml.h, and
          tests/test-quantize-fns printing per-type lines as ggml's does.

All of the code below is EoK's own, written for these tests; none of it comes from OpenBLAS or ggml.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

# ------------------------------------------------------------------------------------------ OpenBLAS

OPENBLAS_FILES = {
    "Makefile": """\
TOPDIR = .
include $(TOPDIR)/Makefile.system

.PHONY: libs
libs: config.h
\t$(MAKE) -C kernel libs
\t$(MAKE) -C interface libs
\t$(RANLIB) $(LIBNAME)
\tln -sf $(LIBNAME) libopenblas.a

config.h: getarch.c
\t$(HOSTCC) -o getarch getarch.c
\t./getarch $(CORE) > config.h
""",
    "Makefile.system": """\
ifndef TARGET
$(error set TARGET, e.g. make TARGET=RISCV64_ZVL256B)
endif
CORE = $(TARGET)
LIBCORE = $(shell echo $(CORE) | tr A-Z a-z)
LIBNAME = libopenblas_$(LIBCORE)-r0.0.1.a
HOSTCC ?= $(CC)
include $(TOPDIR)/Makefile.riscv64
CFLAGS = -O2 -Wall $(CCOMMON_OPT) -I$(TOPDIR)
""",
    "Makefile.riscv64": """\
ifeq ($(CORE), RISCV64_ZVL256B)
CCOMMON_OPT += -march=rv64imafdcv_zvl256b -mabi=lp64d
endif
ifeq ($(CORE), RISCV64_ZVL128B)
CCOMMON_OPT += -march=rv64imafdcv -mabi=lp64d
endif
""",
    "getarch.c": """\
#include <stdio.h>
#include <string.h>
int main(int argc, char **argv) {
    const char *core = argc > 1 ? argv[1] : "";
    int vlen = strstr(core, "ZVL256B") ? 256 : strstr(core, "ZVL128B") ? 128 : 0;
    printf("#define CORE_NAME \\"%s\\"\\n#define VLEN_BITS %d\\n", core, vlen);
    return vlen ? 0 : 1;
}
""",
    "common.h": """\
#ifndef COMMON_H
#define COMMON_H
#include "config.h"
#define FLOAT float
#define BLASLONG long
float sdot_k(long n, const float *x, long incx, const float *y, long incy);
void saxpy_k(long n, float alpha, const float *x, long incx, float *y, long incy);
void sgemv_t(long m, long n, float alpha, const float *a, long lda, const float *x, float *y);
void sgemv_n(long m, long n, float alpha, const float *a, long lda, const float *x, float *y);
#endif
""",
    "cblas.h": """\
#ifndef CBLAS_H
#define CBLAS_H
enum CBLAS_ORDER { CblasRowMajor = 101, CblasColMajor = 102 };
enum CBLAS_TRANSPOSE { CblasNoTrans = 111, CblasTrans = 112 };
float cblas_sdot(int n, const float *x, int incx, const float *y, int incy);
void cblas_saxpy(int n, float alpha, const float *x, int incx, float *y, int incy);
void cblas_sgemv(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE trans, int m, int n, float alpha, const float *a,
                 int lda, const float *x, int incx, float beta, float *y, int incy);
#endif
""",
    "kernel/Makefile": """\
TOPDIR = ..
include $(TOPDIR)/Makefile.system
include riscv64/KERNEL.$(CORE)
OBJS = sdot_k.o saxpy_k.o sgemv_t.o sgemv_n.o

libs: $(OBJS)
\t$(AR) rc ../$(LIBNAME) $(OBJS)

sdot_k.o: riscv64/$(SDOTKERNEL)
\t$(CC) $(CFLAGS) -c riscv64/$(SDOTKERNEL) -o $@
saxpy_k.o: riscv64/$(SAXPYKERNEL)
\t$(CC) $(CFLAGS) -c riscv64/$(SAXPYKERNEL) -o $@
sgemv_t.o: riscv64/$(SGEMVTKERNEL)
\t$(CC) $(CFLAGS) -c riscv64/$(SGEMVTKERNEL) -o $@
sgemv_n.o: riscv64/$(SGEMVNKERNEL)
\t$(CC) $(CFLAGS) -c riscv64/$(SGEMVNKERNEL) -o $@
""",
    "kernel/riscv64/KERNEL.RISCV64_ZVL256B": """\
SDOTKERNEL   = dot_rvv.c
SAXPYKERNEL  = axpy.c
SGEMVTKERNEL = gemv_t.c
SGEMVNKERNEL = gemv_n.c
SGEMMKERNEL  = sgemm_kernel_$(SGEMM_UNROLL_M)x$(SGEMM_UNROLL_N)_zvl256b.c
""",
    "param.h": """\
#ifndef PARAM_H
#define PARAM_H
#ifdef RISCV64_ZVL128B
#define SGEMM_DEFAULT_UNROLL_M 8
#define SGEMM_DEFAULT_UNROLL_N 8
#endif
#ifdef RISCV64_ZVL256B
#define GEMM_DEFAULT_ALIGN 0x03fffUL
#define SGEMM_DEFAULT_UNROLL_M 16
#define SGEMM_DEFAULT_UNROLL_N 8
#define SGEMM_DEFAULT_P 128
#define SGEMM_DEFAULT_Q 128
#endif
#endif
""",
    "kernel/riscv64/sgemm_kernel_16x8_zvl256b.c": """\
#include "common.h"
/* C += alpha * A*B on panels packed in blocks of 16 rows (A) and 8 columns (B), tails by powers of two. */
static BLASLONG width(BLASLONG left, BLASLONG unroll) {
    while (unroll > left) unroll /= 2;
    return unroll;
}
int CNAME(BLASLONG bm, BLASLONG bn, BLASLONG bk, FLOAT alpha, FLOAT *ba, FLOAT *bb, FLOAT *C, BLASLONG ldc)
{
    for (BLASLONG j0 = 0, nr = 0; j0 < bn; j0 += nr) {
        nr = width(bn - j0, 8);
        for (BLASLONG i0 = 0, mr = 0; i0 < bm; i0 += mr) {
            mr = width(bm - i0, 16);
            for (BLASLONG j = 0; j < nr; j++)
                for (BLASLONG i = 0; i < mr; i++) {
                    FLOAT s = 0;
                    for (BLASLONG k = 0; k < bk; k++) s += ba[i0 * bk + k * mr + i] * bb[j0 * bk + k * nr + j];
                    C[i0 + i + (j0 + j) * ldc] += alpha * s;
                }
        }
    }
    return 0;
}
""",
    "kernel/riscv64/dot_rvv.c": """\
#include <riscv_vector.h>
#include "common.h"

float sdot_k(long n, const float *x, long incx, const float *y, long incy) {
    if (incx != 1 || incy != 1) {
        float s = 0.0f;
        for (long i = 0; i < n; i++) s += x[i * incx] * y[i * incy];
        return s;
    }
    size_t vlmax = __riscv_vsetvlmax_e32m4();
    vfloat32m4_t acc = __riscv_vfmv_v_f_f32m4(0.0f, vlmax);
    for (long i = 0; i < n;) {
        size_t vl = __riscv_vsetvl_e32m4(n - i);
        acc = __riscv_vfmacc_vv_f32m4_tu(acc, __riscv_vle32_v_f32m4(x + i, vl), __riscv_vle32_v_f32m4(y + i, vl), vl);
        i += vl;
    }
    vfloat32m1_t sum = __riscv_vfredusum_vs_f32m4_f32m1(acc, __riscv_vfmv_s_f_f32m1(0.0f, 1), vlmax);
    return __riscv_vfmv_f_s_f32m1_f32(sum);
}
""",
    "kernel/riscv64/axpy.c": """\
#include "common.h"
void saxpy_k(long n, float alpha, const float *x, long incx, float *y, long incy) {
    for (long i = 0; i < n; i++) y[i * incy] += alpha * x[i * incx];
}
""",
    "kernel/riscv64/gemv_t.c": """\
#include "common.h"
/* y[j] += alpha * sum_i a[i + j*lda] * x[i] (column-major, transposed) */
void sgemv_t(long m, long n, float alpha, const float *a, long lda, const float *x, float *y) {
    for (long j = 0; j < n; j++) {
        float s = 0.0f;
        for (long i = 0; i < m; i++) s += a[i + j * lda] * x[i];
        y[j] += alpha * s;
    }
}
""",
    "kernel/riscv64/gemv_n.c": """\
#include "common.h"
void sgemv_n(long m, long n, float alpha, const float *a, long lda, const float *x, float *y) {
    for (long j = 0; j < n; j++)
        for (long i = 0; i < m; i++) y[i] += alpha * a[i + j * lda] * x[j];
}
""",
    "interface/Makefile": """\
TOPDIR = ..
include $(TOPDIR)/Makefile.system
OBJS = cblas_sdot.o cblas_saxpy.o cblas_sgemv.o

libs: $(OBJS)
\t$(AR) rc ../$(LIBNAME) $(OBJS)

cblas_sdot.o: dot.c
\t$(CC) $(CFLAGS) -c dot.c -o $@
cblas_saxpy.o: axpy.c
\t$(CC) $(CFLAGS) -c axpy.c -o $@
cblas_sgemv.o: gemv.c
\t$(CC) $(CFLAGS) -c gemv.c -o $@
""",
    "interface/dot.c": """\
#include "common.h"
#include "cblas.h"
float cblas_sdot(int n, const float *x, int incx, const float *y, int incy) {
    if (n <= 0) return 0.0f;
    if (incx < 0) x -= (long)(n - 1) * incx;
    if (incy < 0) y -= (long)(n - 1) * incy;
    return sdot_k(n, x, incx, y, incy);
}
""",
    "interface/axpy.c": """\
#include "common.h"
#include "cblas.h"
void cblas_saxpy(int n, float alpha, const float *x, int incx, float *y, int incy) {
    if (n <= 0 || alpha == 0.0f) return;
    if (incx < 0) x -= (long)(n - 1) * incx;
    if (incy < 0) y -= (long)(n - 1) * incy;
    saxpy_k(n, alpha, x, incx, y, incy);
}
""",
    "interface/gemv.c": """\
#include "common.h"
#include "cblas.h"
/* Column-major only with unit increments: what the miniature's tester calls. */
void cblas_sgemv(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE trans, int m, int n, float alpha, const float *a,
                 int lda, const float *x, int incx, float beta, float *y, int incy) {
    (void)order; (void)incx; (void)incy;
    int leny = trans == CblasNoTrans ? m : n;
    for (int i = 0; i < leny; i++) y[i] = beta == 0.0f ? 0.0f : beta * y[i];
    if (trans == CblasNoTrans) sgemv_n(m, n, alpha, a, lda, x, y);
    else sgemv_t(m, n, alpha, a, lda, x, y);
}
""",
    "ctest/Makefile": """\
TOPDIR = ..
include $(TOPDIR)/Makefile.system

xscblat1: c_sblat1c.c ../$(LIBNAME)
\t$(CC) $(CFLAGS) -o $@ c_sblat1c.c ../$(LIBNAME) $(CEXTRALIB) -lm
xscblat2: c_sblat2c.c ../$(LIBNAME)
\t$(CC) $(CFLAGS) -o $@ c_sblat2c.c ../$(LIBNAME) $(CEXTRALIB) -lm
""",
    "ctest/c_sblat1c.c": """\
/* Level-1 tester: each routine against a double-precision reference, several lengths and strides. */
#include <math.h>
#include <stdio.h>
#include "cblas.h"

static float x[200], y[200], yr[200];

static void fill(int n) {
    for (int i = 0; i < n; i++) {
        x[i] = (float)((i * 37) % 17) / 8.0f - 1.0f;
        yr[i] = (float)((i * 11) % 13) / 6.0f - 1.0f;
    }
}

static int test_sdot(void) {
    static const int lengths[] = {0, 1, 2, 7, 64, 65, 99};
    for (unsigned k = 0; k < sizeof lengths / sizeof *lengths; k++) {
        int n = lengths[k];
        fill(2 * n);
        for (int inc = 1; inc <= 2; inc++) {
            double ref = 0.0;
            for (int i = 0; i < n; i++) ref += (double)x[i * inc] * yr[i * inc];
            float got = cblas_sdot(n, x, inc, yr, inc);
            if (fabs(got - ref) > 1e-4 * (1.0 + fabs(ref))) return 0;
        }
    }
    return 1;
}

static int test_saxpy(void) {
    static const int lengths[] = {0, 1, 3, 64, 99};
    for (unsigned k = 0; k < sizeof lengths / sizeof *lengths; k++) {
        int n = lengths[k];
        fill(n);
        for (int i = 0; i < n; i++) y[i] = yr[i];
        cblas_saxpy(n, 0.5f, x, 1, y, 1);
        for (int i = 0; i < n; i++)
            if (fabsf(y[i] - (yr[i] + 0.5f * x[i])) > 1e-6f) return 0;
    }
    return 1;
}

int main(void) {
    const char *names[] = {"CBLAS_SDOT  ", "CBLAS_SAXPY "};
    int (*tests[])(void) = {test_sdot, test_saxpy};
    int failed = 0;
    for (int c = 0; c < 2; c++) {
        printf("\\nTest of subprogram number %3d         %15s", c + 1, names[c]);
        if (tests[c]()) printf("                                    ----- PASS -----\\n");
        else { printf("                                       FAIL\\n"); failed = 1; }
    }
    return failed;
}
""",
    "ctest/c_sblat2c.c": """\
/* Level-2 tester: reads an sin2-style input (header, then `cblas_NAME T|F ...` lines) from stdin. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "cblas.h"

static int test_sgemv(int *calls) {
    static float a[40 * 40], x[40], y[40];
    static const int sizes[] = {1, 2, 5, 9, 33};
    for (unsigned k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        int n = sizes[k];
        for (int i = 0; i < n * n; i++) a[i] = (float)((i * 29) % 23) / 11.0f - 1.0f;
        for (int i = 0; i < n; i++) x[i] = (float)((i * 7) % 5) / 2.0f - 1.0f;
        for (int t = 0; t < 2; t++) {
            cblas_sgemv(CblasColMajor, t ? CblasTrans : CblasNoTrans, n, n, 0.7f, a, n, x, 1, 0.0f, y, 1);
            ++*calls;
            for (int i = 0; i < n; i++) {
                double ref = 0.0;
                for (int j = 0; j < n; j++) ref += (double)(t ? a[j + i * n] : a[i + j * n]) * x[j];
                if (fabs(y[i] - 0.7 * ref) > 1e-4 * (1.0 + fabs(ref))) return 0;
            }
        }
    }
    return 1;
}

int main(void) {
    char line[256], name[64], flag[8];
    int failed = 0;
    while (fgets(line, sizeof line, stdin)) {
        if (sscanf(line, "%63s %7s", name, flag) != 2 || strncmp(name, "cblas_", 6) != 0) continue;
        if (strcmp(flag, "T") != 0) { printf("%-12s WAS NOT TESTED\\n", name); continue; }
        if (strcmp(name, "cblas_sgemv") != 0) { printf("%-12s WAS NOT TESTED\\n", name); continue; }
        int calls = 0;
        if (test_sgemv(&calls)) printf("%-12s PASSED THE COLUMN-MAJOR COMPUTATIONAL TESTS (%6d CALLS)\\n", name, calls);
        else { printf("******* %12s FAILED ON CALL NUMBER: %d\\n", name, calls); failed = 1; }
    }
    printf("\\nEND OF TESTS\\n");
    return failed;
}
""",
    "ctest/sin2": """\
'SBLAT2.SNAP'     NAME OF SNAPSHOT OUTPUT FILE
T        LOGICAL FLAG, T TO STOP ON FAILURES.
cblas_sgemv  T PUT F FOR NO TEST. SAME COLUMNS.
cblas_sger   T PUT F FOR NO TEST. SAME COLUMNS.
""",
    ".gitignore": "*.o\n*.a\nconfig.h\ngetarch\nctest/xscblat*\n",
}

# --------------------------------------------------------------------------------------------- ggml

GGML_FILES = {
    "CMakeLists.txt": """\
cmake_minimum_required(VERSION 3.14)
project(ggml C CXX)
option(GGML_RVV "ggml: enable rvv" ON)
option(GGML_NATIVE "ggml: optimize for the build machine" OFF)
option(GGML_OPENMP "ggml: use OpenMP" OFF)
option(GGML_BUILD_TESTS "ggml: build tests" OFF)
option(GGML_BUILD_EXAMPLES "ggml: build examples" OFF)
set(CMAKE_RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
add_subdirectory(src)
if (GGML_BUILD_TESTS)
    add_subdirectory(tests)
endif()
""",
    "include/ggml.h": """\
#pragma once
#include <stdint.h>
enum ggml_type { GGML_TYPE_Q4_0 = 2, GGML_TYPE_Q8_0 = 8 };
const char *ggml_type_name(enum ggml_type type);
""",
    "src/CMakeLists.txt": """\
add_library(ggml-base ggml.c)
target_include_directories(ggml-base PUBLIC ../include)
include(ggml-cpu/cpu.cmake)
add_library(ggml ggml-backend-reg.c)
target_link_libraries(ggml PUBLIC ggml-cpu ggml-base)
""",
    "src/ggml.c": """\
#include "ggml.h"
const char *ggml_type_name(enum ggml_type type) { return type == GGML_TYPE_Q8_0 ? "q8_0" : "q4_0"; }
""",
    "src/ggml-backend-reg.c": """\
int ggml_backend_reg_count(void) { return 1; }
""",
    "src/ggml-common.h": """\
#pragma once
#include <stdint.h>
#define QK8_0 32
#define QK4_0 32
typedef struct { _Float16 d; int8_t qs[QK8_0]; } block_q8_0;
typedef struct { _Float16 d; uint8_t qs[QK4_0 / 2]; } block_q4_0;
""",
    "src/ggml-cpu/cpu.cmake": """\
add_library(ggml-cpu ggml-cpu/quants.c ggml-cpu/arch/riscv/quants.c)
target_include_directories(ggml-cpu PRIVATE . ggml-cpu)
target_link_libraries(ggml-cpu PUBLIC ggml-base)
if (GGML_RVV)
    target_compile_options(ggml-cpu PRIVATE -march=rv64gcv_zfh -mabi=lp64d)
endif()
""",
    "src/ggml-cpu/quants.h": """\
#pragma once
#include <stddef.h>
#include <stdint.h>
void quantize_row_q8_0(const float *x, void *y, int64_t k);
void quantize_row_q4_0(const float *x, void *y, int64_t k);
void ggml_vec_dot_q8_0_q8_0(int n, float *s, size_t bs, const void *vx, size_t bx, const void *vy, size_t by, int nrc);
void ggml_vec_dot_q4_0_q8_0(int n, float *s, size_t bs, const void *vx, size_t bx, const void *vy, size_t by, int nrc);
""",
    "src/ggml-cpu/quants.c": """\
#include <math.h>
#include "ggml-common.h"
#include "quants.h"

void quantize_row_q8_0(const float *x, void *vy, int64_t k) {
    block_q8_0 *y = vy;
    for (int64_t b = 0; b < k / QK8_0; b++) {
        float amax = 0.0f;
        for (int i = 0; i < QK8_0; i++) amax = fmaxf(amax, fabsf(x[b * QK8_0 + i]));
        float d = amax / 127.0f, id = d ? 1.0f / d : 0.0f;
        y[b].d = (_Float16)d;
        /* Scalar on purpose: clang vectorizes this into vfncvt.rtz.x.f.w at SEW 16, which qemu 7.2 aborts on. */
#pragma clang loop vectorize(disable)
        for (int i = 0; i < QK8_0; i++) y[b].qs[i] = (int8_t)roundf(x[b * QK8_0 + i] * id);
    }
}

void quantize_row_q4_0(const float *x, void *vy, int64_t k) {
    block_q4_0 *y = vy;
    for (int64_t b = 0; b < k / QK4_0; b++) {
        float amax = 0.0f;
        for (int i = 0; i < QK4_0; i++) amax = fmaxf(amax, fabsf(x[b * QK4_0 + i]));
        float d = amax / 7.0f, id = d ? 1.0f / d : 0.0f;
        y[b].d = (_Float16)d;
#pragma clang loop vectorize(disable)
        for (int i = 0; i < QK4_0 / 2; i++) {
            int lo = (int)roundf(x[b * QK4_0 + i] * id) + 8, hi = (int)roundf(x[b * QK4_0 + i + 16] * id) + 8;
            lo = lo < 0 ? 0 : lo > 15 ? 15 : lo;
            hi = hi < 0 ? 0 : hi > 15 ? 15 : hi;
            y[b].qs[i] = (uint8_t)(lo | hi << 4);
        }
    }
}

void ggml_vec_dot_q4_0_q8_0(int n, float *s, size_t bs, const void *vx, size_t bx, const void *vy, size_t by, int nrc) {
    (void)bs; (void)bx; (void)by; (void)nrc;
    const block_q4_0 *x = vx;
    const block_q8_0 *y = vy;
    float sum = 0.0f;
    for (int b = 0; b < n / QK4_0; b++) {
        int acc = 0;
        for (int i = 0; i < QK4_0 / 2; i++)
            acc += ((x[b].qs[i] & 15) - 8) * y[b].qs[i] + ((x[b].qs[i] >> 4) - 8) * y[b].qs[i + 16];
        sum += (float)x[b].d * (float)y[b].d * (float)acc;
    }
    *s = sum;
}
""",
    "src/ggml-cpu/arch/riscv/quants.c": """\
#include <riscv_vector.h>
#include "ggml-common.h"
#include "quants.h"

/* One block per step: widen the int8 products to int16, reduce to int32, scale by both fp16 scales. */
void ggml_vec_dot_q8_0_q8_0(int n, float *s, size_t bs, const void *vx, size_t bx, const void *vy, size_t by, int nrc) {
    (void)bs; (void)bx; (void)by; (void)nrc;
    const block_q8_0 *x = vx;
    const block_q8_0 *y = vy;
    float sum = 0.0f;
    size_t vl = __riscv_vsetvl_e8m1(QK8_0);
    for (int b = 0; b < n / QK8_0; b++) {
        vint8m1_t a = __riscv_vle8_v_i8m1(x[b].qs, vl);
        vint8m1_t c = __riscv_vle8_v_i8m1(y[b].qs, vl);
        vint16m2_t p = __riscv_vwmul_vv_i16m2(a, c, vl);
        vint32m1_t r = __riscv_vwredsum_vs_i16m2_i32m1(p, __riscv_vmv_v_x_i32m1(0, 1), vl);
        sum += (float)x[b].d * (float)y[b].d * (float)__riscv_vmv_x_s_i32m1_i32(r);
    }
    *s = sum;
}
""",
    "tests/CMakeLists.txt": """\
add_executable(test-quantize-fns test-quantize-fns.c)
target_include_directories(test-quantize-fns PRIVATE ../src ../src/ggml-cpu)
target_link_libraries(test-quantize-fns PRIVATE ggml m)
""",
    "tests/test-quantize-fns.c": """\
/* Per type: quantize, then check the dot product against the float one; -v prints every case. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "ggml.h"
#include "ggml-common.h"
#include "quants.h"

enum { N = 256 };
static float x[N], y[N];
static block_q8_0 qx8[N / QK8_0], qy8[N / QK8_0];
static block_q4_0 qx4[N / QK4_0];

static int report(const char *type, const char *what, double err, double limit, int verbose) {
    int failed = !(err < limit);
    if (failed || verbose) printf("%5s %-31s %s (%f)\\n", type, what, failed ? "FAILED" : "ok", err);
    return failed;
}

int main(int argc, char **argv) {
    int verbose = argc > 1 && strcmp(argv[1], "-v") == 0, failed = 0;
    double ref = 0.0;
    for (int i = 0; i < N; i++) {
        x[i] = 0.1f + 2.0f * cosf((float)i);
        y[i] = 0.1f + 2.0f * cosf((float)i + 1.0f);
        ref += (double)x[i] * y[i];
    }
    float got;
    quantize_row_q8_0(x, qx8, N);
    quantize_row_q8_0(y, qy8, N);
    ggml_vec_dot_q8_0_q8_0(N, &got, 0, qx8, 0, qy8, 0, 1);
    failed += report(ggml_type_name(GGML_TYPE_Q8_0), "dot product error:", fabs(got - ref) / N, 0.02, verbose);
    quantize_row_q4_0(x, qx4, N);
    ggml_vec_dot_q4_0_q8_0(N, &got, 0, qx4, 0, qy8, 0, 1);
    failed += report(ggml_type_name(GGML_TYPE_Q4_0), "dot product error:", fabs(got - ref) / N, 0.05, verbose);
    if (failed || verbose) printf("%d tests failed\\n", failed);
    return failed > 0;
}
""",
    ".gitignore": "build*/\n",
}


def _write_repo(root: Path, files: dict[str, str]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    git = ["git", "-C", str(root), "-c", "user.name=EoK tests", "-c", "user.email=tests@eok.invalid"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "miniature tree"], check=True)
    return root


def make_openblas_tree(root: Path) -> Path:
    """A git clone (one commit) of the miniature OpenBLAS at `root`."""
    return _write_repo(root, OPENBLAS_FILES)


def make_ggml_tree(root: Path) -> Path:
    """A git clone (one commit) of the miniature ggml at `root`."""
    return _write_repo(root, GGML_FILES)
