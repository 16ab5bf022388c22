/* Characters in UTF-8 text at LMUL 1: a signed byte compare finds the non-continuation bytes and vcpop counts
 * them into a scalar sum; vsetvli once per strip. */
#include <riscv_vector.h>
#include <stddef.h>
#include <stdint.h>

size_t rb_utf8_count(int n, const uint8_t *str) {
    size_t count = 0;
    for (size_t left = (size_t)n, vl; left > 0; left -= vl, str += vl) {
        vl = __riscv_vsetvl_e8m1(left);
        vint8m1_t v = __riscv_vle8_v_i8m1((const int8_t *)str, vl);
        count += __riscv_vcpop_m_b8(__riscv_vmsgt_vx_i8m1_b8(v, -65, vl), vl);
    }
    return count;
}
