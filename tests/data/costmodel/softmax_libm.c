/* Softmax over N floats with libm expf per element: the region calls into libm. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "eok_markers.h"

#ifndef N
#define N 2048
#endif

__attribute__((noinline)) void softmax(const float *x, float *y, size_t n) {
  float m = x[0];
  for (size_t i = 1; i < n; i++) m = x[i] > m ? x[i] : m;
  float s = 0.0f;
  for (size_t i = 0; i < n; i++) {
    y[i] = expf(x[i] - m);
    s += y[i];
  }
  float inv = 1.0f / s;
  for (size_t i = 0; i < n; i++) y[i] *= inv;
}

int main(void) {
  float *x = malloc(N * sizeof(float)), *y = malloc(N * sizeof(float));
  for (int i = 0; i < N; i++) x[i] = (float)((i * 37) % 101) / 25.0f;
  eok_region_begin();
  softmax(x, y, N);
  eok_region_end();
  printf("%g %g\n", y[0], y[N - 1]);
  return 0;
}
