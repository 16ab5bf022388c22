/* utf8_count reference: bytes that are not UTF-8 continuation bytes (10xxxxxx). */
#include <stddef.h>
#include <stdint.h>

size_t rb_utf8_count(int n, const uint8_t *str) {
    size_t count = 0;
    for (int i = 0; i < n; i++) count += (str[i] & 0xc0) != 0x80;
    return count;
}
