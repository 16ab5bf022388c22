/* Characters in UTF-8 text: bytes that are not continuation bytes (10xxxxxx), one byte per iteration. */
#include <stddef.h>
#include <stdint.h>

size_t rb_utf8_count(int n, const uint8_t *str) {
    size_t count = 0;
    #pragma clang loop vectorize(disable) interleave(disable) unroll(disable)
    for (int i = 0; i < n; i++) {
        count += (str[i] & 0xc0) != 0x80;
    }
    return count;
}
