/* ASCII to UTF-32 at LMUL 2 with a four-field segment store: field 0 the byte, fields 1-3 a zero register. */
#include <riscv_vector.h>
#include <stdint.h>

void rb_ascii_to_utf32(int n, uint32_t *dest, const uint8_t *src) {
    vuint8m2_t zero = __riscv_vmv_v_x_u8m2(0, __riscv_vsetvlmax_e8m2());
    uint8_t *out = (uint8_t *)dest;
    for (size_t left = (size_t)n, vl; left > 0; left -= vl, src += vl, out += 4 * vl) {
        vl = __riscv_vsetvl_e8m2(left);
        vuint8m2x4_t quad = __riscv_vcreate_v_u8m2x4(__riscv_vle8_v_u8m2(src, vl), zero, zero, zero);
        __riscv_vsseg4e8_v_u8m2x4(out, quad, vl);
    }
}
