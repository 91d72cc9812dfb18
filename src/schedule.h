/*
 * schedule.h - the schedule of a collective, as data.
 *
 * An algorithm (one file in src/coll/) turns (collective, rank, size) into a list of
 * steps. The executor (exec.c) runs that list, the tracer logs it and the
 * diagram tool draws it, so all three agree by construction.
 *
 * Vocabulary, used the same way in every algorithm file:
 *  - chunk:   the buffer is cut into `nchunks` chunks, one per rank for the
 *             ring; chunk sizes differ by at most one element.
 *  - step:    one round of the algorithm; in a step a rank sends at most one
 *             chunk to one peer and receives at most one chunk from one peer.
 *  - segment: the pipelined unit. A chunk moves in segments of at most
 *             BATON_SEGMENT_BYTES, so the reduction of one segment overlaps
 *             the transfer of the next.
 */
#ifndef BATON_SCHEDULE_H
#define BATON_SCHEDULE_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
  BATON__PHASE_REDUCE_SCATTER,
  BATON__PHASE_ALLGATHER,
  BATON__PHASE_BROADCAST,
  BATON__PHASE_FLAT,      /* one step, every rank reads every other rank */
} baton__phase_t;

typedef enum {
  BATON__RECV_COPY,   /* receive and overwrite */
  BATON__RECV_REDUCE, /* receive and combine with this rank's own input */
} baton__recv_op_t;

typedef struct {
  uint8_t phase;    /* baton__phase_t */
  uint16_t step;    /* step number within the phase */
  int send_peer;    /* -1 when the step only receives */
  int send_chunk;
  int recv_peer;    /* -1 when the step only sends */
  int recv_chunk;
  uint8_t recv_op;  /* baton__recv_op_t */
  uint8_t keep;     /* the received chunk is final: store it in the output */
  uint8_t forward;  /* the result is what this rank sends at the next step */
} baton__step_t;

typedef enum {
  BATON__COLL_ALLREDUCE,
  BATON__COLL_REDUCE_SCATTER,
  BATON__COLL_ALLGATHER,
  BATON__COLL_BROADCAST,
  BATON__COLL_BARRIER, /* no schedule: only its signature is exchanged */
  BATON__COLL_COUNT
} baton__coll_t;

typedef struct {
  baton__coll_t coll;
  const char *algo;
  int nsteps;
  baton__step_t *steps; /* capacity fixed at communicator creation */
} baton__sched_t;

const char *baton__coll_name(baton__coll_t coll);
const char *baton__phase_name(baton__phase_t phase);

/* Ring: fills s for `coll` on the ring `order` (ranks in ring order, so that
 * the ring can follow the topology). Steps capacity must be >= 2 * size. */
void baton__ring_schedule(baton__sched_t *s, baton__coll_t coll, int rank,
                          int size, const int *order);

/* Chain (the ring opened at the root), for broadcast: the root sends the
 * one chunk `root` to the next rank, every other rank receives it, keeps it
 * and forwards it, until the rank before the root. Pipelined by segments,
 * so a large buffer costs about one transfer plus N-2 segment latencies. */
void baton__chain_schedule(baton__sched_t *s, baton__coll_t coll, int rank, int size,
                           const int *order, int root);

/* ---- The algorithms, as one table (algo.c): the one place the tracer, the
 * diagram tool, the cost model and the tests ask for a schedule. A new
 * algorithm adds a row there and appears in all of them. */

/* recv_chunk/send_chunk value meaning the whole buffer (flat). */
#define BATON__ALL_CHUNKS (-1)

typedef struct {
  const char *name;
  unsigned colls;   /* bit (1u << coll) for each collective it serves */
  const char *layout; /* how to draw the ranks: "ring" or "tree" */
  int (*max_steps)(int size);
  /* Fills s for one rank; count is the count of the public call, root
   * the root of a rooted collective (broadcast), order the ring (ranks in
   * ring order, following the topology). */
  void (*build)(baton__sched_t *s, baton__coll_t coll, int rank, int size,
                size_t count, int root, const int *order);
} baton__algo_t;

/* The table, *n rows; and the row named `name`, or NULL. */
const baton__algo_t *baton__algos(int *n);
const baton__algo_t *baton__algo_find(const char *name);
/* Collective by name, or BATON__COLL_COUNT. */
baton__coll_t baton__coll_find(const char *name);

/* The schedule of `algo` for (coll, rank, size, count, root). s->steps
 * must hold algo->max_steps(size) steps; root matters only to rooted
 * collectives. Returns 0, or -1 when algo does not serve coll or the
 * arguments are out of range. */
int baton__schedule_for(baton__sched_t *s, baton__coll_t coll, const baton__algo_t *algo,
                        int rank, int size, size_t count, int root);
/* The same on a given ring `order` (the communicator's): what the library
 * itself executes. schedule_for is this on the ring 0, 1, ..., N-1. */
int baton__schedule_on(baton__sched_t *s, baton__coll_t coll, const baton__algo_t *algo,
                       int rank, int size, size_t count, int root, const int *order);

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
