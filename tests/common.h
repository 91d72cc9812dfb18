/*
 * common.h - the harness shared by the tests that run under baton-run.
 *
 * A test is a sequence of numbered checks that every rank runs in the same
 * order. Each rank records whether each check passed; at the end one
 * allreduce (int64 SUM) adds up, per check, how many ranks failed it, so a
 * check counts once however many ranks ran it, and rank 0 prints the
 * summary line `N passed, M failed` that tests/run.sh looks for.
 *
 * Failure messages go to stderr, prefixed with the rank, and stop after
 * MAX_LINES per rank so that a broken build does not flood the log.
 */
#ifndef BATON_TEST_COMMON_H
#define BATON_TEST_COMMON_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baton.h"

#define MAX_LINES 40

typedef struct {
  baton_comm_t *comm;
  int rank, size;
  int64_t *failed; /* failed[i]: 1 when check i failed on this rank */
  size_t nchecks, cap;
  int lines;  /* failure lines printed so far */
  int broken; /* a call failed with a transport error: stop communicating */
} tally_t;

/* Creates the communicator from the environment that baton-run sets. */
static inline void tally_init(tally_t *t) {
  memset(t, 0, sizeof *t);
  setvbuf(stdout, NULL, _IOLBF, 0);
  int rc = baton_comm_init(&t->comm);
  if (rc != BATON_OK) {
    fprintf(stderr, "baton_comm_init: %s: %s\n", baton_err_name(rc), baton_last_init_error());
    exit(1);
  }
  t->rank = baton_comm_rank(t->comm);
  t->size = baton_comm_size(t->comm);
}

/* Prints one failure line, unless this rank has printed MAX_LINES. */
__attribute__((format(printf, 2, 3))) static inline void tally_say(tally_t *t, const char *fmt,
                                                                   ...) {
  char line[1024];
  va_list ap;
  if (t->lines > MAX_LINES)
    return;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (t->lines++ == MAX_LINES)
    fprintf(stderr, "rank %d: more failures, not printed\n", t->rank);
  else
    fprintf(stderr, "rank %d: %s\n", t->rank, line);
}

/* Records the outcome of the next check; returns ok. */
static inline int tally_record(tally_t *t, int ok) {
  if (t->nchecks == t->cap) {
    t->cap = t->cap ? 2 * t->cap : 1024;
    t->failed = (int64_t *)realloc(t->failed, t->cap * sizeof *t->failed);
    if (!t->failed) {
      fprintf(stderr, "rank %d: out of memory\n", t->rank);
      exit(1);
    }
  }
  t->failed[t->nchecks++] = !ok;
  return ok;
}

/*
 * Checks a return code: BATON_OK, or prints what failed. An error other
 * than BATON_EINVAL means the communicator may be unusable (a peer died or
 * timed out), so the test stops making collective calls.
 */
static inline int tally_rc(tally_t *t, int rc, const char *what) {
  if (rc == BATON_OK)
    return 1;
  tally_say(t, "%s: returned %s (%s): %s", what, baton_err_name(rc), baton_strerror(rc),
            baton_comm_last_error(t->comm));
  if (rc != BATON_EINVAL)
    t->broken = 1;
  return 0;
}

/* Adds up this rank's failures; no communication. */
static inline size_t tally_local_failures(const tally_t *t) {
  size_t n = 0;
  for (size_t i = 0; i < t->nchecks; i++)
    n += t->failed[i] != 0;
  return n;
}

/*
 * Combines every rank's record, prints the summary on rank 0, destroys the
 * communicator and returns the exit status. When the ranks cannot agree
 * (the communicator broke, or ranks ran different numbers of checks), each
 * rank prints its own counts instead. baton-run stops all ranks as soon as
 * one exits with a failure, so a barrier holds the others until rank 0 has
 * printed.
 */
static inline int tally_finish(tally_t *t) {
  int64_t n[2] = {(int64_t)t->nchecks, -(int64_t)t->nchecks};
  int agreed =
      !t->broken &&
      tally_rc(t, baton_allreduce(n, n, 2, BATON_INT64, BATON_MAX, t->comm), "summary allreduce") &&
      n[0] == -n[1];
  if (agreed && t->nchecks > 0)
    agreed = tally_rc(
        t, baton_allreduce(t->failed, t->failed, t->nchecks, BATON_INT64, BATON_SUM, t->comm),
        "summary allreduce");
  if (!agreed)
    fprintf(stderr, "rank %d: could not combine results across ranks\n", t->rank);
  size_t failed = tally_local_failures(t) + !agreed;
  if (!agreed || t->rank == 0)
    printf("%zu passed, %zu failed\n", t->nchecks + !agreed - failed, failed);
  fflush(stdout);
  if (!t->broken) {
    int ok = tally_rc(t, baton_barrier(t->comm), "final barrier");
    ok &= tally_rc(t, baton_comm_destroy(t->comm), "baton_comm_destroy");
    failed += !ok;
  }
  free(t->failed);
  return failed ? 1 : 0;
}

#endif /* BATON_TEST_COMMON_H */
