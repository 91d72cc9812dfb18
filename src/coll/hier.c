/*
 * hier.c - the hierarchical allreduce, for ranks spread over hosts.
 *
 * The ring crosses each host boundary once each way, but every rank still
 * moves 2(N-1)/N of the buffer through its links, and on a host of m ranks
 * the two links that leave the host carry that for all of them in turn. The
 * hierarchical path sends less over the network:
 *
 *  1. fold:   inside each host, every rank sends its buffer to the host's
 *             leader (its first rank on the ring), which recv-reduces them;
 *  2. ring:   the L leaders run the ring allreduce among themselves on L
 *             super-chunks (runs of about N/L chunks): reduce-scatter then
 *             allgather, 2(L-1) rounds of a send and a recv-reduce (then a
 *             recv-copy), each leader moving 2(L-1)/L of the buffer over the
 *             network;
 *  3. unfold: the leader sends the result to the ranks of its host, which
 *             recv-copy it.
 *
 * With hosts of m ranks the network carries 2(L-1)/L instead of
 * 2(N-1)/N of the buffer per link direction (1 instead of 1.5 for 2 hosts
 * of 2 ranks): worth it when the network is the slow part and buffers are
 * large. Inside a host the fold and unfold are shared-memory copies.
 *
 * A host is a run of ranks along the ring `order` that the `host` map puts
 * on the same host (hosts are numbered along the ring, so each is one run);
 * without a map (drawings, offline checks) every rank is its own host and
 * this is a plain ring on runs of one chunk. Everything is found by walking
 * the ring, so any number of ranks works. A leader alone on its host takes
 * 4(L-1) steps, at most 4(N-1).
 */
#include "steps.h"

/* The host of the rank at ring place i. */
static int host_at(const baton__build_t *b, int i) { return b->host ? b->host[b->order[i]] : i; }

/* The first place of the host that place i is on, and the place after it. */
static int host_first(const baton__build_t *b, int i) {
  while (i > 0 && host_at(b, i - 1) == host_at(b, i))
    i--;
  return i;
}
static int host_end(const baton__build_t *b, int i) {
  while (i + 1 < b->size && host_at(b, i + 1) == host_at(b, i))
    i++;
  return i + 1;
}

/* The leaders' ring: L leaders, this one the me-th; super-chunk j is the
 * run of chunks [off(j), off(j) + len(j)) of N chunks cut into L. */
typedef struct {
  int size, L, me, next, prev, from_input;
} ring_t;

static baton__step_t *super(baton__sched_t *s, const ring_t *r, baton__step_kind_t kind,
                            baton__phase_t phase, int step, int j, baton__from_t src) {
  j = ((j % r->L) + r->L) % r->L;
  return baton__step_add(s, kind, phase, step, kind == BATON__STEP_SEND ? r->next : r->prev,
                         (int)baton__chunk_off((size_t)r->size, r->L, j),
                         (int)baton__chunk_len((size_t)r->size, r->L, j), src);
}

static void leaders_ring(baton__sched_t *s, const ring_t *r) {
  /* A chunk not yet touched here (no fold) is still only in the input. */
  baton__from_t with = r->from_input ? BATON__FROM_INPUT : BATON__FROM_WORK;
  for (int step = 0; step < r->L - 1; step++) {
    super(s, r, BATON__STEP_SEND, BATON__PHASE_REDUCE_SCATTER, step, r->me - step - 1,
          step == 0 ? with : BATON__FROM_WORK);
    super(s, r, BATON__STEP_RECV_REDUCE, BATON__PHASE_REDUCE_SCATTER, step, r->me - step - 2, with)
        ->finish = step == r->L - 2;
  }
  for (int step = 0; step < r->L - 1; step++) {
    super(s, r, BATON__STEP_SEND, BATON__PHASE_ALLGATHER, step, r->me - step, BATON__FROM_WORK);
    super(s, r, BATON__STEP_RECV_COPY, BATON__PHASE_ALLGATHER, step, r->me - step - 1,
          BATON__FROM_WORK);
  }
}

int baton__hier_max_steps(int size) { return 4 * (size - 1); }

int baton__hier_build(baton__sched_t *s, const baton__build_t *b) {
  int n = b->size, p = 0;
  if (b->coll != BATON__COLL_ALLREDUCE || n > UINT16_MAX) /* runs of N chunks must fit */
    return -1;
  while (p < n - 1 && b->order[p] != b->rank)
    p++;
  int first = host_first(b, p), end = host_end(b, p), leader = b->order[first];
  if (p > first) { /* send the input to the leader, get the result back */
    baton__step_add(s, BATON__STEP_SEND, BATON__PHASE_FOLD, p - first - 1, leader, 0, n,
                    BATON__FROM_INPUT);
    baton__step_add(s, BATON__STEP_RECV_COPY, BATON__PHASE_UNFOLD, p - first - 1, leader, 0, n,
                    BATON__FROM_INPUT);
    return 0;
  }
  ring_t r = {.size = n, .L = 1, .me = 0, .from_input = end - first == 1};
  for (int i = 1; i < n; i++)
    if (host_at(b, i) != host_at(b, i - 1))
      r.L++, r.me += i <= first;
  r.next = b->order[end < n ? end : 0];
  r.prev = b->order[host_first(b, first > 0 ? first - 1 : n - 1)];
  /* The leader: fold the host's ranks in, in ring order. */
  for (int k = 0; k < end - first - 1; k++)
    baton__step_add(s, BATON__STEP_RECV_REDUCE, BATON__PHASE_FOLD, k, b->order[first + 1 + k], 0, n,
                    k == 0 ? BATON__FROM_INPUT : BATON__FROM_WORK)
        ->finish = r.L == 1 && k == end - first - 2;
  leaders_ring(s, &r);
  for (int k = 0; k < end - first - 1; k++)
    baton__step_add(s, BATON__STEP_SEND, BATON__PHASE_UNFOLD, k, b->order[first + 1 + k], 0, n,
                    BATON__FROM_WORK);
  return 0;
}
