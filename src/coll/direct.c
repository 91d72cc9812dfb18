/*
 * direct.c - the direct algorithm, for registered buffers on one host.
 *
 * When every rank's buffers lie in memory that every rank maps
 * (baton_mem_alloc), nothing needs to move through a channel: each rank
 * reads the inputs it needs where they lie and writes the results into
 * the outputs that need them. A call is three moments:
 *  - direct-arrive: every rank shows where its buffers are and waits for
 *    the others (the host's rendezvous); if some rank's buffers are not
 *    registered, all of them learn it here and run the staged algorithm
 *    the selection would have picked instead (exec_direct.c);
 *  - the work, each rank on its own share, so both cores of the host work
 *    at once and every byte is read once from memory and written once:
 *    allreduce: rank r combines chunk r of every input and writes the
 *    result into every rank's output (direct-reduce to all ranks);
 *    reduce-scatter: into its own output; reduce: its N-th of the buffer
 *    into the root's; allgather: its block into every output; gather:
 *    into the root's; broadcast, scatter, alltoall: each rank copies what
 *    its output needs out of the inputs (the root's, or every rank's);
 *  - direct-done: every rank waits until all are done, so that no rank
 *    returns while a peer still reads its input or writes its output.
 * The executor's rounds cut the chunks into pieces that stay in the cache
 * between the reduction and its copies.
 *
 * Not served: alltoallv (a rank does not know where the peers' blocks for
 * it lie) and the barrier, which has no buffers.
 */
#include "algo.h"

static baton__step_t *add(baton__sched_t *s, baton__step_kind_t kind, int step, int chunk, int from,
                          int to) {
  baton__step_t *st = baton__step_push(s, kind, BATON__PHASE_DIRECT, step);
  st->chunk = chunk;
  st->n = kind == BATON__STEP_DIRECT_ARRIVE || kind == BATON__STEP_DIRECT_DONE ? 0 : 1;
  st->recv_peer = from;
  st->send_peer = to;
  return st;
}

int baton__direct_max_steps(int size) { return size + 2; }

int baton__direct_build(baton__sched_t *s, const baton__build_t *b) {
  int n = b->size, me = b->rank, all = BATON__ALL_RANKS;
  add(s, BATON__STEP_DIRECT_ARRIVE, 0, 0, -1, -1);
  switch (b->coll) {
  case BATON__COLL_ALLREDUCE:
    add(s, BATON__STEP_DIRECT_REDUCE, 1, me, all, all)->finish = 1;
    break;
  case BATON__COLL_REDUCE_SCATTER:
  case BATON__COLL_REDUCE_SCATTERV:
    add(s, BATON__STEP_DIRECT_REDUCE, 1, me, all, me)->finish = 1;
    break;
  case BATON__COLL_REDUCE: {
    baton__step_t *st = add(s, BATON__STEP_DIRECT_REDUCE, 1, b->root, all, b->root);
    st->finish = 1;
    st->slice = 1;
    break;
  }
  case BATON__COLL_ALLGATHER:
  case BATON__COLL_ALLGATHERV:
    add(s, BATON__STEP_DIRECT_COPY, 1, me, me, all);
    break;
  case BATON__COLL_GATHER:
    add(s, BATON__STEP_DIRECT_COPY, 1, me, me, b->root);
    break;
  case BATON__COLL_BROADCAST:
    add(s, BATON__STEP_DIRECT_COPY, 1, b->root, b->root, me);
    break;
  case BATON__COLL_SCATTER:
    add(s, BATON__STEP_DIRECT_COPY, 1, me, b->root, me);
    break;
  case BATON__COLL_ALLTOALL:
    /* Output chunk q is rank q's INPUT chunk `me` (schedule.h); starting
     * past this rank spreads the ranks over different inputs. */
    for (int k = 0; k < n; k++) {
      int q = (me + k) % n;
      add(s, BATON__STEP_DIRECT_COPY, 1, q, q, me);
    }
    break;
  default:
    return -1;
  }
  add(s, BATON__STEP_DIRECT_DONE, 2, 0, -1, -1);
  return 0;
}
