/*
 * pairwise.c - pairwise exchange, for alltoall.
 *
 * Every rank has a block for every other rank: chunk c of its input is the
 * block for rank c, and chunk c of its output the block from rank c
 * (schedule.h). A rank's own block only moves from its input to its
 * output, in a local copy. The other N - 1 blocks go in N - 1 rounds; in
 * round k each rank sends one block and recv-copies one:
 *
 *  - N a power of two: the ranks pair up, rank r with r XOR k, and each
 *    pair swaps the blocks meant for each other;
 *  - otherwise: rank r sends to r + k and receives from r - k (mod N), a
 *    shift by k, so every rank still sends one block and receives one.
 *
 * Either way no rank receives two blocks at once, which is the point of
 * the pairing: the naive form, where every rank sends to everyone at once,
 * makes N - 1 senders contend for each receiver. Each rank sends and
 * receives (N-1)/N of its buffer, in N - 1 latencies; 2N-1 steps a rank.
 *
 * A send names the sender's chunk (the destination's index) and a receive
 * the receiver's chunk (the source's index); both are `count` elements
 * long, so the two ends agree on every piece. alltoallv is the same
 * schedule on blocks of their own lengths: the send's is the sender's
 * sendcount and the receive's the receiver's recvcount (schedule.h), which
 * the message's signature checks against each other (exec.c).
 */
#include "steps.h"

int baton__pairwise_max_steps(int size) { return 2 * size - 1; }

int baton__pairwise_build(baton__sched_t *s, const baton__build_t *b) {
  int rank = b->rank, size = b->size, pow2 = (size & (size - 1)) == 0;
  if (b->coll != BATON__COLL_ALLTOALL && b->coll != BATON__COLL_ALLTOALLV)
    return -1;
  baton__step_add(s, BATON__STEP_COPY, BATON__PHASE_EXCHANGE, 0, -1, rank, 1, BATON__FROM_INPUT);
  for (int k = 1; k < size; k++) {
    int to = pow2 ? rank ^ k : (rank + k) % size;
    int from = pow2 ? rank ^ k : (rank - k + size) % size;
    baton__step_add(s, BATON__STEP_SEND, BATON__PHASE_EXCHANGE, k, to, to, 1, BATON__FROM_INPUT);
    baton__step_add(s, BATON__STEP_RECV_COPY, BATON__PHASE_EXCHANGE, k, from, from, 1,
                    BATON__FROM_INPUT);
  }
  return 0;
}
