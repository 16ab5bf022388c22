/* mandelbrot reference: iteration counts of a width x width image over [-1.5, 0.5] x [-1, 1] in f32, at most
 * max_iter iterations. c = x * (2 / width) - 1.5 in two roundings and z*z + c with one fused multiply-add, so
 * the vector versions can match it bit for bit. */
#include <stdint.h>

void rb_mandelbrot(int width, int max_iter, uint32_t *res) {
    float scale = 2.0f / (float)width;
    for (int y = 0; y < width; y++) {
        float cy = (float)y * scale;
        cy = cy - 1.0f;
        for (int x = 0; x < width; x++) {
            float cx = (float)x * scale;
            cx = cx - 1.5f;
            float zx = 0, zy = 0, zx2 = 0, zy2 = 0;
            int iter = 0;
            while (zx2 + zy2 <= 4.0f && iter < max_iter) {
                zy = __builtin_fmaf(zx + zx, zy, cy);
                zx = (zx2 - zy2) + cx;
                zx2 = zx * zx;
                zy2 = zy * zy;
                iter++;
            }
            res[y * width + x] = (uint32_t)iter;
        }
    }
}
