/*
 * hier.c - the hierarchical allreduce, for ranks spread over hosts.
 *
 * The ring crosses each host boundary once each way, but every rank still
 * moves 2(N-1)/N of the buffer through its links, and on a host of m ranks
 * the two links that leave the host carry that for all of them in turn. The
 * hierarchical path sends less over the network:
 *
 *  1. fold:   inside each host, every rank hands its buffer to the host's
 *             leader (its first rank on the ring), which adds them up;
 *  2. ring:   the L leaders run the ring allreduce among themselves on L
 *             super-chunks (runs of about N/L chunks): reduce-scatter then
 *             allgather, 2(L-1) steps, each leader moving 2(L-1)/L of the
 *             buffer over the network;
 *  3. unfold: each leader hands the result to the ranks of its host.
 *
 * With hosts of m ranks the network carries 2(L-1)/L instead of
 * 2(N-1)/N of the buffer per link direction (1 instead of 1.5 for 2 hosts
 * of 2 ranks): worth it when the network is the slow part and buffers are
 * large. Inside a host the fold and unfold are shared-memory copies.
 *
 * The hosts come from the schedule's `host` map (rank -> host index, hosts
 * numbered along the ring); without one (drawings, offline checks) every
 * rank is its own host and this is a plain ring on runs of one chunk.
 */
#include "schedule.h"

static baton__step_t *add(baton__sched_t *s, baton__phase_t phase, int step) {
  baton__step_t *st = &s->steps[s->nsteps++];
  *st = (baton__step_t){.phase = (uint8_t)phase,
                        .step = (uint16_t)step,
                        .send_peer = -1,
                        .send_chunk = -1,
                        .recv_peer = -1,
                        .recv_chunk = -1};
  return st;
}

void baton__hier_schedule(baton__sched_t *s, baton__coll_t coll, int rank, int size,
                          const int *order) {
  s->coll = coll;
  s->algo = "hier";
  s->nsteps = 0;
  if (size == 1)
    return;
  /* Along the ring: this rank's host, its leader, its place in the host,
   * the leaders in ring order and the index of this rank's host. */
  int nhosts = 0, me = -1, leader = -1, local = 0, locals = 0;
  int leaders[4096];
  if (size > 4096)
    return;
  for (int i = 0; i < size; i++) {
    int r = order[i], h = s->host ? s->host[r] : i;
    if (i == 0 || h != (s->host ? s->host[order[i - 1]] : i - 1))
      leaders[nhosts++] = r;
    if (r == rank)
      me = nhosts - 1, leader = leaders[me];
  }
  for (int i = 0; i < size; i++) {
    int r = order[i];
    if ((s->host ? s->host[r] : i) != (s->host ? s->host[rank] : me))
      continue;
    if (r == rank)
      local = locals;
    locals++;
  }
  if (local > 0) { /* hand the input to the leader, get the result back */
    baton__step_t *st = add(s, BATON__PHASE_FOLD, local - 1);
    st->send_peer = leader, st->send_chunk = 0, st->send_n = (uint16_t)size;
    st->send_from = BATON__FROM_INPUT;
    st = add(s, BATON__PHASE_UNFOLD, local - 1);
    st->recv_peer = leader, st->recv_chunk = 0, st->recv_n = (uint16_t)size;
    st->recv_op = BATON__RECV_COPY, st->keep = 1;
    return;
  }
  /* The leader: fold the host's ranks in, in ring order. */
  int peers[4096], npeers = 0, from_input = locals == 1;
  for (int i = 0; i < size; i++)
    if (order[i] != rank && (s->host ? s->host[order[i]] == s->host[rank] : 0))
      peers[npeers++] = order[i];
  for (int k = 0; k < npeers; k++) {
    baton__step_t *st = add(s, BATON__PHASE_FOLD, k);
    st->recv_peer = peers[k], st->recv_chunk = 0, st->recv_n = (uint16_t)size;
    st->recv_op = BATON__RECV_REDUCE, st->keep = 1;
    st->recv_with = k == 0 ? BATON__FROM_INPUT : BATON__FROM_WORK;
    st->finish = nhosts == 1 && k == npeers - 1;
  }
  /* The leaders' ring on super-chunks: super-chunk j is a run of chunks. */
  int L = nhosts, next = leaders[(me + 1) % L], prev = leaders[(me + L - 1) % L];
#define SUPER_FIRST(j) ((int)baton__chunk_off((size_t)size, L, (j)))
#define SUPER_LEN(j) ((uint16_t)baton__chunk_len((size_t)size, L, (j)))
  for (int step = 0; step < L - 1; step++) {
    int sj = ((me - step - 1) % L + L) % L, rj = ((me - step - 2) % L + L) % L;
    baton__step_t *st = add(s, BATON__PHASE_REDUCE_SCATTER, step);
    st->send_peer = next, st->send_chunk = SUPER_FIRST(sj), st->send_n = SUPER_LEN(sj);
    /* A chunk not yet touched here is still only in the input. */
    st->send_from = step == 0 && from_input ? BATON__FROM_INPUT : BATON__FROM_WORK;
    st->recv_peer = prev, st->recv_chunk = SUPER_FIRST(rj), st->recv_n = SUPER_LEN(rj);
    st->recv_op = BATON__RECV_REDUCE, st->keep = 1;
    st->recv_with = from_input ? BATON__FROM_INPUT : BATON__FROM_WORK;
    st->finish = step == L - 2;
  }
  for (int step = 0; step < L - 1; step++) {
    int sj = ((me - step) % L + L) % L, rj = ((me - step - 1) % L + L) % L;
    baton__step_t *st = add(s, BATON__PHASE_ALLGATHER, step);
    st->send_peer = next, st->send_chunk = SUPER_FIRST(sj), st->send_n = SUPER_LEN(sj);
    st->send_from = BATON__FROM_WORK;
    st->recv_peer = prev, st->recv_chunk = SUPER_FIRST(rj), st->recv_n = SUPER_LEN(rj);
    st->recv_op = BATON__RECV_COPY, st->keep = 1;
  }
#undef SUPER_FIRST
#undef SUPER_LEN
  for (int k = 0; k < npeers; k++) {
    baton__step_t *st = add(s, BATON__PHASE_UNFOLD, k);
    st->send_peer = peers[k], st->send_chunk = 0, st->send_n = (uint16_t)size;
    st->send_from = BATON__FROM_WORK;
  }
}
