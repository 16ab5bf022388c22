/* memset with vse8 at LMUL 8, vsetvli once per strip. */
#include <riscv_vector.h>
#include <stdint.h>

void rb_memset(int n, uint8_t *dest, int c) {
    vuint8m8_t v = __riscv_vmv_v_x_u8m8((uint8_t)c, __riscv_vsetvlmax_e8m8());
    for (size_t left = (size_t)n, vl; left > 0; left -= vl, dest += vl) {
        vl = __riscv_vsetvl_e8m8(left);
        __riscv_vse8_v_u8m8(dest, v, vl);
    }
}
