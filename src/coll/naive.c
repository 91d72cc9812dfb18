/*
 * naive.c - the baseline: gather everything at one rank, reduce there,
 * send the result back to every rank.
 *
 * One rank, the hub (the root of a rooted collective, else rank 0), talks
 * to every other rank in turn, in rank order; the others talk only to the
 * hub. Hub step i serves the i-th other rank, whose own step carries the
 * same number, so that each send meets its receive at the same (phase,
 * step) and the hub takes one message per step.
 *
 *  - allreduce: every other rank sends its whole input to rank 0, which
 *    combines them in rank order (the first with its INPUT, then WORK; the
 *    last finishes the sum), then sends the result to each rank in turn:
 *    2(N-1) messages of the whole buffer through one rank,
 *    (N-1)(a + Kb + Kg) + (N-1)(a + Kb). The ring moves 2(N-1)/N K per rank
 *    instead, spread over all links: this is the comparison it wins.
 *  - reduce_scatter(v): the same gather and reduction at rank 0, then each
 *    rank gets only its chunk.
 *  - allgather(v): every other rank sends its block to rank 0 (keeping it
 *    in its own output on the way), rank 0 sends each rank the N-1 blocks
 *    it lacks, as one run starting after the rank's own.
 *  - broadcast: the root sends the buffer to each rank in turn.
 *  - reduce: every rank sends its input to the root, which combines them.
 *  - gather, scatter: the direct, linear forms: each block goes straight
 *    between its rank and the root.
 */
#include "schedule.h"

static baton__step_t *add(baton__sched_t *s, baton__phase_t phase, int step) {
  baton__step_t *st = &s->steps[s->nsteps++];
  *st = (baton__step_t){.phase = (uint8_t)phase,
                        .step = (uint16_t)step,
                        .send_peer = -1,
                        .send_chunk = -1,
                        .recv_peer = -1,
                        .recv_chunk = -1};
  return st;
}

/* A rank's place among the non-hub ranks, in rank order: its step number. */
static int turn(int rank, int hub) { return rank < hub ? rank : rank - 1; }

/* The hub's own chunk, INPUT to WORK: its block in its output. */
static void local_copy(baton__sched_t *s, baton__phase_t phase, int chunk) {
  baton__step_t *st = add(s, phase, 0);
  st->send_chunk = chunk;
  st->send_n = 1;
  st->send_keep = 1;
}

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

/* Every other rank sends its run to the hub, which copies it or combines
 * it into WORK. */
static void to_hub(baton__sched_t *s, baton__coll_t coll, baton__phase_t phase, int rank, int size,
                   int hub, int reduce) {
  if (rank != hub) {
    run_t r = run_of(coll, 1, rank, size, hub);
    baton__step_t *st = add(s, phase, turn(rank, hub));
    st->send_peer = hub;
    st->send_chunk = r.chunk;
    st->send_n = (uint16_t)r.n;
    st->send_from = BATON__FROM_INPUT;
    /* An allgather rank's own block belongs in its output too. */
    st->send_keep = coll == BATON__COLL_ALLGATHER || coll == BATON__COLL_ALLGATHERV;
    return;
  }
  if (!reduce)
    local_copy(s, phase, hub);
  for (int q = 0, i = 0; q < size; q++) {
    if (q == hub)
      continue;
    run_t r = run_of(coll, 1, q, size, hub);
    baton__step_t *st = add(s, phase, turn(q, hub));
    st->recv_peer = q;
    st->recv_chunk = r.chunk;
    st->recv_n = (uint16_t)r.n;
    st->recv_op = reduce ? BATON__RECV_REDUCE : BATON__RECV_COPY;
    st->recv_with = i++ ? BATON__FROM_WORK : BATON__FROM_INPUT;
    st->keep = 1;
    st->finish = (uint8_t)(reduce && i == size - 1);
  }
}

/* The hub sends each other rank its run, from `from`; they receive it. */
static void from_hub(baton__sched_t *s, baton__coll_t coll, baton__phase_t phase, int rank,
                     int size, int hub, baton__from_t from) {
  if (rank != hub) {
    run_t r = run_of(coll, 0, rank, size, hub);
    baton__step_t *st = add(s, phase, turn(rank, hub));
    st->recv_peer = hub;
    st->recv_chunk = r.chunk;
    st->recv_n = (uint16_t)r.n;
    st->recv_op = BATON__RECV_COPY;
    st->keep = 1;
    return;
  }
  if (coll == BATON__COLL_SCATTER)
    local_copy(s, phase, hub);
  int first = 1;
  for (int q = 0; q < size; q++) {
    if (q == hub)
      continue;
    run_t r = run_of(coll, 0, q, size, hub);
    baton__step_t *st = add(s, phase, turn(q, hub));
    st->send_peer = q;
    st->send_chunk = r.chunk;
    st->send_n = (uint16_t)r.n;
    st->send_from = (uint8_t)from;
    /* The broadcast root's output gets the buffer too, once. */
    st->send_keep = (uint8_t)(first && coll == BATON__COLL_BROADCAST);
    first = 0;
  }
}

int baton__naive_max_steps(int size) { return 2 * size; }

void baton__naive_schedule(baton__sched_t *s, baton__coll_t coll, int rank, int size, size_t count,
                           int root, const int *order) {
  (void)count, (void)order; /* any order of the ranks is as good as another */
  s->coll = coll;
  s->algo = "naive";
  s->nsteps = 0;
  if (size == 1)
    return;
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
    break;
  }
}
