/*
 * test_abort_signal.c - baton_comm_abort from a signal handler, as baton.h
 * allows: the last rank arms a 300 ms SIGALRM (setitimer) whose handler
 * calls baton_comm_abort while every rank is inside a long run of 4 MiB
 * allreduces.
 *
 *   baton-run -n 2 build/tests/test_abort_signal
 *   BATON_TRANSPORT=tcp baton-run -n 3 build/tests/test_abort_signal
 *
 * The aborting rank's collective must return BATON_EABORTED soon after the
 * signal; every peer's must fail with BATON_EABORTED or BATON_EREMOTE within
 * a few seconds; a later call fails at once, and nothing hangs (the run is
 * capped at 20 s). SIGPIPE keeps its default action, as in a user's
 * program: the sockets that the abort shut must not kill the process. The
 * handler is installed without SA_RESTART, so every wait also meets EINTR.
 * Each rank prints `N passed, M failed`.
 */
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "baton.h"

#define BIG (1 << 20) /* floats: 4 MiB, the ring */
#define ALARM_S 0.3
#define CAP_S 20.0

static int passed, failed, rank;
static baton_comm_t *comm;
static volatile sig_atomic_t fired;
static volatile double fired_at; /* written only by the handler */

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts); /* async-signal-safe */
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void check(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void check(int ok, const char *fmt, ...) {
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  fprintf(stderr, "rank %d: %s %s\n", rank, ok ? "ok  " : "FAIL", line); /* one write per line */
  ok ? passed++ : failed++;
}

static void on_alarm(int sig) {
  (void)sig;
  fired_at = now();
  baton_comm_abort(comm);
  fired = 1;
}

static void arm(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_alarm;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGALRM, &sa, NULL); /* no SA_RESTART */
  struct itimerval it = {.it_value = {0, (suseconds_t)(ALARM_S * 1e6)}};
  setitimer(ITIMER_REAL, &it, NULL);
}

/* Allreduces until one fails or CAP_S passes; returns the failing code. */
static int run_until_failure(float *buf, double *failed_at, int *calls) {
  double start = now();
  int rc = BATON_OK;
  for (*calls = 0; rc == BATON_OK && now() - start < CAP_S; ++*calls)
    rc = baton_allreduce(buf, buf, BIG, BATON_FLOAT32, BATON_SUM, comm);
  *failed_at = now();
  return rc;
}

int main(void) {
  int rc = baton_comm_init(&comm);
  if (rc != BATON_OK) {
    fprintf(stderr, "init: %s: %s\n", baton_err_name(rc), baton_last_init_error());
    return 1;
  }
  rank = baton_comm_rank(comm);
  int aborter = baton_comm_size(comm) - 1;
  float *buf = calloc(BIG, sizeof *buf);
  rc = baton_allreduce(buf, buf, BIG, BATON_FLOAT32, BATON_SUM, comm);
  check(rc == BATON_OK, "allreduce before the signal: %s", baton_err_name(rc));
  if (rank == aborter)
    arm();
  double start = now(), failed_at;
  int calls;
  rc = run_until_failure(buf, &failed_at, &calls);
  const char *msg = baton_comm_last_error(comm);
  if (rank == aborter) {
    double late = fired ? failed_at - fired_at : -1;
    check(fired && rc == BATON_EABORTED && late >= 0 && late < 1.5 &&
              strstr(msg, "baton_comm_abort") != NULL,
          "the signalled rank's call %d returned %s %.3f s after the signal: %s", calls,
          baton_err_name(rc), late, msg);
  } else {
    double took = failed_at - start;
    check((rc == BATON_EABORTED || rc == BATON_EREMOTE) && took < ALARM_S + 3.0,
          "a peer's call %d failed %.3f s into the run: %s: %s", calls, took, baton_err_name(rc),
          msg);
  }
  double t0 = now();
  rc = baton_allreduce(buf, buf, 8, BATON_FLOAT32, BATON_SUM, comm);
  check(rc != BATON_OK && now() - t0 < 0.5, "a call after the failure: %s in %.3f s",
        baton_err_name(rc), now() - t0);
  baton_comm_destroy(comm);
  free(buf);
  printf("rank %d: %d passed, %d failed\n", rank, passed, failed);
  return failed ? 1 : 0;
}
