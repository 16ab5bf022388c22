/* Data-dependent branches on pseudo-random data: most TBs run outside any periodic loop. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "eok_markers.h"

#ifndef N
#define N 4096
#endif

__attribute__((noinline)) long branchy(const uint32_t *x, size_t n) {
  long s = 0;
  for (size_t i = 0; i < n; i++) {
    uint32_t v = x[i];
    if (v & 1) {
      s += v >> 3;
    } else if (v & 2) {
      s -= (long)(v % 7);
    } else {
      s ^= v;
    }
  }
  return s;
}

int main(void) {
  uint32_t *x = malloc(N * sizeof(uint32_t));
  uint32_t r = 12345;
  for (int i = 0; i < N; i++) {
    r = r * 1103515245u + 12345u;
    x[i] = r >> 8;
  }
  eok_region_begin();
  long s = branchy(x, N);
  eok_region_end();
  printf("%ld\n", s);
  return 0;
}
