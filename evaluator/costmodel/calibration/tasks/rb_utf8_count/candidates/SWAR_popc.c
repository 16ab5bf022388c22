/* Characters in UTF-8 text, eight bytes per step: a byte starts a character when its top bit is clear or its
 * second bit is set; those flags are gathered into one bit per byte and counted with cpop (Zbb). */
#include <stddef.h>
#include <stdint.h>

static size_t starts(const uint8_t *p, size_t n) {
    size_t count = 0;
    #pragma clang loop vectorize(disable) interleave(disable) unroll(disable)
    for (size_t i = 0; i < n; i++) count += (p[i] & 0xc0) != 0x80;
    return count;
}

size_t rb_utf8_count(int n, const uint8_t *str) {
    size_t len = (size_t)n, head = (8 - (uintptr_t)str % 8) % 8;
    if (head > len) head = len;
    size_t count = starts(str, head);
    const uint64_t *w = (const uint64_t *)(str + head);
    size_t words = (len - head) / 8;
    #pragma clang loop vectorize(disable) interleave(disable) unroll(disable)
    for (size_t i = 0; i < words; i++) {
        uint64_t x = w[i];
        count += (size_t)__builtin_popcountll(((~x & 0x8080808080808080ull) >> 1) | (x & 0x4040404040404040ull));
    }
    return count + starts((const uint8_t *)(w + words), (len - head) % 8);
}
