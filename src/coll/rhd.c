/*
 * rhd.c - recursive halving-doubling (Rabenseifner) for allreduce and
 * reduce-scatter(v).
 *
 * The buffer is cut into N chunks, chunk c being the part rank c owns once
 * reduce-scattered. On P = 2^L ranks (the fold of recursive.h brings any
 * N down to P virtual ranks, each holding a run of chunks):
 *
 * Reduce-scatter by recursive halving, L steps. A rank starts with a
 * window of all P virtual ranks' chunks. At step k its partner is
 * v XOR d, d = P / 2^(k+1): the window is cut into two halves of d virtual
 * ranks, the rank keeps the half that holds its own chunks, sends the other
 * half to the partner and receives the partner's partial sums of the half
 * it keeps, combining them with its own. After L steps its window is its
 * own chunks, reduced over all ranks. Each rank sends (P-1)/P of the
 * buffer in L messages.
 *
 * Allgather by recursive doubling, L steps, the same exchanges in reverse
 * order: at distance d = 2^k the rank sends the window it has complete
 * (the d virtual ranks [v & ~(d-1), +d)) and receives the partner's,
 * doubling its window. Allreduce is both: 2L latencies instead of the
 * ring's 2(N-1), for the same 2(P-1)/P of the buffer on the wire, which is
 * why it wins at medium sizes.
 *
 * Where the data is (schedule.h): the first reduction of a chunk combines
 * the message with the rank's INPUT and writes WORK, later ones combine
 * with WORK; what a rank sends is in INPUT until it has reduced it once.
 * The halves a rank sends are never the ones it writes in the same step,
 * and what the allgather overwrites it sent to the same partner during the
 * halving, which that partner had to receive before it could answer: the
 * memory of a send is never written before the send has arrived.
 *
 * Non-power-of-two N (recursive.h): the odd rank of a folding pair sends
 * its whole input to the even one, which adds its own (phase FOLD); after
 * the recursion the even one sends back the whole result (allreduce) or
 * only the odd one's chunk (reduce-scatter, phase UNFOLD). That costs two
 * more latencies and one more transfer of the buffer on those ranks.
 */
#include "recursive.h"

int baton__rhd_max_steps(int size) { return 2 * baton__log2_below(size) + 2; }

/* The halving steps; folded: the rank already holds all its chunks in
 * WORK (the fold added its partner's input in). */
static void halving(baton__sched_t *s, const baton__fold_t *f, int folded) {
  int lo = 0, hi = f->p, step = 0;
  for (int d = f->p / 2; d >= 1; d /= 2, step++) {
    int mid = lo + d, low = f->v < mid;
    int send_lo = low ? mid : lo, send_hi = low ? hi : mid;
    int keep_lo = low ? lo : mid, keep_hi = low ? mid : hi;
    int peer = baton__fold_real(f, f->v ^ d);
    baton__from_t from = folded || step > 0 ? BATON__FROM_WORK : BATON__FROM_INPUT;
    baton__step_t *st = baton__step_add(s, BATON__PHASE_REDUCE_SCATTER, step);
    baton__step_send(st, peer, baton__fold_real(f, send_lo),
                     baton__fold_real(f, send_hi) - baton__fold_real(f, send_lo), from);
    baton__step_recv(st, peer, baton__fold_real(f, keep_lo),
                     baton__fold_real(f, keep_hi) - baton__fold_real(f, keep_lo),
                     BATON__RECV_REDUCE, from);
    st->finish = d == 1;
    lo = keep_lo, hi = keep_hi;
  }
}

void baton__rhd_schedule(baton__sched_t *s, baton__coll_t coll, int rank, int size, size_t count,
                         int root, const int *order) {
  (void)count, (void)root, (void)order;
  int all = coll == BATON__COLL_ALLREDUCE;
  s->coll = coll;
  s->algo = "rhd";
  s->nsteps = 0;
  if (size == 1)
    return;
  baton__fold_t f = baton__fold(rank, size);
  if (f.v < 0) {
    baton__fold_away(s, &f, 0, size, all ? 0 : rank, all ? size : 1);
    return;
  }
  if (f.partner >= 0) {
    baton__step_t *st = baton__step_add(s, BATON__PHASE_FOLD, 0);
    baton__step_recv(st, f.partner, 0, size, BATON__RECV_REDUCE, BATON__FROM_INPUT);
  }
  halving(s, &f, f.partner >= 0);
  if (all)
    baton__doubling(s, &f, 0);
  if (f.partner >= 0) {
    baton__step_t *st = baton__step_add(s, BATON__PHASE_UNFOLD, 0);
    baton__step_send(st, f.partner, all ? 0 : f.partner, all ? size : 1, BATON__FROM_WORK);
  }
}
