/* EoK's benchmark of one ggml dot-product kernel: one call between the cost model's markers.
 * Built by evaluator/upstream/library_tests.py with -DEOK_Q8_0=1 or -DEOK_Q4_0=1 against the built ggml
 * archives; argv[1] is n, the elements of each vector (a multiple of 32, ggml's block length). The
 * kernels are ggml-cpu's own symbols, declared here as ggml-cpu/quants.h declares them. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

void quantize_row_q8_0(const float *x, void *y, int64_t k);
void quantize_row_q4_0(const float *x, void *y, int64_t k);
void ggml_vec_dot_q8_0_q8_0(int n, float *s, size_t bs, const void *vx, size_t bx, const void *vy, size_t by, int nrc);
void ggml_vec_dot_q4_0_q8_0(int n, float *s, size_t bs, const void *vx, size_t bx, const void *vy, size_t by, int nrc);

__attribute__((noinline)) void eok_region_begin(void) { __asm__ volatile(""); }
__attribute__((noinline)) void eok_region_end(void) { __asm__ volatile(""); }

enum { BLOCK = 32, Q8_0_BYTES = 2 + 32, Q4_0_BYTES = 2 + 16 }; /* ggml-common.h: an fp16 scale + quants */

static float *filled(int n, float scale) {
    float *p = malloc((size_t)n * sizeof *p);
    if (!p) { perror("malloc"); exit(2); }
    for (int i = 0; i < n; i++) p[i] = scale * (float)((i * 7919) % 101) / 101.0f - 0.5f;
    return p;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 4096;
    if (n <= 0 || n % BLOCK) { fprintf(stderr, "usage: %s N (a positive multiple of 32)\n", argv[0]); return 2; }
    float *x = filled(n, 1.0f), *y = filled(n, 0.5f), s = 0.0f;
    void *qy = malloc((size_t)n / BLOCK * Q8_0_BYTES);
#if defined(EOK_Q8_0)
    void *qx = malloc((size_t)n / BLOCK * Q8_0_BYTES);
    quantize_row_q8_0(x, qx, n);
#define DOT ggml_vec_dot_q8_0_q8_0
#elif defined(EOK_Q4_0)
    void *qx = malloc((size_t)n / BLOCK * Q4_0_BYTES);
    quantize_row_q4_0(x, qx, n);
#define DOT ggml_vec_dot_q4_0_q8_0
#else
#error "define EOK_Q8_0 or EOK_Q4_0"
#endif
    quantize_row_q8_0(y, qy, n);
    DOT(n, &s, 0, qx, 0, qy, 0, 1);
    eok_region_begin();
    DOT(n, &s, 0, qx, 0, qy, 0, 1);
    eok_region_end();
    printf("%g\n", (double)s);
    return 0;
}
