#include <stddef.h>
#include <stdint.h>

/* One row of activations times an n x k matrix of 4-bit weights (MatMulNBits layout, see NOTES.md).
   Weights are dequantized as (q - zero_point) * scale, one scale and zero point per 32 weights. */
void matmulnbits_q4_gemv(int n, int k, const float *a, const uint8_t *b, const float *scales,
                         const uint8_t *zero_points, float *y)
{
    int kb = (k + 31) / 32;
    for (int j = 0; j < n; j++) {
        float acc = 0.0f;
        for (int blk = 0; blk < kb; blk++) {
            size_t bi = (size_t)j * (size_t)kb + (size_t)blk;
            const uint8_t *blob = b + bi * 16;
            float s = scales[bi];
            int zp = zero_points[bi];
            int len = (k - blk * 32 < 32) ? k - blk * 32 : 32;
            for (int e = 0; e < len; e++) {
                int q = (e & 1) ? (blob[e >> 1] >> 4) : (blob[e >> 1] & 0x0f);
                float w = (float)(q - zp) * s;
                acc += a[blk * 32 + e] * w;
            }
        }
        y[j] = acc;
    }
}
