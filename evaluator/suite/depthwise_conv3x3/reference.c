#include <stddef.h>

/* Depthwise 3x3 convolution: each channel is filtered by its own 3x3 kernel (groups = channels),
   stride 1, pad 1, so the output keeps h x w. Taps outside the image read zero. */
void depthwise_conv3x3(int c, int h, int w, const float *x, const float *weight, const float *bias,
                       float *y)
{
    size_t plane = (size_t)h * (size_t)w;
    for (int ch = 0; ch < c; ch++) {
        const float *xc = x + (size_t)ch * plane;
        const float *k = weight + (size_t)ch * 9;
        float *yc = y + (size_t)ch * plane;
        for (int i = 0; i < h; i++) {
            for (int j = 0; j < w; j++) {
                float acc = bias[ch];
                for (int di = 0; di < 3; di++) {
                    int si = i + di - 1;
                    if (si < 0 || si >= h)
                        continue;
                    for (int dj = 0; dj < 3; dj++) {
                        int sj = j + dj - 1;
                        if (sj < 0 || sj >= w)
                            continue;
                        acc += k[di * 3 + dj] * xc[(size_t)si * (size_t)w + (size_t)sj];
                    }
                }
                yc[(size_t)i * (size_t)w + (size_t)j] = acc;
            }
        }
    }
}
