/* M 32-bit words zeroed with vse32 (m4), then M bytes stored into them with vsse8 (m1) every STRIDE bytes
 * (4: into each word's low byte, a scattered store; 1: contiguous into the first quarter). The same
 * instructions and the same lines whatever the stride; only whether the byte store's elements are scattered. */
#include <riscv_vector.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "eok_markers.h"

#ifndef M
#define M 65536
#endif
#ifndef STRIDE
#define STRIDE 4
#endif

__attribute__((noinline)) void widen(uint32_t *dest, const uint8_t *src, size_t n) {
  vuint32m4_t zero = __riscv_vmv_v_x_u32m4(0, __riscv_vsetvlmax_e32m4());
  for (size_t left = n, vl; left > 0; left -= vl, src += vl, dest += vl) {
    vl = __riscv_vsetvl_e32m4(left);
    __riscv_vse32_v_u32m4(dest, zero, vl);
    vl = __riscv_vsetvl_e8m1(left);
    __riscv_vsse8_v_u8m1((uint8_t *)dest, STRIDE, __riscv_vle8_v_u8m1(src, vl), vl);
  }
}

int main(void) {
  uint8_t *src = aligned_alloc(4096, M);
  uint32_t *dest = aligned_alloc(4096, 4 * (size_t)M);
  for (size_t i = 0; i < M; i++) src[i] = (uint8_t)(i & 127);
  eok_region_begin();
  widen(dest, src, M);
  eok_region_end();
  printf("%u\n", (unsigned)dest[M / 2]);
  return 0;
}
