/* q4_0 x q8_0 dot product over nb blocks of 32 values.
 *
 * Block layouts (little endian), as in ggml:
 *   q4_0: fp16 scale d, then 16 bytes; byte j holds value j in its low nibble and value j+16 in its
 *         high nibble, each stored as (q + 8), q in [-8, 7].
 *   q8_0: fp16 scale d, then 32 int8 values.
 * The integer sum of each block is exact; it is scaled by both fp16 scales and accumulated in float.
 */
#include <stdint.h>
#include <string.h>

static float half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t mant = h & 0x3ff;
    uint32_t bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (mant << 13);
    } else if (exp != 0) {
        bits = sign | ((exp + 112) << 23) | (mant << 13);
    } else if (mant == 0) {
        bits = sign;
    } else {
        /* subnormal half: normalize the mantissa into a float exponent */
        int e = 113;
        while (!(mant & 0x400)) {
            mant <<= 1;
            e--;
        }
        bits = sign | ((uint32_t)e << 23) | ((mant & 0x3ff) << 13);
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static uint16_t read_u16(const uint8_t *p) {
    return (uint16_t)(p[0] | (p[1] << 8));
}

float q4_0_q8_0_dot(int nb, const uint8_t *x, const uint8_t *y) {
    float sum = 0.0f;
    for (int b = 0; b < nb; b++) {
        const uint8_t *bx = x + 18 * b;
        const uint8_t *by = y + 34 * b;
        const int8_t *qy = (const int8_t *)(by + 2);
        int sumi = 0;
        for (int j = 0; j < 16; j++) {
            int lo = (bx[2 + j] & 0x0f) - 8;
            int hi = (bx[2 + j] >> 4) - 8;
            sumi += lo * qy[j] + hi * qy[j + 16];
        }
        sum += (float)sumi * (half_to_float(read_u16(bx)) * half_to_float(read_u16(by)));
    }
    return sum;
}
