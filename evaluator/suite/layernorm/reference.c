#include <math.h>
#include <stddef.h>

/* Layer normalization over the last axis, eps = 1e-5. Two passes (mean, then centred variance)
   so the variance does not suffer from cancellation. */
void layernorm(int rows, int cols, const float *x, const float *gamma, const float *beta, float *y)
{
    const float eps = 1e-5f;
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * (size_t)cols;
        float *yr = y + (size_t)r * (size_t)cols;
        float sum = 0.0f;
        for (int c = 0; c < cols; c++)
            sum += xr[c];
        float mean = sum / (float)cols;
        float sq = 0.0f;
        for (int c = 0; c < cols; c++) {
            float d = xr[c] - mean;
            sq += d * d;
        }
        float inv = 1.0f / sqrtf(sq / (float)cols + eps);
        for (int c = 0; c < cols; c++)
            yr[c] = (xr[c] - mean) * inv * gamma[c] + beta[c];
    }
}
