#include <stdint.h>

/* int8 dot product accumulated in int32, as int8 GEMM and ggml's q8_0 dot compute each block. */
int32_t i8dot(int n, const int8_t *x, const int8_t *y) {
  int32_t s = 0;
  for (int i = 0; i < n; i++) s += x[i] * y[i];
  return s;
}
