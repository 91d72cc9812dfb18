/*
 * ring.c - the ring algorithm for allreduce, reduce-scatter and allgather.
 *
 * The ranks stand in a ring (in the order `order`, which follows the
 * topology); each sends only to the next and receives only from the
 * previous. The buffer is cut into N chunks, chunk c being the part that
 * rank c owns at the end of the reduce-scatter.
 *
 * Reduce-scatter, N-1 rounds. In round s the rank at ring position p sends
 * chunk order[p-s-1] and receives chunk order[p-s-2], which it combines with
 * its own input. What it receives in round s is exactly what it sends in
 * round s+1, so the partial sum never lands in memory: the steps are one
 * send, then recv-reduce-send, and in the last round a recv-reduce of the
 * rank's own chunk, which is then complete.
 *
 * Allgather, N-1 rounds. In round s the rank sends chunk order[p-s] and
 * receives chunk order[p-s-1]: recv-copy-send, the last one a recv-copy.
 * In an allreduce the reduce-scatter's last step (recv-reduce-copy-send)
 * makes the allgather's first send.
 *
 * Allreduce is reduce-scatter followed by allgather: 2(N-1) steps, and each
 * rank sends and receives 2(N-1)/N of the buffer whatever N is, which is
 * optimal in bandwidth. The price is 2(N-1) latencies, which is why small
 * messages want other algorithms.
 *
 * Broadcast and reduce use the chain: the ring opened at the root. The root
 * sends the one chunk `root` to the next rank; each rank receives it, keeps
 * it and passes it on (recv-copy-send) until the rank before the root.
 * Reduce runs the other way round: the rank after the root sends its input,
 * each next one adds its own and passes the sum on (recv-reduce-send), and
 * the root adds its own last. Pipelined by segments, so a large buffer costs
 * about one transfer plus N-2 segment latencies.
 */
#include "algo.h"

static int mod(int a, int n) { return ((a % n) + n) % n; }

static int place(const int *order, int size, int rank) {
  int p = 0;
  while (p < size - 1 && order[p] != rank)
    p++;
  return p;
}

/* One chunk between ring neighbours. */
static void add(baton__sched_t *s, baton__step_kind_t kind, baton__phase_t phase, int round,
                int chunk, int prev, int next) {
  baton__step_t *st = baton__step_push(s, kind, phase, round);
  st->chunk = chunk;
  st->n = 1;
  st->recv_peer = baton__step_does(kind) & BATON__DOES_RECV ? prev : -1;
  st->send_peer = baton__step_does(kind) & BATON__DOES_SEND ? next : -1;
  st->finish = kind == BATON__STEP_RECV_REDUCE || kind == BATON__STEP_RECV_REDUCE_COPY_SEND;
}

static void reduce_scatter(baton__sched_t *s, const int *order, int p, int n, int then_gather) {
  int next = order[mod(p + 1, n)], prev = order[mod(p - 1, n)];
  add(s, BATON__STEP_SEND, BATON__PHASE_REDUCE_SCATTER, 0, order[mod(p - 1, n)], prev, next);
  for (int round = 0; round < n - 2; round++)
    add(s, BATON__STEP_RECV_REDUCE_SEND, BATON__PHASE_REDUCE_SCATTER, round,
        order[mod(p - round - 2, n)], prev, next);
  add(s, then_gather ? BATON__STEP_RECV_REDUCE_COPY_SEND : BATON__STEP_RECV_REDUCE,
      BATON__PHASE_REDUCE_SCATTER, n - 2, order[p], prev, next);
}

/* fed: the reduce-scatter's last step has sent the first chunk already. */
static void allgather(baton__sched_t *s, const int *order, int p, int n, int fed) {
  int next = order[mod(p + 1, n)], prev = order[mod(p - 1, n)];
  if (!fed) { /* this rank's own block goes out and into its output */
    add(s, BATON__STEP_SEND, BATON__PHASE_ALLGATHER, 0, order[p], prev, next);
    add(s, BATON__STEP_COPY, BATON__PHASE_ALLGATHER, 0, order[p], prev, next);
  }
  for (int round = 0; round < n - 2; round++)
    add(s, BATON__STEP_RECV_COPY_SEND, BATON__PHASE_ALLGATHER, round, order[mod(p - round - 1, n)],
        prev, next);
  add(s, BATON__STEP_RECV_COPY, BATON__PHASE_ALLGATHER, n - 2, order[mod(p + 1, n)], prev, next);
}

static void chain_broadcast(baton__sched_t *s, const baton__build_t *b, int p, int r) {
  int n = b->size, q = mod(p - r, n); /* distance from the root along the chain */
  int next = b->order[mod(p + 1, n)], prev = b->order[mod(p - 1, n)];
  if (q == 0) {
    add(s, BATON__STEP_SEND, BATON__PHASE_BROADCAST, 0, b->root, prev, next);
    add(s, BATON__STEP_COPY, BATON__PHASE_BROADCAST, 0, b->root, prev, next);
  } else {
    add(s, q < n - 1 ? BATON__STEP_RECV_COPY_SEND : BATON__STEP_RECV_COPY, BATON__PHASE_BROADCAST,
        q - 1, b->root, prev, next);
  }
}

static void chain_reduce(baton__sched_t *s, const baton__build_t *b, int p, int r) {
  int n = b->size, q = mod(p - r - 1, n); /* places from the far end: 0 after the root */
  int next = b->order[mod(p + 1, n)], prev = b->order[mod(p - 1, n)];
  if (q == 0)
    add(s, BATON__STEP_SEND, BATON__PHASE_REDUCE, 0, b->root, prev, next);
  else
    add(s, b->rank == b->root ? BATON__STEP_RECV_REDUCE : BATON__STEP_RECV_REDUCE_SEND,
        BATON__PHASE_REDUCE, q - 1, b->root, prev, next);
}

int baton__ring_max_steps(int size) { return 2 * size; }

int baton__ring_build(baton__sched_t *s, const baton__build_t *b) {
  int n = b->size, p = place(b->order, n, b->rank), r = place(b->order, n, b->root);
  switch (b->coll) {
  case BATON__COLL_BROADCAST:
    chain_broadcast(s, b, p, r);
    break;
  case BATON__COLL_REDUCE:
    chain_reduce(s, b, p, r);
    break;
  case BATON__COLL_ALLREDUCE:
    reduce_scatter(s, b->order, p, n, 1);
    allgather(s, b->order, p, n, 1);
    break;
  case BATON__COLL_REDUCE_SCATTER:
  case BATON__COLL_REDUCE_SCATTERV:
    reduce_scatter(s, b->order, p, n, 0);
    break;
  case BATON__COLL_ALLGATHER:
  case BATON__COLL_ALLGATHERV:
  case BATON__COLL_BARRIER:
    allgather(s, b->order, p, n, 0);
    break;
  default:
    return -1;
  }
  return 0;
}
