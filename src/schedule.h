/*
 * schedule.h - the schedule of a collective, as data.
 *
 * An algorithm (one file in src/coll/) turns (collective, rank, size) into a list of
 * steps. The executor (exec.c) runs that list, the tracer logs it and the
 * diagram tool draws it, so all three agree by construction.
 *
 * Vocabulary, used the same way in every algorithm file:
 *  - chunk:   the buffer is cut into N chunks (N = ranks), chunk c being
 *             rank c's part (below, per collective); sizes differ by at
 *             most one element, or follow the counts of the v-variants.
 *  - step:    one round of the algorithm; in a step a rank sends at most one
 *             message to one peer and receives at most one from one peer; a
 *             message is a run of chunks (one for the ring).
 *  - segment: the pipelined unit. A chunk moves in segments of at most
 *             BATON_SEGMENT_BYTES, so the reduction of one segment overlaps
 *             the transfer of the next.
 */
#ifndef BATON_SCHEDULE_H
#define BATON_SCHEDULE_H

#include <stddef.h>
#include <stdint.h>

/* Phases, in the order they happen within a schedule (the offline checks
 * and the drawing order steps by (phase, step)). */
typedef enum {
  BATON__PHASE_FOLD, /* non-power-of-two: extra ranks hand their data in */
  BATON__PHASE_REDUCE_SCATTER,
  BATON__PHASE_REDUCE, /* towards a root (tree, chain, naive) */
  BATON__PHASE_GATHER,
  BATON__PHASE_EXCHANGE, /* whole buffers (rd allreduce) or blocks (alltoall) */
  BATON__PHASE_ALLGATHER,
  BATON__PHASE_SCATTER,
  BATON__PHASE_BROADCAST,
  BATON__PHASE_UNFOLD, /* non-power-of-two: extra ranks get the result */
  BATON__PHASE_FLAT,   /* one step, every rank reads every other rank */
  BATON__PHASE_COUNT
} baton__phase_t;

typedef enum {
  BATON__RECV_COPY,   /* receive and overwrite */
  BATON__RECV_REDUCE, /* receive and combine with what recv_with names */
} baton__recv_op_t;

/* Where a chunk's bytes are, for a send or for the reduction of a receive:
 *  - INPUT: the caller's send buffer, at the chunk's input offset;
 *  - WORK:  the chunk's working copy. That is the caller's output where
 *           this rank has the chunk in its output, else the communicator's
 *           scratch memory (for chunks a rank only passes on: partial sums
 *           on a non-root in a tree, blocks a gather tree forwards). */
typedef enum { BATON__FROM_INPUT, BATON__FROM_WORK } baton__from_t;

/* One step of one rank. A step sends at most one message and receives at
 * most one. A message carries a run of chunks: `n` chunks from `chunk` on,
 * taken modulo the number of chunks (so a run may wrap past the last), one
 * piece of each per round; n is 1 for the ring.
 *
 * The executor first sends, then receives. What it receives lands in WORK,
 * copied or combined (REDUCE: received op recv_with), unless `forward` says
 * it goes straight out again as the next step's send (the ring's pipeline:
 * no memory touched); `keep` then says whether it also lands in WORK.
 *
 * A step with send_keep and no send_peer is a local copy: the chunks go
 * from INPUT to WORK, e.g. a rank's own block before a gather tree sends
 * its subtree. With a send_peer, send_keep sends from INPUT and stores the
 * same bytes in WORK on the way (allgather's own chunk).
 *
 * An algorithm may overwrite, in WORK, bytes it sent earlier only after it
 * has received something that depends on that send having arrived: TCP
 * may still be sending from the memory itself (send_ref). */
typedef struct {
  uint8_t phase; /* baton__phase_t */
  uint16_t step; /* step number within the phase */
  int send_peer; /* -1 when the step only receives */
  int send_chunk;
  uint16_t send_n;   /* chunks in the message */
  uint8_t send_from; /* baton__from_t */
  uint8_t send_keep; /* see above */
  int recv_peer;     /* -1 when the step only sends */
  int recv_chunk;
  uint16_t recv_n;
  uint8_t recv_op;   /* baton__recv_op_t */
  uint8_t recv_with; /* baton__from_t: what REDUCE combines the message with */
  uint8_t keep;      /* the result lands in WORK */
  uint8_t forward;   /* the result is the next step's send (n == 1 on both) */
  uint8_t finish;    /* the result is the complete reduction: AVG divides here */
} baton__step_t;

