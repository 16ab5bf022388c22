#include <stdint.h>

/* Byte histogram. hist is an output (the harness poisons it), so it is cleared first. Conflicting
   updates to the same bin are what makes this hard to vectorize. */
void histogram(int n, const uint8_t *x, int32_t *hist)
{
    for (int b = 0; b < 256; b++)
        hist[b] = 0;
    for (int i = 0; i < n; i++)
        hist[x[i]]++;
}
