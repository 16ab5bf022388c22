/* memcpy at LMUL 8 with the vector length fixed before the loop (no vsetvli per strip); the remainder is
 * copied once after it. */
#include <riscv_vector.h>
#include <stdint.h>

void rb_memcpy(int n, uint8_t *dest, const uint8_t *src) {
    size_t vl = __riscv_vsetvl_e8m8((size_t)n);
    if (vl == 0) return;
    const uint8_t *end = src + ((size_t)n - (size_t)n % vl);
    for (; src < end; src += vl, dest += vl)
        __riscv_vse8_v_u8m8(dest, __riscv_vle8_v_u8m8(src, vl), vl);
    size_t rest = (size_t)n % vl;
    __riscv_vse8_v_u8m8(dest, __riscv_vle8_v_u8m8(src, rest), rest);
}