typedef enum {
  BATON__COLL_ALLREDUCE,
  BATON__COLL_REDUCE_SCATTER,
  BATON__COLL_ALLGATHER,
  BATON__COLL_BROADCAST,
  BATON__COLL_REDUCE,
  BATON__COLL_ALLTOALL,
  BATON__COLL_GATHER,
  BATON__COLL_SCATTER,
  BATON__COLL_ALLGATHERV,      /* allgather with a count per rank */
  BATON__COLL_REDUCE_SCATTERV, /* reduce_scatter with a count per rank */
  BATON__COLL_BARRIER,         /* no schedule: only its signature is exchanged */
  BATON__COLL_COUNT
} baton__coll_t;

/* The chunks of each collective. There are always N chunks (N = size),
 * chunk c being rank c's part:
 *  - allreduce, reduce_scatter(v): chunk c is the part of the buffer that
 *    rank c owns once reduce-scattered; every rank has all N in INPUT;
 *  - allgather(v), gather: chunk c is rank c's block; a rank has only its
 *    own in INPUT;
 *  - alltoall: chunk c is the block this rank sends to rank c (INPUT) and
 *    the block it receives from rank c (output): a block moves from INPUT
 *    chunk `to` on one rank to output chunk `from` on the other, so the
 *    schedule names the sender's index on send and the receiver's on
 *    receive;
 *  - scatter: chunk c is rank c's block, all in the root's INPUT;
 *  - broadcast, reduce: one chunk holds the whole buffer, chunk `root`;
 *    the others are empty. */
typedef struct {
  baton__coll_t coll;
  const char *algo;
  int nsteps;
  baton__step_t *steps; /* capacity fixed at communicator creation */
  /* Per rank, the index of its host (hosts numbered along the ring); set
   * by the communicator, NULL offline (every rank its own host). Only the
   * hierarchical algorithm reads it. */
  const int *host;
} baton__sched_t;

const char *baton__coll_name(baton__coll_t coll);
const char *baton__phase_name(baton__phase_t phase);

/* Ring: fills s for `coll` on the ring `order` (ranks in ring order, so that
 * the ring can follow the topology). Steps capacity must be >= 2 * size. */
void baton__ring_schedule(baton__sched_t *s, baton__coll_t coll, int rank, int size,
                          const int *order);

/* Chain (the ring opened at the root), for broadcast and reduce. Broadcast:
 * the root sends the one chunk `root` to the next rank, every other rank
 * receives it, keeps it and forwards it, until the rank before the root.
 * Reduce runs the other way round: the rank after the root sends its
 * input, each next one adds its own and passes the sum on, and the root
 * adds its own last. Pipelined by segments, so a large buffer costs about
 * one transfer plus N-2 segment latencies. */
void baton__chain_schedule(baton__sched_t *s, baton__coll_t coll, int rank, int size,
                           const int *order, int root);

/* Pairwise exchange (coll/pairwise.c), for alltoall: N - 1 steps, in each
 * of which every rank sends one block and receives one. */
int baton__pairwise_max_steps(int size);
void baton__pairwise_build(baton__sched_t *s, baton__coll_t coll, int rank, int size, size_t count,
                           int root, const int *order);

/* Binomial tree (tree.c) and the hub-and-spokes baseline (naive.c): the
 * builders of their rows in algo.c's table, and their step counts. */
void baton__tree_schedule(baton__sched_t *s, baton__coll_t coll, int rank, int size, size_t count,
                          int root, const int *order);
int baton__tree_max_steps(int size);
void baton__naive_schedule(baton__sched_t *s, baton__coll_t coll, int rank, int size, size_t count,
                           int root, const int *order);
int baton__naive_max_steps(int size);
/* Hierarchical allreduce (hier.c): fold into one leader per host, ring
 * among the leaders, unfold. Steps capacity must be >= 2 * size. */
void baton__hier_schedule(baton__sched_t *s, baton__coll_t coll, int rank, int size,
                          const int *order);
/* Recursive halving-doubling (rhd.c): allreduce, reduce_scatter(v). */
int baton__rhd_max_steps(int size);
void baton__rhd_schedule(baton__sched_t *s, baton__coll_t coll, int rank, int size, size_t count,
                         int root, const int *order);
/* Recursive doubling (rd.c): allreduce, allgather(v). */
int baton__rd_max_steps(int size);
void baton__rd_schedule(baton__sched_t *s, baton__coll_t coll, int rank, int size, size_t count,
                        int root, const int *order);

