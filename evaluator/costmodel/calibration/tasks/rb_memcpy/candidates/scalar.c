/* memcpy, one byte per iteration; the empty asm keeps the compiler from vectorising or widening the loop. */
#include <stdint.h>

void rb_memcpy(int n, uint8_t *dest, const uint8_t *src) {
    for (int i = 0; i < n; i++) {
        dest[i] = src[i];
        __asm__ volatile("" ::: "memory");
    }
}
