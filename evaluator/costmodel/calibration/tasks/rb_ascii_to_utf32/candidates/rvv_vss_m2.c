/* ASCII to UTF-32 at LMUL 2: the 32-bit outputs are zeroed with vse32, then the bytes are written into
 * their low bytes with a stride-4 store (vsse8). */
#include <riscv_vector.h>
#include <stdint.h>

void rb_ascii_to_utf32(int n, uint32_t *dest, const uint8_t *src) {
    vuint32m8_t zero = __riscv_vmv_v_x_u32m8(0, __riscv_vsetvlmax_e32m8());
    for (size_t left = (size_t)n, vl; left > 0; left -= vl, src += vl, dest += vl) {
        vl = __riscv_vsetvl_e32m8(left);
        __riscv_vse32_v_u32m8(dest, zero, vl);
        vl = __riscv_vsetvl_e8m2(left);
        __riscv_vsse8_v_u8m2((uint8_t *)dest, 4, __riscv_vle8_v_u8m2(src, vl), vl);
    }
}