/* ---- The algorithms, as one table (algo.c): the one place the tracer, the
 * diagram tool, the cost model and the tests ask for a schedule. A new
 * algorithm adds a row there and appears in all of them. */

/* recv_chunk/send_chunk value meaning the whole buffer (flat). */
#define BATON__ALL_CHUNKS (-1)

/* What sets an algorithm apart, for the selection and the dispatch
 * (baton__algo_t.traits), so that neither tests names. */
enum {
  /* It runs over the ring's channels, with their cost and segment; the
   * others use the pair channels (or TCP) between any two ranks. */
  BATON__ALGO_RING_LINKS = 1u << 0,
  /* One rendezvous through the shared-memory mailboxes (flat.c), not the
   * executor: every rank on one host, the input within BATON_FLAT_BYTES. */
  BATON__ALGO_MAILBOX = 1u << 1,
  /* It folds each host into one leader (hier.c): it needs several hosts
   * and more than one rank on some host, and it pays a fold and an unfold
   * inside each host on top of its formula. */
  BATON__ALGO_HOST_LEADERS = 1u << 2,
  /* The algorithm that runs where nothing chooses one (a communicator of
   * one rank, one without its selection state) and whose times baton-tune
   * fits the ring's links to: the ring. One row has it. */
  BATON__ALGO_DEFAULT = 1u << 3,
};

/* An algorithm's cost for one collective (model.h): the formula as
 * baton-model prints it and as code. */
typedef struct baton__cost_row baton__cost_row_t;

typedef struct {
  const char *name;
  const char *summary;    /* one line: what it is, when it wins */
  unsigned colls;         /* bit (1u << coll) for each collective it serves */
  unsigned scratch_colls; /* those for which a rank may hold the whole message in
                             scratch memory (rhd's reduce-scatter, a tree's inner
                             ranks under a rooted collective) */
  unsigned traits;        /* BATON__ALGO_* */
  const char *layout;     /* how to draw the ranks: "ring" or "tree" */
  int (*max_steps)(int size);
  /* Fills s for one rank; count is the count of the public call, root
   * the root of a rooted collective (broadcast), order the ring (ranks in
   * ring order, following the topology). */
  void (*build)(baton__sched_t *s, baton__coll_t coll, int rank, int size, size_t count, int root,
                const int *order);
  /* Its cost per collective, indexed by baton__coll_t (model.c): an entry
   * for each collective in colls, none for the others. */
  const baton__cost_row_t *costs;
} baton__algo_t;

/* The most steps any algorithm of the table needs on `size` ranks. */
int baton__max_steps(int size);

/* The table, *n rows; and the row named `name`, or NULL. */
const baton__algo_t *baton__algos(int *n);
const baton__algo_t *baton__algo_find(const char *name);
/* The collectives `algo` serves, for people: "allreduce, allgather(v)"
 * (a v-variant beside its collective). Returns buf. */
const char *baton__algo_colls(const baton__algo_t *algo, char *buf, size_t len);
/* The row with BATON__ALGO_DEFAULT: the ring. */
const baton__algo_t *baton__algo_default(void);
/* Collective by name, or BATON__COLL_COUNT. */
baton__coll_t baton__coll_find(const char *name);

/* The schedule of `algo` for (coll, rank, size, count, root). s->steps
 * must hold algo->max_steps(size) steps; root matters only to rooted
 * collectives. Returns 0, or -1 when algo does not serve coll or the
 * arguments are out of range. */
int baton__schedule_for(baton__sched_t *s, baton__coll_t coll, const baton__algo_t *algo, int rank,
                        int size, size_t count, int root);
/* The same on a given ring `order` (the communicator's): what the library
 * itself executes. schedule_for is this on the ring 0, 1, ..., N-1. */
int baton__schedule_on(baton__sched_t *s, baton__coll_t coll, const baton__algo_t *algo, int rank,
                       int size, size_t count, int root, const int *order);

/* Chunk c of `count` elements cut into n chunks: the first count % n chunks
 * hold one element more. */
static inline size_t baton__chunk_off(size_t count, int n, int c) {
  size_t q = count / (size_t)n, r = count % (size_t)n;
  return (size_t)c * q + ((size_t)c < r ? (size_t)c : r);
}
static inline size_t baton__chunk_len(size_t count, int n, int c) {
  return count / (size_t)n + ((size_t)c < count % (size_t)n ? 1 : 0);
}

#endif /* BATON_SCHEDULE_H */
