/*
 * rhd.c - recursive halving-doubling (Rabenseifner) for allreduce and
 * reduce-scatter(v).
 *
 * The buffer is cut into N chunks, chunk c being the part rank c owns once
 * reduce-scattered. On P = 2^L ranks (the fold of recursive.h brings any
 * N down to P virtual ranks, each holding a run of chunks):
 *
 * Reduce-scatter by recursive halving, L rounds. A rank starts with a
 * window of all P virtual ranks' chunks. In round k its partner is
 * v XOR d, d = P / 2^(k+1): the window is cut into two halves of d virtual
 * ranks, the rank keeps the half that holds its own chunks, sends the other
 * half to the partner and recv-reduces the partner's partial sums of the
 * half it keeps. After L rounds its window is its own chunks, reduced over
 * all ranks. Each rank sends (P-1)/P of the buffer in L messages.
 *
 * Allgather by recursive doubling, L rounds, the same exchanges in reverse
 * order: at distance d = 2^k the rank sends the window it has complete
 * (the d virtual ranks [v & ~(d-1), +d)) and recv-copies the partner's,
 * doubling its window. Allreduce is both: 2L latencies instead of the
 * ring's 2(N-1), for the same 2(P-1)/P of the buffer on the wire, which is
 * why it wins at medium sizes. Each round is a send and a receive: 4L
 * steps, and 2 more on a rank that folds.
 *
 * Where the data is (schedule.h): the first reduction of a chunk combines
 * the message with the rank's INPUT and writes WORK, later ones combine
 * with WORK; what a rank sends is in INPUT until it has reduced it once.
 * The halves a rank sends are never the ones it writes in the same round,
 * and what the allgather overwrites it sent to the same partner during the
 * halving, which that partner had to receive before it could answer: the
 * memory of a send is never written before the send has arrived.
 *
 * Non-power-of-two N (recursive.h): the odd rank of a folding pair sends
 * its whole input to the even one, which recv-reduces it with its own
 * (phase FOLD); after the recursion the even one sends back the whole
 * result (allreduce) or only the odd one's chunk (reduce-scatter, phase
 * UNFOLD). That costs two more latencies and one more transfer of the
 * buffer on those ranks.
 */
#include "recursive.h"

int baton__rhd_max_steps(int size) {
  return 4 * baton__log2_below(size) + ((size & (size - 1)) ? 2 : 0);
}

/* The halving rounds; folded: the rank already holds all its chunks in
 * WORK (the fold added its partner's input in). */
static void halving(baton__sched_t *s, const baton__fold_t *f, int folded) {
  int lo = 0, hi = f->p, step = 0;
  for (int d = f->p / 2; d >= 1; d /= 2, step++) {
    int mid = lo + d, low = f->v < mid;
    int peer = baton__fold_real(f, f->v ^ d);
    baton__from_t from = folded || step > 0 ? BATON__FROM_WORK : BATON__FROM_INPUT;
    baton__fold_step(s, f, BATON__STEP_SEND, BATON__PHASE_REDUCE_SCATTER, step, peer,
                     low ? mid : lo, low ? hi : mid, from);
    lo = low ? lo : mid, hi = low ? mid : hi; /* the half this rank keeps */
    baton__fold_step(s, f, BATON__STEP_RECV_REDUCE, BATON__PHASE_REDUCE_SCATTER, step, peer, lo, hi,
                     from)
        ->finish = d == 1;
  }
}

int baton__rhd_build(baton__sched_t *s, const baton__build_t *b) {
  int all = b->coll == BATON__COLL_ALLREDUCE, rank = b->rank, size = b->size;
  if (size > UINT16_MAX) /* a fold message is a run of N chunks */
    return -1;
  baton__fold_t f = baton__fold(rank, size);
  if (f.v < 0) {
    baton__fold_away(s, &f, 0, size, all ? 0 : rank, all ? size : 1);
    return 0;
  }
  if (f.partner >= 0)
    baton__step_add(s, BATON__STEP_RECV_REDUCE, BATON__PHASE_FOLD, 0, f.partner, 0, size,
                    BATON__FROM_INPUT);
  halving(s, &f, f.partner >= 0);
  if (all)
    baton__doubling(s, &f, 0);
  if (f.partner >= 0)
    baton__step_add(s, BATON__STEP_SEND, BATON__PHASE_UNFOLD, 0, f.partner, all ? 0 : f.partner,
                    all ? size : 1, BATON__FROM_WORK);
  return 0;
}
