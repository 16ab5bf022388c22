/* Each byte replaced by lut[byte & 63], one byte per iteration (the loop pragma keeps it a plain loop). */
#include <stdint.h>

void rb_lut6(int n, const uint8_t *lut, uint8_t *ptr) {
    #pragma clang loop vectorize(disable) interleave(disable) unroll(disable)
    for (int i = 0; i < n; i++) {
        ptr[i] = lut[ptr[i] & 63];
    }
}
