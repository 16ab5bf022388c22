#include <stddef.h>

/* A 1x1 convolution is the matrix product Y (c_out x hw) = W (c_out x c_in) * X (c_in x hw) plus a
   per-row bias; the inner loop runs along the contiguous spatial axis. */
void conv1x1(int c_in, int c_out, int hw, const float *x, const float *weight, const float *bias,
             float *y)
{
    for (int co = 0; co < c_out; co++) {
        float *yo = y + (size_t)co * (size_t)hw;
        for (int p = 0; p < hw; p++)
            yo[p] = bias[co];
        for (int ci = 0; ci < c_in; ci++) {
            float wv = weight[(size_t)co * (size_t)c_in + (size_t)ci];
            const float *xi = x + (size_t)ci * (size_t)hw;
            for (int p = 0; p < hw; p++)
                yo[p] += wv * xi[p];
        }
    }
}
