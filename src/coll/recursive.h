/*
 * recursive.h - what the two recursive algorithms (rhd.c, rd.c) share: the
 * fold of a non-power-of-two number of ranks, and the doubling allgather.
 *
 * Recursive halving and doubling pair rank v with v XOR 2^k, which needs a
 * power of two. With P the largest power of two <= N and r = N - P, the
 * first 2r ranks pair up as (2i, 2i+1): the odd one sends its data to the
 * even one before the recursion (phase FOLD) and recv-copies the result
 * after it (UNFOLD); the even one stands in for both as virtual rank i,
 * holding chunks [2i, 2i+2). Rank j >= 2r is virtual rank j - r and holds
 * chunk j. Virtual rank v is real rank real(v) and its chunks start at
 * chunk real(v), so virtual ranks [a, b) hold the one run of chunks
 * [real(a), real(b)) (real(P) = N): every message is one run.
 */
#ifndef BATON_COLL_RECURSIVE_H
#define BATON_COLL_RECURSIVE_H

#include "steps.h"

typedef struct {
  int p;       /* largest power of two <= N */
  int r;       /* N - p: the pairs that fold */
  int v;       /* this rank's virtual rank, -1 for an odd rank that folds */
  int partner; /* the other rank of this rank's folding pair, -1 when none */
} baton__fold_t;

static inline baton__fold_t baton__fold(int rank, int size) {
  baton__fold_t f = {.p = 1, .v = -1, .partner = -1};
  while (f.p * 2 <= size)
    f.p *= 2;
  f.r = size - f.p;
  if (rank >= 2 * f.r) {
    f.v = rank - f.r;
  } else {
    f.partner = rank ^ 1;
    f.v = rank % 2 ? -1 : rank / 2;
  }
  return f;
}

/* The real rank of virtual rank v, which is also its first chunk. */
static inline int baton__fold_real(const baton__fold_t *f, int v) {
  return v < f->r ? 2 * v : v + f->r;
}

/* A step on the chunks of virtual ranks [lo, hi). */
static inline baton__step_t *baton__fold_step(baton__sched_t *s, const baton__fold_t *f,
                                              baton__step_kind_t kind, baton__phase_t phase,
                                              int step, int peer, int lo, int hi,
                                              baton__from_t src) {
  int first = baton__fold_real(f, lo);
  return baton__step_add(s, kind, phase, step, peer, first, baton__fold_real(f, hi) - first, src);
}

/* log2 of the largest power of two <= size: the rounds of one recursion. */
static inline int baton__log2_below(int size) {
  int l = 0;
  while ((2 << l) <= size)
    l++;
  return l;
}

/* The whole schedule of the odd rank of a folding pair: it sends chunks
 * [in, in + in_n) of its input to its partner, and recv-copies the result,
 * chunks [out, out + out_n), at the end. */
static inline void baton__fold_away(baton__sched_t *s, const baton__fold_t *f, int in, int in_n,
                                    int out, int out_n) {
  baton__step_add(s, BATON__STEP_SEND, BATON__PHASE_FOLD, 0, f->partner, in, in_n,
                  BATON__FROM_INPUT);
  baton__step_add(s, BATON__STEP_RECV_COPY, BATON__PHASE_UNFOLD, 0, f->partner, out, out_n,
                  BATON__FROM_INPUT);
}

/* Allgather by recursive doubling, log2(P) rounds: at distance d = 2^k the
 * rank sends the run it has complete (virtual ranks [v & ~(d-1), +d)) and
 * recv-copies its partner's, next to it. `own_from_input`: the first send
 * is the rank's own block, still in INPUT, which is copied into WORK too. */
static inline void baton__doubling(baton__sched_t *s, const baton__fold_t *f, int own_from_input) {
  int step = 0;
  for (int d = 1; d < f->p; d *= 2, step++) {
    int mine = f->v & ~(d - 1), theirs = (f->v ^ d) & ~(d - 1);
    int peer = baton__fold_real(f, f->v ^ d), first = own_from_input && step == 0;
    baton__fold_step(s, f, BATON__STEP_SEND, BATON__PHASE_ALLGATHER, step, peer, mine, mine + d,
                     first ? BATON__FROM_INPUT : BATON__FROM_WORK);
    if (first)
      baton__fold_step(s, f, BATON__STEP_COPY, BATON__PHASE_ALLGATHER, step, -1, mine, mine + d,
                       BATON__FROM_INPUT);
    baton__fold_step(s, f, BATON__STEP_RECV_COPY, BATON__PHASE_ALLGATHER, step, peer, theirs,
                     theirs + d, BATON__FROM_WORK);
  }
}

#endif /* BATON_COLL_RECURSIVE_H */
