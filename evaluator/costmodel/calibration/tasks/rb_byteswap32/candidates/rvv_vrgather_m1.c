/* Byte swap of 32-bit words at LMUL 1: words loaded at e32, their bytes permuted with one vrgather.vv at e8
 * (8-bit indices 4k+3-j), stored at e32. */
#include <riscv_vector.h>
#include <stdint.h>

void rb_byteswap32(int n, uint32_t *ptr) {
    size_t vlmax = __riscv_vsetvlmax_e8m1();
    vuint8m1_t lane = __riscv_vid_v_u8m1(vlmax);
    vuint8m1_t idx = __riscv_vadd_vv_u8m1(__riscv_vand_vx_u8m1(lane, 0xfc, vlmax),
                                          __riscv_vrsub_vx_u8m1(__riscv_vand_vx_u8m1(lane, 3, vlmax), 3, vlmax),
                                          vlmax);
    for (size_t left = (size_t)n, vl; left > 0; left -= vl, ptr += vl) {
        vl = __riscv_vsetvl_e32m1(left);
        vuint8m1_t bytes = __riscv_vreinterpret_v_u32m1_u8m1(__riscv_vle32_v_u32m1(ptr, vl));
        vuint8m1_t swapped = __riscv_vrgather_vv_u8m1(bytes, idx, vl * 4);
        __riscv_vse32_v_u32m1(ptr, __riscv_vreinterpret_v_u8m1_u32m1(swapped), vl);
    }
}
