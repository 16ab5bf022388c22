/* dest = src reversed at LMUL 1: stride -1 loads from the back, unit-stride stores from the front. */
#include <riscv_vector.h>
#include <stdint.h>

void rb_memreverse(int n, uint8_t *dest, const uint8_t *src) {
    const uint8_t *back = src + n - 1;
    for (size_t left = (size_t)n, vl; left > 0; left -= vl, dest += vl, back -= vl) {
        vl = __riscv_vsetvl_e8m1(left);
        __riscv_vse8_v_u8m1(dest, __riscv_vlse8_v_u8m1(back, -1, vl), vl);
    }
}
