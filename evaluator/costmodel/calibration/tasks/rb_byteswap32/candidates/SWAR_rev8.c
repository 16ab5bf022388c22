/* Byte order of every 32-bit word reversed in place with the Zbb byte reverse (rev8), a word per iteration. */
#include <stdint.h>

void rb_byteswap32(int n, uint32_t *ptr) {
    #pragma clang loop vectorize(disable) interleave(disable) unroll(disable)
    for (int i = 0; i < n; i++) {
        ptr[i] = __builtin_bswap32(ptr[i]);
    }
}
