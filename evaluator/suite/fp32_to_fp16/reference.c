#include <stdint.h>
#include <string.h>

/* f32 -> IEEE binary16 bits, round to nearest even; overflow gives inf, NaN stays a quiet NaN. */
static uint16_t float_to_half(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) /* NaN: keep the top payload bits, force quiet */
        return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
    if (ax >= 0x477ff000u) /* >= 65520 rounds past the largest finite half (65504) */
        return (uint16_t)(sign | 0x7c00u);
    if (ax >= 0x38800000u) { /* normal half: |f| >= 2^-14 */
        uint32_t h = ((((ax >> 23) - 112u) << 10) | ((ax >> 13) & 0x3ffu));
        uint32_t rem = ax & 0x1fffu;
        if (rem > 0x1000u || (rem == 0x1000u && (h & 1u)))
            h++; /* a carry into the exponent is the correct rounding */
        return (uint16_t)(sign | h);
    }
    if (ax <= 0x33000000u) /* <= 2^-25: rounds to zero (2^-25 itself is a tie, to even) */
        return (uint16_t)sign;
    /* subnormal half: value = m24 * 2^(e-150); in units of 2^-24 that is m24 >> (126 - e) */
    uint32_t m24 = (ax & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126u - (ax >> 23);
    uint32_t h = m24 >> shift;
    uint32_t rem = m24 & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (h & 1u)))
        h++;
    return (uint16_t)(sign | h);
}

void fp32_to_fp16(int n, const float *x, uint16_t *y)
{
    for (int i = 0; i < n; i++)
        y[i] = float_to_half(x[i]);
}
