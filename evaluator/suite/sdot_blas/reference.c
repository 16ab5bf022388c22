#include <stddef.h>

/* sdot_blas: the reference BLAS's semantics in plain C. n <= 0 gives 0; a negative increment starts at
   the far end, so element i is x[(i - (n - 1)) * incx] = x[(n - 1 - i) * |incx|]. */
float sdot_blas(int n, const float *x, int incx, const float *y, int incy)
{
    if (n <= 0)
        return 0.0f;
    ptrdiff_t ix = incx < 0 ? (ptrdiff_t)(1 - n) * incx : 0;
    ptrdiff_t iy = incy < 0 ? (ptrdiff_t)(1 - n) * incy : 0;
    float sum = 0.0f;
    for (int i = 0; i < n; i++) {
        sum += x[ix] * y[iy];
        ix += incx;
        iy += incy;
    }
    return sum;
}
