/* dest = src reversed: LMUL-8 loads and stores, each of the eight registers reversed with an LMUL-1
 * vrgatherei16.vv and placed in the mirrored position; the tail through a stride -1 store. */
#include <riscv_vector.h>
#include <stdint.h>

void rb_memreverse(int n, uint8_t *dest, const uint8_t *src) {
    size_t vl1 = __riscv_vsetvlmax_e8m1(), vl8 = __riscv_vsetvlmax_e8m8(), left = (size_t)n;
    vuint16m2_t idx = __riscv_vrsub_vx_u16m2(__riscv_vid_v_u16m2(vl1), (uint16_t)(vl1 - 1), vl1);
    uint8_t *back = dest + n;
    for (; left >= vl8; left -= vl8, src += vl8) {
        back -= vl8;
        vuint8m8_t in = __riscv_vle8_v_u8m8(src, vl8);
        vuint8m8_t out = __riscv_vundefined_u8m8();
        out = __riscv_vset_v_u8m1_u8m8(out, 0, __riscv_vrgatherei16_vv_u8m1(__riscv_vget_v_u8m8_u8m1(in, 7), idx, vl1));
        out = __riscv_vset_v_u8m1_u8m8(out, 1, __riscv_vrgatherei16_vv_u8m1(__riscv_vget_v_u8m8_u8m1(in, 6), idx, vl1));
        out = __riscv_vset_v_u8m1_u8m8(out, 2, __riscv_vrgatherei16_vv_u8m1(__riscv_vget_v_u8m8_u8m1(in, 5), idx, vl1));
        out = __riscv_vset_v_u8m1_u8m8(out, 3, __riscv_vrgatherei16_vv_u8m1(__riscv_vget_v_u8m8_u8m1(in, 4), idx, vl1));
        out = __riscv_vset_v_u8m1_u8m8(out, 4, __riscv_vrgatherei16_vv_u8m1(__riscv_vget_v_u8m8_u8m1(in, 3), idx, vl1));
        out = __riscv_vset_v_u8m1_u8m8(out, 5, __riscv_vrgatherei16_vv_u8m1(__riscv_vget_v_u8m8_u8m1(in, 2), idx, vl1));
        out = __riscv_vset_v_u8m1_u8m8(out, 6, __riscv_vrgatherei16_vv_u8m1(__riscv_vget_v_u8m8_u8m1(in, 1), idx, vl1));
        out = __riscv_vset_v_u8m1_u8m8(out, 7, __riscv_vrgatherei16_vv_u8m1(__riscv_vget_v_u8m8_u8m1(in, 0), idx, vl1));
        __riscv_vse8_v_u8m8(back, out, vl8);
    }
    for (size_t vl; left > 0; left -= vl, src += vl, back -= vl) {
        vl = __riscv_vsetvl_e8m1(left);
        __riscv_vsse8_v_u8m1(back - 1, -1, __riscv_vle8_v_u8m1(src, vl), vl);
    }
}
