/*
 * trace.h - BATON_TRACE: one JSON line per step of every collective
 * (format in docs/trace.md).
 *
 * Everything is allocated when the communicator is created. During a
 * collective the executor only stores two timestamps per step and round
 * (start of the step's first round, end of its last); the lines are
 * formatted and written after the collective has finished. With the knob
 * unset comm->trace is NULL and nothing at all happens.
 */
#ifndef BATON_TRACE_H
#define BATON_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "schedule.h"

typedef struct baton__trace baton__trace_t;

/* Opens the file `pattern` with %r replaced by rank (%% is a %), for
 * schedules of up to max_steps steps. BATON_EUSAGE naming BATON_TRACE when
 * the pattern is bad or the file cannot be created. */
int baton__trace_open(baton__trace_t **out, const char *pattern, int rank, int size, int max_steps,
                      char *err, size_t errlen);
void baton__trace_close(baton__trace_t *t);

/* A collective starts: forget the previous one's times. */
void baton__trace_begin(baton__trace_t *t);
/* Step i of the schedule starts or ends a round. */
void baton__trace_step_begin(baton__trace_t *t, int i);
void baton__trace_step_end(baton__trace_t *t, int i);

/* What the lines of one finished collective say besides the steps. */
typedef struct {
  uint64_t seq;
  baton__coll_t coll;
  const char *dtype;
  size_t count; /* the count of the public call */
  int root;     /* broadcast's root; -1 for collectives without one */
  size_t elsize;
  const baton__sched_t *sched; /* the steps that ran; NULL: one flat step */
  const size_t *len;           /* elements per chunk */
  size_t flat_bytes;           /* flat: bytes this rank put in its mailbox */
  int rc;                      /* how the collective ended */
} baton__trace_call_t;

/* Writes the collective's lines and flushes them. */
void baton__trace_end(baton__trace_t *t, const baton__trace_call_t *call);

#endif /* BATON_TRACE_H */
