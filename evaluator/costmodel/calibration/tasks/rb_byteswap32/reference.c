/* byteswap32 reference: the byte order of every 32-bit word reversed. */
#include <stdint.h>

void rb_byteswap32(int n, uint32_t *ptr) {
    for (int i = 0; i < n; i++) {
        uint32_t w = ptr[i];
        ptr[i] = (w >> 24) | ((w >> 8) & 0xff00u) | ((w << 8) & 0xff0000u) | (w << 24);
    }
}
