/*
 * test_fault.c - a peer that disappears or stalls must not hang anyone.
 *
 *   BATON_TIMEOUT=2 baton-run -n 2 build/tests/test_fault exit
 *   BATON_TIMEOUT=2 baton-run -n 2 build/tests/test_fault stall
 *
 * exit:  rank 1 leaves (exit 0, no destroy) right after init. Rank 0's
 *        barrier, small (flat) and large (ring) allreduce must each fail
 *        with BATON_EREMOTE naming rank 1, found by watching the process
 *        rather than by waiting out BATON_TIMEOUT.
 * stall: rank 1 sleeps through the collectives. Rank 0's first call must
 *        fail with BATON_ETIMEDOUT naming rank 1 once BATON_TIMEOUT has
 *        passed; the communicator is then broken, so the later calls fail
 *        at once with the same code and cause.
 * link:  both ranks run 4 MiB allreduces for up to 60 s while the test
 *        script cuts the link between their hosts (tests/test_linkbreak.sh):
 *        no FIN or RST ever arrives, so only TCP's keepalive and its
 *        user timeout can tell. Each rank's failing call must return
 *        BATON_EREMOTE or BATON_ETIMEDOUT in less than half BATON_TIMEOUT
 *        from its start, so that the link's own watch caught it, not the
 *        timeout (the time taken is printed; BATON_TCP_LINK_TIMEOUT sets
 *        it); each rank prints its own `N passed, M failed`.
 * Rank 0 prints `N passed, M failed`.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "baton.h"

static int passed, failed;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* One call on rank 0: its code, that the message names rank 1, and whether
 * the answer came before the timeout (EREMOTE) or after it (ETIMEDOUT). */
static void expect(const char *what, int rc, double took, int want, baton_comm_t *comm,
                   double timeout, int first) {
  const char *msg = baton_comm_last_error(comm);
  int ok = rc == want && strstr(msg, "rank 1") != NULL &&
           (want == BATON_EREMOTE || !first ? took < timeout : took >= timeout);
  printf("%s %s: %s in %.2f s (want %s): %s\n", ok ? "ok  " : "FAIL", what, baton_err_name(rc),
         took, baton_err_name(want), msg);
  ok ? passed++ : failed++;
}

/* Calls until one fails; the call that fails must not take long. */
static int link_loop(baton_comm_t *comm, double timeout) {
  size_t n = 1 << 20;
  float *buf = calloc(n, sizeof(float));
  double start = now(), t0 = start, took = 0;
  int rc = BATON_OK, calls = 0;
  while (rc == BATON_OK && now() - start < 60) {
    t0 = now();
    rc = baton_allreduce(buf, buf, n, BATON_FLOAT32, BATON_SUM, comm);
    took = now() - t0;
    calls += rc == BATON_OK;
  }
  int ok = (rc == BATON_EREMOTE || rc == BATON_ETIMEDOUT) && took < timeout / 2;
  printf("%s rank %d: after %d calls, %s in %.2f s: %s\n", ok ? "ok  " : "FAIL",
         baton_comm_rank(comm), calls, baton_err_name(rc), took, baton_comm_last_error(comm));
  printf("%d passed, %d failed\n", ok, !ok);
  fflush(stdout);
  _exit(ok ? 0 : 1);
}

int main(int argc, char **argv) {
  int stall = argc > 1 && strcmp(argv[1], "stall") == 0;
  double timeout = getenv("BATON_TIMEOUT") ? atof(getenv("BATON_TIMEOUT")) : 60;
  baton_comm_t *comm;
  if (baton_comm_init(&comm) != BATON_OK || baton_comm_size(comm) != 2) {
    fprintf(stderr, "test_fault needs 2 ranks: %s\n", baton_last_init_error());
    return 1;
  }
  if (argc > 1 && strcmp(argv[1], "link") == 0)
    return link_loop(comm, timeout);
  if (baton_comm_rank(comm) == 1) {
    if (stall)
      sleep((unsigned)(3 * timeout + 2));
    _exit(0); /* vanish without a word */
  }
  size_t big = 1 << 22;
  float *buf = calloc(big, sizeof(float));
  int want = stall ? BATON_ETIMEDOUT : BATON_EREMOTE;
  if (!stall)
    usleep(200 * 1000); /* let rank 1 go */
  double t0 = now();
  int rc = baton_barrier(comm);
  expect("barrier", rc, now() - t0, want, comm, timeout, 1);
  t0 = now();
  rc = baton_allreduce(buf, buf, 2, BATON_FLOAT32, BATON_SUM, comm);
  expect("allreduce 8 B (flat)", rc, now() - t0, want, comm, timeout, 0);
  t0 = now();
  rc = baton_allreduce(buf, buf, big, BATON_FLOAT32, BATON_SUM, comm);
  expect("allreduce 16 MiB (ring)", rc, now() - t0, want, comm, timeout, 0);
  free(buf);
  printf("%d passed, %d failed\n", passed, failed);
  fflush(stdout);
  _exit(failed ? 1 : 0); /* the communicator is broken; do not wait in destroy */
}
