/*
 * flat.c - the flat algorithm, for small buffers on shared memory.
 *
 * One step: every rank copies its input into its own mailbox in the shared
 * segment and arrives at a rendezvous; once all have arrived, each rank
 * reads what it needs straight out of the others' mailboxes. Allreduce and
 * reduce-scatter combine the mailboxes in rank order, so every rank computes
 * the same bits; allgather just copies; broadcast fills only the root's
 * mailbox.
 *
 * Each rank reads N times the data instead of the ring's 2(N-1)/N, but pays
 * one synchronisation instead of 2(N-1) hand-offs. For a few kilobytes the
 * hand-offs dominate, all the more when ranks outnumber cores and every
 * hand-off may wait for the scheduler.
 */
#include <string.h>

#include "comm.h"

int baton__flat_fits(const baton_comm_t *comm, baton__coll_t coll, size_t count, size_t elsize) {
  if (!comm->host_net || !comm->one_host || count == 0)
    return 0;
  size_t in_count = coll == BATON__COLL_REDUCE_SCATTER ? count * (size_t)comm->size : count;
  return in_count * elsize <= baton__shm_mailbox_bytes(comm->host_net->impl);
}

/* dst = op over ranks of the mailboxes' elements [first, first + n). */
static void reduce_mailboxes(baton_comm_t *comm, uint32_t call, void *dst, size_t first, size_t n,
                             const baton__exec_args_t *a) {
  baton__reduce_fn reduce = baton__reduce_get(a->dtype, a->op);
  size_t off = first * a->elsize;
  const char *m0 = (const char *)baton__shm_mailbox(comm->host_net->impl, 0, call) + off;
  const char *m1 = (const char *)baton__shm_mailbox(comm->host_net->impl, 1, call) + off;
  reduce(dst, m0, m1, n);
  for (int q = 2; q < comm->size; q++)
    reduce(dst, dst, (const char *)baton__shm_mailbox(comm->host_net->impl, q, call) + off, n);
  if (a->op == BATON_AVG)
    baton__reduce_div(dst, n, a->dtype, comm->size);
}

int baton__flat_run(baton_comm_t *comm, baton__coll_t coll, size_t count,
                    const baton__exec_args_t *a) {
  uint32_t call = ++comm->shm_calls;
  size_t in_count = coll == BATON__COLL_REDUCE_SCATTER ? count * (size_t)comm->size : count;
  if (coll != BATON__COLL_BROADCAST || comm->rank == a->root)
    memcpy(baton__shm_mailbox(comm->host_net->impl, comm->rank, call), a->in, in_count * a->elsize);
  char why[BATON__ERRLEN];
  int rc = baton__shm_arrive(comm->host_net->impl, call, &comm->sig, comm->params.timeout_s, why,
                             sizeof why);
  if (rc)
    return baton__fail(comm, rc, "%s #%llu (flat): %s", baton__coll_name(coll),
                       (unsigned long long)comm->seq, why);
  if (coll == BATON__COLL_ALLREDUCE)
    reduce_mailboxes(comm, call, a->out, 0, count, a);
  else if (coll == BATON__COLL_REDUCE_SCATTER)
    reduce_mailboxes(comm, call, a->out, (size_t)comm->rank * count, count, a);
  else if (coll == BATON__COLL_BROADCAST)
    memcpy(a->out, baton__shm_mailbox(comm->host_net->impl, a->root, call), count * a->elsize);
  else
    for (int q = 0; q < comm->size; q++)
      memcpy(a->out + (size_t)q * count * a->elsize,
             baton__shm_mailbox(comm->host_net->impl, q, call), count * a->elsize);
  return 0;
}
