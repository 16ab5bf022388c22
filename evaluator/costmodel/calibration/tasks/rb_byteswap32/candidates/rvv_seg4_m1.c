/* Byte swap of 32-bit words with segment accesses: vlseg4e8 splits each word into four byte fields, the
 * fields are stored back in reverse order with vsseg4e8 (LMUL 1 per field). */
#include <riscv_vector.h>
#include <stdint.h>

void rb_byteswap32(int n, uint32_t *ptr) {
    uint8_t *p = (uint8_t *)ptr;
    for (size_t left = (size_t)n, vl; left > 0; left -= vl, p += 4 * vl) {
        vl = __riscv_vsetvl_e8m1(left);
        vuint8m1x4_t f = __riscv_vlseg4e8_v_u8m1x4(p, vl);
        vuint8m1x4_t r = __riscv_vcreate_v_u8m1x4(__riscv_vget_v_u8m1x4_u8m1(f, 3), __riscv_vget_v_u8m1x4_u8m1(f, 2),
                                                  __riscv_vget_v_u8m1x4_u8m1(f, 1), __riscv_vget_v_u8m1x4_u8m1(f, 0));
        __riscv_vsseg4e8_v_u8m1x4(p, r, vl);
    }
}
