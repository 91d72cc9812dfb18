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

typedef struct {
  double alpha;   /* seconds per message (latency) */
  double beta;    /* seconds per byte moved (1 / bandwidth) */
  double gamma;   /* seconds per byte reduced (1 / reduction bandwidth) */
  double segment; /* bytes per pipeline segment (chain algorithms) */
  double hosts;   /* hosts the ranks are spread over (hier); 0: one rank each */
} baton__cost_t;

typedef struct {
  const char *coll, *algo;
  const char *formula; /* for people: K bytes, N ranks, L = ceil(log2 N) */
  double (*time)(int n, double bytes, const baton__cost_t *c);
} baton__model_t;

/* Every (collective, algorithm) the model knows, *n rows. */
const baton__model_t *baton__models(int *n);

/* Predicted seconds for `algo` doing `coll` on n ranks with a message of
 * `bytes` (the larger buffer of the call, as baton-bench counts it: the
 * buffer of allreduce, broadcast and reduce; all N blocks for
 * reduce_scatter's input, allgather's and gather's output, scatter's
 * input, and each rank's alltoall buffer). -1 when there is no such row. */
double baton__model_time(const char *coll, const char *algo, int n, double bytes,
                         const baton__cost_t *c);

#endif /* BATON_MODEL_H */
