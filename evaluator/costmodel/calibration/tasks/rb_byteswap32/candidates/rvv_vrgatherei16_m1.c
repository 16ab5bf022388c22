/* Byte swap of 32-bit words at LMUL 1 with vrgatherei16.vv (16-bit indices 4k+3-j at LMUL 2). */
#include <riscv_vector.h>
#include <stdint.h>

void rb_byteswap32(int n, uint32_t *ptr) {
    size_t vlmax = __riscv_vsetvlmax_e16m2();
    vuint16m2_t lane = __riscv_vid_v_u16m2(vlmax);
    vuint16m2_t idx = __riscv_vadd_vv_u16m2(__riscv_vand_vx_u16m2(lane, 0xfffc, vlmax),
                                           __riscv_vrsub_vx_u16m2(__riscv_vand_vx_u16m2(lane, 3, vlmax), 3, vlmax),
                                           vlmax);
    for (size_t left = (size_t)n, vl; left > 0; left -= vl, ptr += vl) {
        vl = __riscv_vsetvl_e32m1(left);
        vuint8m1_t bytes = __riscv_vreinterpret_v_u32m1_u8m1(__riscv_vle32_v_u32m1(ptr, vl));
        vuint8m1_t swapped = __riscv_vrgatherei16_vv_u8m1(bytes, idx, vl * 4);
        __riscv_vse32_v_u32m1(ptr, __riscv_vreinterpret_v_u8m1_u32m1(swapped), vl);
    }
}
