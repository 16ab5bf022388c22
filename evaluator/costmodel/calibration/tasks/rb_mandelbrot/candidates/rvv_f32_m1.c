/* Mandelbrot at f32 LMUL 1: a pixel per lane, the lanes still inside |z| <= 2 count one more iteration
 * (vadc with the mask) and the strip ends when vfirst finds none left. */
#include <riscv_vector.h>
#include <stdint.h>

void rb_mandelbrot(int width, int max_iter, uint32_t *res) {
    float scale = 2.0f / (float)width;
    size_t vlmax = __riscv_vsetvlmax_e32m1();
    vuint32m1_t lane = __riscv_vid_v_u32m1(vlmax);
    for (int y = 0; y < width; y++) {
        float cy = (float)y * scale;
        cy = cy - 1.0f;
        for (size_t x = 0, left = (size_t)width, vl; left > 0; left -= vl, x += vl, res += vl) {
            vl = __riscv_vsetvl_e32m1(left);
            vfloat32m1_t cx = __riscv_vfcvt_f_xu_v_f32m1(__riscv_vadd_vx_u32m1(lane, (uint32_t)x, vl), vl);
            cx = __riscv_vfsub_vf_f32m1(__riscv_vfmul_vf_f32m1(cx, scale, vl), 1.5f, vl);
            vfloat32m1_t zx = __riscv_vfmv_v_f_f32m1(0, vl), zy = zx, zx2 = zx, zy2 = zx;
            vuint32m1_t iters = __riscv_vmv_v_x_u32m1(0, vl);
            vfloat32m1_t cyv = __riscv_vfmv_v_f_f32m1(cy, vl);
            for (int i = 0; i < max_iter; i++) {
                vbool32_t in = __riscv_vmfle_vf_f32m1_b32(__riscv_vfadd_vv_f32m1(zx2, zy2, vl), 4.0f, vl);
                if (__riscv_vfirst_m_b32(in, vl) < 0) break;
                iters = __riscv_vadc_vxm_u32m1(iters, 0, in, vl);
                zy = __riscv_vfmacc_vv_f32m1(cyv, __riscv_vfadd_vv_f32m1(zx, zx, vl), zy, vl);
                zx = __riscv_vfadd_vv_f32m1(__riscv_vfsub_vv_f32m1(zx2, zy2, vl), cx, vl);
                zx2 = __riscv_vfmul_vv_f32m1(zx, zx, vl);
                zy2 = __riscv_vfmul_vv_f32m1(zy, zy, vl);
            }
            __riscv_vse32_v_u32m1(res, iters, vl);
        }
    }
}
