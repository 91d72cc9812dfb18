/*
 * rd.c - recursive doubling, for small allreduce and allgather(v).
 *
 * On P = 2^L ranks (the fold of recursive.h brings any N down to P virtual
 * ranks), at step k each rank pairs with virtual rank v XOR 2^k, so after
 * L steps every rank has heard, through the pairs, from every other: L
 * latencies, the fewest any algorithm can take, which is what a small
 * message is about.
 *
 * Allreduce: at every step both partners send their whole current buffer
 * and combine what arrives with it (the first step with INPUT, later ones
 * with WORK). Each rank moves L times the buffer, so this is for small
 * buffers only; rhd moves 2(P-1)/P of it. The two partners compute
 * op(theirs, mine) and op(mine, theirs), which are bitwise equal because
 * the reductions are commutative (float min/max of two NaNs with different
 * payloads aside), so every rank ends with the same bytes.
 *
 * Allgather: at step k virtual rank v holds the blocks of virtual ranks
 * [v & ~(2^k - 1), +2^k), one run of chunks (recursive.h); it sends that
 * run and receives the partner's run next to it, doubling its window. The
 * own block goes out of INPUT at the first step and lands in the output on
 * the way (send_keep). (P-1)/P of the output moves, as on the ring.
 *
 * Non-power-of-two N: the odd rank of a folding pair first sends its input
 * (allreduce: the whole buffer, added in by the even one; allgather: its
 * block) and receives the whole result at the end.
 *
 * An allreduce step overwrites the memory it has just sent; the executor
 * waits for a send to leave (flush) before it writes over it (exec.c).
 */
#include "recursive.h"

int baton__rd_max_steps(int size) { return baton__log2_below(size) + 2; }

/* Allreduce's exchanges; folded: the rank already holds the sum in WORK. */
static void exchanges(baton__sched_t *s, const baton__fold_t *f, int size, int folded) {
  int step = 0;
  for (int d = 1; d < f->p; d *= 2, step++) {
    int peer = baton__fold_real(f, f->v ^ d);
    baton__from_t from = folded || step > 0 ? BATON__FROM_WORK : BATON__FROM_INPUT;
    baton__step_t *st = baton__step_add(s, BATON__PHASE_EXCHANGE, step);
    baton__step_send(st, peer, 0, size, from);
    baton__step_recv(st, peer, 0, size, BATON__RECV_REDUCE, from);
    st->finish = d * 2 == f->p;
  }
}

void baton__rd_schedule(baton__sched_t *s, baton__coll_t coll, int rank, int size, size_t count,
                        int root, const int *order) {
  (void)count, (void)root, (void)order;
  int reduces = coll == BATON__COLL_ALLREDUCE;
  s->coll = coll;
  s->algo = "rd";
  s->nsteps = 0;
  if (size == 1)
    return;
  baton__fold_t f = baton__fold(rank, size);
  if (f.v < 0) {
    baton__fold_away(s, &f, reduces ? 0 : rank, reduces ? size : 1, 0, size);
    return;
  }
  if (f.partner >= 0) {
    baton__step_t *st = baton__step_add(s, BATON__PHASE_FOLD, 0);
    if (reduces) {
      baton__step_recv(st, f.partner, 0, size, BATON__RECV_REDUCE, BATON__FROM_INPUT);
    } else { /* the partner's block in, and this rank's own copied beside it */
      baton__step_recv(st, f.partner, f.partner, 1, BATON__RECV_COPY, BATON__FROM_WORK);
      st->send_chunk = rank;
      st->send_n = 1;
      st->send_from = BATON__FROM_INPUT;
      st->send_keep = 1;
    }
  }
  if (reduces)
    exchanges(s, &f, size, f.partner >= 0);
  else
    baton__doubling(s, &f, f.partner < 0);
  if (f.partner >= 0) {
    baton__step_t *st = baton__step_add(s, BATON__PHASE_UNFOLD, 0);
    baton__step_send(st, f.partner, 0, size, BATON__FROM_WORK);
  }
}
