/*
 * sig.c - the signature of a collective call (transport.h), compared
 * between ranks in the first exchange of every call.
 */
#include <stdio.h>
#include <string.h>

#include "baton.h"
#include "algo.h"
#include "transport/transport.h"

void baton__sig_format(const baton__sig_t *s, char *buf, size_t len) {
  char root[24] = "";
  if (s->root >= 0)
    snprintf(root, sizeof root, ", root %d", (int)s->root);
  int has_op = s->coll == BATON__COLL_ALLREDUCE || s->coll == BATON__COLL_REDUCE_SCATTER ||
               s->coll == BATON__COLL_REDUCE || s->coll == BATON__COLL_REDUCE_SCATTERV;
  int nalgos;
  const baton__algo_t *algos = baton__algos(&nalgos);
  char algo[32] = "";
  if (s->algo > 0 && s->algo <= nalgos)
    snprintf(algo, sizeof algo, " with %s", algos[s->algo - 1].name);
  if (s->coll == BATON__COLL_BARRIER)
    snprintf(buf, len, "barrier #%llu", (unsigned long long)s->seq);
  else if (s->coll == BATON__COLL_ALLTOALLV) /* a block's count, or none (the call) */
    snprintf(buf, len, "alltoallv #%llu (%s)%s", (unsigned long long)s->seq,
             baton_dtype_name((baton_dtype_t)s->dtype), algo);
  else
    snprintf(buf, len, "%s #%llu (count %llu, %s%s%s%s)%s", baton__coll_name(s->coll),
             (unsigned long long)s->seq, (unsigned long long)s->count,
             baton_dtype_name((baton_dtype_t)s->dtype), has_op ? ", " : "",
             has_op ? baton_op_name((baton_op_t)s->op) : "", root, algo);
}

/* An alltoallv block whose two ends disagree on its count (exec.c: count
 * is the block's own, root 31 bits of the one going the other way). */
static int block_mismatch(const baton__sig_t *mine, const baton__sig_t *theirs, int me, int peer,
                          char *why, size_t whylen) {
  unsigned long long send = theirs->count, recv = mine->count;
  int from = peer, to = me;
  if (send == recv) { /* the block this rank sends the peer */
    send = (unsigned long long)mine->root, recv = (unsigned long long)theirs->root;
    from = me, to = peer;
  }
  snprintf(why, whylen,
           "alltoallv #%llu: rank %d sends %llu elements to rank %d (its sendcounts[%d]) where "
           "rank %d expects %llu (its recvcounts[%d]): every block's sendcount must equal its "
           "recvcount",
           (unsigned long long)mine->seq, from, send, to, to, to, recv, from);
  return BATON_EMISMATCH;
}

baton__sig_t baton__sig_call(const baton__sig_t *s) {
  baton__sig_t call = *s;
  if (call.coll == BATON__COLL_ALLTOALLV)
    call.count = 0, call.root = -1;
  return call;
}

int baton__sig_check(const baton__sig_t *mine, const baton__sig_t *theirs, int me, int peer,
                     char *why, size_t whylen) {
  if (mine->seq == theirs->seq && mine->count == theirs->count && mine->root == theirs->root &&
      mine->coll == theirs->coll && mine->dtype == theirs->dtype && mine->op == theirs->op &&
      mine->algo == theirs->algo)
    return 0;
  if (mine->coll == BATON__COLL_ALLTOALLV && theirs->coll == mine->coll &&
      mine->seq == theirs->seq && mine->dtype == theirs->dtype && mine->algo == theirs->algo)
    return block_mismatch(mine, theirs, me, peer, why, whylen);
  char a[128], b[128];
  baton__sig_format(theirs, a, sizeof a);
  baton__sig_format(mine, b, sizeof b);
  snprintf(why, whylen,
           "rank %d called %s while rank %d called %s: every rank must make "
           "the same calls in the same order%s",
           peer, a, me, b,
           mine->algo != theirs->algo
               ? " (and the same BATON_ALGO, BATON_FLAT_BYTES, "
                 "BATON_SCRATCH_BYTES and tune file, which choose the algorithm)"
               : "");
  return BATON_EMISMATCH;
}
