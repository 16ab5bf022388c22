/* Characters in UTF-8 text at LMUL 8, vector length fixed before the loop, the remainder counted after it. */
#include <riscv_vector.h>
#include <stddef.h>
#include <stdint.h>

static size_t strip(const uint8_t *p, size_t vl) {
    vint8m8_t v = __riscv_vle8_v_i8m8((const int8_t *)p, vl);
    return __riscv_vcpop_m_b1(__riscv_vmsgt_vx_i8m8_b1(v, -65, vl), vl);
}

size_t rb_utf8_count(int n, const uint8_t *str) {
    size_t vl = __riscv_vsetvl_e8m8((size_t)n), count = 0;
    if (vl == 0) return 0;
    const uint8_t *end = str + ((size_t)n - (size_t)n % vl);
    for (; str < end; str += vl) count += strip(str, vl);
    return count + strip(str, (size_t)n % vl);
}
