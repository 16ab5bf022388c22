#include <stddef.h>

/* y = alpha*A*x + beta*y with A column-major (element (i, j) at a[i + j*m]).
   Column-at-a-time (axpy) order: the natural order for the non-transposed column-major case. */
void sgemv_n(int m, int n, float alpha, const float *a, const float *x, float beta, float *y)
{
    for (int i = 0; i < m; i++)
        y[i] = (beta == 0.0f) ? 0.0f : beta * y[i];
    for (int j = 0; j < n; j++) {
        float t = alpha * x[j];
        const float *col = a + (size_t)j * (size_t)m;
        for (int i = 0; i < m; i++)
            y[i] += t * col[i];
    }
}
