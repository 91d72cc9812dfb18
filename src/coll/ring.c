/*
 * ring.c - the ring algorithm for allreduce, reduce-scatter and allgather.
 *
 * The ranks stand in a ring (in the order `order`, which follows the
 * topology); each sends only to the next and receives only from the
 * previous. The buffer is cut into N chunks, chunk c being the part that
 * rank c owns at the end of the reduce-scatter.
 *
 * Reduce-scatter, N-1 steps. At step s the rank at ring position p sends
 * chunk order[p-s-1] and receives chunk order[p-s-2], which it combines with
 * its own input. What it receives at step s is exactly what it sends at step
 * s+1, so the partial sum never needs to land in memory: it is forwarded.
 * After the last step the rank holds the full reduction of its own chunk.
 *
 * Allgather, N-1 steps. At step s the rank sends chunk order[p-s] and
 * receives chunk order[p-s-1], overwriting; again each received chunk is the
 * next step's send.
 *
 * Allreduce is reduce-scatter followed by allgather: 2(N-1) steps, and each
 * rank sends and receives 2(N-1)/N of the buffer whatever N is, which is
 * optimal in bandwidth. The price is 2(N-1) latencies, which is why small
 * messages want other algorithms.
 */
#include "schedule.h"

static int mod(int a, int n) { return ((a % n) + n) % n; }

static void add_phase(baton__sched_t *s, baton__phase_t phase, int p, int n, const int *order,
                      int final_forward, int fed) {
  int next = order[mod(p + 1, n)], prev = order[mod(p - 1, n)];
  int rs = phase == BATON__PHASE_REDUCE_SCATTER;
  for (int step = 0; step < n - 1; step++) {
    int last = step == n - 2;
    baton__step_t *st = &s->steps[s->nsteps++];
    st->phase = (uint8_t)phase;
    st->step = (uint16_t)step;
    st->send_peer = next;
    st->send_chunk = order[mod(p - step - (rs ? 1 : 0), n)];
    st->send_n = 1;
    st->send_from = BATON__FROM_INPUT;
    /* A bare allgather's first send is this rank's own block: it also
     * belongs in the output. */
    st->send_keep = (uint8_t)(!rs && step == 0 && !fed);
    st->recv_peer = prev;
    st->recv_chunk = order[mod(p - step - (rs ? 2 : 1), n)];
    st->recv_n = 1;
    st->recv_op = rs ? BATON__RECV_REDUCE : BATON__RECV_COPY;
    st->recv_with = BATON__FROM_INPUT;
    st->keep = (uint8_t)(!rs || last);
    st->forward = (uint8_t)(!last || final_forward);
    st->finish = (uint8_t)(rs && last);
  }
}

void baton__ring_schedule(baton__sched_t *s, baton__coll_t coll, int rank, int size,
                          const int *order) {
  int p = 0;
  while (order[p] != rank)
    p++;
  int gathers = coll == BATON__COLL_ALLGATHER || coll == BATON__COLL_ALLGATHERV;
  int scatters = coll == BATON__COLL_REDUCE_SCATTER || coll == BATON__COLL_REDUCE_SCATTERV;
  s->coll = coll;
  s->algo = "ring";
  s->nsteps = 0;
  if (size == 1)
    return;
  if (!gathers)
    add_phase(s, BATON__PHASE_REDUCE_SCATTER, p, size, order, coll == BATON__COLL_ALLREDUCE, 0);
  if (!scatters)
    add_phase(s, BATON__PHASE_ALLGATHER, p, size, order, 0, coll == BATON__COLL_ALLREDUCE);
}

void baton__chain_schedule(baton__sched_t *s, baton__coll_t coll, int rank, int size,
                           const int *order, int root) {
  int p = 0, r = 0;
  while (order[p] != rank)
    p++;
  while (order[r] != root)
    r++;
  s->coll = coll;
  s->algo = "ring";
  s->nsteps = 0;
  if (size == 1)
    return;
  if (coll == BATON__COLL_REDUCE) {
    /* The chain run backwards: the rank before the root on the ring is
     * the last to add its part, the rank after the root the first to
     * send. q counts places from the far end. */
    int q = mod(p - r - 1, size); /* 0 for the rank after the root */
    if (q > 0) {
      baton__step_t *st = &s->steps[s->nsteps++];
      *st = (baton__step_t){.phase = BATON__PHASE_REDUCE,
                            .step = (uint16_t)(q - 1),
                            .send_peer = -1,
                            .send_chunk = -1,
                            .recv_peer = order[mod(p - 1, size)],
                            .recv_chunk = root,
                            .recv_n = 1,
                            .recv_op = BATON__RECV_REDUCE,
                            .recv_with = BATON__FROM_INPUT,
                            .keep = rank == root,
                            .forward = rank != root,
                            .finish = rank == root};
    }
    if (rank != root && q == 0) {
      baton__step_t *st = &s->steps[s->nsteps++];
      *st = (baton__step_t){.phase = BATON__PHASE_REDUCE,
                            .step = 0,
                            .send_peer = order[mod(p + 1, size)],
                            .send_chunk = root,
                            .send_n = 1,
                            .send_from = BATON__FROM_INPUT,
                            .recv_peer = -1,
                            .recv_chunk = -1};
    } else if (rank != root) {
      baton__step_t *st = &s->steps[s->nsteps++];
      *st = (baton__step_t){.phase = BATON__PHASE_REDUCE,
                            .step = (uint16_t)q,
                            .send_peer = order[mod(p + 1, size)],
                            .send_chunk = root,
                            .send_n = 1,
                            .send_from = BATON__FROM_WORK,
                            .recv_peer = -1,
                            .recv_chunk = -1};
    }
    return;
  }
  int q = mod(p - r, size); /* distance from the root along the chain */
  if (q > 0) {
    baton__step_t *st = &s->steps[s->nsteps++];
    *st = (baton__step_t){.phase = BATON__PHASE_BROADCAST,
                          .step = (uint16_t)(q - 1),
                          .send_peer = -1,
                          .send_chunk = -1,
                          .recv_peer = order[mod(p - 1, size)],
                          .recv_chunk = root,
                          .recv_n = 1,
                          .recv_op = BATON__RECV_COPY,
                          .keep = 1,
                          .forward = q < size - 1};
  }
  if (q < size - 1) {
    baton__step_t *st = &s->steps[s->nsteps++];
    *st = (baton__step_t){.phase = BATON__PHASE_BROADCAST,
                          .step = (uint16_t)q,
                          .send_peer = order[mod(p + 1, size)],
                          .send_chunk = root,
                          .send_n = 1,
                          .send_from = BATON__FROM_INPUT,
                          .send_keep = q == 0,
                          .recv_peer = -1,
                          .recv_chunk = -1};
  }
}
