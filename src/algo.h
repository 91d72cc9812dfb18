/*
 * algo.h - the table of algorithms (algo.c): the one place the executor,
 * the selection, the tracer, baton-viz, baton-model and the tests learn
 * what algorithms exist, what each serves and how it builds its schedule.
 * A new algorithm is one file in src/coll/ plus one row of the table.
 */
#ifndef BATON_ALGO_H
#define BATON_ALGO_H

#include "schedule.h"

/* What sets an algorithm apart, for the selection and the executor
 * (baton__algo_t.traits), so that neither tests names. */
enum {
  /* It runs over the ring's channels, with their cost and segment; the
   * others use the pair channels (or TCP) between any two ranks. */
  BATON__ALGO_RING_LINKS = 1u << 0,
  /* Its steps are the host's mailbox rendezvous (flat.c): every rank on
   * one host, the input within the mailbox (BATON_FLAT_BYTES). */
  BATON__ALGO_MAILBOX = 1u << 1,
  /* It folds each host into one leader (hier.c): it needs several hosts
   * and more than one rank on some host, and it pays a fold and an unfold
   * inside each host on top of its formula. */
  BATON__ALGO_HOST_LEADERS = 1u << 2,
  /* The algorithm that runs where nothing chooses one (a communicator of
   * one rank, one without its selection state) and whose times baton-tune
   * fits the ring's links to: the ring. One row has it. */
  BATON__ALGO_DEFAULT = 1u << 3,
  /* Each of its messages is one chunk, and in one round a rank sends any
   * peer at most one (pairwise): a round's piece of a chunk may fill the
   * half channel that otherwise a message of N chunks' pieces must fit. */
  BATON__ALGO_ONE_BLOCK = 1u << 4,
  /* It reads and writes the peers' buffers where they lie (direct.c):
   * every rank on one host, the communicator with registered memory
   * (baton_mem_alloc); where some rank's buffers are not registered, its
   * first step hands the call to the staged algorithm (exec_direct.c). */
  BATON__ALGO_REGISTERED = 1u << 5,
  /* It moves the buffer as two halves, each down or up (allreduce: up and
   * down) a tree of its own (dbtree.c): the layout gives them two chunks
   * (baton__layout_args_t.halves). */
  BATON__ALGO_HALVES = 1u << 6,
};

/* The collectives that the direct algorithm serves by CMA, on buffers
 * that are not registered, each copy through the kernel (BATON_CMA,
 * exec_direct.c): allgather and alltoall, where every rank sends and
 * receives alike, so the staged path's two copies of each byte (into a
 * channel and out of it) load every core and one copy halves that; and
 * broadcast, whose root writes a share of the buffer into each peer while
 * the peers read the rest, so that every core copies (one copy by the
 * non-root alone, the root idle, ran 0.4-1.4x the staged path; split, N=2
 * in place, 1.5-2.6x from 128 KiB to 32 MiB), where each rank has a core
 * (the selection's cannot()). Not
 * allgatherv: an allgather writes its block into each peer's output, at
 * the peer's displacement, and the torch backend's lists give every rank
 * displacements of its own (pulling instead made the registered allgather
 * 1.2-1.4x slower: each input read N times from memory, not once). N=2
 * and N=4 alltoall and allgather of 128 KiB-2 MiB ran 1.3-3.0x faster by
 * the kernel; gather and scatter, where the staged copies of the root and
 * the others overlap, 0.4-1.4x (docs/performance.md). */
static inline int baton__algo_by_cma(baton__coll_t coll) {
  return coll == BATON__COLL_ALLGATHER || coll == BATON__COLL_ALLTOALL ||
         coll == BATON__COLL_BROADCAST;
}

/* An algorithm's cost for one collective (model.h): the formula as
 * baton-model prints it and as code. */
typedef struct baton__cost_row baton__cost_row_t;

typedef struct baton__algo {
  const char *name;
  const char *summary;    /* one line, for BATON_ALGO's help and the docs */
  unsigned colls;         /* bit (1u << coll) for each collective it serves */
  unsigned scratch_colls; /* those for which a rank may hold the whole message in
                             scratch memory (rhd's reduce-scatter, a tree's inner
                             ranks under a rooted collective) */
  unsigned traits;        /* BATON__ALGO_* */
  const char *layout;     /* how to draw the ranks: "ring" or "tree" */
  int (*max_steps)(int size);
  /* Fills s (s->cap >= max_steps(size)) for one rank of the call b
   * describes; 0, or -1 when it cannot (s is then void). */
  int (*build)(baton__sched_t *s, const baton__build_t *b);
  /* Its cost per collective, indexed by baton__coll_t (model.c): an entry
   * for every collective it serves, and only for those. */
  const baton__cost_row_t *costs;
} baton__algo_t;

/* The most steps any algorithm of the table needs on `size` ranks. */
int baton__max_steps(int size);

/* The table, *n rows; and the row named `name`, or NULL. */
const baton__algo_t *baton__algos(int *n);
const baton__algo_t *baton__algo_find(const char *name);
/* The collectives algo serves, for people: "allreduce, allgather(v), ..."
 * (a v-variant beside its collective). Returns buf. */
const char *baton__algo_colls(const baton__algo_t *algo, char *buf, size_t len);
/* The row with BATON__ALGO_DEFAULT: the ring. */
const baton__algo_t *baton__algo_default(void);
/* 1 + the row's index: how a call's signature names its algorithm. */
int baton__algo_id(const baton__algo_t *algo);

/* The schedule of `algo` for the call b describes (b->order NULL: the ring
 * 0, 1, ..., N-1). s->steps must hold algo->max_steps(size) steps (s->cap).
 * Returns 0, or -1 when algo does not serve the collective, the arguments
 * are out of range or the builder refuses. */
int baton__schedule_build(baton__sched_t *s, const baton__algo_t *algo, const baton__build_t *b);

/* The builders, one per file of src/coll/, and their step counts. */
int baton__ring_build(baton__sched_t *s, const baton__build_t *b); /* ring.c: ring and chain */
int baton__ring_max_steps(int size);
int baton__flat_build(baton__sched_t *s, const baton__build_t *b); /* flat.c */
int baton__flat_max_steps(int size);
int baton__pairwise_build(baton__sched_t *s, const baton__build_t *b);
int baton__pairwise_max_steps(int size);
int baton__tree_build(baton__sched_t *s, const baton__build_t *b);
int baton__tree_max_steps(int size);
int baton__naive_build(baton__sched_t *s, const baton__build_t *b);
int baton__naive_max_steps(int size);
int baton__hier_build(baton__sched_t *s, const baton__build_t *b);
int baton__hier_max_steps(int size);
int baton__rhd_build(baton__sched_t *s, const baton__build_t *b);
int baton__rhd_max_steps(int size);
int baton__rd_build(baton__sched_t *s, const baton__build_t *b);
int baton__rd_max_steps(int size);
int baton__dbtree_build(baton__sched_t *s, const baton__build_t *b);
int baton__dbtree_max_steps(int size);
int baton__direct_build(baton__sched_t *s, const baton__build_t *b);
int baton__direct_max_steps(int size);

#endif /* BATON_ALGO_H */
