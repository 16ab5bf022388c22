/* 4-bit table lookup at LMUL 8 with an unordered indexed load (vluxei8) from the table in memory. */
#include <riscv_vector.h>
#include <stdint.h>

void rb_lut4(int n, const uint8_t *lut, uint8_t *ptr) {
    for (size_t left = (size_t)n, vl; left > 0; left -= vl, ptr += vl) {
        vl = __riscv_vsetvl_e8m8(left);
        vuint8m8_t idx = __riscv_vand_vx_u8m8(__riscv_vle8_v_u8m8(ptr, vl), 15, vl);
        __riscv_vse8_v_u8m8(ptr, __riscv_vluxei8_v_u8m8(lut, idx, vl), vl);
    }
}
