/*
 * alltoallv.c - baton_alltoallv and baton_ialltoallv, on the point-to-point
 * lanes (p2p.c).
 *
 * Every rank's block for every other rank is a message of its own, so the
 * counts may differ per pair and nothing is cut into chunks. The exchange
 * is pairwise, as alltoall's: for k = 1 .. N-1 rank r receives from r - k
 * and sends to r + k (mod N), posted in that order, so that on every lane
 * the blocks of one call follow those of the calls before it (the messages
 * have the reserved tag -1, and messages of one pair and tag are matched
 * in order). The rank's own block is a local copy. Each block is sent from
 * the caller's send buffer and received into its receive buffer: no scratch
 * memory, but in place (sendbuf == recvbuf), where the input is copied
 * first, within BATON_SCRATCH_BYTES.
 *
 * The counts are checked as messages are: a receive compares its count
 * with the count the send's header carries, and a send completes only once
 * matched, so a sendcount that differs from its peer's recvcount is
 * BATON_EMISMATCH on both ranks, naming both counts.
 *
 * A request here is the 2(N-1) messages of one call: waiting for it waits
 * for each, and its status is the first failure.
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "call.h"
#include "p2p.h"

/* The copy of an in-place call's input. One is kept on the communicator
 * between calls, so that a run of calls faults its pages in once. */
struct baton__stage {
  size_t bytes;
  char data[];
};

static struct baton__stage *stage_take(baton_comm_t *comm, size_t bytes) {
  struct baton__stage *s = atomic_exchange(&comm->a2av_stage, NULL);
  if (s && s->bytes >= bytes)
    return s;
  free(s);
  if (!(s = malloc(sizeof *s + bytes)))
    return NULL;
  s->bytes = bytes;
  memset(s->data, 0, bytes); /* the page faults, once */
  return s;
}

static void stage_give(baton_comm_t *comm, struct baton__stage *s) {
  if (s)
    free(atomic_exchange(&comm->a2av_stage, s));
}

typedef struct {
  uint32_t kind; /* BATON__REQ_GROUP: the request's first field (call.h) */
  baton_comm_t *comm;
  struct baton__stage *staged; /* in place: the input's copy the blocks leave from */
  int n;
  baton_request_t *msgs[]; /* n messages */
} group_t;

int baton__group_wait(baton_request_t *req) {
  group_t *g = (group_t *)req;
  char first_error[BATON__ERRLEN] = "";
  int first = BATON_OK;
  for (int i = 0; i < g->n; i++) {
    int rc = baton__p2p_wait(g->msgs[i]);
    if (rc && !first) {
      first = rc;
      snprintf(first_error, sizeof first_error, "%s", baton_comm_last_error(g->comm));
    }
  }
  if (first)
    snprintf(g->comm->last_error, sizeof g->comm->last_error, "%s", first_error);
  stage_give(g->comm, g->staged);
  free(g);
  return first;
}

int baton__group_test(baton_request_t *req, int *done) {
  group_t *g = (group_t *)req;
  /* Complete ones are waited for (and freed) as they finish: the rest stay. */
  int k = 0, failed = 0;
  for (int i = 0; i < g->n; i++) {
    int d = 0, rc = baton__p2p_test(g->msgs[i], &d);
    if (!d)
      g->msgs[k++] = g->msgs[i];
    else if (rc && !failed) {
      /* A failure fails the whole call: the others fail too (p2p breaks
       * on every failure but a mismatch), so waiting for them is quick. */
      failed = rc;
    }
  }
  g->n = k;
  if (failed) {
    baton_comm_t *comm = g->comm;
    char why[BATON__ERRLEN];
    snprintf(why, sizeof why, "%s", baton_comm_last_error(comm));
    baton__group_wait(req); /* frees g */
    snprintf(comm->last_error, sizeof comm->last_error, "%s", why);
    *done = 1;
    return failed;
  }
  *done = k == 0;
  if (*done)
    stage_give(g->comm, g->staged), free(g);
  return BATON_OK;
}

/* The arguments, as baton.h states them; BATON_EINVAL naming what is
 * wrong. */
static int check(baton_comm_t *comm, const void *sendbuf, const size_t *sendcounts,
                 const size_t *sdispls, const void *recvbuf, const size_t *recvcounts,
                 const size_t *rdispls, baton_dtype_t dtype) {
  const char *name = "alltoallv";
  size_t es = baton_dtype_size(dtype);
  if (es == 0)
    return baton__fail(comm, BATON_EINVAL, "%s: unknown dtype %d", name, (int)dtype);
  if (!sendcounts || !sdispls || !recvcounts || !rdispls)
    return baton__fail(comm, BATON_EINVAL, "%s: %s is NULL", name,
                       !sendcounts   ? "sendcounts"
                       : !sdispls    ? "sdispls"
                       : !recvcounts ? "recvcounts"
                                     : "rdispls");
  for (int r = 0; r < comm->size; r++) {
    const size_t c[2] = {sendcounts[r], recvcounts[r]}, d[2] = {sdispls[r], rdispls[r]};
    for (int k = 0; k < 2; k++)
      if (c[k] > SIZE_MAX / es || d[k] > SIZE_MAX / es - c[k])
        return baton__fail(comm, BATON_EINVAL, "%s: %s[%d] = %zu at %s[%d] = %zu overflows", name,
                           k ? "recvcounts" : "sendcounts", r, c[k], k ? "rdispls" : "sdispls", r,
                           d[k]);
    if ((sendcounts[r] && !sendbuf) || (recvcounts[r] && !recvbuf))
      return baton__fail(comm, BATON_EINVAL, "%s: %s is NULL with %s[%d] = %zu", name,
                         sendcounts[r] && !sendbuf ? "sendbuf" : "recvbuf",
                         sendcounts[r] && !sendbuf ? "sendcounts" : "recvcounts", r,
                         sendcounts[r] && !sendbuf ? sendcounts[r] : recvcounts[r]);
  }
  int me = comm->rank;
  if (sendcounts[me] != recvcounts[me])
    return baton__fail(comm, BATON_EINVAL,
                       "%s: this rank sends itself sendcounts[%d] = %zu elements but expects "
                       "recvcounts[%d] = %zu",
                       name, me, sendcounts[me], me, recvcounts[me]);
  return BATON_OK;
}

