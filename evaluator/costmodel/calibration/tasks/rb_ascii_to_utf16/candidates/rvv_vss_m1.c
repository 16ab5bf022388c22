/* ASCII to UTF-16 at LMUL 1: the 16-bit outputs are zeroed with vse16, then the bytes are written into
 * their low halves with a stride-2 store (vsse8). */
#include <riscv_vector.h>
#include <stdint.h>

void rb_ascii_to_utf16(int n, uint16_t *dest, const uint8_t *src) {
    vuint16m2_t zero = __riscv_vmv_v_x_u16m2(0, __riscv_vsetvlmax_e16m2());
    for (size_t left = (size_t)n, vl; left > 0; left -= vl, src += vl, dest += vl) {
        vl = __riscv_vsetvl_e16m2(left);
        __riscv_vse16_v_u16m2(dest, zero, vl);
        vl = __riscv_vsetvl_e8m1(left);
        __riscv_vsse8_v_u8m1((uint8_t *)dest, 2, __riscv_vle8_v_u8m1(src, vl), vl);
    }
}
