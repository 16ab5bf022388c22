/* ASCII to UTF-16 at LMUL 1 with a two-field segment store: field 0 the byte, field 1 a zero register. */
#include <riscv_vector.h>
#include <stdint.h>

void rb_ascii_to_utf16(int n, uint16_t *dest, const uint8_t *src) {
    vuint8m1_t zero = __riscv_vmv_v_x_u8m1(0, __riscv_vsetvlmax_e8m1());
    uint8_t *out = (uint8_t *)dest;
    for (size_t left = (size_t)n, vl; left > 0; left -= vl, src += vl, out += 2 * vl) {
        vl = __riscv_vsetvl_e8m1(left);
        vuint8m1x2_t pair = __riscv_vcreate_v_u8m1x2(__riscv_vle8_v_u8m1(src, vl), zero);
        __riscv_vsseg2e8_v_u8m1x2(out, pair, vl);
    }
}
