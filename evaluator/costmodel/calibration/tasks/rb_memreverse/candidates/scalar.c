/* dest = src reversed, one byte per iteration (the loop pragma keeps it a plain loop). */
#include <stdint.h>

void rb_memreverse(int n, uint8_t *dest, const uint8_t *src) {
    #pragma clang loop vectorize(disable) interleave(disable) unroll(disable)
    for (int i = 0; i < n; i++) {
        dest[i] = src[n - 1 - i];
    }
}
