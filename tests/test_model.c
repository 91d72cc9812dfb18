/*
 * test_model.c - the cost formulas of src/model.c.
 *
 * Checks a few values worked out by hand from the textbook formulas (the
 * ring's 2(N-1)(K/N)/B from the issue, a binomial tree's ceil(log2 N)
 * rounds, a pipelined chain, the fold of a non-power-of-two N), and that
 * the table and its costs agree: every collective an algorithm serves has
 * a formula, as text and as code, and no other has one. Prints "N passed, M failed".
 */
#include <math.h>
#include <stdio.h>

#include "model.h"
#include "algo.h"

static int passed, failed;

/* The model's time for the algorithm of the table named `algo`. */
#define T(coll, algo, n, k, c)                                                                     \
  baton__model_time(baton__algo_find(algo), BATON__COLL_##coll, n, k, c)

static void near(double got, double want, const char *what) {
  if (fabs(got - want) <= 1e-9 * fabs(want) + 1e-15) {
    passed++;
    return;
  }
  failed++;
  fprintf(stderr, "FAIL: %s: got %.12g, want %.12g\n", what, got, want);
}

int main(void) {
  const double K = 64.0 * (1 << 20), a = 5e-6, b = 1 / 12.5e9, g = 1 / 20e9;
  baton__cost_t bw_only = {.alpha = 0, .beta = b},
                c = {.alpha = a, .beta = b, .gamma = g, .segment = 256 << 10};
  near(T(ALLREDUCE, "ring", 16, K, &bw_only), 2.0 * 15 * (K / 16) * b,
       "ring allreduce, alpha 0: 2(N-1)(K/N)/B");
  near(T(ALLREDUCE, "ring", 16, K, &c), 30 * a + 30 * (K / 16) * b + 15 * (K / 16) * g,
       "ring allreduce N=16");
  near(T(ALLGATHER, "ring", 5, K, &c), 4 * a + 0.8 * K * b, "ring allgather N=5");
  near(T(BROADCAST, "tree", 9, K, &c), 4 * (a + K * b), "binomial broadcast N=9");
  near(T(BROADCAST, "ring", 8, K, &c), (6 + 256) * (a + K / 256 * b),
       "ring broadcast N=8 is the chain, 256 segments");
  /* Ring reduce runs the chain (src/coll/ring.c), not the allreduce. */
  near(T(REDUCE, "ring", 8, K, &c), (6 + 256) * (a + K / 256 * (b + g)),
       "ring reduce N=8 is the chain, 256 segments");
  near(T(ALLREDUCE, "rd", 8, K, &c), 3 * (a + K * b + K * g), "recursive doubling N=8");
  near(T(ALLREDUCE, "rd", 6, K, &c), 2 * (a + K * b + K * g) + 2 * (a + K * b) + K * g,
       "recursive doubling N=6 folds 2 ranks");
  near(T(REDUCE_SCATTER, "rhd", 6, K, &c),
       2 * a + 0.75 * K * (b + g) + (a + K * b + K * g) + (a + K / 6 * b),
       "rhd reduce_scatter N=6: the fold sends the input in and the chunk out");
  near(T(ALLGATHER, "rd", 6, K, &c), 2 * a + 0.75 * K * b + (a + K / 6 * b) + (a + K * b),
       "rd allgather N=6: the fold sends the block in and the output out");
  near(T(ALLGATHER, "flat", 4, K, &c), a + 1.25 * K * b,
       "flat allgather N=4: its block into the mailbox, all four out");
  near(T(REDUCE_SCATTER, "flat", 4, K, &c), a + 1.25 * K * b + 0.75 * K * g,
       "flat reduce_scatter N=4: the input into the mailbox, its chunk of the others pulled");
  near(T(ALLREDUCE, "rhd", 8, K, &c), 6 * a + 1.75 * K * b + 0.875 * K * g, "Rabenseifner N=8");
  near(T(ALLTOALL, "pairwise", 4, K, &c), 3 * (a + K / 4 * b) + K / 8 * b, "pairwise alltoall");
  near(T(ALLREDUCE, "naive", 4, K, &c), 2 * a + 3 * (2 * K * b + K * g),
       "naive allreduce N=4: one latency a leg, the bytes one after the other at the hub");
  near(T(ALLREDUCE, "flat", 4, K, &c), a + 2 * K * b + 3 * K * g,
       "flat allreduce N=4: one rendezvous, a copy in, the others' mailboxes pulled over "
       "and reduced");
  /* More ranks than cores: the costs given are those of every rank
   * running (per_core ranks a core); the recursive algorithms' steps in
   * which no more ranks run than there are cores pay the costs of a core
   * each (alpha1, beta1, gamma1), the others the costs given. */
  baton__cost_t busy = {.alpha = 3 * a,
                        .beta = 2 * b,
                        .gamma = 2 * g,
                        .per_core = 1.5,
                        .alpha1 = a,
                        .beta1 = b,
                        .gamma1 = g};
  near(T(ALLREDUCE, "rd", 3, K, &busy), (a + K * b + K * g) + 2 * (a + K * b) + K * g,
       "rd allreduce N=3 on 2 cores: two ranks run in every step, at a core each");
  near(T(ALLREDUCE, "ring", 3, K, &busy),
       4 * 3 * a + 2 * (2.0 / 3) * K * 2 * b + (2.0 / 3) * K * 2 * g,
       "ring allreduce N=3 on 2 cores: every rank runs in every step");
  busy.per_core = 2;
  near(T(ALLREDUCE, "rd", 4, K, &busy), 2 * (3 * a + 2 * K * b + 2 * K * g),
       "rd allreduce N=4 on 2 cores: all four run");
  busy.per_core = 2.5;
  near(T(ALLREDUCE, "rhd", 5, K, &busy),
       4 * 3 * a + 1.5 * K * 2 * b + 0.75 * K * 2 * g + 2 * (a + K * b) + K * g,
       "rhd allreduce N=5 on 2 cores: four ranks in its steps (2 a core), two in the fold");
  near(T(ALLREDUCE, "ring", 1, K, &c), 0, "one rank costs nothing");
  near(T(ALLREDUCE, "pairwise", 4, K, &c), -1, "pairwise does not serve allreduce");
  near(baton__model_time(NULL, BATON__COLL_ALLREDUCE, 4, K, &c), -1, "no algorithm");
  /* The table and its costs agree: a formula, as text and as code, for
   * every collective an algorithm serves and none for the others. */
  int na;
  const baton__algo_t *algos = baton__algos(&na);
  for (int i = 0; i < na; i++)
    for (int coll = 0; coll < BATON__COLL_COUNT; coll++) {
      const baton__algo_t *al = &algos[i];
      int serves = (al->colls & (1u << coll)) != 0;
      const char *cn = baton__coll_name((baton__coll_t)coll);
      char what[128];
      snprintf(what, sizeof what, "%s %s: %s", al->name, cn,
               serves ? "a formula, text and code" : "no formula: it does not serve it");
      const baton__cost_row_t *row = al->costs ? &al->costs[coll] : NULL;
      near(row && (row->formula != NULL) == serves && (row->time != NULL) == serves, 1, what);
      double t = baton__model_time(al, (baton__coll_t)coll, 4, K, &c);
      snprintf(what, sizeof what, "%s %s: %s", al->name, cn,
               serves ? "a positive time" : "no time (-1)");
      near(serves ? t > 0 : t == -1, 1, what);
    }
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
