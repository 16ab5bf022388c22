#include <stdint.h>

/* sgemm_kernel_blas: OpenBLAS's single-precision GEMM micro-kernel contract (SGEMMKERNEL) for
   RISCV64_ZVL256B, whose param.h sets SGEMM_DEFAULT_UNROLL_M 16 and SGEMM_DEFAULT_UNROLL_N 8.
   Written from the contract, in plain C:

   ba: bm rows of A, packed by rows in blocks of UNROLL_M rows, then the remaining rows in blocks of the
       powers of two they are made of, largest first (31 rows: 16, 8, 4, 2, 1). A block of mr rows that
       starts at row i0 starts at ba + i0*bk and holds, for k = 0 .. bk-1, its mr values of column k.
   bb: bn columns of B, packed the same way in blocks of UNROLL_N columns (then 4, 2, 1): a block of nr
       columns that starts at column j0 starts at bb + j0*bk and holds, for each k, its nr values of row k.
   c:  column-major, C(i, j) is c[i + j*ldc]; C += alpha * A*B. No beta: OpenBLAS's driver applies it first.
   bm, bn or bk = 0: C unchanged, and ba and bb are not read. */
#define UNROLL_M 16
#define UNROLL_N 8

/* Rows (or columns) in the block that starts `at` of `total`: a full block while one fits, then the
   largest power of two that fits in what is left. */
static int64_t block(int64_t at, int64_t total, int64_t unroll)
{
    int64_t left = total - at, width = unroll;
    while (width > left)
        width /= 2;
    return width;
}

void sgemm_kernel_blas(int64_t bm, int64_t bn, int64_t bk, float alpha, const float *ba, const float *bb, float *c,
                       int64_t ldc)
{
    if (bk <= 0)
        return;
    for (int64_t j0 = 0, nr = 0; j0 < bn; j0 += nr) {
        nr = block(j0, bn, UNROLL_N);
        const float *b = bb + j0 * bk;
        for (int64_t i0 = 0, mr = 0; i0 < bm; i0 += mr) {
            mr = block(i0, bm, UNROLL_M);
            const float *a = ba + i0 * bk;
            float acc[UNROLL_M * UNROLL_N] = {0}; /* acc[i + j*mr]: the block's A*B */
            for (int64_t k = 0; k < bk; k++)
                for (int64_t j = 0; j < nr; j++) {
                    float bkj = b[k * nr + j];
                    for (int64_t i = 0; i < mr; i++)
                        acc[i + j * mr] += a[k * mr + i] * bkj;
                }
            for (int64_t j = 0; j < nr; j++)
                for (int64_t i = 0; i < mr; i++)
                    c[(i0 + i) + (j0 + j) * ldc] += alpha * acc[i + j * mr];
        }
    }
}
