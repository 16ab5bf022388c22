/* The fidelity bench's driver: one call of a calibration candidate between the cost model's markers, on the
 * inputs rvv-bench gives it (docs/COSTMODEL.md, "Fidelity against published silicon").
 *
 *   driver N    runs the candidate once on a fresh buffer of size N (the benchmark's n), checks it against
 *               the task's reference.c and exits 0 (prints "ok") or 1 (prints the first difference).
 *
 *   driver N R  (built with -DEOK_TIMED, for `eok calibrate` on a board) runs it R times, each on fresh
 *               inputs, timing each call alone with rdcycle (and clock_gettime, for kernels that forbid
 *               user rdcycle), checks the last one and prints "ok cycles=<median> ns=<median>" (cycles=-1
 *               when rdcycle traps).
 *
 * Built with -DRB_<KERNEL> (one of the sections below), -DREFERENCE="path/reference.c" and the candidate
 * file. Buffers are 4 KiB aligned and their inputs are written just before the call, as rvv-bench's
 * bench_memrand does before it reads the cycle counter; the cost model replays the region's accesses
 * twice and prices the second pass, the steady state of a repeated call (docs/COSTMODEL.md, "Memory").
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

__attribute__((noinline)) void eok_region_begin(void) { __asm__ volatile(""); }
__attribute__((noinline)) void eok_region_end(void) { __asm__ volatile(""); }

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next(void) { /* xorshift64*: fixed inputs, no libc rand */
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return rng * 0x2545f4914f6cdd1dull;
}

static void *buffer(size_t bytes) {
    void *p = aligned_alloc(4096, (bytes + 64 + 4095) / 4096 * 4096);
    if (p == NULL) {
        fprintf(stderr, "out of memory for %zu bytes\n", bytes);
        exit(2);
    }
    return p;
}

/* Eight bytes per step and memcmp below: qemu logs every block the process runs, the driver's own work too, so
 * the set-up and the check are kept short. */
static void random_bytes(void *p, size_t n, uint8_t mask) {
    uint64_t spread = 0x0101010101010101ull * mask, word;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        word = next() & spread;
        memcpy((uint8_t *)p + i, &word, 8);
    }
    for (; i < n; i++) ((uint8_t *)p)[i] = (uint8_t)next() & mask;
}

static int same(const void *got, const void *want, size_t bytes) {
    const uint8_t *g = got, *w = want;
    if (memcmp(got, want, bytes) == 0) return 1;
    for (size_t i = 0; i < bytes; i++)
        if (g[i] != w[i]) {
            printf("differs at byte %zu: %u, expected %u\n", i, g[i], w[i]);
            return 0;
        }
    return 1;
}

#ifndef EOK_TIMED
#define BEGIN eok_region_begin();
#define END eok_region_end();
#else
#include <setjmp.h>
#include <signal.h>
#include <time.h>

static int have_rdcycle = 1;
static sigjmp_buf probe_jump;
static uint64_t t_cycles, t_ns, got_cycles, got_ns;

static uint64_t rdcycle(void) {
    uint64_t c;
    __asm__ volatile("rdcycle %0" : "=r"(c));
    return c;
}

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static void on_sigill(int sig) {
    (void)sig;
    siglongjmp(probe_jump, 1);
}

static void probe_rdcycle(void) { /* Linux >= 6.6 may forbid user rdcycle (perf_user_access): SIGILL */
    struct sigaction sa = {0}, old;
    sa.sa_handler = on_sigill;
    sigaction(SIGILL, &sa, &old);
    if (sigsetjmp(probe_jump, 1) == 0) (void)rdcycle();
    else have_rdcycle = 0;
    sigaction(SIGILL, &old, NULL);
}

#define BEGIN t_ns = now_ns(); t_cycles = have_rdcycle ? rdcycle() : 0;
#define END got_cycles = have_rdcycle ? rdcycle() - t_cycles : 0; got_ns = now_ns() - t_ns;
#endif

