#include <stddef.h>

/* Direct 3x3 convolution (cross-correlation, as in deep learning frameworks), stride 1, pad 1,
   so the output has the input's h x w. Taps that fall outside the image read zero. */
void conv2d_3x3(int c_in, int c_out, int h, int w, const float *x, const float *weight,
                const float *bias, float *y)
{
    size_t plane = (size_t)h * (size_t)w;
    for (int co = 0; co < c_out; co++) {
        float *yo = y + (size_t)co * plane;
        for (size_t p = 0; p < plane; p++)
            yo[p] = bias[co];
        for (int ci = 0; ci < c_in; ci++) {
            const float *xi = x + (size_t)ci * plane;
            const float *k = weight + ((size_t)co * (size_t)c_in + (size_t)ci) * 9;
            for (int i = 0; i < h; i++) {
                for (int di = 0; di < 3; di++) {
                    int si = i + di - 1;
                    if (si < 0 || si >= h)
                        continue;
                    for (int dj = 0; dj < 3; dj++) {
                        float kv = k[di * 3 + dj];
                        /* output columns j whose tap j + dj - 1 is inside [0, w) */
                        int j0 = (dj == 0) ? 1 : 0;
                        int j1 = (dj == 2) ? w - 1 : w;
                        const float *row = xi + (size_t)si * (size_t)w;
                        float *out = yo + (size_t)i * (size_t)w;
                        for (int j = j0; j < j1; j++)
                            out[j] += kv * row[j + dj - 1];
                    }
                }
            }
        }
    }
}
