/* A competent engineer's plain RVV loop for i8dot: int8 products widened to int16 (vwmul), summed into
 * int32 accumulators (vwadd.wv) across the strips, one reduction after the loop. */
#include <riscv_vector.h>
#include <stddef.h>
#include <stdint.h>

int32_t i8dot(int n, const int8_t *x, const int8_t *y) {
  vint32m4_t acc = __riscv_vmv_v_x_i32m4(0, __riscv_vsetvlmax_e32m4());
  for (size_t i = 0, vl; i < (size_t)n; i += vl) {
    vl = __riscv_vsetvl_e8m1((size_t)n - i);
    vint16m2_t p = __riscv_vwmul_vv_i16m2(__riscv_vle8_v_i8m1(x + i, vl), __riscv_vle8_v_i8m1(y + i, vl), vl);
    acc = __riscv_vwadd_wv_i32m4_tu(acc, acc, p, vl);
  }
  vint32m1_t sum = __riscv_vredsum_vs_i32m4_i32m1(acc, __riscv_vmv_v_x_i32m1(0, 1), __riscv_vsetvlmax_e32m4());
  return __riscv_vmv_x_s_i32m1_i32(sum);
}
