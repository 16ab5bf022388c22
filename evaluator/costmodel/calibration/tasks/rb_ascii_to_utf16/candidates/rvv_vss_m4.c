/* ASCII to UTF-16 at LMUL 4: the 16-bit outputs are zeroed with vse16, then the bytes are written into
 * their low halves with a stride-2 store (vsse8). */
#include <riscv_vector.h>
#include <stdint.h>

void rb_ascii_to_utf16(int n, uint16_t *dest, const uint8_t *src) {
    vuint16m8_t zero = __riscv_vmv_v_x_u16m8(0, __riscv_vsetvlmax_e16m8());
    for (size_t left = (size_t)n, vl; left > 0; left -= vl, src += vl, dest += vl) {
        vl = __riscv_vsetvl_e16m8(left);
        __riscv_vse16_v_u16m8(dest, zero, vl);
        vl = __riscv_vsetvl_e8m4(left);
        __riscv_vsse8_v_u8m4((uint8_t *)dest, 2, __riscv_vle8_v_u8m4(src, vl), vl);
    }
}
