/* A competent engineer's plain RVV loop for fir5: strip-mined at LMUL 4, one vfmacc per tap. */
#include <riscv_vector.h>
#include <stddef.h>

void fir5(int n, const float *x, const float *c, float *y) {
  for (size_t i = 0, vl; i < (size_t)n; i += vl) {
    vl = __riscv_vsetvl_e32m4((size_t)n - i);
    vfloat32m4_t s = __riscv_vfmul_vf_f32m4(__riscv_vle32_v_f32m4(x + i, vl), c[0], vl);
    for (int k = 1; k < 5; k++) s = __riscv_vfmacc_vf_f32m4(s, c[k], __riscv_vle32_v_f32m4(x + i + k, vl), vl);
    __riscv_vse32_v_f32m4(y + i, s, vl);
  }
}
