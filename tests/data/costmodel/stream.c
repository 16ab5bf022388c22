/* STREAM-like kernels over N floats, hand-vectorized with LMUL 4 (vsetvl per strip): KERNEL 0 read (sum),
 * 1 copy, 2 scale, 3 add, 4 triad. The arrays are written by the set-up before the region, as a board's
 * warm-up call would leave them. */
#include <stdio.h>
#include <stdlib.h>

#include "eok_markers.h"
#define LMUL 4
#include "rvv_lmul.h"

#ifndef N
#define N 65536
#endif
#ifndef KERNEL
#define KERNEL 0
#endif

__attribute__((noinline)) float run(float *a, const float *b, const float *c, float s, size_t n) {
  VF32 acc = VFMV_V_F(0.0f, VSETVLMAX());
  for (size_t i = 0, vl; i < n; i += vl) {
    vl = VSETVL(n - i);
#if KERNEL == 0
    acc = VFADD_VV(acc, VLE32(b + i, vl), vl);
#elif KERNEL == 1
    VSE32(a + i, VLE32(b + i, vl), vl);
#elif KERNEL == 2
    VSE32(a + i, __riscv_vfmul_vf_f32m4(VLE32(b + i, vl), s, vl), vl);
#elif KERNEL == 3
    VSE32(a + i, VFADD_VV(VLE32(b + i, vl), VLE32(c + i, vl), vl), vl);
#else
    VSE32(a + i, VFMACC_VF(VLE32(b + i, vl), s, VLE32(c + i, vl), vl), vl);
#endif
  }
  vfloat32m1_t zero = __riscv_vfmv_v_f_f32m1(0.0f, 1);
  return __riscv_vfmv_f_s_f32m1_f32(VFREDUSUM(acc, zero, VSETVLMAX()));
}

int main(void) {
  float *a = malloc(N * sizeof(float)), *b = malloc(N * sizeof(float)), *c = malloc(N * sizeof(float));
  for (size_t i = 0; i < N; i++) {
    b[i] = (float)(i % 7);
#if KERNEL != 0
    a[i] = 0.0f;
#endif
#if KERNEL >= 3
    c[i] = 1.0f;
#endif
  }
  eok_region_begin();
  float r = run(a, b, c, 3.0f, N);
  eok_region_end();
  printf("%g %g\n", r, a[N - 1]);
  return 0;
}
