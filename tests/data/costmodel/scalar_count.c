/* Scalar loops whose dynamic instruction count is known by hand:
 * count_loop runs exactly 3 instructions (add, addi, bnez) per iteration (inline asm, ITERS iterations);
 * sum_loop is plain C, vectorizer and unroller off. */
#include <stdio.h>
#include <stdlib.h>

#include "eok_markers.h"

#ifndef ITERS
#define ITERS 1000
#endif

__attribute__((noinline)) long count_loop(long n) {
  long s = 0;
  __asm__ volatile(
      "1:\n"
      "add %0, %0, %1\n"
      "addi %1, %1, -1\n"
      "bnez %1, 1b\n"
      : "+r"(s), "+r"(n));
  return s;
}

__attribute__((noinline)) long sum_loop(const long *x, long n) {
  long s = 0;
#pragma clang loop vectorize(disable) interleave(disable) unroll(disable)
  for (long i = 0; i < n; i++) s += x[i] * 3;
  return s;
}

int main(void) {
  long *x = malloc(ITERS * sizeof(long));
  for (long i = 0; i < ITERS; i++) x[i] = i;
  long r;
  eok_region_begin();
#if SUM
  r = sum_loop(x, ITERS);
#else
  r = count_loop(ITERS);
#endif
  eok_region_end();
  printf("%ld\n", r);
  return 0;
}
