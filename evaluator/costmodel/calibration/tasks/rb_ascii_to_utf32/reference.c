/* ascii_to_utf32 reference: each byte zero-extended to 32 bits. */
#include <stdint.h>

void rb_ascii_to_utf32(int n, uint32_t *dest, const uint8_t *src) {
    for (int i = 0; i < n; i++) dest[i] = src[i];
}
