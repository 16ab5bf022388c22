/* dest = src reversed at LMUL 8: unit-stride loads from the front, stride -1 stores from the back. */
#include <riscv_vector.h>
#include <stdint.h>

void rb_memreverse(int n, uint8_t *dest, const uint8_t *src) {
    uint8_t *back = dest + n - 1;
    for (size_t left = (size_t)n, vl; left > 0; left -= vl, src += vl, back -= vl) {
        vl = __riscv_vsetvl_e8m8(left);
        __riscv_vsse8_v_u8m8(back, -1, __riscv_vle8_v_u8m8(src, vl), vl);
    }
}
