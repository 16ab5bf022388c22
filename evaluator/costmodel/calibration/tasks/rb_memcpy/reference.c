/* memcpy reference: dest[i] = src[i]. */
#include <stdint.h>

void rb_memcpy(int n, uint8_t *dest, const uint8_t *src) {
    for (int i = 0; i < n; i++) dest[i] = src[i];
}
