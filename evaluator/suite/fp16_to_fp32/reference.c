#include <stdint.h>
#include <string.h>

/* Exact binary16 -> binary32 widening, done with integer operations so it needs no Zfh. */
static float half_to_float(uint16_t hv)
{
    uint32_t h = hv;
    uint32_t sign = (h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    if (exp == 0) {
        /* zero or subnormal: mant * 2^-24 is exact in float */
        float v = (float)mant * 0x1p-24f;
        return sign ? -v : v;
    }
    /* inf and NaN keep their payload; normals rebias the exponent by 127 - 15 */
    uint32_t bits = (exp == 31) ? (sign | 0x7f800000u | (mant << 13))
                                : (sign | ((exp + 112u) << 23) | (mant << 13));
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

void fp16_to_fp32(int n, const uint16_t *x, float *y)
{
    for (int i = 0; i < n; i++)
        y[i] = half_to_float(x[i]);
}