#if defined(RB_MEMCPY)
#define rb_memcpy ref_rb_memcpy
#include REFERENCE
#undef rb_memcpy
void rb_memcpy(int n, uint8_t *dest, const uint8_t *src);
static int run(int n) {
    uint8_t *src = buffer(n), *dest = buffer(n), *want = buffer(n);
    random_bytes(src, n, 0xff);
    memset(dest, 0, n);
    ref_rb_memcpy(n, want, src);
    BEGIN rb_memcpy(n, dest, src); END
    return same(dest, want, n);
}
#elif defined(RB_MEMSET)
#define rb_memset ref_rb_memset
#include REFERENCE
#undef rb_memset
void rb_memset(int n, uint8_t *dest, int c);
static int run(int n) {
    uint8_t *dest = buffer(n), *want = buffer(n);
    int c = (int)(next() & 0xff);
    memset(dest, c + 3, n);
    ref_rb_memset(n, want, c);
    BEGIN rb_memset(n, dest, c); END
    return same(dest, want, n);
}
#elif defined(RB_UTF8_COUNT)
#define rb_utf8_count ref_rb_utf8_count
#include REFERENCE
#undef rb_utf8_count
size_t rb_utf8_count(int n, const uint8_t *str);
static int run(int n) {
    uint8_t *str = buffer(n);
    random_bytes(str, n, 0xff);
    size_t want = ref_rb_utf8_count(n, str), got;
    BEGIN got = rb_utf8_count(n, str); END
    if (got != want) printf("count %zu, expected %zu\n", got, want);
    return got == want;
}
#elif defined(RB_BYTESWAP32)
#define rb_byteswap32 ref_rb_byteswap32
#include REFERENCE
#undef rb_byteswap32
void rb_byteswap32(int n, uint32_t *ptr);
static int run(int n) {
    uint32_t *ptr = buffer(4 * (size_t)n), *want = buffer(4 * (size_t)n);
    random_bytes(ptr, 4 * (size_t)n, 0xff);
    memcpy(want, ptr, 4 * (size_t)n);
    ref_rb_byteswap32(n, want);
    BEGIN rb_byteswap32(n, ptr); END
    return same(ptr, want, 4 * (size_t)n);
}
#elif defined(RB_LUT4)
#define rb_lut4 ref_rb_lut4
#include REFERENCE
#undef rb_lut4
void rb_lut4(int n, const uint8_t *lut, uint8_t *ptr);
static int run(int n) {
    uint8_t *lut = buffer(16), *ptr = buffer(n), *want = buffer(n);
    random_bytes(lut, 16, 0xff);
    random_bytes(ptr, n, 0xff);
    memcpy(want, ptr, n);
    ref_rb_lut4(n, lut, want);
    BEGIN rb_lut4(n, lut, ptr); END
    return same(ptr, want, n);
}
#elif defined(RB_LUT6)
#define rb_lut6 ref_rb_lut6
#include REFERENCE
#undef rb_lut6
void rb_lut6(int n, const uint8_t *lut, uint8_t *ptr);
static int run(int n) {
    uint8_t *lut = buffer(64), *ptr = buffer(n), *want = buffer(n);
    random_bytes(lut, 64, 0xff);
    random_bytes(ptr, n, 0xff);
    memcpy(want, ptr, n);
    ref_rb_lut6(n, lut, want);
    BEGIN rb_lut6(n, lut, ptr); END
    return same(ptr, want, n);
}
#elif defined(RB_ASCII_TO_UTF16)
#define rb_ascii_to_utf16 ref_rb_ascii_to_utf16
#include REFERENCE
#undef rb_ascii_to_utf16
void rb_ascii_to_utf16(int n, uint16_t *dest, const uint8_t *src);
static int run(int n) {
    uint8_t *src = buffer(n);
    uint16_t *dest = buffer(2 * (size_t)n), *want = buffer(2 * (size_t)n);
    random_bytes(src, n, 0x7f);
    memset(dest, 1, 2 * (size_t)n);
    ref_rb_ascii_to_utf16(n, want, src);
    BEGIN rb_ascii_to_utf16(n, dest, src); END
    return same(dest, want, 2 * (size_t)n);
}
#elif defined(RB_ASCII_TO_UTF32)
#define rb_ascii_to_utf32 ref_rb_ascii_to_utf32
#include REFERENCE
#undef rb_ascii_to_utf32
void rb_ascii_to_utf32(int n, uint32_t *dest, const uint8_t *src);
static int run(int n) {
    uint8_t *src = buffer(n);
    uint32_t *dest = buffer(4 * (size_t)n), *want = buffer(4 * (size_t)n);
    random_bytes(src, n, 0x7f);
    memset(dest, 1, 4 * (size_t)n);
    ref_rb_ascii_to_utf32(n, want, src);
    BEGIN rb_ascii_to_utf32(n, dest, src); END
    return same(dest, want, 4 * (size_t)n);
}
#elif defined(RB_MEMREVERSE)
#define rb_memreverse ref_rb_memreverse
#include REFERENCE
#undef rb_memreverse
void rb_memreverse(int n, uint8_t *dest, const uint8_t *src);
static int run(int n) {
    uint8_t *src = buffer(n), *dest = buffer(n), *want = buffer(n);
    random_bytes(src, n, 0xff);
    memset(dest, 0, n);
    ref_rb_memreverse(n, want, src);
    BEGIN rb_memreverse(n, dest, src); END
    return same(dest, want, n);
}
#elif defined(RB_MANDELBROT)
#define rb_mandelbrot ref_rb_mandelbrot
#include REFERENCE
#undef rb_mandelbrot
void rb_mandelbrot(int width, int max_iter, uint32_t *res);
static int run(int n) {
    int width = 0; /* rvv-bench: width = isqrt(n) */
    while ((width + 1) * (width + 1) <= n) width++;
    size_t bytes = 4 * (size_t)width * (size_t)width;
    uint32_t *res = buffer(bytes), *want = buffer(bytes);
    ref_rb_mandelbrot(width, 100, want);
    BEGIN rb_mandelbrot(width, 100, res); END
    return same(res, want, bytes);
}
#else
#error "build with -DRB_<KERNEL>"
#endif

