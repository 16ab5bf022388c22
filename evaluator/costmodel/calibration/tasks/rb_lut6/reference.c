/* LUT6 reference: each byte replaced by its entry in a 64-byte table, indexed by its low six bits. */
#include <stdint.h>

void rb_lut6(int n, const uint8_t *lut, uint8_t *ptr) {
    for (int i = 0; i < n; i++) ptr[i] = lut[ptr[i] & 63];
}
