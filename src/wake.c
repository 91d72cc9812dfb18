/*
 * wake.c - what it costs to wake a thread that sleeps on a futex, measured
 * once per process; BATON_SPIN_US's default is derived from it.
 *
 * A waiter that spins for less time than a wake-up costs can fall into a
 * trap with its peer: each goes to sleep just before the other's word
 * arrives, so every call pays two wake-ups (about 170 us a call instead of
 * 0.3 on the machines this was found on, for whole runs). Spinning for a
 * little longer than a wake-up takes breaks it, and costs at most twice
 * what sleeping at once would (the classic bound for spin-then-block).
 * What a wake-up costs differs between machines (a hypervisor's idle vCPU
 * costs tens of microseconds where bare metal costs a few), so it is
 * measured: two threads of this process hand a futex word back and forth
 * without spinning, and the 90th percentile of a handoff is the cost.
 */
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"

#define HANDOFFS 64

static _Atomic uint32_t word;
static double handoff_s[HANDOFFS];

/* Sleeps until word == want (no spinning: a sleep is what is measured). */
static void await(uint32_t want) {
  for (uint32_t v; (v = atomic_load(&word)) != want;)
    syscall(SYS_futex, &word, FUTEX_WAIT_PRIVATE, v, NULL, NULL, 0);
}

static void pass(uint32_t v) {
  atomic_store(&word, v);
  syscall(SYS_futex, &word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

static void *echo(void *arg) {
  (void)arg;
  for (uint32_t i = 0; i < HANDOFFS; i++) {
    await(2 * i + 1);
    pass(2 * i + 2);
  }
  return NULL;
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double cost_s;

static void measure(void) {
  cpu_set_t cpus;
  pthread_t t;
  /* On one core a sleeping waiter is what lets its peer run: nothing to
   * measure, and nothing to gain from spinning. */
  if (sched_getaffinity(0, sizeof cpus, &cpus) != 0 || CPU_COUNT(&cpus) < 2 ||
      pthread_create(&t, NULL, echo, NULL) != 0)
    return;
  for (uint32_t i = 0; i < HANDOFFS; i++) {
    double start = baton__now();
    pass(2 * i + 1);
    await(2 * i + 2);
    handoff_s[i] = (baton__now() - start) / 2; /* a round trip is two handoffs */
  }
  pthread_join(t, NULL);
  qsort(handoff_s, HANDOFFS, sizeof *handoff_s, by_value);
  cost_s = handoff_s[HANDOFFS * 9 / 10];
}

double baton__wake_cost_s(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, measure);
  return cost_s;
}
