/* Byte swap of 32-bit words at LMUL 8: words loaded at e32, their bytes permuted with one vrgather.vv at e8
 * (8-bit indices 4k+3-j), stored at e32. */
#include <riscv_vector.h>
#include <stdint.h>

void rb_byteswap32(int n, uint32_t *ptr) {
    size_t vlmax = __riscv_vsetvlmax_e8m8();
    vuint8m8_t lane = __riscv_vid_v_u8m8(vlmax);
    vuint8m8_t idx = __riscv_vadd_vv_u8m8(__riscv_vand_vx_u8m8(lane, 0xfc, vlmax),
                                          __riscv_vrsub_vx_u8m8(__riscv_vand_vx_u8m8(lane, 3, vlmax), 3, vlmax),
                                          vlmax);
    for (size_t left = (size_t)n, vl; left > 0; left -= vl, ptr += vl) {
        vl = __riscv_vsetvl_e32m8(left);
        vuint8m8_t bytes = __riscv_vreinterpret_v_u32m8_u8m8(__riscv_vle32_v_u32m8(ptr, vl));
        vuint8m8_t swapped = __riscv_vrgather_vv_u8m8(bytes, idx, vl * 4);
        __riscv_vse32_v_u32m8(ptr, __riscv_vreinterpret_v_u8m8_u32m8(swapped), vl);
    }
}
