#include <stddef.h>

/* Caffe-style im2col: one row of col per (channel, kernel tap), one column per output pixel.
   oh = (h + 2*pad - kh)/stride + 1 and likewise ow; taps in the padding are written as 0. */
void im2col(int c, int h, int w, int kh, int kw, int stride, int pad, const float *x, float *col)
{
    int oh = (h + 2 * pad - kh) / stride + 1;
    int ow = (w + 2 * pad - kw) / stride + 1;
    size_t ncols = (size_t)oh * (size_t)ow;
    for (int ci = 0; ci < c; ci++) {
        const float *xc = x + (size_t)ci * (size_t)h * (size_t)w;
        for (int ky = 0; ky < kh; ky++) {
            for (int kx = 0; kx < kw; kx++) {
                size_t row = ((size_t)ci * (size_t)kh + (size_t)ky) * (size_t)kw + (size_t)kx;
                float *dst = col + row * ncols;
                for (int oy = 0; oy < oh; oy++) {
                    int iy = oy * stride - pad + ky;
                    for (int ox = 0; ox < ow; ox++) {
                        int ix = ox * stride - pad + kx;
                        int inside = iy >= 0 && iy < h && ix >= 0 && ix < w;
                        dst[(size_t)oy * (size_t)ow + (size_t)ox] =
                            inside ? xc[(size_t)iy * (size_t)w + (size_t)ix] : 0.0f;
                    }
                }
            }
        }
    }
}
