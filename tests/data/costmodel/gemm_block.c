/* C[ROWS x 512] += A[ROWS x 512] * B[512 x 512], f32, RVV m4 along C's rows. BLOCKED 0: for each row of C
 * stream all of B (1 MiB, twice the K1's L2) from top to bottom; BLOCKED 1: the same arithmetic with k cut
 * into KB-row panels of B (KB x 512 x 4 B = 64 KiB at KB 32), each panel used by every row of C before
 * the next. ROWS rows of a 512x512 product keep the modeled run small; B's reuse is what blocking is for. */
#include <stdio.h>
#include <stdlib.h>

#include "eok_markers.h"
#define LMUL 4
#include "rvv_lmul.h"

#define NN 512
#ifndef ROWS
#define ROWS 16
#endif
#ifndef BLOCKED
#define BLOCKED 0
#endif
#ifndef KB
#define KB 32
#endif

static void row_panel(float *c, const float *a, const float *b, size_t k0, size_t k1) {
  for (size_t j = 0, vl; j < NN; j += vl) {
    vl = VSETVL(NN - j);
    VF32 acc = VLE32(c + j, vl);
    for (size_t k = k0; k < k1; k++) acc = VFMACC_VF(acc, a[k], VLE32(b + k * NN + j, vl), vl);
    VSE32(c + j, acc, vl);
  }
}

__attribute__((noinline)) void gemm(float *c, const float *a, const float *b) {
#if BLOCKED
  for (size_t k0 = 0; k0 < NN; k0 += KB)
    for (size_t i = 0; i < ROWS; i++) row_panel(c + i * NN, a + i * NN, b, k0, k0 + KB);
#else
  for (size_t i = 0; i < ROWS; i++) row_panel(c + i * NN, a + i * NN, b, 0, NN);
#endif
}

int main(void) {
  float *a = malloc(ROWS * NN * sizeof(float)), *b = malloc(NN * NN * sizeof(float));
  float *c = calloc(ROWS * NN, sizeof(float));
  for (size_t i = 0; i < ROWS * NN; i++) a[i] = (float)(i % 5) * 0.25f;
  for (size_t i = 0; i < NN * NN; i++) b[i] = (float)(i % 3);
  eok_region_begin();
  gemm(c, a, b);
  eok_region_end();
  printf("%g\n", c[ROWS * NN - 1]);
  return 0;
}
