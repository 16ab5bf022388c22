/* 6-bit table lookup at LMUL 4 with an unordered indexed load (vluxei8) from the 64-byte table in memory. */
#include <riscv_vector.h>
#include <stdint.h>

void rb_lut6(int n, const uint8_t *lut, uint8_t *ptr) {
    for (size_t left = (size_t)n, vl; left > 0; left -= vl, ptr += vl) {
        vl = __riscv_vsetvl_e8m4(left);
        vuint8m4_t idx = __riscv_vand_vx_u8m4(__riscv_vle8_v_u8m4(ptr, vl), 63, vl);
        __riscv_vse8_v_u8m4(ptr, __riscv_vluxei8_v_u8m4(lut, idx, vl), vl);
    }
}
