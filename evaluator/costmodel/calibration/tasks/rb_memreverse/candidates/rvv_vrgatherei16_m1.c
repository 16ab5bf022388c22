/* dest = src reversed: whole LMUL-1 registers are reversed with vrgatherei16.vv (indices vlmax-1-i) and
 * stored from the back; the last partial register goes through a stride -1 store. */
#include <riscv_vector.h>
#include <stdint.h>

void rb_memreverse(int n, uint8_t *dest, const uint8_t *src) {
    size_t vlmax = __riscv_vsetvlmax_e8m1(), left = (size_t)n;
    vuint16m2_t idx = __riscv_vrsub_vx_u16m2(__riscv_vid_v_u16m2(vlmax), (uint16_t)(vlmax - 1), vlmax);
    uint8_t *back = dest + n;
    for (; left >= vlmax; left -= vlmax, src += vlmax) {
        back -= vlmax;
        __riscv_vse8_v_u8m1(back, __riscv_vrgatherei16_vv_u8m1(__riscv_vle8_v_u8m1(src, vlmax), idx, vlmax), vlmax);
    }
    __riscv_vsse8_v_u8m1(back - 1, -1, __riscv_vle8_v_u8m1(src, left), left);
}
