/*
 * model.h - the alpha-beta-gamma cost model of every algorithm (model.c).
 *
 * A transfer of m bytes costs alpha + m * beta and reducing m bytes costs
 * m * gamma; the formulas count what each rank does on the longest path of
 * the schedule. They are here, inside the library, so that choosing an
 * algorithm at run time and the baton-model tool use the same ones.
 */
#ifndef BATON_MODEL_H
#define BATON_MODEL_H

#include "algo.h"

typedef struct {
  double alpha;   /* seconds per message (latency) */
  double beta;    /* seconds per byte moved (1 / bandwidth) */
  double gamma;   /* seconds per byte reduced (1 / reduction bandwidth) */
  double segment; /* bytes per pipeline segment (chain algorithms) */
  double hosts;   /* hosts the ranks are spread over (hier); 0: one rank each */
  double room;    /* flat: bytes a mailbox holds (a broadcast past it fans out); 0: any */
  /* With more ranks than cores: the ranks per core of the call, and the
   * link's costs with a core per rank, for the steps in which only as many
   * ranks run as there are cores (the recursive algorithms' steps and
   * folds at N=3 on 2 cores); per_core 0 or 1: alpha, beta and gamma hold
   * for every step. */
  double per_core, alpha1, beta1, gamma1;
} baton__cost_t;

/* One cell of an algorithm's cost table (baton__algo_t.costs, indexed by
 * baton__coll_t): the formula for people, in the symbols of
 * baton__cost_legend, and the same as code. Both NULL for a collective
 * the algorithm does not serve. */
struct baton__cost_row {
  const char *formula;
  double (*time)(int n, double bytes, const baton__cost_t *c);
};

/* The cost tables of the rows of algo.c's table, one per algorithm. */
extern const baton__cost_row_t baton__ring_costs[BATON__COLL_COUNT];
extern const baton__cost_row_t baton__flat_costs[BATON__COLL_COUNT];
extern const baton__cost_row_t baton__pairwise_costs[BATON__COLL_COUNT];
extern const baton__cost_row_t baton__tree_costs[BATON__COLL_COUNT];
extern const baton__cost_row_t baton__naive_costs[BATON__COLL_COUNT];
extern const baton__cost_row_t baton__hier_costs[BATON__COLL_COUNT];
extern const baton__cost_row_t baton__rhd_costs[BATON__COLL_COUNT];
extern const baton__cost_row_t baton__rd_costs[BATON__COLL_COUNT];
extern const baton__cost_row_t baton__dbtree_costs[BATON__COLL_COUNT];
extern const baton__cost_row_t baton__direct_costs[BATON__COLL_COUNT];

/* What the symbols of the formulas mean, one line. */
extern const char baton__cost_legend[];

/* Predicted seconds for `algo` doing `coll` on n ranks with a message of
 * `bytes` (the larger buffer of the call, as baton-bench counts it: the
 * buffer of allreduce, broadcast and reduce; all N blocks for
 * reduce_scatter's input, allgather's and gather's output, scatter's
 * input, and each rank's alltoall buffer). -1 when algo does not serve
 * coll; 0 on one rank. */
double baton__model_time(const baton__algo_t *algo, baton__coll_t coll, int n, double bytes,
                         const baton__cost_t *c);
/* The formula of `algo` for `coll`, or NULL when it does not serve it. */
const char *baton__model_formula(const baton__algo_t *algo, baton__coll_t coll);

#endif /* BATON_MODEL_H */
