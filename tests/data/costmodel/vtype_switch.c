/* One TB (vadd_chain) reached under different vtypes: it has no vsetvli of its own, so its cost depends on
 * the vtype its callers set. PHASES: 1 = e32 m1 only, 8 = e32 m8 only, 9 = both. */
#include <stdio.h>

#include "eok_markers.h"

#ifndef CALLS
#define CALLS 200
#endif
#ifndef PHASES
#define PHASES 9
#endif

#define V8_GROUP "v8", "v9", "v10", "v11", "v12", "v13", "v14", "v15"

__attribute__((noinline)) void vadd_chain(void) {
  __asm__ volatile("vadd.vv v8, v8, v8\nvadd.vv v8, v8, v8\nvadd.vv v8, v8, v8\nvadd.vv v8, v8, v8\n" ::
                       : V8_GROUP);
}

__attribute__((noinline)) void run(long calls) {
#if PHASES & 1
  for (long i = 0; i < calls; i++) {
    __asm__ volatile("vsetvli zero, %0, e32, m1, ta, ma" ::"r"(i + 1));
    vadd_chain();
  }
#endif
#if PHASES & 8
  for (long i = 0; i < calls; i++) {
    __asm__ volatile("vsetvli zero, %0, e32, m8, ta, ma" ::"r"(i + 1));
    vadd_chain();
  }
#endif
}

int main(void) {
  __asm__ volatile("vsetvli zero, zero, e32, m1, ta, ma\nvmv.v.i v8, 0" ::: V8_GROUP);
  eok_region_begin();
  run(CALLS);
  eok_region_end();
  puts("done");
  return 0;
}
