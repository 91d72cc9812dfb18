/*
 * algo.c - the table of algorithms: for each, its name and a line saying
 * what it is, which collectives it serves, what sets it apart (traits), how
 * many steps it may need, the function that writes its schedule and its
 * cost per collective (the formulas live in model.c).
 *
 * The executor, the tracer, baton-viz, baton-model and the schedule tests
 * all reach an algorithm's steps through baton__schedule_for(), so a new
 * algorithm (one file in src/coll/ plus one row below) is drawn, traced and
 * tested without touching any of them; the selection prices it, BATON_ALGO
 * accepts it, baton-model lists and measures it, and the help of BATON_ALGO
 * and docs/algorithms.md name it, all from its row. Code elsewhere tells
 * algorithms apart by their traits, never by their names.
 */
#include <stdio.h>
#include <string.h>

#include "model.h"
#include "schedule.h"

/* Larger communicators than this are never drawn or checked offline. */
#define MAX_OFFLINE_SIZE 4096

static int ring_max_steps(int size) { return 2 * size; }

/* Broadcast and reduce on the ring are the chain: the ring opened at the
 * root. */
static void ring_build(baton__sched_t *s, baton__coll_t coll, int rank, int size, size_t count,
                       int root, const int *order) {
  (void)count;
  if (coll == BATON__COLL_BROADCAST || coll == BATON__COLL_REDUCE)
    baton__chain_schedule(s, coll, rank, size, order, root);
  else
    baton__ring_schedule(s, coll, rank, size, order);
}

static int flat_max_steps(int size) { return size; }

static void hier_build(baton__sched_t *s, baton__coll_t coll, int rank, int size, size_t count,
                       int root, const int *order) {
  (void)count;
  (void)root;
  baton__hier_schedule(s, coll, rank, size, order);
}

/* flat.c as data: one step in which this rank reads, from every other
 * rank's mailbox, what it needs: everything (allreduce), its own chunk of
 * every input (reduce-scatter), the other rank's input (allgather) or the
 * root's (broadcast). No rank sends: each writes its own mailbox and the
 * others read it. */
static void flat_build(baton__sched_t *s, baton__coll_t coll, int rank, int size, size_t count,
                       int root, const int *order) {
  (void)order;
  (void)count;
  s->coll = coll;
  s->algo = "flat";
  s->nsteps = 0;
  for (int q = 0; q < size; q++) {
    if (q == rank || (coll == BATON__COLL_BROADCAST && q != root))
      continue;
    baton__step_t *st = &s->steps[s->nsteps++];
    memset(st, 0, sizeof *st);
    st->phase = BATON__PHASE_FLAT;
    st->send_peer = -1;
    st->send_chunk = -1;
    st->recv_peer = q;
    st->recv_n = 1;
    st->recv_with = BATON__FROM_WORK;
    st->recv_chunk = coll == BATON__COLL_ALLREDUCE        ? BATON__ALL_CHUNKS
                     : coll == BATON__COLL_REDUCE_SCATTER ? rank
                                                          : q;
    st->recv_op = coll == BATON__COLL_ALLREDUCE || coll == BATON__COLL_REDUCE_SCATTER
                      ? BATON__RECV_REDUCE
                      : BATON__RECV_COPY;
    st->keep = 1;
  }
}

#define BIT(c) (1u << BATON__COLL_##c)
#define FLAT_COLLS (BIT(ALLREDUCE) | BIT(REDUCE_SCATTER) | BIT(ALLGATHER) | BIT(BROADCAST))
#define RING_COLLS (FLAT_COLLS | BIT(REDUCE) | BIT(ALLGATHERV) | BIT(REDUCE_SCATTERV))
#define RHD_COLLS (BIT(ALLREDUCE) | BIT(REDUCE_SCATTER) | BIT(REDUCE_SCATTERV))
#define RD_COLLS (BIT(ALLREDUCE) | BIT(ALLGATHER) | BIT(ALLGATHERV))
#define TREE_COLLS (BIT(ALLREDUCE) | BIT(BROADCAST) | BIT(REDUCE) | BIT(GATHER) | BIT(SCATTER))
#define NAIVE_COLLS (RING_COLLS | BIT(GATHER) | BIT(SCATTER))

