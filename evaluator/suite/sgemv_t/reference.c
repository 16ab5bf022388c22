#include <stddef.h>

/* y = alpha*A^T*x + beta*y with A column-major (element (i, j) at a[i + j*m]).
   Each output is a dot product of one contiguous column with x. */
void sgemv_t(int m, int n, float alpha, const float *a, const float *x, float beta, float *y)
{
    for (int j = 0; j < n; j++) {
        const float *col = a + (size_t)j * (size_t)m;
        float acc = 0.0f;
        for (int i = 0; i < m; i++)
            acc += col[i] * x[i];
        float prev = (beta == 0.0f) ? 0.0f : beta * y[j];
        y[j] = alpha * acc + prev;
    }
}
