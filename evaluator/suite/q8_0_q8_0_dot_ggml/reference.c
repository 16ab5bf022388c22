#include <math.h>
#include <stdint.h>
#include <string.h>

/* Decode an IEEE binary16 value stored little-endian at p (the ggml block scale). */
static float half_at(const uint8_t *p)
{
    uint32_t h = (uint32_t)p[0] | ((uint32_t)p[1] << 8);
    uint32_t sign = (h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    if (exp == 0) {
        /* zero or subnormal: mant * 2^-24 is exact in float */
        float v = (float)mant * 0x1p-24f;
        return sign ? -v : v;
    }
    uint32_t bits = (exp == 31) ? (sign | 0x7f800000u | (mant << 13))
                                : (sign | ((exp + 112u) << 23) | (mant << 13));
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* ggml_vec_dot_q8_0_q8_0 as ggml declares it, for one row (nrc == 1): the integer sum of each block is
   exact; blocks are combined in double (see q8_0_q8_0_dot/task.toml). */
void q8_0_q8_0_dot_ggml(int n, float *s, size_t bs, const uint8_t *vx, size_t bx, const uint8_t *vy, size_t by,
                        int nrc)
{
    (void)bs, (void)bx, (void)by, (void)nrc;
    double acc = 0.0;
    for (int b = 0; b < n / 32; b++) {
        const uint8_t *xb = vx + (size_t)b * 34;
        const uint8_t *yb = vy + (size_t)b * 34;
        int32_t isum = 0;
        for (int j = 0; j < 32; j++)
            isum += (int32_t)(int8_t)xb[2 + j] * (int32_t)(int8_t)yb[2 + j];
        acc += (double)((float)isum * (half_at(xb) * half_at(yb)));
    }
    *s = (float)acc;
}
