/*
 * test_alltoallv.c - baton_alltoallv and baton_ialltoallv against MPI's
 * definition, written only against baton.h.
 *
 *   baton-run -n N test_alltoallv
 *
 * Rounds of every dtype with counts that differ per pair (zeros among
 * them, and blocks of several segments), the
 * blocks laid out with gaps and in another order than the ranks' (every
 * gap byte checked untouched); the i-form, waited for and polled with
 * baton_test; a count that differs from the peer's (BATON_EMISMATCH on
 * both ranks, both counts named, on a copy of the communicator; the
 * communicator itself fine after it); bad arguments
 * (BATON_EINVAL, no request). Prints "N passed, M failed".
 */
#include <stdint.h>

#include "common.h"

static const baton_dtype_t dtypes[] = {BATON_INT8,    BATON_UINT8,    BATON_INT16,   BATON_UINT16,
                                       BATON_INT32,   BATON_UINT32,   BATON_INT64,   BATON_UINT64,
                                       BATON_FLOAT16, BATON_BFLOAT16, BATON_FLOAT32, BATON_FLOAT64,
                                       BATON_BOOL};

/* Elements from rank `from` to rank `to` in round k: mostly small, some 0,
 * now and then large. The same formula on every rank, so both ends agree. */
static size_t count_of(int from, int to, int k) {
  uint32_t h = (uint32_t)from * 2654435761u ^ (uint32_t)to * 40503u ^ (uint32_t)k * 97u;
  h ^= h >> 13, h *= 0x5bd1e995u, h ^= h >> 15;
  if (h % 7 == 0)
    return 0;
  if (h % 11 == 0)
    return 40000 + h % 30000; /* past the eager limit for most dtypes */
  return h % 300;
}

/* Byte j of the block from `from` to `to` in round k. */
static uint8_t byte_of(int from, int to, int k, size_t j, int is_bool) {
  uint32_t v = (uint32_t)from * 131u + (uint32_t)to * 17u + (uint32_t)k * 7u + (uint32_t)j * 3u;
  return is_bool ? (uint8_t)(v & 1) : (uint8_t)(v ^ (v >> 8));
}

#define GAP 3 /* elements left between blocks */

/* One round: fills, exchanges (blocking or not), checks. */
static int round_of(tally_t *T, baton_dtype_t dt, int k, int mode) {
  int me = T->rank, n = T->size, is_bool = dt == BATON_BOOL;
  size_t es = baton_dtype_size(dt);
  size_t *sc = calloc(4 * (size_t)n, sizeof *sc), *sd = sc + n, *rc = sc + 2 * n, *rd = sc + 3 * n;
  size_t stot = GAP, rtot = GAP;
  /* Send blocks in rank order, receive blocks in reverse rank order. */
  for (int q = 0; q < n; q++) {
    sc[q] = count_of(me, q, k), sd[q] = stot, stot += sc[q] + GAP;
    int p = n - 1 - q;
    rc[p] = count_of(p, me, k), rd[p] = rtot, rtot += rc[p] + GAP;
  }
  /* Mode 3 is in place: one buffer, the send blocks' layout written over by
   * the receive blocks'; what no block lands on stays as it was. */
  if (mode == 3 && stot > rtot)
    rtot = stot;
  uint8_t *s = malloc(stot * es), *r = malloc(rtot * es), *want = malloc(rtot * es);
  memset(s, 0x5a, stot * es);
  memset(r, 0xee, rtot * es);
  for (int q = 0; q < n; q++)
    for (size_t j = 0; j < sc[q] * es; j++)
      s[sd[q] * es + j] = byte_of(me, q, k, j, is_bool);
  if (mode == 3)
    memcpy(r, s, stot * es);
  memcpy(want, r, rtot * es);
  char what[96];
  snprintf(what, sizeof what, "alltoallv %s round %d mode %d", baton_dtype_name(dt), k, mode);
  int ok;
  if (mode == 0 || mode == 3) {
    ok = tally_rc(T, baton_alltoallv(mode == 3 ? r : s, sc, sd, r, rc, rd, dt, T->comm), what);
  } else {
    baton_request_t *req = NULL;
    ok = tally_rc(T, baton_ialltoallv(s, sc, sd, r, rc, rd, dt, T->comm, &req), what);
    if (ok && mode == 1) {
      ok = tally_rc(T, baton_wait(req), what);
    } else if (ok) {
      int done = 0, st = BATON_OK;
      while (!done && st == BATON_OK)
        st = baton_test(req, &done);
      ok = tally_rc(T, st, what);
    }
  }
  /* Each block where it belongs; the gaps as they were. */
  size_t bad = 0, at = (size_t)-1;
  for (int p = 0; p < n; p++)
    for (size_t j = 0; j < rc[p] * es; j++)
      want[rd[p] * es + j] = byte_of(p, me, k, j, is_bool);
  for (size_t j = 0; ok && j < rtot * es; j++)
    if (r[j] != want[j] && bad++ == 0)
      at = j;
  if (bad)
    tally_say(T, "%s: %zu bytes wrong, the first at byte %zu (%02x, want %02x)", what, bad, at,
              r[at], want[at]);
  free(s), free(r), free(want), free(sc);
  return ok && !bad;
}

