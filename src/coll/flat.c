/*
 * flat.c - the flat algorithm, for small buffers on shared memory.
 *
 * One round: every rank copies its input into its own mailbox in the
 * shared segment and waits until all have (mailbox-put); then each rank
 * reads what it needs straight out of the others' mailboxes. Allreduce and
 * reduce-scatter combine every rank's mailbox in rank order
 * (mailbox-reduce), so every rank computes the same bits; allgather copies
 * each other rank's block (mailbox-copy) and its own from its input;
 * broadcast reads only the root's mailbox.
 *
 * Each rank reads N times the data instead of the ring's 2(N-1)/N, but pays
 * one synchronisation instead of 2(N-1) hand-offs. For a few kilobytes the
 * hand-offs dominate, all the more when ranks outnumber cores and every
 * hand-off may wait for the scheduler.
 */
#include "algo.h"

static baton__step_t *add(baton__sched_t *s, baton__step_kind_t kind, int chunk, int n) {
  baton__step_t *st = baton__step_push(s, kind, BATON__PHASE_FLAT, 0);
  st->chunk = chunk;
  st->n = (uint16_t)n;
  return st;
}

int baton__flat_max_steps(int size) { return size + 1; }

int baton__flat_build(baton__sched_t *s, const baton__build_t *b) {
  int n = b->size, me = b->rank;
  switch (b->coll) {
  case BATON__COLL_ALLREDUCE:
  case BATON__COLL_REDUCE_SCATTER:
    add(s, BATON__STEP_MAILBOX_PUT, 0, n);
    add(s, BATON__STEP_MAILBOX_REDUCE, b->coll == BATON__COLL_ALLREDUCE ? 0 : me,
        b->coll == BATON__COLL_ALLREDUCE ? n : 1)
        ->finish = 1;
    break;
  case BATON__COLL_ALLGATHER:
    add(s, BATON__STEP_MAILBOX_PUT, me, 1);
    add(s, BATON__STEP_COPY, me, 1);
    for (int q = 0; q < n; q++)
      if (q != me)
        add(s, BATON__STEP_MAILBOX_COPY, q, 1)->recv_peer = q;
    break;
  case BATON__COLL_BROADCAST:
    /* Every rank arrives; only the root has something to put. */
    add(s, BATON__STEP_MAILBOX_PUT, b->root, me == b->root);
    if (me == b->root)
      add(s, BATON__STEP_COPY, b->root, 1);
    else
      add(s, BATON__STEP_MAILBOX_COPY, b->root, 1)->recv_peer = b->root;
    break;
  default:
    return -1;
  }
  return 0;
}
