/* The loop shape pigirons/cpufp measures on the X60 (33.4 GFLOPS f32 per core): vsetvli at the top of each
 * iteration, a long run of independent vfmacc.vf e32 m1, a counter decrement and a branch. Written as inline
 * asm so the instruction stream is fixed; ASM_ACC independent accumulators (v8 upwards). */
#include <stdio.h>

#include "eok_markers.h"

#ifndef ITERS
#define ITERS 500
#endif

#define F(r) "vfmacc.vf v" #r ", fa0, v1\n"

__attribute__((noinline)) void fma_asm(long iters, float s) {
  __asm__ volatile(
      "1:\n"
      "vsetvli t0, zero, e32, m1, tu, mu\n"
      F(8) F(9) F(10) F(11) F(12) F(13) F(14) F(15) F(16) F(17) F(18) F(19)
      F(20) F(21) F(22) F(23) F(24) F(25) F(26) F(27) F(28) F(29) F(30) F(31)
      "addi %0, %0, -1\n"
      "bnez %0, 1b\n"
      : "+r"(iters)
      : "f"(s)
      : "t0", "v1", "v8", "v9", "v10", "v11", "v12", "v13", "v14", "v15", "v16", "v17", "v18", "v19", "v20",
        "v21", "v22", "v23", "v24", "v25", "v26", "v27", "v28", "v29", "v30", "v31", "memory");
}

int main(int argc, char **argv) {
  (void)argv;
  eok_region_begin();
  fma_asm(ITERS, (float)argc);
  eok_region_end();
  puts("done");
  return 0;
}
