/*
 * p2p_exchange.c - point-to-point messages with tags, written only against
 * baton.h: the three patterns most programs build from them.
 *
 *   baton-run -n 4 build/examples/p2p_exchange
 *
 *  1. a ring: every rank passes a block to the next rank and gets one from
 *     the previous, both posted at once (baton_isend, baton_irecv);
 *  2. random pairs: round after round, ranks meet in pairs drawn from a
 *     seed they all share, and swap blocks of a random size;
 *  3. all to one: every rank sends rank 0 three messages with tags 0, 1, 2;
 *     rank 0 receives them by tag, in the other order (2, 1, 0): messages
 *     wait until a receive with their tag comes.
 *
 * Every rank checks what it got and prints one line; the exit status is 0
 * when every rank got what it should.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "baton.h"

/* What rank `from` sends rank `to` with tag `tag`, element i. */
static int32_t value(int from, int to, int tag, size_t i) {
  return (int32_t)((uint32_t)from * 1000u + (uint32_t)to * 10u + (uint32_t)tag + (uint32_t)i * 7u);
}

static int32_t *block(int from, int to, int tag, size_t n) {
  int32_t *b = malloc((n ? n : 1) * sizeof *b);
  if (!b) {
    fprintf(stderr, "out of memory\n");
    exit(1);
  }
  for (size_t i = 0; i < n; i++)
    b[i] = value(from, to, tag, i);
  return b;
}

/* The number of elements of `got` that differ from what `from` sent. */
static size_t wrong(const int32_t *got, size_t n, int from, int to, int tag) {
  size_t bad = 0;
  for (size_t i = 0; i < n; i++)
    bad += got[i] != value(from, to, tag, i);
  return bad;
}

static int check(baton_comm_t *comm, int rc, const char *what) {
  if (rc != BATON_OK)
    fprintf(stderr, "rank %d: %s: %s: %s\n", baton_comm_rank(comm), what, baton_err_name(rc),
            baton_comm_last_error(comm));
  return rc == BATON_OK;
}

static size_t ring(baton_comm_t *comm, size_t n) {
  int me = baton_comm_rank(comm), size = baton_comm_size(comm);
  int next = (me + 1) % size, prev = (me + size - 1) % size;
  int32_t *out = block(me, next, 0, n), *in = block(-1, -1, -1, n);
  baton_request_t *req[2];
  size_t bad = n;
  if (check(comm, baton_irecv(in, n, BATON_INT32, prev, 0, comm, &req[0]), "ring irecv") &&
      check(comm, baton_isend(out, n, BATON_INT32, next, 0, comm, &req[1]), "ring isend") &&
      check(comm, baton_wait_all(2, req), "ring wait"))
    bad = wrong(in, n, prev, me, 0);
  free(out), free(in);
  return bad;
}

static size_t random_pairs(baton_comm_t *comm, int rounds) {
  int me = baton_comm_rank(comm), size = baton_comm_size(comm);
  unsigned seed = 12345;
  size_t bad = 0;
  int *order = malloc((size_t)size * sizeof *order);
  for (int k = 0; k < rounds; k++) {
    for (int i = 0; i < size; i++)
      order[i] = i;
    for (int i = size - 1; i > 0; i--) { /* the same shuffle on every rank */
      seed = seed * 1103515245u + 12345u;
      int j = (int)(seed >> 8) % (i + 1), t = order[i];
      order[i] = order[j], order[j] = t;
    }
    seed = seed * 1103515245u + 12345u;
    size_t n = (seed >> 8) % 200000;
    int pos = 0;
    while (order[pos] != me)
      pos++;
    int partner = order[(pos ^ 1) < size ? pos ^ 1 : pos]; /* an odd one out sits it out */
    if (partner == me)
      continue;
    int32_t *out = block(me, partner, k, n), *in = block(-1, -1, -1, n);
    baton_request_t *req[2];
    if (check(comm, baton_irecv(in, n, BATON_INT32, partner, k, comm, &req[0]), "pair irecv") &&
        check(comm, baton_isend(out, n, BATON_INT32, partner, k, comm, &req[1]), "pair isend") &&
        check(comm, baton_wait_all(2, req), "pair wait"))
      bad += wrong(in, n, partner, me, k);
    else
      bad += n + 1;
    free(out), free(in);
  }
  free(order);
  return bad;
}

static size_t all_to_one(baton_comm_t *comm) {
  int me = baton_comm_rank(comm), size = baton_comm_size(comm);
  const size_t n[3] = {10, 100000, 0}; /* by tag: small, large, empty */
  size_t bad = 0;
  if (me != 0) {
    /* A send completes once rank 0 has matched it: the three go at once. */
    baton_request_t *req[3];
    int32_t *out[3];
    for (int tag = 0; tag < 3; tag++) {
      out[tag] = block(me, 0, tag, n[tag]);
      if (!check(comm, baton_isend(out[tag], n[tag], BATON_INT32, 0, tag, comm, &req[tag]),
                 "isend to rank 0"))
        req[tag] = NULL, bad++;
    }
    bad += !check(comm, baton_wait_all(3, req), "sends to rank 0");
    for (int tag = 0; tag < 3; tag++)
      free(out[tag]);
    return bad;
  }
  for (int tag = 2; tag >= 0; tag--)
    for (int from = 1; from < size; from++) {
      int32_t *in = block(-1, -1, -1, n[tag]);
      if (check(comm, baton_recv(in, n[tag], BATON_INT32, from, tag, comm), "recv at rank 0"))
        bad += wrong(in, n[tag], from, 0, tag);
      else
        bad += n[tag] + 1;
      free(in);
    }
  return bad;
}

int main(void) {
  baton_comm_t *comm;
  int rc = baton_comm_init(&comm);
  if (rc != BATON_OK) {
    fprintf(stderr, "baton_comm_init: %s: %s\n", baton_err_name(rc), baton_last_init_error());
    return 1;
  }
  int me = baton_comm_rank(comm), size = baton_comm_size(comm);
  size_t bad[3] = {0, 0, 0};
  if (size > 1) {
    bad[0] = ring(comm, 1000) + ring(comm, 300000);
    bad[1] = random_pairs(comm, 10);
    bad[2] = all_to_one(comm);
  }
  printf("rank %d of %d: ring %s, random pairs %s, all to one %s\n", me, size,
         bad[0] ? "WRONG" : "ok", bad[1] ? "WRONG" : "ok", bad[2] ? "WRONG" : "ok");
  int ok = !bad[0] && !bad[1] && !bad[2];
  /* Every rank's verdict, so that each exits with the same status. */
  int all = ok;
  rc = baton_allreduce(&ok, &all, 1, BATON_INT32, BATON_MIN, comm);
  baton_comm_destroy(comm);
  return rc == BATON_OK && all ? 0 : 1;
}
