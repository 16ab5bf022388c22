#include <stddef.h>

/* 2x2 window, stride 2, no padding, NCHW batch 1: the output is c x (h/2) x (w/2); when h or w is
   odd the last row or column of the input is not covered (floor mode, as in PyTorch's default). */
void avgpool2x2(int c, int h, int w, const float *x, float *y)
{
    int oh = h / 2, ow = w / 2;
    for (int ch = 0; ch < c; ch++) {
        const float *xc = x + (size_t)ch * (size_t)h * (size_t)w;
        float *yc = y + (size_t)ch * (size_t)oh * (size_t)ow;
        for (int i = 0; i < oh; i++) {
            const float *r0 = xc + (size_t)(2 * i) * (size_t)w;
            const float *r1 = r0 + w;
            for (int j = 0; j < ow; j++) {
                float a = r0[2 * j], b = r0[2 * j + 1], c2 = r1[2 * j], d = r1[2 * j + 1];
                yc[(size_t)i * (size_t)ow + (size_t)j] = ((a + b) + (c2 + d)) * 0.25f;
            }
        }
    }
}
