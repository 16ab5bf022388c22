/* memreverse reference: dest[i] = src[n - 1 - i]. */
#include <stdint.h>

void rb_memreverse(int n, uint8_t *dest, const uint8_t *src) {
    for (int i = 0; i < n; i++) dest[i] = src[n - 1 - i];
}
