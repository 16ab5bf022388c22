/* memset, one byte store per iteration (the loop pragma keeps it a plain loop). */
#include <stdint.h>

void rb_memset(int n, uint8_t *dest, int c) {
    #pragma clang loop vectorize(disable) interleave(disable) unroll(disable)
    for (int i = 0; i < n; i++) {
        dest[i] = (uint8_t)c;
    }
}
