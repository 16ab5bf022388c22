/* saxpy y += alpha*x hand-vectorized with LMUL (1/2/4/8) and ACC (1/2/4) independent vectors per iteration. */
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

#define AXPY_AT(off) VSE32(y + i + (off), VFMACC_VF(VLE32(y + i + (off), vl), alpha, VLE32(x + i + (off), vl), vl), vl)

__attribute__((noinline)) void saxpy(float alpha, const float *x, float *y, size_t n) {
  size_t vl = VSETVLMAX();
  size_t i = 0;
#pragma clang loop unroll(disable)
  for (; i + ACC * vl <= n; i += ACC * vl) {
    AXPY_AT(0);
#if ACC > 1
    AXPY_AT(vl);
#endif
#if ACC > 2
    AXPY_AT(2 * vl);
    AXPY_AT(3 * vl);
#endif
  }
  for (; i < n; i += vl) {
    vl = VSETVL(n - i);
    AXPY_AT(0);
  }
}

int main(void) {
  float *x = malloc(N * sizeof(float)), *y = malloc(N * sizeof(float));
  for (int i = 0; i < N; i++) {
    x[i] = (float)(i % 5);
    y[i] = 1.0f;
  }
  eok_region_begin();
  saxpy(0.25f, x, y, N);
  eok_region_end();
  printf("%g %g\n", y[0], y[N - 1]);
  return 0;
}
