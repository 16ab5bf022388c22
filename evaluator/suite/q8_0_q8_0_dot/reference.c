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

/* Dot product of two rows of block_q8_0 (34 bytes: fp16 scale d, then 32 int8 quants).
   The integer sum of each block is exact; blocks are combined in double (see task.toml). */
float q8_0_q8_0_dot(int nb, const uint8_t *x, const uint8_t *y)
{
    double acc = 0.0;
    for (int b = 0; b < nb; b++) {
        const uint8_t *bx = x + (size_t)b * 34;
        const uint8_t *by = y + (size_t)b * 34;
        int32_t isum = 0;
        for (int j = 0; j < 32; j++)
            isum += (int32_t)(int8_t)bx[2 + j] * (int32_t)(int8_t)by[2 + j];
        float d = half_at(bx) * half_at(by);
        acc += (double)((float)isum * d);
    }
    return (float)acc;
}
