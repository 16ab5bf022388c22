#include <math.h>
#include <stddef.h>

/* snrm2_blas: every float's square is an ordinary double, so a double sum of squares neither overflows
   nor underflows for float inputs (the accurate answer; see snrm2/reference.c). The order of the
   elements does not change the result, only which elements a negative increment reaches. */
float snrm2_blas(int n, const float *x, int incx)
{
    if (n <= 0)
        return 0.0f;
    ptrdiff_t step = incx < 0 ? -(ptrdiff_t)incx : incx;
    double acc = 0.0;
    for (int i = 0; i < n; i++) {
        double v = x[(ptrdiff_t)i * step];
        acc += v * v;
    }
    return (float)sqrt(acc);
}
