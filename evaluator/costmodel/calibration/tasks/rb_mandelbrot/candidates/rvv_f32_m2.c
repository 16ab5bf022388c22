/* Mandelbrot at f32 LMUL 2: a pixel per lane, the lanes still inside |z| <= 2 count one more iteration
 * (vadc with the mask) and the strip ends when vfirst finds none left. */
#include <riscv_vector.h>
#include <stdint.h>

void rb_mandelbrot(int width, int max_iter, uint32_t *res) {
    float scale = 2.0f / (float)width;
    size_t vlmax = __riscv_vsetvlmax_e32m2();
    vuint32m2_t lane = __riscv_vid_v_u32m2(vlmax);
    for (int y = 0; y < width; y++) {
        float cy = (float)y * scale;
        cy = cy - 1.0f;
        for (size_t x = 0, left = (size_t)width, vl; left > 0; left -= vl, x += vl, res += vl) {
            vl = __riscv_vsetvl_e32m2(left);
            vfloat32m2_t cx = __riscv_vfcvt_f_xu_v_f32m2(__riscv_vadd_vx_u32m2(lane, (uint32_t)x, vl), vl);
            cx = __riscv_vfsub_vf_f32m2(__riscv_vfmul_vf_f32m2(cx, scale, vl), 1.5f, vl);
            vfloat32m2_t zx = __riscv_vfmv_v_f_f32m2(0, vl), zy = zx, zx2 = zx, zy2 = zx;
            vuint32m2_t iters = __riscv_vmv_v_x_u32m2(0, vl);
            vfloat32m2_t cyv = __riscv_vfmv_v_f_f32m2(cy, vl);
            for (int i = 0; i < max_iter; i++) {
                vbool16_t in = __riscv_vmfle_vf_f32m2_b16(__riscv_vfadd_vv_f32m2(zx2, zy2, vl), 4.0f, vl);
                if (__riscv_vfirst_m_b16(in, vl) < 0) break;
                iters = __riscv_vadc_vxm_u32m2(iters, 0, in, vl);
                zy = __riscv_vfmacc_vv_f32m2(cyv, __riscv_vfadd_vv_f32m2(zx, zx, vl), zy, vl);
                zx = __riscv_vfadd_vv_f32m2(__riscv_vfsub_vv_f32m2(zx2, zy2, vl), cx, vl);
                zx2 = __riscv_vfmul_vv_f32m2(zx, zx, vl);
                zy2 = __riscv_vfmul_vv_f32m2(zy, zy, vl);
            }
            __riscv_vse32_v_u32m2(res, iters, vl);
        }
    }
}
