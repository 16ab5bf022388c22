/* 4-bit table lookup: loads, masks and stores at LMUL 8, the lookups as eight LMUL-1 vrgather.vv. */
#include <riscv_vector.h>
#include <stdint.h>

void rb_lut4(int n, const uint8_t *lut, uint8_t *ptr) {
    vuint8m1_t tbl = __riscv_vle8_v_u8m1(lut, 16);
    size_t vl1 = __riscv_vsetvlmax_e8m1();
    for (size_t left = (size_t)n, vl; left > 0; left -= vl, ptr += vl) {
        vl = __riscv_vsetvl_e8m8(left);
        vuint8m8_t in = __riscv_vand_vx_u8m8(__riscv_vle8_v_u8m8(ptr, vl), 15, vl);
        vuint8m8_t out = __riscv_vundefined_u8m8();
        out = __riscv_vset_v_u8m1_u8m8(out, 0, __riscv_vrgather_vv_u8m1(tbl, __riscv_vget_v_u8m8_u8m1(in, 0), vl1));
        out = __riscv_vset_v_u8m1_u8m8(out, 1, __riscv_vrgather_vv_u8m1(tbl, __riscv_vget_v_u8m8_u8m1(in, 1), vl1));
        out = __riscv_vset_v_u8m1_u8m8(out, 2, __riscv_vrgather_vv_u8m1(tbl, __riscv_vget_v_u8m8_u8m1(in, 2), vl1));
        out = __riscv_vset_v_u8m1_u8m8(out, 3, __riscv_vrgather_vv_u8m1(tbl, __riscv_vget_v_u8m8_u8m1(in, 3), vl1));
        out = __riscv_vset_v_u8m1_u8m8(out, 4, __riscv_vrgather_vv_u8m1(tbl, __riscv_vget_v_u8m8_u8m1(in, 4), vl1));
        out = __riscv_vset_v_u8m1_u8m8(out, 5, __riscv_vrgather_vv_u8m1(tbl, __riscv_vget_v_u8m8_u8m1(in, 5), vl1));
        out = __riscv_vset_v_u8m1_u8m8(out, 6, __riscv_vrgather_vv_u8m1(tbl, __riscv_vget_v_u8m8_u8m1(in, 6), vl1));
        out = __riscv_vset_v_u8m1_u8m8(out, 7, __riscv_vrgather_vv_u8m1(tbl, __riscv_vget_v_u8m8_u8m1(in, 7), vl1));
        __riscv_vse8_v_u8m8(ptr, out, vl);
    }
}
