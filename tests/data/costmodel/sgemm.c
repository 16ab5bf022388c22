/* Mid-size kernel for the cost-model benchmark: C += A*B, f32, M=N=K=DIM, rows of C in LMUL-2 vectors. */
#include <riscv_vector.h>
#include <stdio.h>
#include <stdlib.h>

#include "eok_markers.h"

#ifndef DIM
#define DIM 128
#endif

__attribute__((noinline)) void sgemm(const float *a, const float *b, float *c, size_t n) {
  for (size_t i = 0; i < n; i++) {
    for (size_t j = 0; j < n;) {
      size_t vl = __riscv_vsetvl_e32m2(n - j);
      vfloat32m2_t acc = __riscv_vle32_v_f32m2(c + i * n + j, vl);
      for (size_t k = 0; k < n; k++) {
        acc = __riscv_vfmacc_vf_f32m2(acc, a[i * n + k], __riscv_vle32_v_f32m2(b + k * n + j, vl), vl);
      }
      __riscv_vse32_v_f32m2(c + i * n + j, acc, vl);
      j += vl;
    }
  }
}

int main(void) {
  size_t n = DIM;
  float *a = malloc(n * n * sizeof(float)), *b = malloc(n * n * sizeof(float));
  float *c = calloc(n * n, sizeof(float));
  for (size_t i = 0; i < n * n; i++) {
    a[i] = (float)(i % 13) * 0.25f;
    b[i] = (float)(i % 7) * 0.5f;
  }
  eok_region_begin();
  sgemm(a, b, c, n);
  eok_region_end();
  printf("%g %g\n", c[0], c[n * n - 1]);
  return 0;
}
