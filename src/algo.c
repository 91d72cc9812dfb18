/*
 * algo.c - the table of algorithms (algo.h): for each, what it is in one
 * line, which collectives it serves, what sets it apart, how many steps it
 * may need and the function that writes its schedule.
 *
 * The executor, the tracer, baton-viz, baton-model and the schedule tests
 * all reach an algorithm's steps through baton__schedule_build(), so a new
 * algorithm (one file in src/coll/ plus one row below) is drawn, traced and
 * tested without touching any of them; the selection prices it, BATON_ALGO
 * accepts it, baton-model lists and measures it, and the help of BATON_ALGO
 * and docs/algorithms.md name it, all from its row (the formulas live in
 * model.c). Code elsewhere tells algorithms apart by their traits, never by
 * their names.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algo.h"
#include "model.h"

#define BIT(c) (1u << BATON__COLL_##c)
#define FLAT_COLLS (BIT(ALLREDUCE) | BIT(REDUCE_SCATTER) | BIT(ALLGATHER) | BIT(BROADCAST))
#define RING_COLLS (FLAT_COLLS | BIT(REDUCE) | BIT(ALLGATHERV) | BIT(REDUCE_SCATTERV))
#define RHD_COLLS (BIT(ALLREDUCE) | BIT(REDUCE_SCATTER) | BIT(REDUCE_SCATTERV))
#define RD_COLLS (BIT(ALLREDUCE) | BIT(ALLGATHER) | BIT(ALLGATHERV))
#define TREE_COLLS (BIT(ALLREDUCE) | BIT(BROADCAST) | BIT(REDUCE) | BIT(GATHER) | BIT(SCATTER))
#define NAIVE_COLLS (RING_COLLS | BIT(GATHER) | BIT(SCATTER))
#define DIRECT_COLLS (NAIVE_COLLS | BIT(ALLTOALL))

#define ALGO(name_, summary_, colls_, traits_, scratch_, layout_, prefix_)                         \
  {                                                                                                \
    .name = name_, .summary = summary_, .colls = colls_, .traits = traits_,                        \
    .scratch_colls = scratch_, .layout = layout_, .max_steps = baton__##prefix_##_max_steps,       \
    .build = baton__##prefix_##_build, .costs = baton__##prefix_##_costs                           \
  }

static const baton__algo_t algos[] = {
    ALGO("ring", "pipelined ring (chain for broadcast and reduce): bandwidth-optimal, 2(N-1) steps",
         RING_COLLS, BATON__ALGO_RING_LINKS | BATON__ALGO_DEFAULT, 0, "ring", ring),
    ALGO("flat",
         "one rendezvous through the host's shared-memory mailboxes: small messages; a "
         "broadcast past a mailbox fans out from one copy",
         FLAT_COLLS, BATON__ALGO_RING_LINKS | BATON__ALGO_MAILBOX, 0, "ring", flat),
    ALGO("pairwise", "alltoall(v) in N-1 steps, each rank sending one block and receiving one",
         BIT(ALLTOALL) | BIT(ALLTOALLV), BATON__ALGO_ONE_BLOCK, 0, "ring", pairwise),
    ALGO("tree", "binomial tree: log2(N) steps of the whole message", TREE_COLLS, 0,
         BIT(REDUCE) | BIT(GATHER) | BIT(SCATTER), "tree", tree),
    ALGO("naive", "everything through one rank: the baseline", NAIVE_COLLS, 0, 0, "tree", naive),
    ALGO("hier", "fold each host into a leader, ring among the leaders, unfold: several hosts",
         BIT(ALLREDUCE), BATON__ALGO_HOST_LEADERS, 0, "ring", hier),
    ALGO("rhd", "recursive halving-doubling: 2 log2(N) steps, the ring's bytes", RHD_COLLS, 0,
         BIT(REDUCE_SCATTER) | BIT(REDUCE_SCATTERV), "ring", rhd),
    ALGO("rd", "recursive doubling: log2(N) steps of the whole message, small messages", RD_COLLS,
         0, 0, "ring", rd),
    ALGO("dbtree",
         "double binary tree: two pipelined trees, each rank a leaf in one, each carrying half",
         BIT(ALLREDUCE) | BIT(BROADCAST) | BIT(REDUCE), BATON__ALGO_HALVES, BIT(REDUCE), "tree",
         dbtree),
    ALGO("direct",
         "registered buffers: each rank reads the inputs and writes the outputs where they lie",
         DIRECT_COLLS, BATON__ALGO_REGISTERED, 0, "ring", direct),
};

const baton__algo_t *baton__algos(int *n) {
  *n = (int)(sizeof algos / sizeof algos[0]);
  return algos;
}

int baton__algo_id(const baton__algo_t *algo) { return algo ? (int)(algo - algos) + 1 : 0; }

int baton__max_steps(int size) {
  int most = 0;
  for (size_t i = 0; i < sizeof algos / sizeof algos[0]; i++)
    most = algos[i].max_steps(size) > most ? algos[i].max_steps(size) : most;
  return most;
}

/* A collective and its v-variant (a count per rank), which a list names
 * once as "allgather(v)". */
