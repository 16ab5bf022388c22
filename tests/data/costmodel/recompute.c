/* y = f(x) / sum(f(x)) over N floats, f a polynomial of degree DEGREE, RVV m4. Two ways an
 * expert writes it, and which one wins depends on the chip's memory:
 *   MATERIALIZE 0: pass 1 sums f(x); pass 2 recomputes f(x) and scales it (twice the FMAs, no temporary);
 *   MATERIALIZE 1: pass 1 stores t = f(x) and sums it; pass 2 scales t (half the FMAs, t written and read).
 * With N = 256 Ki the three arrays take 3 MiB: DRAM on a K1 (512 KiB L2), L2 on an X100 (4 MiB L2). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eok_markers.h"
#define LMUL 4
#include "rvv_lmul.h"

#ifndef N
#define N (256 * 1024)
#endif
#ifndef DEGREE
#define DEGREE 4
#endif
#ifndef MATERIALIZE
#define MATERIALIZE 0
#endif

static inline VF32 poly(VF32 x, size_t vl) {
  VF32 p = VFMV_V_F(0.5f, vl);
  for (int k = 0; k < DEGREE; k++) p = VFMACC_VV(VFMV_V_F(0.01f * (float)(k + 1), vl), p, x, vl);
  return p;
}

__attribute__((noinline)) void normalize(float *y, float *t, const float *x, size_t n) {
  VF32 acc = VFMV_V_F(0.0f, VSETVLMAX());
  for (size_t i = 0, vl; i < n; i += vl) {
    vl = VSETVL(n - i);
    VF32 f = poly(VLE32(x + i, vl), vl);
#if MATERIALIZE
    VSE32(t + i, f, vl);
#endif
    acc = VFADD_VV(acc, f, vl);
  }
  vfloat32m1_t zero = __riscv_vfmv_v_f_f32m1(0.0f, 1);
  float inv = 1.0f / __riscv_vfmv_f_s_f32m1_f32(VFREDUSUM(acc, zero, VSETVLMAX()));
  for (size_t i = 0, vl; i < n; i += vl) {
    vl = VSETVL(n - i);
#if MATERIALIZE
    VF32 f = VLE32(t + i, vl);
#else
    VF32 f = poly(VLE32(x + i, vl), vl);
#endif
    VSE32(y + i, __riscv_vfmul_vf_f32m4(f, inv, vl), vl);
  }
}

int main(void) {
  float *x = malloc(N * sizeof(float)), *y = malloc(N * sizeof(float)), *t = malloc(N * sizeof(float));
  memset(y, 0, N * sizeof(float));
  memset(t, 0, N * sizeof(float));
  for (size_t i = 0; i < N; i++) x[i] = (float)(i % 13) * 0.05f;
  eok_region_begin();
  normalize(y, t, x, N);
  eok_region_end();
  printf("%g\n", y[N - 1]);
  return 0;
}
