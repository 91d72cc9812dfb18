/*
 * rd.c - recursive doubling, for small allreduce and allgather(v).
 *
 * On P = 2^L ranks (the fold of recursive.h brings any N down to P virtual
 * ranks), in round k each rank pairs with virtual rank v XOR 2^k, so after
 * L rounds every rank has heard, through the pairs, from every other: L
 * latencies, the fewest any algorithm can take, which is what a small
 * message is about.
 *
 * Allreduce: in every round both partners send their whole current buffer
 * and recv-reduce what arrives with it (the first round with INPUT, later
 * ones with WORK). Each rank moves L times the buffer, so this is for small
 * buffers only; rhd moves 2(P-1)/P of it. The two partners compute
 * op(theirs, mine) and op(mine, theirs), which are bitwise equal because
 * the reductions are commutative (float min/max of two NaNs with different
 * payloads aside), so every rank ends with the same bytes.
 *
 * Allgather: in round k virtual rank v holds the blocks of virtual ranks
 * [v & ~(2^k - 1), +2^k), one run of chunks (recursive.h); it sends that
 * run and recv-copies the partner's run next to it, doubling its window.
 * The own block goes out of INPUT in the first round and is copied into
 * the output beside it. (P-1)/P of the output moves, as on the ring.
 *
 * Non-power-of-two N: the odd rank of a folding pair first sends its input
 * (allreduce: the whole buffer, recv-reduced by the even one; allgather:
 * its block, recv-copied beside the even one's own) and recv-copies the
 * whole result at the end.
 *
 * An allreduce round's receive overwrites the memory its send has just
 * sent from; that is the receive directly after the send, for which the
 * executor waits until the send has left (schedule.h).
 */
#include "recursive.h"

int baton__rd_max_steps(int size) {
  return 2 * baton__log2_below(size) + 1 + ((size & (size - 1)) ? 2 : 0);
}

/* Allreduce's exchanges; folded: the rank already holds the sum in WORK. */
static void exchanges(baton__sched_t *s, const baton__fold_t *f, int size, int folded) {
  int step = 0;
  for (int d = 1; d < f->p; d *= 2, step++) {
    int peer = baton__fold_real(f, f->v ^ d);
    baton__from_t from = folded || step > 0 ? BATON__FROM_WORK : BATON__FROM_INPUT;
    baton__step_add(s, BATON__STEP_SEND, BATON__PHASE_EXCHANGE, step, peer, 0, size, from);
    baton__step_add(s, BATON__STEP_RECV_REDUCE, BATON__PHASE_EXCHANGE, step, peer, 0, size, from)
        ->finish = d * 2 == f->p;
  }
}

int baton__rd_build(baton__sched_t *s, const baton__build_t *b) {
  int reduces = b->coll == BATON__COLL_ALLREDUCE, rank = b->rank, size = b->size;
  if (size > UINT16_MAX) /* a message is a run of up to N chunks */
    return -1;
  baton__fold_t f = baton__fold(rank, size);
  if (f.v < 0) {
    baton__fold_away(s, &f, reduces ? 0 : rank, reduces ? size : 1, 0, size);
    return 0;
  }
  if (f.partner >= 0 && reduces) {
    baton__step_add(s, BATON__STEP_RECV_REDUCE, BATON__PHASE_FOLD, 0, f.partner, 0, size,
                    BATON__FROM_INPUT);
  } else if (f.partner >= 0) { /* this rank's own block, and the partner's beside it */
    baton__step_add(s, BATON__STEP_COPY, BATON__PHASE_FOLD, 0, -1, rank, 1, BATON__FROM_INPUT);
    baton__step_add(s, BATON__STEP_RECV_COPY, BATON__PHASE_FOLD, 0, f.partner, f.partner, 1,
                    BATON__FROM_INPUT);
  }
  if (reduces)
    exchanges(s, &f, size, f.partner >= 0);
  else
    baton__doubling(s, &f, f.partner < 0);
  if (f.partner >= 0)
    baton__step_add(s, BATON__STEP_SEND, BATON__PHASE_UNFOLD, 0, f.partner, 0, size,
                    BATON__FROM_WORK);
  return 0;
}
