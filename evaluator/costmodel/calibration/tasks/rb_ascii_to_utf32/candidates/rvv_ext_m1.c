/* ASCII to UTF-32 at LMUL 1: bytes loaded, widened with vzext.vf4 to LMUL 4, stored as 32-bit elements. */
#include <riscv_vector.h>
#include <stdint.h>

void rb_ascii_to_utf32(int n, uint32_t *dest, const uint8_t *src) {
    for (size_t left = (size_t)n, vl; left > 0; left -= vl, src += vl, dest += vl) {
        vl = __riscv_vsetvl_e8m1(left);
        __riscv_vse32_v_u32m4(dest, __riscv_vzext_vf4_u32m4(__riscv_vle8_v_u8m1(src, vl), vl), vl);
    }
}
