#include <stdint.h>

/* Inclusive scan: a loop-carried dependence that the vector kernel has to break with an in-register
   scan (log2(VL) shifted adds) plus a carried running total. */
void prefix_scan(int n, const int32_t *x, int32_t *y)
{
    int32_t run = 0;
    for (int i = 0; i < n; i++) {
        run += x[i];
        y[i] = run;
    }
}
