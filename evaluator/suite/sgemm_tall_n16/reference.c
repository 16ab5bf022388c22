#include <stddef.h>

/* C = alpha*A*B + beta*C, all row-major with leading dimensions k (A), n (B) and n (C).
   i-p-j order: the inner loop is an axpy over a contiguous row of B into a contiguous row of C. */
void sgemm_tall_n16(int m, int n, int k, float alpha, const float *a, const float *b, float beta, float *c)
{
    for (int i = 0; i < m; i++) {
        float *ci = c + (size_t)i * (size_t)n;
        for (int j = 0; j < n; j++)
            ci[j] = (beta == 0.0f) ? 0.0f : beta * ci[j];
        for (int p = 0; p < k; p++) {
            float t = alpha * a[(size_t)i * (size_t)k + (size_t)p];
            const float *bp = b + (size_t)p * (size_t)n;
            for (int j = 0; j < n; j++)
                ci[j] += t * bp[j];
        }
    }
}