static const baton__coll_t variants[][2] = {
    {BATON__COLL_ALLGATHER, BATON__COLL_ALLGATHERV},
    {BATON__COLL_REDUCE_SCATTER, BATON__COLL_REDUCE_SCATTERV},
    {BATON__COLL_ALLTOALL, BATON__COLL_ALLTOALLV},
};

const char *baton__algo_colls(const baton__algo_t *algo, char *buf, size_t len) {
  size_t off = 0;
  buf[0] = '\0';
  for (int c = 0; c < BATON__COLL_COUNT && off < len; c++) {
    const char *suffix = "";
    int skip = !(algo->colls & (1u << c));
    for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++) {
      int base = (algo->colls >> variants[i][0]) & 1, v = (algo->colls >> variants[i][1]) & 1;
      if (c == (int)variants[i][0] && v)
        suffix = "(v)";
      if (c == (int)variants[i][1] && base)
        skip = 1;
    }
    if (!skip)
      off += (size_t)snprintf(buf + off, len - off, "%s%s%s", off ? ", " : "",
                              baton__coll_name((baton__coll_t)c), suffix);
  }
  return buf;
}

const baton__algo_t *baton__algo_default(void) {
  for (size_t i = 0; i < sizeof algos / sizeof algos[0]; i++)
    if (algos[i].traits & BATON__ALGO_DEFAULT)
      return &algos[i];
  return &algos[0];
}

const baton__algo_t *baton__algo_find(const char *name) {
  for (size_t i = 0; i < sizeof algos / sizeof algos[0]; i++)
    if (strcmp(algos[i].name, name) == 0)
      return &algos[i];
  return NULL;
}

baton__coll_t baton__coll_find(const char *name) {
  for (int c = 0; c < BATON__COLL_COUNT; c++)
    if (strcmp(baton__coll_name((baton__coll_t)c), name) == 0)
      return (baton__coll_t)c;
  return BATON__COLL_COUNT;
}

int baton__schedule_build(baton__sched_t *s, const baton__algo_t *algo, const baton__build_t *b) {
  s->nsteps = 0;
  s->overflow = 0;
  s->algo = algo;
  s->coll = b->coll;
  if (!algo || (unsigned)b->coll >= BATON__COLL_COUNT || !(algo->colls & (1u << b->coll)) ||
      b->size < 1 || b->rank < 0 || b->rank >= b->size || b->root < 0 || b->root >= b->size ||
      s->cap < algo->max_steps(b->size))
    return -1;
  baton__build_t with_order = *b;
  int *identity = NULL;
  if (!b->order) { /* offline: the ring 0, 1, ..., N-1 */
    if (!(identity = malloc((size_t)b->size * sizeof *identity)))
      return -1;
    for (int i = 0; i < b->size; i++)
      identity[i] = i;
    with_order.order = identity;
  }
  int rc = b->size == 1 ? 0 : algo->build(s, &with_order);
  free(identity);
  if (rc != 0 || s->overflow) {
    s->nsteps = 0;
    return -1;
  }
  return 0;
}
