/*
 * test_model.c - the cost formulas of src/model.c.
 *
 * Checks a few values worked out by hand from the textbook formulas (the
 * ring's 2(N-1)(K/N)/B from the issue, a binomial tree's ceil(log2 N)
 * rounds, a pipelined chain, the fold of a non-power-of-two N), that every
 * algorithm the library can run for a collective has a formula, and that
 * an unknown pair is refused. Prints "N passed, M failed".
 */
#include <math.h>
#include <stdio.h>

#include "model.h"
#include "schedule.h"

static int passed, failed;

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
  near(baton__model_time("allreduce", "ring", 16, K, &bw_only), 2.0 * 15 * (K / 16) * b,
       "ring allreduce, alpha 0: 2(N-1)(K/N)/B");
  near(baton__model_time("allreduce", "ring", 16, K, &c),
       30 * a + 30 * (K / 16) * b + 15 * (K / 16) * g, "ring allreduce N=16");
  near(baton__model_time("allgather", "ring", 5, K, &c), 4 * a + 0.8 * K * b, "ring allgather N=5");
  near(baton__model_time("broadcast", "tree", 9, K, &c), 4 * (a + K * b), "binomial broadcast N=9");
  near(baton__model_time("broadcast", "chain", 8, K, &c), (6 + 256) * (a + K / 256 * b),
       "chain broadcast N=8, 256 segments");
  /* Ring reduce runs the chain (src/coll/ring.c), not the allreduce. */
  near(baton__model_time("reduce", "ring", 8, K, &c), (6 + 256) * (a + K / 256 * (b + g)),
       "ring reduce N=8 is the chain, 256 segments");
  near(baton__model_time("allreduce", "rd", 8, K, &c), 3 * (a + K * b + K * g),
       "recursive doubling N=8");
  near(baton__model_time("allreduce", "rd", 6, K, &c),
       2 * (a + K * b + K * g) + 2 * (a + K * b) + K * g, "recursive doubling N=6 folds 2 ranks");
  near(baton__model_time("allreduce", "rhd", 8, K, &c), 6 * a + 1.75 * K * b + 0.875 * K * g,
       "Rabenseifner N=8");
  near(baton__model_time("alltoall", "pairwise", 4, K, &c), 3 * (a + K / 4 * b),
       "pairwise alltoall");
  near(baton__model_time("allreduce", "naive", 4, K, &c), 2 * a + 3 * (2 * K * b + K * g),
       "naive allreduce N=4: one latency a leg, the bytes one after the other at the hub");
  near(baton__model_time("allreduce", "flat", 4, K, &c), a + 2 * K * b + 3 * K * g,
       "flat allreduce N=4: one rendezvous, a copy in, the others' mailboxes pulled over "
       "and reduced");
  near(baton__model_time("allreduce", "ring", 1, K, &c), 0, "one rank costs nothing");
  near(baton__model_time("allreduce", "nonesuch", 4, K, &c), -1, "unknown algorithm");
  int na;
  const baton__algo_t *algos = baton__algos(&na);
  for (int i = 0; i < na; i++)
    for (int coll = 0; coll < BATON__COLL_COUNT; coll++)
      if (algos[i].colls & (1u << coll)) {
        char what[96];
        snprintf(what, sizeof what, "a formula for %s %s", algos[i].name,
                 baton__coll_name((baton__coll_t)coll));
        double t =
            baton__model_time(baton__coll_name((baton__coll_t)coll), algos[i].name, 4, K, &c);
        near(t > 0, 1, what);
      }
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
