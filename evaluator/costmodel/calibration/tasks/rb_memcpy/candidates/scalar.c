/* memcpy, one byte per iteration. rvv-bench keeps its scalar loops scalar with an empty asm barrier, which
 * EoK's candidate rules refuse; the loop pragma does the same here (no vectorising, no unrolling). */
#include <stdint.h>

void rb_memcpy(int n, uint8_t *dest, const uint8_t *src) {
    #pragma clang loop vectorize(disable) interleave(disable) unroll(disable)
    for (int i = 0; i < n; i++) {
        dest[i] = src[i];
    }
}
