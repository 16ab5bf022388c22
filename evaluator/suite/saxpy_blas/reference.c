#include <stddef.h>

/* saxpy_blas: the reference BLAS's semantics in plain C, quick return included (alpha == 0: y is not
   touched, so x's NaN and inf never reach it). */
void saxpy_blas(int n, float alpha, const float *x, int incx, float *y, int incy)
{
    if (n <= 0 || alpha == 0.0f)
        return;
    ptrdiff_t ix = incx < 0 ? (ptrdiff_t)(1 - n) * incx : 0;
    ptrdiff_t iy = incy < 0 ? (ptrdiff_t)(1 - n) * incy : 0;
    for (int i = 0; i < n; i++) {
        y[iy] += alpha * x[ix];
        ix += incx;
        iy += incy;
    }
}