/* Rank 0 sends rank 1 five elements where rank 1 expects seven, on a
 * copy of the communicator: a mismatch fails the communicator it happens
 * on, as any collective's does, and the others go on. */
static void mismatch(tally_t *T) {
  baton_comm_t *comm = NULL;
  if (!tally_rc(T, baton_comm_dup(T->comm, &comm), "baton_comm_dup"))
    return;
  int me = T->rank, n = T->size;
  size_t *c = calloc(4 * (size_t)n, sizeof *c), *d = c + 2 * n;
  int32_t s[16] = {0}, r[16];
  for (int q = 0; q < n; q++)
    c[q] = c[n + q] = 1, d[q] = d[n + q] = (size_t)q; /* one element per pair */
  if (me == 0 && n > 1)
    c[1] = 5, d[1] = 8; /* sendcounts[1] */
  if (me == 1)
    c[n + 0] = 7, d[n + 0] = 8; /* recvcounts[0] */
  int rc = baton_alltoallv(s, c, d, r, c + n, d + n, BATON_INT32, comm);
  const char *err = baton_comm_last_error(comm);
  /* The others may finish first, or hear of the failure first. */
  int ok = me > 1 ? rc == BATON_OK || rc == BATON_EMISMATCH || rc == BATON_EREMOTE
                  : rc == BATON_EMISMATCH && strstr(err, "sends 5 elements") &&
                        strstr(err, "expects 7") && strstr(err, "alltoallv");
  if (!ok)
    tally_say(T, "alltoallv mismatch on rank %d: %s: %s", me, baton_err_name(rc), err);
  tally_record(T, ok);
  baton_comm_destroy(comm);
  free(c);
}

static void bad_args(tally_t *T) {
  int n = T->size;
  size_t *c = calloc(4 * (size_t)n, sizeof *c);
  int32_t buf[4];
  baton_request_t *req = (baton_request_t *)buf;
  int ok =
      baton_alltoallv(buf, NULL, c, buf + 2, c, c, BATON_INT32, T->comm) == BATON_EINVAL &&
      baton_alltoallv(buf, c, c, buf + 2, c, c, (baton_dtype_t)99, T->comm) == BATON_EINVAL &&
      baton_ialltoallv(buf, c, c, buf + 2, NULL, c, BATON_INT32, T->comm, &req) == BATON_EINVAL &&
      req == NULL && baton_alltoallv(buf, c, c, buf, c, c, BATON_INT32, NULL) == BATON_EINVAL;
  /* A rank that sends itself a count it does not expect. */
  c[T->rank] = 1, c[n + T->rank] = 2;
  ok &= baton_alltoallv(buf, c, c + 2 * n, buf + 2, c + n, c + 3 * n, BATON_INT32, T->comm) ==
        BATON_EINVAL;
  ok &= strstr(baton_comm_last_error(T->comm), "expects") != NULL;
  if (!ok)
    tally_say(T, "alltoallv bad arguments: last error \"%s\"", baton_comm_last_error(T->comm));
  tally_record(T, ok);
  free(c);
}

int main(void) {
  tally_t T;
  tally_init(&T);
  bad_args(&T);
  int k = 0;
  for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0] && !T.broken; i++)
    for (int mode = 0; mode < 4 && !T.broken; mode++)
      tally_record(&T, round_of(&T, dtypes[i], k++, mode));
  /* Rounds back to back with the same dtype: each call's blocks follow the
   * last call's on every lane. */
  if (!T.broken) {
    enum { K = 4 };
    int ok = 1;
    for (int j = 0; j < K && ok; j++)
      ok &= round_of(&T, BATON_FLOAT32, 100 + j, 1);
    tally_record(&T, ok);
  }
  if (!T.broken && T.size > 1) {
    mismatch(&T);
    tally_record(&T, round_of(&T, BATON_INT32, 200, 0)); /* fine again */
  }
  return tally_finish(&T);
}
