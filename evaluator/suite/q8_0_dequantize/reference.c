#include <stddef.h>
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

/* block_q8_0: fp16 d, then 32 int8 quants; value = q * d. */
void q8_0_dequantize(int nb, const uint8_t *x, float *y)
{
    for (int b = 0; b < nb; b++) {
        const uint8_t *blk = x + (size_t)b * 34;
        float d = half_at(blk);
        float *out = y + (size_t)b * 32;
        for (int j = 0; j < 32; j++)
            out[j] = (float)(int8_t)blk[2 + j] * d;
    }
}
