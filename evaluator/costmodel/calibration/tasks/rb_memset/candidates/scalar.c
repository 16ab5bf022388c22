/* memset, one byte store per iteration. volatile keeps clang from turning the loop into a call to memset,
 * the pragma from vectorising or unrolling it (rvv-bench uses an empty asm barrier, which EoK's candidate
 * rules refuse). */
#include <stdint.h>

void rb_memset(int n, uint8_t *dest, int c) {
    volatile uint8_t *d = dest;
    #pragma clang loop vectorize(disable) interleave(disable) unroll(disable)
    for (int i = 0; i < n; i++) {
        d[i] = (uint8_t)c;
    }
}
