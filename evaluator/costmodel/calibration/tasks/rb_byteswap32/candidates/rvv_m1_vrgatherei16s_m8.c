/* Byte swap of 32-bit words: loads and stores at LMUL 8, the permutation as eight LMUL-1 vrgatherei16.vv. */
#include <riscv_vector.h>
#include <stdint.h>

void rb_byteswap32(int n, uint32_t *ptr) {
    size_t vl1 = __riscv_vsetvlmax_e8m1();
    vuint16m2_t lane = __riscv_vid_v_u16m2(vl1);
    vuint16m2_t idx = __riscv_vadd_vv_u16m2(__riscv_vand_vx_u16m2(lane, 0xfffc, vl1),
                                           __riscv_vrsub_vx_u16m2(__riscv_vand_vx_u16m2(lane, 3, vl1), 3, vl1), vl1);
    for (size_t left = (size_t)n, vl; left > 0; left -= vl, ptr += vl) {
        vl = __riscv_vsetvl_e32m8(left);
        vuint8m8_t in = __riscv_vreinterpret_v_u32m8_u8m8(__riscv_vle32_v_u32m8(ptr, vl));
        vuint8m8_t out = __riscv_vundefined_u8m8();
        out = __riscv_vset_v_u8m1_u8m8(out, 0, __riscv_vrgatherei16_vv_u8m1(__riscv_vget_v_u8m8_u8m1(in, 0), idx, vl1));
        out = __riscv_vset_v_u8m1_u8m8(out, 1, __riscv_vrgatherei16_vv_u8m1(__riscv_vget_v_u8m8_u8m1(in, 1), idx, vl1));
        out = __riscv_vset_v_u8m1_u8m8(out, 2, __riscv_vrgatherei16_vv_u8m1(__riscv_vget_v_u8m8_u8m1(in, 2), idx, vl1));
        out = __riscv_vset_v_u8m1_u8m8(out, 3, __riscv_vrgatherei16_vv_u8m1(__riscv_vget_v_u8m8_u8m1(in, 3), idx, vl1));
        out = __riscv_vset_v_u8m1_u8m8(out, 4, __riscv_vrgatherei16_vv_u8m1(__riscv_vget_v_u8m8_u8m1(in, 4), idx, vl1));
        out = __riscv_vset_v_u8m1_u8m8(out, 5, __riscv_vrgatherei16_vv_u8m1(__riscv_vget_v_u8m8_u8m1(in, 5), idx, vl1));
        out = __riscv_vset_v_u8m1_u8m8(out, 6, __riscv_vrgatherei16_vv_u8m1(__riscv_vget_v_u8m8_u8m1(in, 6), idx, vl1));
        out = __riscv_vset_v_u8m1_u8m8(out, 7, __riscv_vrgatherei16_vv_u8m1(__riscv_vget_v_u8m8_u8m1(in, 7), idx, vl1));
        __riscv_vse32_v_u32m8(ptr, __riscv_vreinterpret_v_u8m8_u32m8(out), vl);
    }
}
