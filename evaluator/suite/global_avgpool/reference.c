#include <stddef.h>

/* Mean of each channel plane (the last pooling layer of most CNN classifiers). */
void global_avgpool(int c, int hw, const float *x, float *y)
{
    for (int ch = 0; ch < c; ch++) {
        const float *xc = x + (size_t)ch * (size_t)hw;
        float sum = 0.0f;
        for (int p = 0; p < hw; p++)
            sum += xc[p];
        y[ch] = sum / (float)hw;
    }
}
