/* Byte order of every 32-bit word reversed in place, four byte loads and four byte stores per word. */
#include <stdint.h>

void rb_byteswap32(int n, uint32_t *ptr) {
    uint8_t *p = (uint8_t *)ptr;
    for (int i = 0; i < n; i++, p += 4) {
        uint8_t b0 = p[0], b1 = p[1], b2 = p[2], b3 = p[3];
        p[0] = b3;
        __asm__ volatile("" ::: "memory");
        p[1] = b2;
        __asm__ volatile("" ::: "memory");
        p[2] = b1;
        __asm__ volatile("" ::: "memory");
        p[3] = b0;
        __asm__ volatile("" ::: "memory");
    }
}
