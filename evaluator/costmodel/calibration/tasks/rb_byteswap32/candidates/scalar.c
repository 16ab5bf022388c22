/* Byte order of every 32-bit word reversed in place, four byte loads and four byte stores per word;
 * volatile keeps clang from fusing them into word accesses (rvv-bench puts a barrier after each store). */
#include <stdint.h>

void rb_byteswap32(int n, uint32_t *ptr) {
    volatile uint8_t *p = (volatile uint8_t *)ptr;
    #pragma clang loop vectorize(disable) interleave(disable) unroll(disable)
    for (int i = 0; i < n; i++, p += 4) {
        uint8_t b0 = p[0], b1 = p[1], b2 = p[2], b3 = p[3];
        p[0] = b3;
        p[1] = b2;
        p[2] = b1;
        p[3] = b0;
    }
}
