/*
 * test_p2p.c - point-to-point messages (baton_send, baton_recv and their
 * i-forms), written only against baton.h.
 *
 *   baton-run -n N test_p2p          the sweep below, at any N (1: bad arguments only)
 *   baton-run -n N test_p2p kill     the last rank dies while the others wait on it
 *
 * The sweep: bad arguments (BATON_EINVAL, no request); a ring (each rank to
 * the next) at sizes from 0 bytes past the eager limit to megabytes; random
 * pairs, round after round, from a seed every rank shares; all-to-one,
 * where every rank sends rank 0 messages with several tags that rank 0
 * receives in another order (so messages wait unmatched) and completes in
 * yet another; order within a tag; a message and a collective in flight at
 * once, completed in either order; receives from every peer beside an
 * iallreduce, completed in reverse; blocking ping-pong; mismatched counts
 * (BATON_EMISMATCH on both sides, naming both counts; later messages still
 * work); the same on a communicator split in two. Every byte received is
 * checked against the formula that made it. Prints "N passed, M failed".
 */
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Element i of the message from `from` to `to` with `tag`. */
static int32_t val(int from, int to, int tag, size_t i) {
  uint32_t v = (uint32_t)from * 1000003u + (uint32_t)to * 7919u + (uint32_t)tag * 104729u +
               (uint32_t)(i * 2654435761u >> 7);
  return (int32_t)(v & 0x7fffffff);
}

static void fill(int32_t *b, size_t n, int from, int to, int tag) {
  for (size_t i = 0; i < n; i++)
    b[i] = val(from, to, tag, i);
}

/* Whether a received message is right; names the first wrong element.
 * Each part of the test records one check on every rank (the summary adds
 * them up across ranks), so this only says. */
static int verify(tally_t *T, const char *what, const int32_t *b, size_t n, int from, int to,
                  int tag) {
  for (size_t i = 0; i < n; i++)
    if (b[i] != val(from, to, tag, i)) {
      tally_say(T, "%s: element %zu of %zu from rank %d (tag %d) is %d, want %d", what, i, n, from,
                tag, b[i], val(from, to, tag, i));
      return 0;
    }
  return 1;
}

static int32_t *alloc(size_t n) {
  int32_t *b = malloc((n ? n : 1) * sizeof *b);
  if (!b) {
    fprintf(stderr, "out of memory\n");
    exit(1);
  }
  return b;
}

/* ------------------------------------------------------------ bad input */

static void bad_args(tally_t *T, baton_comm_t *comm) {
  int rank = baton_comm_rank(comm), size = baton_comm_size(comm);
  int32_t x = 0;
  struct {
    const char *what;
    int peer, tag;
    baton_dtype_t dt;
    void *buf;
    size_t count;
  } cases[] = {
      {"peer -1", -1, 0, BATON_INT32, &x, 1},
      {"peer == size", size, 0, BATON_INT32, &x, 1},
      {"peer == rank", rank, 0, BATON_INT32, &x, 1},
      {"tag -1", (rank + 1) % size, -1, BATON_INT32, &x, 1},
      {"dtype out of range", (rank + 1) % size, 0, (baton_dtype_t)99, &x, 1},
      {"NULL buffer", (rank + 1) % size, 0, BATON_INT32, NULL, 1},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    if (size == 1 && i == 3)
      break; /* (rank + 1) % 1 is this rank: the rest would test that again */
    baton_request_t *req = (baton_request_t *)&x;
    int rc[4] = {
        baton_send(cases[i].buf, cases[i].count, cases[i].dt, cases[i].peer, cases[i].tag, comm),
        baton_recv(cases[i].buf, cases[i].count, cases[i].dt, cases[i].peer, cases[i].tag, comm),
        baton_isend(cases[i].buf, cases[i].count, cases[i].dt, cases[i].peer, cases[i].tag, comm,
                    &req),
        0};
    int null_req = req == NULL;
    req = (baton_request_t *)&x;
    rc[3] = baton_irecv(cases[i].buf, cases[i].count, cases[i].dt, cases[i].peer, cases[i].tag,
                        comm, &req);
    null_req &= req == NULL;
    int ok = rc[0] == BATON_EINVAL && rc[1] == BATON_EINVAL && rc[2] == BATON_EINVAL &&
             rc[3] == BATON_EINVAL && null_req;
    if (!ok)
      tally_say(
          T, "%s: send/recv/isend/irecv returned %s %s %s %s%s, want BATON_EINVAL and no request",
          cases[i].what, baton_err_name(rc[0]), baton_err_name(rc[1]), baton_err_name(rc[2]),
          baton_err_name(rc[3]), null_req ? "" : " and a request");
    tally_record(T, ok);
  }
  tally_record(T, baton_isend(&x, 1, BATON_INT32, 0, 0, comm, NULL) == BATON_EINVAL);
  tally_record(T, baton_send(&x, 1, BATON_INT32, 0, 0, NULL) == BATON_EINVAL);
  /* A zero count with a NULL buffer is legal; sent to self it is still EINVAL. */
  tally_record(T, baton_send(NULL, 0, BATON_INT32, rank, 0, comm) == BATON_EINVAL);
  const char *err = baton_comm_last_error(comm);
  int named = strstr(err, "this rank") != NULL;
  if (!named)
    tally_say(T, "the error for a message to itself does not say so: \"%s\"", err);
  tally_record(T, named);
}