static int post(const void *sendbuf, const size_t *sendcounts, const size_t *sdispls, void *recvbuf,
                const size_t *recvcounts, const size_t *rdispls, baton_dtype_t dtype,
                baton_comm_t *comm, baton_request_t **req) {
  if (req)
    *req = NULL;
  if (!comm)
    return BATON_EINVAL;
  int rc = check(comm, sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls, dtype);
  if (rc)
    return rc;
  int idle = 0;
  if (!atomic_compare_exchange_strong(&comm->busy, &idle, 1))
    return baton__fail(comm, BATON_EUSAGE,
                       "alltoallv: another thread is in a call on this communicator; calls on "
                       "one communicator must come from one thread at a time");
  int me = comm->rank, n = comm->size;
  size_t es = baton_dtype_size(dtype);
  group_t *g = calloc(1, sizeof *g + 2 * (size_t)(n - 1) * sizeof g->msgs[0]);
  if (!g) {
    atomic_store(&comm->busy, 0);
    return baton__fail(comm, BATON_ENOMEM, "alltoallv: out of memory for %d messages", 2 * (n - 1));
  }
  *g = (group_t){.kind = BATON__REQ_GROUP, .comm = comm};
  /* In place: the blocks leave from a copy of the input, as alltoall's. */
  size_t extent = 0;
  for (int q = 0; q < n && sendbuf == recvbuf; q++)
    if (sendcounts[q] && sdispls[q] + sendcounts[q] > extent)
      extent = sdispls[q] + sendcounts[q];
  if (extent && extent * es > comm->params.scratch_bytes) {
    atomic_store(&comm->busy, 0);
    free(g);
    return baton__fail(comm, BATON_ENOMEM,
                       "alltoallv: in place, the input (%zu bytes) is copied first, which is more "
                       "than BATON_SCRATCH_BYTES (%zu)",
                       extent * es, comm->params.scratch_bytes);
  }
  if (extent && !(g->staged = stage_take(comm, extent * es))) {
    atomic_store(&comm->busy, 0);
    free(g);
    return baton__fail(comm, BATON_ENOMEM, "alltoallv: out of memory for the in-place copy");
  }
  if (extent)
    memcpy(g->staged->data, sendbuf, extent * es), sendbuf = g->staged->data;
  if (recvcounts[me])
    memmove((char *)recvbuf + rdispls[me] * es, (const char *)sendbuf + sdispls[me] * es,
            recvcounts[me] * es);
  for (int k = 1; k < n && rc == 0; k++) {
    int from = (me - k + n) % n, to = (me + k) % n;
    rc = baton__p2p_submit(comm, 0, (char *)recvbuf + rdispls[from] * es, recvcounts[from], dtype,
                           from, "alltoallv", req != NULL, &g->msgs[g->n]);
    g->n += rc == 0;
    if (rc == 0 &&
        (rc = baton__p2p_submit(comm, 1, (char *)sendbuf + sdispls[to] * es, sendcounts[to], dtype,
                                to, "alltoallv", req != NULL, &g->msgs[g->n])) == 0)
      g->n++;
  }
  atomic_store(&comm->busy, 0);
  if (rc) {
    /* Out of memory half way: the messages posted fail as the peers time
     * out waiting for the rest; say so now. */
    baton__group_wait((baton_request_t *)g);
    return baton__fail(comm, rc, "alltoallv: out of memory for its messages");
  }
  if (req) {
    *req = (baton_request_t *)g;
    return BATON_OK;
  }
  return baton__group_wait((baton_request_t *)g);
}

int baton_alltoallv(const void *sendbuf, const size_t *sendcounts, const size_t *sdispls,
                    void *recvbuf, const size_t *recvcounts, const size_t *rdispls,
                    baton_dtype_t dtype, baton_comm_t *comm) {
  return post(sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls, dtype, comm, NULL);
}

int baton_ialltoallv(const void *sendbuf, const size_t *sendcounts, const size_t *sdispls,
                     void *recvbuf, const size_t *recvcounts, const size_t *rdispls,
                     baton_dtype_t dtype, baton_comm_t *comm, baton_request_t **req) {
  if (!req)
    return BATON_EINVAL;
  return post(sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls, dtype, comm, req);
}
