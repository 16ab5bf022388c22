/* ASCII to UTF-32 at LMUL 2: bytes loaded, widened with vzext.vf4 to LMUL 8, stored as 32-bit elements. */
#include <riscv_vector.h>
#include <stdint.h>

void rb_ascii_to_utf32(int n, uint32_t *dest, const uint8_t *src) {
    for (size_t left = (size_t)n, vl; left > 0; left -= vl, src += vl, dest += vl) {
        vl = __riscv_vsetvl_e8m2(left);
        __riscv_vse32_v_u32m8(dest, __riscv_vzext_vf4_u32m8(__riscv_vle8_v_u8m2(src, vl), vl), vl);
    }
}