/* ---------------------------------------------------------------- ring */

static void ring(tally_t *T, baton_comm_t *comm, size_t n, int tag) {
  int rank = baton_comm_rank(comm), size = baton_comm_size(comm);
  int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  int32_t *out = alloc(n), *in = alloc(n);
  fill(out, n, rank, next, tag);
  memset(in, 0, n * sizeof *in);
  baton_request_t *r[2];
  char what[96];
  snprintf(what, sizeof what, "ring of %zu int32 (tag %d)", n, tag);
  /* The receive first on odd ranks, the send first on even ones. */
  int rc0 = rank % 2 ? baton_irecv(in, n, BATON_INT32, prev, tag, comm, &r[0])
                     : baton_isend(out, n, BATON_INT32, next, tag, comm, &r[0]);
  int rc1 = rank % 2 ? baton_isend(out, n, BATON_INT32, next, tag, comm, &r[1])
                     : baton_irecv(in, n, BATON_INT32, prev, tag, comm, &r[1]);
  int ok = tally_rc(T, rc0, what) & tally_rc(T, rc1, what);
  ok = ok && tally_rc(T, baton_wait_all(2, r), what) && verify(T, what, in, n, prev, rank, tag);
  tally_record(T, ok);
  free(out), free(in);
}

/* ------------------------------------------------------------- random pairs */

static uint64_t rng(uint64_t *s) {
  *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
  return *s;
}

/* Round after round, a random permutation: rank r sends to perm[r] and
 * receives from its inverse, with a random size and the round as tag. */
static void random_pairs(tally_t *T, baton_comm_t *comm, int rounds) {
  int rank = baton_comm_rank(comm), size = baton_comm_size(comm);
  uint64_t s = 0x9e3779b97f4a7c15ull;
  int *perm = malloc((size_t)size * sizeof *perm), all = 1;
  for (int k = 0; k < rounds && !T->broken; k++) {
    for (int i = 0; i < size; i++)
      perm[i] = i;
    for (int i = size - 1; i > 0; i--) {
      int j = (int)(rng(&s) % (uint64_t)(i + 1)), t = perm[i];
      perm[i] = perm[j], perm[j] = t;
    }
    size_t n = rng(&s) % 3 == 0 ? rng(&s) % (300 << 10) : rng(&s) % 2000;
    int to = perm[rank], from = -1;
    for (int i = 0; i < size; i++)
      if (perm[i] == rank)
        from = i;
    if (to == rank) /* a fixed point sits this round out */
      continue;
    int32_t *out = alloc(n), *in = alloc(n);
    fill(out, n, rank, to, k);
    baton_request_t *r[2];
    char what[96];
    snprintf(what, sizeof what, "random pairs round %d (%zu int32, %d -> %d -> %d)", k, n, from,
             rank, to);
    int ok = tally_rc(T, baton_irecv(in, n, BATON_INT32, from, k, comm, &r[0]), what);
    ok = ok && tally_rc(T, baton_isend(out, n, BATON_INT32, to, k, comm, &r[1]), what);
    ok = ok && tally_rc(T, baton_wait_all(2, r), what) && verify(T, what, in, n, from, rank, k);
    all &= ok;
    free(out), free(in);
  }
  tally_record(T, all);
  free(perm);
}

/* ------------------------------------------------------------- all to one */

/* Every other rank sends rank 0 one message per tag, in tag order 0, 1, 2
 * (tag 1 large enough to wait for a go-ahead); rank 0 posts its receives
 * in the reverse order of tags and waits for them in the order of ranks
 * backwards. */
