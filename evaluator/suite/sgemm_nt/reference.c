#include <stddef.h>

/* C = alpha*A*B^T + beta*C. A (m x k) and B (n x k) are row-major, so both operands of every
   dot product are contiguous in memory: the layout of Y = X*W^T in a fully connected layer. */
void sgemm_nt(int m, int n, int k, float alpha, const float *a, const float *b, float beta, float *c)
{
    for (int i = 0; i < m; i++) {
        const float *ai = a + (size_t)i * (size_t)k;
        for (int j = 0; j < n; j++) {
            const float *bj = b + (size_t)j * (size_t)k;
            float acc = 0.0f;
            for (int p = 0; p < k; p++)
                acc += ai[p] * bj[p];
            float *cij = c + (size_t)i * (size_t)n + (size_t)j;
            float prev = (beta == 0.0f) ? 0.0f : beta * *cij;
            *cij = alpha * acc + prev;
        }
    }
}
