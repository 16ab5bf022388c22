/* memset reference: dest[i] = c. */
#include <stdint.h>

void rb_memset(int n, uint8_t *dest, int c) {
    for (int i = 0; i < n; i++) dest[i] = (uint8_t)c;
}