static void all_to_one(tally_t *T, baton_comm_t *comm) {
  int rank = baton_comm_rank(comm), size = baton_comm_size(comm);
  enum { NT = 3 };
  size_t sizes[NT] = {17, 200000, 0};
  int ok = 1;
  if (rank != 0) {
    for (int tag = 0; tag < NT; tag++) {
      int32_t *out = alloc(sizes[tag]);
      fill(out, sizes[tag], rank, 0, tag);
      ok &= tally_rc(T, baton_send(out, sizes[tag], BATON_INT32, 0, tag, comm), "all-to-one send");
      free(out);
    }
    tally_record(T, ok);
    return;
  }
  /* The sends are synchronous: each sender blocks in its tag 0 send until
   * rank 0 posts that receive, so rank 0 posts everything first. */
  int32_t *in[64][NT];
  baton_request_t *req[64][NT];
  int nr = size < 64 ? size : 64;
  for (int tag = NT - 1; tag >= 0; tag--)
    for (int r = 1; r < nr; r++) {
      in[r][tag] = alloc(sizes[tag]);
      ok &=
          tally_rc(T, baton_irecv(in[r][tag], sizes[tag], BATON_INT32, r, tag, comm, &req[r][tag]),
                   "all-to-one irecv");
    }
  for (int r = nr - 1; r >= 1; r--)
    for (int tag = 0; tag < NT; tag++) {
      char what[64];
      snprintf(what, sizeof what, "all-to-one from rank %d tag %d", r, tag);
      ok &= tally_rc(T, baton_wait(req[r][tag]), what) &&
            verify(T, what, in[r][tag], sizes[tag], r, 0, tag);
      free(in[r][tag]);
    }
  tally_record(T, ok);
}

/* ------------------------------------------------------ order in a tag */

static void order(tally_t *T, baton_comm_t *comm) {
  int rank = baton_comm_rank(comm);
  enum { K = 12 };
  if (rank > 1) {
    tally_record(T, 1);
    return;
  }
  int32_t v[K];
  baton_request_t *r[K];
  for (int i = 0; i < K; i++) {
    v[i] = rank == 0 ? 1000 + i : -1;
    int rc = rank == 0 ? baton_isend(&v[i], 1, BATON_INT32, 1, 7, comm, &r[i])
                       : baton_irecv(&v[i], 1, BATON_INT32, 0, 7, comm, &r[i]);
    if (!tally_rc(T, rc, "order: post"))
      r[i] = NULL;
  }
  int ok = tally_rc(T, baton_wait_all(K, r), "order: wait_all");
  for (int i = 0; ok && rank == 1 && i < K; i++)
    if (v[i] != 1000 + i) {
      tally_say(T, "order: message %d of tag 7 is %d, want %d", i, v[i], 1000 + i);
      ok = 0;
    }
  tally_record(T, ok);
}

/* ----------------------------------------------- beside the collectives */

/* Rank 1 waits for rank 0's message only after an allreduce that rank 0
 * makes before sending: the receive and the collective are in flight at
 * once. Then every rank receives from every other beside an iallreduce
 * and completes them in reverse order of posting. */
static void beside_collectives(tally_t *T, baton_comm_t *comm) {
  int rank = baton_comm_rank(comm), size = baton_comm_size(comm);
  int32_t x = rank, sum = 0, msg = -1;
  int ok = 1;
  if (rank == 1) {
    baton_request_t *r;
    ok &= tally_rc(T, baton_irecv(&msg, 1, BATON_INT32, 0, 3, comm, &r), "beside: irecv");
    ok &= tally_rc(T, baton_allreduce(&x, &sum, 1, BATON_INT32, BATON_SUM, comm),
                   "beside: allreduce");
    ok &= tally_rc(T, baton_wait(r), "beside: wait") && msg == 4242;
  } else {
    ok &= tally_rc(T, baton_allreduce(&x, &sum, 1, BATON_INT32, BATON_SUM, comm),
                   "beside: allreduce");
    if (rank == 0) {
      msg = 4242;
      ok &= tally_rc(T, baton_send(&msg, 1, BATON_INT32, 1, 3, comm), "beside: send");
    }
  }
  tally_record(T, ok && sum == size * (size - 1) / 2);
  ok = 1;

  size_t n = 5000;
  int32_t *in = alloc(n * (size_t)size), *out = alloc(n * (size_t)size);
  baton_request_t **r = malloc(2 * (size_t)size * sizeof *r);
  int nr = 0;
  for (int p = 0; p < size; p++)
    if (p != rank)
      ok &= tally_rc(T, baton_irecv(in + n * (size_t)p, n, BATON_INT32, p, 11, comm, &r[nr++]),
                     "beside: irecv");
  float f = 1, fsum = 0;
  baton_request_t *coll;
  ok &= tally_rc(T, baton_iallreduce(&f, &fsum, 1, BATON_FLOAT32, BATON_SUM, comm, &coll),
                 "beside: iallreduce");
  for (int p = 0; p < size; p++)
    if (p != rank) {
      fill(out + n * (size_t)p, n, rank, p, 11);
      ok &= tally_rc(T, baton_isend(out + n * (size_t)p, n, BATON_INT32, p, 11, comm, &r[nr++]),
                     "beside: isend");
    }
  ok &= tally_rc(T, baton_wait(coll), "beside: wait iallreduce") && fsum == (float)size;
  for (int i = nr - 1; i >= 0; i--)
    ok &= tally_rc(T, baton_wait(r[i]), "beside: wait");
  for (int p = 0; p < size; p++)
    if (p != rank)
      ok &= verify(T, "beside: from every peer", in + n * (size_t)p, n, p, rank, 11);
  tally_record(T, ok);
  free(in), free(out), free(r);
}

