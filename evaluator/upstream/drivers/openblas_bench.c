/* EoK's benchmark of one OpenBLAS routine: one call between the cost model's markers.
 * Built by evaluator/upstream/library_tests.py with -DEOK_<ROUTINE>=1 against the built libopenblas.a;
 * argv[1] is n (vector length, or the order of the square sgemv/sgemm). One call before the region warms
 * the caches the way a library's caller in a loop finds them. */
#include <stdio.h>
#include <stdlib.h>
#include <cblas.h>

__attribute__((noinline)) void eok_region_begin(void) { __asm__ volatile(""); }
__attribute__((noinline)) void eok_region_end(void) { __asm__ volatile(""); }

static float *filled(size_t count, float scale) {
    float *p = malloc(count * sizeof *p);
    if (!p) { perror("malloc"); exit(2); }
    for (size_t i = 0; i < count; i++) p[i] = scale * (float)((i * 7919u) % 101u) / 101.0f - 0.5f;
    return p;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 1024;
    if (n <= 0) { fprintf(stderr, "usage: %s N (N > 0)\n", argv[0]); return 2; }
    volatile float sink = 0.0f;
#if defined(EOK_SDOT)
    float *x = filled(n, 1.0f), *y = filled(n, 0.5f);
    sink = cblas_sdot(n, x, 1, y, 1);
    eok_region_begin();
    sink = cblas_sdot(n, x, 1, y, 1);
    eok_region_end();
#elif defined(EOK_SAXPY)
    float *x = filled(n, 1.0f), *y = filled(n, 0.5f);
    cblas_saxpy(n, 0.75f, x, 1, y, 1);
    eok_region_begin();
    cblas_saxpy(n, 0.75f, x, 1, y, 1);
    eok_region_end();
    sink = y[n - 1];
#elif defined(EOK_SGEMV_T) || defined(EOK_SGEMV_N)
#if defined(EOK_SGEMV_T)
    enum CBLAS_TRANSPOSE trans = CblasTrans;
#else
    enum CBLAS_TRANSPOSE trans = CblasNoTrans;
#endif
    float *a = filled((size_t)n * n, 1.0f), *x = filled(n, 0.5f), *y = filled(n, 0.25f);
    cblas_sgemv(CblasColMajor, trans, n, n, 1.0f, a, n, x, 1, 0.0f, y, 1);
    eok_region_begin();
    cblas_sgemv(CblasColMajor, trans, n, n, 1.0f, a, n, x, 1, 0.0f, y, 1);
    eok_region_end();
    sink = y[n - 1];
#elif defined(EOK_SGEMM)
    float *a = filled((size_t)n * n, 1.0f), *b = filled((size_t)n * n, 0.5f), *c = filled((size_t)n * n, 0.25f);
    cblas_sgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
    eok_region_begin();
    cblas_sgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
    eok_region_end();
    sink = c[(size_t)n * n - 1];
#else
#error "define one of EOK_SDOT, EOK_SAXPY, EOK_SGEMV_T, EOK_SGEMV_N, EOK_SGEMM"
#endif
    printf("%g\n", (double)sink);
    return 0;
}
