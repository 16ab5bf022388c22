/* memset at LMUL 1, vector length fixed before the loop, remainder stored once after it. */
#include <riscv_vector.h>
#include <stdint.h>

void rb_memset(int n, uint8_t *dest, int c) {
    size_t vl = __riscv_vsetvl_e8m1((size_t)n);
    if (vl == 0) return;
    vuint8m1_t v = __riscv_vmv_v_x_u8m1((uint8_t)c, vl);
    uint8_t *end = dest + ((size_t)n - (size_t)n % vl);
    for (; dest < end; dest += vl) __riscv_vse8_v_u8m1(dest, v, vl);
    __riscv_vse8_v_u8m1(dest, v, (size_t)n % vl);
}
