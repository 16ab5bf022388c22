/* Sum of M floats taken every STRIDE elements (STRIDE 1: unit stride) of an array of M*STRIDE floats, RVV
 * m4. The same work and instruction count whatever the stride: only the lines touched differ. */
#include <stdio.h>
#include <stdlib.h>

#include "eok_markers.h"
#define LMUL 4
#include "rvv_lmul.h"

#ifndef M
#define M 65536
#endif
#ifndef STRIDE
#define STRIDE 1
#endif

__attribute__((noinline)) float sum(const float *x, size_t m) {
  VF32 acc = VFMV_V_F(0.0f, VSETVLMAX());
  for (size_t i = 0, vl; i < m; i += vl) {
    vl = VSETVL(m - i);
    acc = VFADD_VV(acc, __riscv_vlse32_v_f32m4(x + i * STRIDE, STRIDE * sizeof(float), vl), vl);
  }
  vfloat32m1_t zero = __riscv_vfmv_v_f_f32m1(0.0f, 1);
  return __riscv_vfmv_f_s_f32m1_f32(VFREDUSUM(acc, zero, VSETVLMAX()));
}

int main(void) {
  float *x = malloc((size_t)M * STRIDE * sizeof(float));
  for (size_t i = 0; i < (size_t)M * STRIDE; i++) x[i] = (float)(i % 3);
  eok_region_begin();
  float r = sum(x, M);
  eok_region_end();
  printf("%g\n", r);
  return 0;
}
