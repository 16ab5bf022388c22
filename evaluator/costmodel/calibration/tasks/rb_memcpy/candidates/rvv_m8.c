/* memcpy with vle8/vse8 at LMUL 8: vsetvli once per strip, the strip length from the bytes left. */
#include <riscv_vector.h>
#include <stdint.h>

void rb_memcpy(int n, uint8_t *dest, const uint8_t *src) {
    for (size_t left = (size_t)n, vl; left > 0; left -= vl, src += vl, dest += vl) {
        vl = __riscv_vsetvl_e8m8(left);
        __riscv_vse8_v_u8m8(dest, __riscv_vle8_v_u8m8(src, vl), vl);
    }
}
