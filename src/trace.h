/*
 * trace.h - BATON_TRACE: one JSON line per step of every collective
 * (format in docs/trace.md).
 *
 * Everything is allocated when the communicator (and each call object of
 * its pool) is created. During a collective the executor only stores two
 * timestamps per step in the call (start of the step's first round, end of
 * its last); the lines are formatted and written after the collective has
 * finished. With the knob unset comm->trace is NULL and nothing at all
 * happens.
 */
#ifndef BATON_TRACE_H
#define BATON_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "schedule.h"

typedef struct baton__trace baton__trace_t;

/* Opens the file `pattern` with %r replaced by rank (%% is a %).
 * BATON_EUSAGE naming BATON_TRACE when the pattern is bad or the file
 * cannot be created. */
int baton__trace_open(baton__trace_t **out, const char *pattern, int rank, int size, char *err,
                      size_t errlen);
void baton__trace_close(baton__trace_t *t);

/* What the lines of one finished collective say. */
typedef struct {
  uint64_t seq;
  baton__coll_t coll;
  const char *algo;
  const char *dtype;
  size_t count; /* the count of the public call */
  int root;     /* of a rooted collective; -1 for the others */
  size_t elsize;
  const baton__sched_t *sched; /* the steps that ran */
  const size_t *len;           /* elements per chunk */
  int host;                    /* this rank's host, numbered along the ring */
  const double *t0, *t1;       /* per step: seconds, < 0 when it did not run */
  int rc;                      /* how the collective ended */
} baton__trace_call_t;

/* Writes the collective's lines, one per step, and flushes them. */
void baton__trace_end(baton__trace_t *t, const baton__trace_call_t *call);

#endif /* BATON_TRACE_H */
