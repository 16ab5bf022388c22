/* ASCII to UTF-32: each byte zero-extended to 32 bits, one per iteration (the loop pragma keeps it a plain loop). */
#include <stdint.h>

void rb_ascii_to_utf32(int n, uint32_t *dest, const uint8_t *src) {
    #pragma clang loop vectorize(disable) interleave(disable) unroll(disable)
    for (int i = 0; i < n; i++) {
        dest[i] = src[i];
    }
}
