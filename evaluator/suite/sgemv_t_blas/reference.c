#include <stddef.h>

/* sgemv_t_blas: the reference BLAS's sgemv for trans = 'T' in plain C, quick returns included. */
void sgemv_t_blas(int m, int n, float alpha, const float *a, int lda, const float *x, int incx, float beta,
                  float *y, int incy)
{
    if (m <= 0 || n <= 0 || (alpha == 0.0f && beta == 1.0f))
        return;
    ptrdiff_t kx = incx < 0 ? (ptrdiff_t)(1 - m) * incx : 0;
    ptrdiff_t ky = incy < 0 ? (ptrdiff_t)(1 - n) * incy : 0;
    if (beta != 1.0f) {
        ptrdiff_t iy = ky;
        for (int j = 0; j < n; j++, iy += incy)
            y[iy] = beta == 0.0f ? 0.0f : beta * y[iy]; /* beta == 0: y is not read */
    }
    if (alpha == 0.0f)
        return;
    ptrdiff_t jy = ky;
    for (int j = 0; j < n; j++, jy += incy) {
        const float *col = a + (ptrdiff_t)j * lda;
        float temp = 0.0f;
        ptrdiff_t ix = kx;
        for (int i = 0; i < m; i++, ix += incx)
            temp += col[i] * x[ix];
        y[jy] += alpha * temp;
    }
}
