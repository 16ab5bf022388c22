/* sdot hand-vectorized with LMUL (1/2/4/8) and ACC (1/2/4) accumulators; STRIP=1: vsetvl every iteration. */
#include <stdio.h>
#include <stdlib.h>

#include "eok_markers.h"
#include "rvv_lmul.h"

#ifndef ACC
#define ACC 1
#endif
#ifndef N
#define N 8192
#endif

__attribute__((noinline)) float sdot(const float *a, const float *b, size_t n) {
  size_t vl = VSETVLMAX();
  VF32 acc0 = VFMV_V_F(0.0f, vl), acc1 = acc0, acc2 = acc0, acc3 = acc0;
  size_t i = 0;
#if STRIP
  for (; i < n; i += vl) {
    vl = VSETVL(n - i);
    acc0 = VFMACC_VV_TU(acc0, VLE32(a + i, vl), VLE32(b + i, vl), vl);
  }
#else
#pragma clang loop unroll(disable)
  for (; i + ACC * vl <= n; i += ACC * vl) {
    acc0 = VFMACC_VV(acc0, VLE32(a + i, vl), VLE32(b + i, vl), vl);
#if ACC > 1
    acc1 = VFMACC_VV(acc1, VLE32(a + i + vl, vl), VLE32(b + i + vl, vl), vl);
#endif
#if ACC > 2
    acc2 = VFMACC_VV(acc2, VLE32(a + i + 2 * vl, vl), VLE32(b + i + 2 * vl, vl), vl);
    acc3 = VFMACC_VV(acc3, VLE32(a + i + 3 * vl, vl), VLE32(b + i + 3 * vl, vl), vl);
#endif
  }
  for (; i < n; i += vl) {
    vl = VSETVL(n - i);
    acc0 = VFMACC_VV_TU(acc0, VLE32(a + i, vl), VLE32(b + i, vl), vl);
  }
  vl = VSETVLMAX();
#endif
  acc0 = VFADD_VV(VFADD_VV(acc0, acc1, vl), VFADD_VV(acc2, acc3, vl), vl);
  vfloat32m1_t zero = __riscv_vfmv_v_f_f32m1(0.0f, 1);
  return __riscv_vfmv_f_s_f32m1_f32(VFREDUSUM(acc0, zero, vl));
}

int main(void) {
  float *a = malloc(N * sizeof(float)), *b = malloc(N * sizeof(float));
  for (int i = 0; i < N; i++) {
    a[i] = (float)(i % 7);
    b[i] = 0.5f;
  }
  eok_region_begin();
  float r = sdot(a, b, N);
  eok_region_end();
  printf("%g\n", r);
  return 0;
}
