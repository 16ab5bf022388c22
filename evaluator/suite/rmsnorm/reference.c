#include <math.h>
#include <stddef.h>

/* RMS normalization (as in LLaMA) over the last axis, eps = 1e-5. */
void rmsnorm(int rows, int cols, const float *x, const float *gamma, float *y)
{
    const float eps = 1e-5f;
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * (size_t)cols;
        float *yr = y + (size_t)r * (size_t)cols;
        float sq = 0.0f;
        for (int c = 0; c < cols; c++)
            sq += xr[c] * xr[c];
        float inv = 1.0f / sqrtf(sq / (float)cols + eps);
        for (int c = 0; c < cols; c++)
            yr[c] = xr[c] * inv * gamma[c];
    }
}
