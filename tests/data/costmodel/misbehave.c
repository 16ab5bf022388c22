/* Harnesses that break the marker contract, for the cost model's error paths:
 * MODE=0 never calls the markers, MODE=1 exits inside the region, MODE=2 spins inside the region,
 * MODE=3 runs a long region (for log-size limits). */
#include <stdio.h>
#include <stdlib.h>

#include "eok_markers.h"

#ifndef MODE
#define MODE 0
#endif

__attribute__((noinline)) long busy(long n) {
  volatile long s = 0;
  for (long i = 0; i < n; i++) s += i;
  return s;
}

int main(int argc, char **argv) {
  (void)argv;
#if MODE == 0
  printf("%ld\n", busy(100));
#elif MODE == 1
  eok_region_begin();
  if (argc > 0) exit(busy(10) == 45 ? 3 : 4);
  eok_region_end();
#elif MODE == 2
  eok_region_begin();
  while (argc > 0) busy(1000);
  eok_region_end();
#else
  eok_region_begin();
  printf("%ld\n", busy(2000000));
  eok_region_end();
#endif
  return 0;
}
