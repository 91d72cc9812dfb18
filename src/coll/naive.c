/*
 * naive.c - the baseline: gather everything at one rank, reduce there,
 * send the result back to every rank.
 *
 * One rank, the hub (the root of a rooted collective, else rank 0), talks
 * to every other rank in turn, in rank order; the others talk only to the
 * hub. Hub round i serves the i-th other rank, whose own steps carry the
 * same round, so that each send meets its receive at the same (phase,
 * step) and the hub takes one message per round.
 *
 *  - allreduce: every other rank sends its whole input to rank 0, which
 *    recv-reduces them in rank order (the first with its INPUT, then WORK;
 *    the last finishes the sum), then sends the result to each rank in
 *    turn, which recv-copies it: 2(N-1) messages of the whole buffer
 *    through one rank, (N-1)(a + Kb + Kg) + (N-1)(a + Kb). The ring moves
 *    2(N-1)/N K per rank instead, spread over all links: this is the
 *    comparison it wins.
 *  - reduce_scatter(v): the same gather and reduction at rank 0, then each
 *    rank gets only its chunk.
 *  - allgather(v): every other rank sends its block to rank 0 and copies
 *    it into its own output; rank 0 copies its own, recv-copies the others
 *    and sends each rank the N-1 blocks it lacks, as one run starting after
 *    the rank's own.
 *  - broadcast: the root sends the buffer to each rank in turn (and copies
 *    it into its own output).
 *  - reduce: every rank sends its input to the root, which recv-reduces.
 *  - gather, scatter: the direct, linear forms: each block goes straight
 *    between its rank and the root.
 * At most 2N-1 steps a rank (the hub of an allgather).
 */
#include "steps.h"

/* A rank's place among the non-hub ranks, in rank order: its round. */
static int turn(int rank, int hub) { return rank < hub ? rank : rank - 1; }

/* What moves between the hub and rank q: the run [chunk, chunk + n). */
typedef struct {
  int chunk, n;
} run_t;

/* Which run a collective moves to the hub (in) or from it (out) for rank q. */
static run_t run_of(baton__coll_t coll, int in, int q, int size, int root) {
  switch (coll) {
  case BATON__COLL_ALLREDUCE:
    return (run_t){0, size};
  case BATON__COLL_REDUCE_SCATTER:
  case BATON__COLL_REDUCE_SCATTERV:
    return in ? (run_t){0, size} : (run_t){q, 1};
  case BATON__COLL_ALLGATHER:
  case BATON__COLL_ALLGATHERV:
    return in ? (run_t){q, 1} : (run_t){(q + 1) % size, size - 1};
  case BATON__COLL_BROADCAST:
  case BATON__COLL_REDUCE:
    return (run_t){root, 1};
  default: /* gather, scatter */
    return (run_t){q, 1};
  }
}

/* A step between the hub and rank q (the peer: q at the hub, the hub at q). */
static baton__step_t *add(baton__sched_t *s, baton__step_kind_t kind, baton__phase_t phase,
                          int peer, int q, run_t r, int hub, baton__from_t src) {
  return baton__step_add(s, kind, phase, turn(q, hub), peer, r.chunk, r.n, src);
}

/* Every other rank sends its run to the hub, which copies it or combines
 * it into WORK. */
static void to_hub(baton__sched_t *s, baton__coll_t coll, baton__phase_t phase, int rank, int size,
                   int hub, int reduce) {
  if (rank != hub) {
    run_t r = run_of(coll, 1, rank, size, hub);
    add(s, BATON__STEP_SEND, phase, hub, rank, r, hub, BATON__FROM_INPUT);
    /* An allgather rank's own block belongs in its output too. */
    if (coll == BATON__COLL_ALLGATHER || coll == BATON__COLL_ALLGATHERV)
      add(s, BATON__STEP_COPY, phase, -1, rank, r, hub, BATON__FROM_INPUT);
    return;
  }
  if (!reduce) /* the hub's own block, INPUT to its output */
    baton__step_add(s, BATON__STEP_COPY, phase, 0, -1, hub, 1, BATON__FROM_INPUT);
  for (int q = 0, i = 0; q < size; q++) {
    if (q == hub)
      continue;
    baton__step_t *st =
        add(s, reduce ? BATON__STEP_RECV_REDUCE : BATON__STEP_RECV_COPY, phase, q, q,
            run_of(coll, 1, q, size, hub), hub, i++ ? BATON__FROM_WORK : BATON__FROM_INPUT);
    st->finish = (uint8_t)(reduce && i == size - 1);
  }
}

/* The hub sends each other rank its run, from `from`; they receive it. */
static void from_hub(baton__sched_t *s, baton__coll_t coll, baton__phase_t phase, int rank,
                     int size, int hub, baton__from_t from) {
  if (rank != hub) {
    add(s, BATON__STEP_RECV_COPY, phase, hub, rank, run_of(coll, 0, rank, size, hub), hub,
        BATON__FROM_INPUT);
    return;
  }
  if (coll == BATON__COLL_SCATTER) /* the root's own block, INPUT to its output */
    baton__step_add(s, BATON__STEP_COPY, phase, 0, -1, hub, 1, BATON__FROM_INPUT);
  int first = 1;
  for (int q = 0; q < size; q++) {
    if (q == hub)
      continue;
    run_t r = run_of(coll, 0, q, size, hub);
    add(s, BATON__STEP_SEND, phase, q, q, r, hub, from);
    /* The broadcast root's output gets the buffer too, once. */
    if (first && coll == BATON__COLL_BROADCAST)
      add(s, BATON__STEP_COPY, phase, -1, q, r, hub, BATON__FROM_INPUT);
    first = 0;
  }
}

int baton__naive_max_steps(int size) { return 2 * size - 1; }

int baton__naive_build(baton__sched_t *s, const baton__build_t *b) {
  int rank = b->rank, size = b->size, root = b->root;
  baton__coll_t coll = b->coll; /* any order of the ranks is as good as another */
  if (size > UINT16_MAX)        /* an allreduce message is a run of N chunks */
    return -1;
  switch (coll) {
  case BATON__COLL_ALLREDUCE:
  case BATON__COLL_REDUCE_SCATTER:
  case BATON__COLL_REDUCE_SCATTERV:
    to_hub(s, coll, BATON__PHASE_REDUCE, rank, size, 0, 1);
    from_hub(s, coll, coll == BATON__COLL_ALLREDUCE ? BATON__PHASE_BROADCAST : BATON__PHASE_SCATTER,
             rank, size, 0, BATON__FROM_WORK);
    break;
  case BATON__COLL_ALLGATHER:
  case BATON__COLL_ALLGATHERV:
    to_hub(s, coll, BATON__PHASE_GATHER, rank, size, 0, 0);
    from_hub(s, coll, BATON__PHASE_BROADCAST, rank, size, 0, BATON__FROM_WORK);
    break;
  case BATON__COLL_BROADCAST:
    from_hub(s, coll, BATON__PHASE_BROADCAST, rank, size, root, BATON__FROM_INPUT);
    break;
  case BATON__COLL_REDUCE:
    to_hub(s, coll, BATON__PHASE_REDUCE, rank, size, root, 1);
    break;
  case BATON__COLL_GATHER:
    to_hub(s, coll, BATON__PHASE_GATHER, rank, size, root, 0);
    break;
  case BATON__COLL_SCATTER:
    from_hub(s, coll, BATON__PHASE_SCATTER, rank, size, root, BATON__FROM_INPUT);
    break;
  default:
    return -1;
  }
  return 0;
}
