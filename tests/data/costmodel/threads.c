/* A region that starts a second thread: the model prices one core and must refuse it. */
#include <pthread.h>
#include <stdio.h>

#include "eok_markers.h"

static void *work(void *arg) {
  volatile long s = 0;
  for (long i = 0; i < 20000; i++) s += i;
  return arg;
}

int main(void) {
  pthread_t t;
  eok_region_begin();
  pthread_create(&t, NULL, work, NULL);
  work(NULL);
  pthread_join(t, NULL);
  eok_region_end();
  puts("done");
  return 0;
}