/* ---------------------------------------------------------- ping-pong */

static void ping_pong(tally_t *T, baton_comm_t *comm) {
  int rank = baton_comm_rank(comm), size = baton_comm_size(comm);
  int partner = rank ^ 1;
  if (partner >= size) {
    tally_record(T, 1);
    return;
  }
  size_t sizes[] = {1, 1000, 16384, 16385, 1 << 20};
  int ok = 1;
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0] && ok; k++) {
    size_t n = sizes[k];
    int32_t *b = alloc(n);
    for (int it = 0; it < 3 && ok; it++) {
      int tag = (int)(k * 10) + it;
      if (rank % 2 == 0) {
        fill(b, n, rank, partner, tag);
        ok = tally_rc(T, baton_send(b, n, BATON_INT32, partner, tag, comm), "ping: send") &&
             tally_rc(T, baton_recv(b, n, BATON_INT32, partner, tag, comm), "ping: recv") &&
             verify(T, "pong", b, n, partner, rank, tag);
      } else {
        ok = tally_rc(T, baton_recv(b, n, BATON_INT32, partner, tag, comm), "pong: recv") &&
             verify(T, "ping", b, n, partner, rank, tag);
        fill(b, n, rank, partner, tag);
        ok = ok && tally_rc(T, baton_send(b, n, BATON_INT32, partner, tag, comm), "pong: send");
      }
    }
    free(b);
  }
  tally_record(T, ok);
}

/* ------------------------------------------------------------ mismatch */

/* Rank 0 sends n elements, rank 1 expects n + 2: both BATON_EMISMATCH,
 * with both counts in the text; then a message that matches still works. */
static void mismatch(tally_t *T, baton_comm_t *comm, size_t n) {
  int rank = baton_comm_rank(comm);
  if (rank > 1) {
    tally_record(T, 1);
    tally_record(T, 1);
    return;
  }
  int32_t *b = alloc(n + 2);
  fill(b, n + 2, 0, 1, 5);
  int rc = rank == 0 ? baton_send(b, n, BATON_INT32, 1, 5, comm)
                     : baton_recv(b, n + 2, BATON_INT32, 0, 5, comm);
  const char *err = baton_comm_last_error(comm);
  char a[32], c[32];
  snprintf(a, sizeof a, "%zu", n);
  snprintf(c, sizeof c, "%zu", n + 2);
  int ok = rc == BATON_EMISMATCH && strstr(err, a) && strstr(err, c);
  if (!ok)
    tally_say(T, "mismatch of %zu and %zu elements: returned %s, \"%s\"", n, n + 2,
              baton_err_name(rc), err);
  tally_record(T, ok);
  fill(b, n, 0, 1, 6);
  rc = rank == 0 ? baton_send(b, n, BATON_INT32, 1, 6, comm)
                 : baton_recv(b, n, BATON_INT32, 0, 6, comm);
  tally_record(T, tally_rc(T, rc, "after the mismatch") &&
                      (rank == 0 || verify(T, "after the mismatch", b, n, 0, 1, 6)));
  free(b);
}

/* --------------------------------------------------------------- kill */

/* Messages to and from the ring neighbours completed only by polling
 * with baton_test (as Python's is_completed and torch's futures do), with
 * nobody in baton_wait: a receive matched in a poll owes its sender an
 * acknowledgement that must still go out, though this rank then waits in
 * a barrier, which does not drive the lanes. Each round is bounded: a send
 * left waiting for its acknowledgement fails the check, not the suite. */
