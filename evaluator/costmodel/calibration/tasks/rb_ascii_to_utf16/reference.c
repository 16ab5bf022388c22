/* ascii_to_utf16 reference: each byte zero-extended to 16 bits. */
#include <stdint.h>

void rb_ascii_to_utf16(int n, uint16_t *dest, const uint8_t *src) {
    for (int i = 0; i < n; i++) dest[i] = src[i];
}
