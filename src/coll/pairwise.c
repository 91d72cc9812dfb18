/*
 * pairwise.c - pairwise exchange, for alltoall.
 *
 * Every rank has a block for every other rank: chunk c of its input is the
 * block for rank c, and chunk c of its output the block from rank c
 * (schedule.h). A rank's own block only moves from its input to its
 * output, in a local copy. The other N - 1 blocks go in N - 1 steps; in
 * step k each rank sends one block and receives one:
 *
 *  - N a power of two: the ranks pair up, rank r with r XOR k, and each
 *    pair swaps the blocks meant for each other;
 *  - otherwise: rank r sends to r + k and receives from r - k (mod N), a
 *    shift by k, so every rank still sends one block and receives one.
 *
 * Either way no rank receives two blocks at once, which is the point of
 * the pairing: the naive form, where every rank sends to everyone at once,
 * makes N - 1 senders contend for each receiver. Each rank sends and
 * receives (N-1)/N of its buffer, in N - 1 latencies.
 *
 * A step names the sender's chunk (the destination's index) on its send
 * and the receiver's chunk (the source's index) on its receive; both are
 * `count` elements long, so the two ends agree on every piece.
 */
#include <string.h>

#include "schedule.h"

int baton__pairwise_max_steps(int size) { return size; }

void baton__pairwise_build(baton__sched_t *s, baton__coll_t coll, int rank, int size, size_t count,
                           int root, const int *order) {
  (void)count, (void)root, (void)order;
  int pow2 = (size & (size - 1)) == 0;
  s->coll = coll;
  s->algo = "pairwise";
  s->nsteps = 0;
  baton__step_t *own = &s->steps[s->nsteps++];
  *own = (baton__step_t){.phase = BATON__PHASE_EXCHANGE,
                         .step = 0,
                         .send_peer = -1,
                         .send_chunk = rank,
                         .send_n = 1,
                         .send_from = BATON__FROM_INPUT,
                         .send_keep = 1,
                         .recv_peer = -1,
                         .recv_chunk = -1};
  for (int k = 1; k < size; k++) {
    int to = pow2 ? rank ^ k : (rank + k) % size;
    int from = pow2 ? rank ^ k : (rank - k + size) % size;
    baton__step_t *st = &s->steps[s->nsteps++];
    *st = (baton__step_t){.phase = BATON__PHASE_EXCHANGE,
                          .step = (uint16_t)k,
                          .send_peer = to,
                          .send_chunk = to,
                          .send_n = 1,
                          .send_from = BATON__FROM_INPUT,
                          .recv_peer = from,
                          .recv_chunk = from,
                          .recv_n = 1,
                          .recv_op = BATON__RECV_COPY,
                          .recv_with = BATON__FROM_WORK,
                          .keep = 1};
  }
}
