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
  else
    snprintf(buf, len, "%s #%llu (count %llu, %s%s%s%s)%s", baton__coll_name(s->coll),
             (unsigned long long)s->seq, (unsigned long long)s->count,
             baton_dtype_name((baton_dtype_t)s->dtype), has_op ? ", " : "",
             has_op ? baton_op_name((baton_op_t)s->op) : "", root, algo);
}

int baton__sig_check(const baton__sig_t *mine, const baton__sig_t *theirs, int me, int peer,
                     char *why, size_t whylen) {
  if (mine->seq == theirs->seq && mine->count == theirs->count && mine->root == theirs->root &&
      mine->coll == theirs->coll && mine->dtype == theirs->dtype && mine->op == theirs->op &&
      mine->algo == theirs->algo)
    return 0;
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