#ifndef EOK_TIMED
int main(int argc, char **argv) {
    long n = argc == 2 ? strtol(argv[1], NULL, 10) : -1;
    if (n < 0 || n > (1L << 28)) {
        fprintf(stderr, "usage: driver N (0 <= N <= 2^28)\n");
        return 2;
    }
    if (!run((int)n)) return 1;
    printf("ok\n");
    return 0;
}
#else
static int by_value(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    long n = argc == 3 ? strtol(argv[1], NULL, 10) : -1, r = argc == 3 ? strtol(argv[2], NULL, 10) : 0;
    if (n < 0 || n > (1L << 28) || r < 1 || r > 99) {
        fprintf(stderr, "usage: driver N R (0 <= N <= 2^28, 1 <= R <= 99)\n");
        return 2;
    }
    probe_rdcycle();
    uint64_t cycles[99], ns[99];
    for (long i = 0; i < r; i++) { /* every repeat on fresh inputs, like rvv-bench; the last one is checked */
        int good = run((int)n);
        if (i == r - 1 && !good) return 1;
        cycles[i] = got_cycles;
        ns[i] = got_ns;
    }
    qsort(cycles, (size_t)r, sizeof cycles[0], by_value);
    qsort(ns, (size_t)r, sizeof ns[0], by_value);
    printf("ok cycles=%lld ns=%llu\n", have_rdcycle ? (long long)cycles[r / 2] : -1LL, (unsigned long long)ns[r / 2]);
    return 0;
}
#endif
