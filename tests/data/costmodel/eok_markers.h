/* The two region markers the EoK harness puts around the one timed kernel call. */
#ifndef EOK_MARKERS_H
#define EOK_MARKERS_H
__attribute__((noinline)) void eok_region_begin(void) { __asm__ volatile(""); }
__attribute__((noinline)) void eok_region_end(void) { __asm__ volatile(""); }
#endif
