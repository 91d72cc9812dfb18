/*
 * steps.h - the one short way the builders of src/coll/ write a step of
 * schedule.h: a send, a receive (recv-copy or recv-reduce) or a local copy
 * of one run of chunks, talking to one peer.
 */
#ifndef BATON_COLL_STEPS_H
#define BATON_COLL_STEPS_H

#include "../algo.h"

/* A step of `kind` on the run [chunk, chunk + n): it sends to or receives
 * from `peer`, whichever the kind does (a COPY ignores it); `src` is a
 * SEND's bytes or a RECV_REDUCE's second operand. */
static inline baton__step_t *baton__step_add(baton__sched_t *s, baton__step_kind_t kind,
                                             baton__phase_t phase, int step, int peer, int chunk,
                                             int n, baton__from_t src) {
  baton__step_t *st = baton__step_push(s, kind, phase, step);
  unsigned does = baton__step_does(kind);
  st->chunk = chunk;
  st->n = (uint16_t)n;
  st->src = (uint8_t)src;
  st->send_peer = does & BATON__DOES_SEND ? peer : -1;
  st->recv_peer = does & BATON__DOES_RECV ? peer : -1;
  return st;
}

#endif /* BATON_COLL_STEPS_H */
