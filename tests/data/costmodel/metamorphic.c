/* Straight-line RVV work (no loop in the region, unless LOOP=1) with knobs that only ever ADD work, for the cost model's
 * metamorphic tests: PAD scalar loads and adds whose result is never used after each vector block (the trick that
 * once lowered the modeled cycles), DUP the vector blocks twice over, LOOP=1 runs the same blocks as a loop
 * instead of unrolled. */
#include <riscv_vector.h>
#include <stdio.h>
#include <stdlib.h>

#include "eok_markers.h"

#ifndef PAD
#define PAD 0
#endif
#ifndef DUP
#define DUP 1
#endif
#ifndef LOOP
#define LOOP 0
#endif
#define BLOCKS 8

static volatile double sink;
static volatile int flag;
static volatile long pad_src[8];
static volatile size_t avl = 32;

/* Each block is its own TBs: the vsetvli ends one, the branch on `flag` another, so the vector work and the
 * padding are priced as separate blocks, one after the other. */
static inline void block(float *y, const float *x, long *d) {
  size_t vl = __riscv_vsetvl_e32m4(avl);
  vfloat32m4_t a = __riscv_vle32_v_f32m4(x, vl), b = __riscv_vle32_v_f32m4(y, vl);
  b = __riscv_vfmacc_vf_f32m4(b, 0.5f, a, vl);
  b = __riscv_vfmul_vv_f32m4(b, a, vl);
  __riscv_vse32_v_f32m4(y, b, vl);
  if (flag) sink = 2.0;
  for (int k = 0; k < PAD; k++) *d += pad_src[k & 7]; /* scalar work nobody reads: loads and adds */
}

__attribute__((noinline)) void kernel(float *y, const float *x) {
  long d = 0;
#if LOOP
#pragma clang loop unroll(disable)
  for (int i = 0; i < BLOCKS * DUP; i++) block(y + (i % BLOCKS) * 32, x + (i % BLOCKS) * 32, &d);
#else
#pragma clang loop unroll(full)
  for (int i = 0; i < BLOCKS * DUP; i++) block(y + (i % BLOCKS) * 32, x + (i % BLOCKS) * 32, &d);
#endif
  sink = (double)d;
}

int main(void) {
  float *x = malloc(4096 * sizeof(float)), *y = malloc(4096 * sizeof(float));
  for (int i = 0; i < 4096; i++) x[i] = (float)(i % 7), y[i] = 1.0f;
  eok_region_begin();
  kernel(y, x);
  eok_region_end();
  printf("%g %g\n", y[0], y[100]);
  return 0;
}
