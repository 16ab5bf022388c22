#include <math.h>
#include <stddef.h>
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

/* The two's-complement byte of an integral float r, |r| <= 128, without a float->int conversion:
   adding 1.5 * 2^23 puts r in the low mantissa bits (the ulp there is 1), so the low byte of the sum's
   encoding 0x4B400000 + r is r mod 256. (A plain (int8_t) cast would be vectorized to vfncvt.rtz,
   which qemu-user 7.2 cannot translate: see NOTES.md.) */
static uint8_t int8_byte(float r)
{
    float t = r + 12582912.0f;
    uint32_t bits;
    memcpy(&bits, &t, sizeof bits);
    return (uint8_t)(bits & 0xffu);
}

/* Quantize to block_q8_0 exactly as specified in NOTES.md (the ggml reference formula). */
void quantize_row_q8_0(int nb, const float *x, uint8_t *y)
{
    for (int b = 0; b < nb; b++) {
        const float *xb = x + (size_t)b * 32;
        uint8_t *yb = y + (size_t)b * 34;
        float amax = 0.0f;
        for (int j = 0; j < 32; j++) {
            float v = fabsf(xb[j]);
            amax = v > amax ? v : amax;
        }
        float d = amax / 127.0f;
        float id = (d != 0.0f) ? 1.0f / d : 0.0f;
        uint16_t dh = float_to_half(d);
        yb[0] = (uint8_t)(dh & 0xffu);
        yb[1] = (uint8_t)(dh >> 8);
        for (int j = 0; j < 32; j++)
            yb[2 + j] = int8_byte(roundf(xb[j] * id));
    }
}
