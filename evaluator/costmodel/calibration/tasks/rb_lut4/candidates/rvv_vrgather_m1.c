/* 4-bit table lookup at LMUL 1: the 16-byte table sits in a vector register, vrgather.vv indexes it. */
#include <riscv_vector.h>
#include <stdint.h>

void rb_lut4(int n, const uint8_t *lut, uint8_t *ptr) {
    vuint8m1_t tbl = __riscv_vle8_v_u8m1(lut, 16);
    vuint8m1_t table = tbl;
    for (size_t left = (size_t)n, vl; left > 0; left -= vl, ptr += vl) {
        vl = __riscv_vsetvl_e8m1(left);
        vuint8m1_t idx = __riscv_vand_vx_u8m1(__riscv_vle8_v_u8m1(ptr, vl), 15, vl);
        __riscv_vse8_v_u8m1(ptr, __riscv_vrgather_vv_u8m1(table, idx, vl), vl);
    }
}