#define ALGO(name_, summary_, colls_, traits_, scratch_, layout_, max_steps_, build_, costs_)      \
  {                                                                                                \
    .name = name_, .summary = summary_, .colls = colls_, .traits = traits_,                        \
    .scratch_colls = scratch_, .layout = layout_, .max_steps = max_steps_, .build = build_,        \
    .costs = costs_                                                                                \
  }

static const baton__algo_t algos[] = {
    ALGO("ring", "pipelined ring (chain for broadcast and reduce): bandwidth-optimal, 2(N-1) steps",
         RING_COLLS, BATON__ALGO_RING_LINKS | BATON__ALGO_DEFAULT, 0, "ring", ring_max_steps,
         ring_build, baton__ring_costs),
    ALGO("flat", "one rendezvous through the host's shared-memory mailboxes: small messages",
         FLAT_COLLS, BATON__ALGO_RING_LINKS | BATON__ALGO_MAILBOX, 0, "ring", flat_max_steps,
         flat_build, baton__flat_costs),
    ALGO("pairwise", "alltoall in N-1 steps, each rank sending one block and receiving one",
         BIT(ALLTOALL), 0, 0, "ring", baton__pairwise_max_steps, baton__pairwise_build,
         baton__pairwise_costs),
    ALGO("tree", "binomial tree: log2(N) steps of the whole message", TREE_COLLS, 0,
         BIT(REDUCE) | BIT(GATHER) | BIT(SCATTER), "tree", baton__tree_max_steps,
         baton__tree_schedule, baton__tree_costs),
    ALGO("naive", "everything through one rank: the baseline", NAIVE_COLLS, 0, 0, "tree",
         baton__naive_max_steps, baton__naive_schedule, baton__naive_costs),
    ALGO("hier", "fold each host into a leader, ring among the leaders, unfold: several hosts",
         BIT(ALLREDUCE), BATON__ALGO_HOST_LEADERS, 0, "ring", ring_max_steps, hier_build,
         baton__hier_costs),
    ALGO("rhd", "recursive halving-doubling: 2 log2(N) steps, the ring's bytes", RHD_COLLS, 0,
         BIT(REDUCE_SCATTER) | BIT(REDUCE_SCATTERV), "ring", baton__rhd_max_steps,
         baton__rhd_schedule, baton__rhd_costs),
    ALGO("rd", "recursive doubling: log2(N) steps of the whole message, small messages", RD_COLLS,
         0, 0, "ring", baton__rd_max_steps, baton__rd_schedule, baton__rd_costs),
};

const baton__algo_t *baton__algos(int *n) {
  *n = (int)(sizeof algos / sizeof algos[0]);
  return algos;
}

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

int baton__schedule_on(baton__sched_t *s, baton__coll_t coll, const baton__algo_t *algo, int rank,
                       int size, size_t count, int root, const int *order) {
  if (!algo || (unsigned)coll >= BATON__COLL_COUNT || !(algo->colls & (1u << coll)) || size < 1 ||
      rank < 0 || rank >= size || root < 0 || root >= size)
    return -1;
  algo->build(s, coll, rank, size, count, root, order);
  return 0;
}

int baton__schedule_for(baton__sched_t *s, baton__coll_t coll, const baton__algo_t *algo, int rank,
                        int size, size_t count, int root) {
  int identity[MAX_OFFLINE_SIZE];
  if (size > MAX_OFFLINE_SIZE)
    return -1;
  for (int i = 0; i < size; i++)
    identity[i] = i;
  return baton__schedule_on(s, coll, algo, rank, size, count, root, identity);
}
