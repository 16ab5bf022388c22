/* ASCII to UTF-16 at LMUL 4: bytes loaded, widened with vzext.vf2 to LMUL 8, stored as 16-bit elements. */
#include <riscv_vector.h>
#include <stdint.h>

void rb_ascii_to_utf16(int n, uint16_t *dest, const uint8_t *src) {
    for (size_t left = (size_t)n, vl; left > 0; left -= vl, src += vl, dest += vl) {
        vl = __riscv_vsetvl_e8m4(left);
        __riscv_vse16_v_u16m8(dest, __riscv_vzext_vf2_u16m8(__riscv_vle8_v_u8m4(src, vl), vl), vl);
    }
}
