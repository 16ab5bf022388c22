/* ACC independent e32 m1 vfmacc.vf accumulators per loop iteration (ACC=1: one dependent chain). */
#include <riscv_vector.h>
#include <stdio.h>
#include <stdlib.h>

#include "eok_markers.h"

#ifndef ACC
#define ACC 8
#endif
#ifndef ITERS
#define ITERS 2000
#endif

#define STEP(k) a##k = __riscv_vfmacc_vf_f32m1(a##k, s, x, vl)

__attribute__((noinline)) float fma_kernel(long iters, float s) {
  size_t vl = __riscv_vsetvlmax_e32m1();
  vfloat32m1_t x = __riscv_vfmv_v_f_f32m1(1.0f, vl);
  vfloat32m1_t a0 = x, a1 = x, a2 = x, a3 = x, a4 = x, a5 = x, a6 = x, a7 = x;
  vfloat32m1_t a8 = x, a9 = x, a10 = x, a11 = x, a12 = x, a13 = x, a14 = x, a15 = x;
#pragma clang loop unroll(disable)
  for (long i = 0; i < iters; i++) {
    STEP(0);
#if ACC > 1
    STEP(1);
#endif
#if ACC > 2
    STEP(2); STEP(3);
#endif
#if ACC > 4
    STEP(4); STEP(5); STEP(6); STEP(7);
#endif
#if ACC > 8
    STEP(8); STEP(9); STEP(10); STEP(11); STEP(12); STEP(13); STEP(14); STEP(15);
#endif
  }
  vfloat32m1_t t = __riscv_vfadd_vv_f32m1(a0, a1, vl);
  t = __riscv_vfadd_vv_f32m1(t, __riscv_vfadd_vv_f32m1(a2, a3, vl), vl);
  t = __riscv_vfadd_vv_f32m1(t, __riscv_vfadd_vv_f32m1(a4, a5, vl), vl);
  t = __riscv_vfadd_vv_f32m1(t, __riscv_vfadd_vv_f32m1(a6, a7, vl), vl);
  t = __riscv_vfadd_vv_f32m1(t, __riscv_vfadd_vv_f32m1(a8, a9, vl), vl);
  t = __riscv_vfadd_vv_f32m1(t, __riscv_vfadd_vv_f32m1(a10, a11, vl), vl);
  t = __riscv_vfadd_vv_f32m1(t, __riscv_vfadd_vv_f32m1(a12, a13, vl), vl);
  t = __riscv_vfadd_vv_f32m1(t, __riscv_vfadd_vv_f32m1(a14, a15, vl), vl);
  return __riscv_vfmv_f_s_f32m1_f32(t);
}

int main(int argc, char **argv) {
  float s = argc > 5 ? 0.5f : 1e-6f;
  eok_region_begin();
  float r = fma_kernel(ITERS, s);
  eok_region_end();
  printf("%g\n", r);
  return 0;
}