static void polled(tally_t *T, baton_comm_t *comm, int rounds) {
  enum { K = 4 };
  int me = baton_comm_rank(comm), n = baton_comm_size(comm);
  int next = (me + 1) % n, prev = (me + n - 1) % n, ok = 1;
  int32_t out[K][3], in[K][3];
  for (int r = 0; r < rounds && ok; r++) {
    baton_request_t *req[2 * K];
    int left = 0, rc = BATON_OK;
    for (int k = 0; k < K && rc == BATON_OK; k++) {
      fill(out[k], 3, me, next, k);
      rc = baton_isend(out[k], 3, BATON_INT32, next, k, comm, &req[left]);
      left += rc == BATON_OK;
      if (rc == BATON_OK &&
          (rc = baton_irecv(in[k], 3, BATON_INT32, prev, k, comm, &req[left])) == BATON_OK)
        left++;
    }
    double t0 = now();
    while (rc == BATON_OK && left > 0) {
      for (int i = 0; i < left && rc == BATON_OK; i++) {
        int done = 0;
        rc = baton_test(req[i], &done);
        if (done)
          req[i--] = req[--left];
      }
      if (left && now() - t0 > 5) {
        tally_say(T, "polled round %d: %d request(s) not done after 5 s", r, left);
        ok = 0;
        break;
      }
    }
    if (rc != BATON_OK)
      ok = tally_rc(T, rc, "polled messages");
    for (int k = 0; k < K && ok; k++)
      ok = verify(T, "polled", in[k], 3, prev, me, k);
    if (!ok && left) /* give up on the communicator: requests are still out */
      T->broken = 1;
    /* Nothing drives the lanes here: an acknowledgement still owed must go
     * out without this rank's help. */
    if (ok)
      ok = tally_rc(T, baton_barrier(comm), "barrier between polled rounds");
  }
  tally_record(T, ok);
}

static int kill_mode(void) {
  tally_t T;
  tally_init(&T);
  int last = T.size - 1;
  int32_t b[4];
  if (T.rank == last) {
    baton_barrier(T.comm);
    usleep(50 * 1000);
    _exit(0);
  }
  baton_request_t *r;
  int rc = baton_irecv(b, 4, BATON_INT32, last, 0, T.comm, &r);
  baton_barrier(T.comm);
  double t0 = now();
  rc = rc ? rc : baton_wait(r);
  double took = now() - t0;
  /* Within BATON_TIMEOUT (20 s here): the death was seen, not timed out. */
  int ok = rc == BATON_EREMOTE && took < 15;
  fprintf(stderr, "rank %d: the receive from the dead rank returned %s after %.2f s: %s\n", T.rank,
          baton_err_name(rc), took, baton_comm_last_error(T.comm));
  /* And a later message fails at once with the same code. */
  int rc2 = baton_send(b, 1, BATON_INT32, last, 0, T.comm);
  ok &= rc2 == BATON_EREMOTE;
  printf("%d passed, %d failed\n", ok, !ok);
  baton_comm_destroy(T.comm);
  return !ok;
}

int main(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "kill"))
    return kill_mode();
  tally_t T;
  tally_init(&T);
  bad_args(&T, T.comm);
  if (T.size > 1) {
    size_t sizes[] = {0, 1, 1000, 16383, 16384, 16385, 100000, 1 << 20, 3 << 20};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0] && !T.broken; i++)
      ring(&T, T.comm, sizes[i], (int)i);
    if (!T.broken)
      random_pairs(&T, T.comm, 20);
    if (!T.broken)
      all_to_one(&T, T.comm);
    if (!T.broken)
      order(&T, T.comm);
    if (!T.broken)
      beside_collectives(&T, T.comm);
    if (!T.broken)
      ping_pong(&T, T.comm);
    if (!T.broken)
      polled(&T, T.comm, 300);
    if (!T.broken)
      mismatch(&T, T.comm, 10);
    if (!T.broken)
      mismatch(&T, T.comm, 100000);
    /* The same on the halves of a split: ranks renumbered, lanes of their own. */
    baton_comm_t *half = NULL;
    if (!T.broken &&
        tally_rc(&T, baton_comm_split(T.comm, T.rank % 2, T.rank, &half), "baton_comm_split")) {
      if (baton_comm_size(half) > 1) {
        ring(&T, half, 3000, 1);
        ring(&T, half, 300000, 2);
        random_pairs(&T, half, 5);
      } else { /* a half of one rank has nobody to talk to: the same number of checks */
        for (int i = 0; i < 3; i++)
          tally_record(&T, 1);
      }
      tally_rc(&T, baton_comm_destroy(half), "destroying the half");
    }
  }
  return tally_finish(&T);
}
