/* ASCII to UTF-16: each byte zero-extended to 16 bits, one per iteration behind a compiler barrier. */
#include <stdint.h>

void rb_ascii_to_utf16(int n, uint16_t *dest, const uint8_t *src) {
    for (int i = 0; i < n; i++) {
        __asm__ volatile("" ::: "memory");
        dest[i] = src[i];
    }
}
