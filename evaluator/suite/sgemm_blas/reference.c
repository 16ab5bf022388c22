#include <stddef.h>

/* sgemm_blas: the reference BLAS's sgemm in plain C, column-major (X(i, j) is x[i + j*ldx]), with its quick
   returns and its loop order per case, so the plain and competent builds vectorize what the reference
   BLAS's Fortran would: an axpy down a column of A where op(A) = A, a contiguous dot where op(A) = A^T.
   transa/transb: 'T' (84) transposes, 'N' (78) does not. */
#define A(i, j) a[(i) + (ptrdiff_t)(j) * lda]
#define B(i, j) b[(i) + (ptrdiff_t)(j) * ldb]
#define C(i, j) c[(i) + (ptrdiff_t)(j) * ldc]

void sgemm_blas(int transa, int transb, int m, int n, int k, float alpha, const float *a, int lda,
                const float *b, int ldb, float beta, float *c, int ldc)
{
    if (m <= 0 || n <= 0 || ((alpha == 0.0f || k <= 0) && beta == 1.0f))
        return;
    int ta = transa == 'T', tb = transb == 'T';
    for (int j = 0; j < n; j++) {
        if (alpha == 0.0f || !ta) { /* C := beta*C first; beta == 0: C is not read */
            for (int i = 0; i < m; i++)
                C(i, j) = beta == 0.0f ? 0.0f : beta * C(i, j);
        }
        if (alpha == 0.0f)
            continue;
        if (!ta) { /* C(:, j) += alpha*op(B)(l, j) * A(:, l) */
            for (int l = 0; l < k; l++) {
                float temp = alpha * (tb ? B(j, l) : B(l, j));
                for (int i = 0; i < m; i++)
                    C(i, j) += temp * A(i, l);
            }
        } else { /* C(i, j) = alpha * A(:, i) . op(B)(:, j) + beta*C(i, j) */
            for (int i = 0; i < m; i++) {
                float temp = 0.0f;
                for (int l = 0; l < k; l++)
                    temp += A(l, i) * (tb ? B(j, l) : B(l, j));
                C(i, j) = alpha * temp + (beta == 0.0f ? 0.0f : beta * C(i, j));
            }
        }
    }
}
