/*
 * test_schedule.c - the schedules of algo.c, checked without running them.
 *
 * The ring is checked against a statement of it written here from the
 * textbook, not from ring.c: on ranks 0..N-1 in a ring, rank r always sends
 * to r+1 and receives from r-1; in reduce-scatter step s (s = 0..N-2) it
 * sends its partial sum of chunk r-s-1 and receives chunk r-s-2, adding its
 * own input, so that after N-1 steps it holds the whole sum of chunk r; in
 * allgather step s it sends chunk r-s and receives chunk r-s-1 (all mod N).
 * Broadcast on the ring is the chain from the root: the rank q places after
 * the root receives the root's chunk from r-1 at step q-1 and, unless it is
 * the last, sends it on to r+1 at step q.
 *
 * Every algorithm of the table (so also those added later) is then checked
 * by what its steps do, simulated here: in each step the chunks every rank
 * receives are exactly the ones its peers send it, a reduction never adds a
 * rank's contribution twice, and at the end every rank holds what the
 * collective promises (every chunk summed over all ranks for allreduce, its
 * own chunk for reduce-scatter, every rank's input for allgather, the root's
 * for broadcast). And the
 * chunk layout of uneven counts: chunks tile the buffer, differ by at most
 * one element, larger ones first; the bytes a ring rank sends add up.
 *
 * Sizes 1..16 and counts around multiples of N. Prints "N passed, M failed".
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schedule.h"

#define MAX_N 16
#define MAX_STEPS 64

static int passed, failed, lines;

static void check(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void check(int ok, const char *fmt, ...) {
  if (ok) {
    passed++;
    return;
  }
  failed++;
  if (lines++ < 40) {
    va_list ap;
    va_start(ap, fmt);
    fputs("FAIL: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
  }
}

static int mod(int a, int n) { return ((a % n) + n) % n; }

typedef struct {
  baton__step_t steps[MAX_N][MAX_STEPS];
  baton__sched_t s[MAX_N];
} all_t;

static int build_all(all_t *A, baton__coll_t coll, const baton__algo_t *algo, int n,
                     size_t count, int root) {
  if (algo->max_steps(n) > MAX_STEPS)
    return -1;
  for (int r = 0; r < n; r++) {
    A->s[r].steps = A->steps[r];
    if (baton__schedule_for(&A->s[r], coll, algo, r, n, count, root) != 0)
      return -1;
  }
  return 0;
}

/* ---------------------------------------------- the ring, as stated above */

static void ring_against_statement(baton__coll_t coll, int n) {
  static all_t A;
  const char *cn = baton__coll_name(coll);
  check(build_all(&A, coll, baton__algo_find("ring"), n, 1000, 0) == 0, "ring %s n=%d builds",
        cn, n);
  int rs = coll != BATON__COLL_ALLGATHER, ag = coll != BATON__COLL_REDUCE_SCATTER;
  for (int r = 0; r < n; r++) {
    const baton__sched_t *s = &A.s[r];
    int want = n == 1 ? 0 : (rs + ag) * (n - 1);
    check(s->nsteps == want, "ring %s n=%d rank %d: %d steps, want %d", cn, n, r, s->nsteps,
          want);
    if (s->nsteps != want)
      continue;
    for (int i = 0; i < s->nsteps; i++) {
      const baton__step_t *st = &s->steps[i];
      int in_rs = rs && i < n - 1, k = in_rs ? i : i - (rs ? n - 1 : 0);
      int send = in_rs ? mod(r - k - 1, n) : mod(r - k, n);
      int recv = in_rs ? mod(r - k - 2, n) : mod(r - k - 1, n);
      int phase = in_rs ? BATON__PHASE_REDUCE_SCATTER : BATON__PHASE_ALLGATHER;
      int op = in_rs ? BATON__RECV_REDUCE : BATON__RECV_COPY;
      check(st->phase == phase && st->step == k && st->send_peer == mod(r + 1, n) &&
                st->recv_peer == mod(r - 1, n) && st->send_chunk == send &&
                st->recv_chunk == recv && st->recv_op == op,
            "ring %s n=%d rank %d step %d: got phase %d step %d send c%d->%d recv c%d<-%d "
            "op %d; want phase %d step %d send c%d->%d recv c%d<-%d op %d",
            cn, n, r, i, st->phase, st->step, st->send_chunk, st->send_peer, st->recv_chunk,
            st->recv_peer, st->recv_op, phase, k, send, mod(r + 1, n), recv, mod(r - 1, n),
            op);
      /* What arrives is what the next step sends, except at the very end
       * and where reduce-scatter ends a bare reduce-scatter. */
      int last = i == s->nsteps - 1;
      check(st->forward == !last && (last || s->steps[i + 1].send_chunk == st->recv_chunk),
            "ring %s n=%d rank %d step %d: forward %d", cn, n, r, i, st->forward);
      int final = !in_rs || k == n - 2;
      check(st->keep == final, "ring %s n=%d rank %d step %d: keep %d, want %d", cn, n, r, i,
            st->keep, final);
    }
  }
}

static void chain_against_statement(int n, int root) {
  static all_t A;
  check(build_all(&A, BATON__COLL_BROADCAST, baton__algo_find("ring"), n, 1000, root) == 0,
        "ring broadcast n=%d root %d builds", n, root);
  for (int r = 0; r < n; r++) {
    const baton__sched_t *s = &A.s[r];
    int q = mod(r - root, n), i = 0, ok = 1;
    if (q > 0) {
      const baton__step_t *st = &s->steps[i++];
      ok &= i <= s->nsteps && st->phase == BATON__PHASE_BROADCAST && st->step == q - 1 &&
            st->recv_peer == mod(r - 1, n) && st->recv_chunk == root && st->send_peer < 0 &&
            st->recv_op == BATON__RECV_COPY && st->keep && st->forward == (q < n - 1);
    }
    if (q < n - 1 && n > 1) {
      const baton__step_t *st = &s->steps[i++];
      ok &= i <= s->nsteps && st->phase == BATON__PHASE_BROADCAST && st->step == q &&
            st->send_peer == mod(r + 1, n) && st->send_chunk == root && st->recv_peer < 0;
    }
    check(ok && s->nsteps == i, "chain broadcast n=%d root %d rank %d: %d steps, not as stated",
          n, root, r, s->nsteps);
  }
}

/* ------------------------------------- any algorithm, by what it computes */

typedef uint32_t set_t; /* bit q: rank q's contribution is in */

static int coll_reduces(baton__coll_t coll) {
  return coll == BATON__COLL_ALLREDUCE || coll == BATON__COLL_REDUCE_SCATTER;
}

/* The phases in the order they first appear, then steps within them. */
static int key_of(const baton__step_t *st) { return st->phase * 65536 + st->step; }

static void simulate(baton__coll_t coll, const baton__algo_t *algo, int n, int root) {
  static all_t A;
  static set_t held[MAX_N][MAX_N], snap[MAX_N][MAX_N];
  const char *cn = baton__coll_name(coll), *an = algo->name;
  if (build_all(&A, coll, algo, n, 1000, root) != 0) {
    check(0, "%s %s n=%d: no schedule", an, cn, n);
    return;
  }
  for (int r = 0; r < n; r++)
    for (int c = 0; c < n; c++)
      held[r][c] = coll_reduces(coll)                                  ? 1u << r
                   : c == r && (coll != BATON__COLL_BROADCAST || r == root) ? 1u << r
                                                                            : 0;
  int at[MAX_N] = {0}, ok = 1;
  for (;;) {
    /* The next step: the smallest key any rank has left. */
    int key = -1;
    for (int r = 0; r < n; r++)
      if (at[r] < A.s[r].nsteps && (key < 0 || key_of(&A.s[r].steps[at[r]]) < key))
        key = key_of(&A.s[r].steps[at[r]]);
    if (key < 0)
      break;
    memcpy(snap, held, sizeof snap);
    int sends[MAX_N][MAX_N] = {{0}}; /* [from][to]: chunk + 1 */
    int any_send = 0;
    for (int r = 0; r < n; r++)
      for (int i = at[r]; i < A.s[r].nsteps && key_of(&A.s[r].steps[i]) == key; i++) {
        const baton__step_t *st = &A.s[r].steps[i];
        if (st->send_peer >= 0) {
          sends[r][st->send_peer] = st->send_chunk + 1;
          any_send = 1;
        }
      }
    for (int r = 0; r < n; r++)
      for (; at[r] < A.s[r].nsteps && key_of(&A.s[r].steps[at[r]]) == key; at[r]++) {
        const baton__step_t *st = &A.s[r].steps[at[r]];
        int q = st->recv_peer;
        if (q < 0)
          continue;
        if (any_send && sends[q][r] != st->recv_chunk + 1) {
          check(0, "%s %s n=%d key %d: rank %d receives chunk %d from %d, which sends it "
                "chunk %d", an, cn, n, key, r, st->recv_chunk, q, sends[q][r] - 1);
          ok = 0;
        }
        if (any_send)
          sends[q][r] = 0;
        for (int c = 0; c < n; c++) {
          if (st->recv_chunk != BATON__ALL_CHUNKS && st->recv_chunk != c)
            continue;
          if (st->recv_op == BATON__RECV_COPY) {
            held[r][c] = snap[q][c];
          } else {
            if (held[r][c] & snap[q][c]) {
              check(0, "%s %s n=%d key %d: rank %d adds rank(s) %#x into chunk %d twice", an,
                    cn, n, key, r, held[r][c] & snap[q][c], c);
              ok = 0;
            }
            held[r][c] |= snap[q][c];
          }
        }
      }
    for (int r = 0; r < n; r++)
      for (int q = 0; q < n; q++)
        if (sends[r][q]) {
          check(0, "%s %s n=%d key %d: rank %d sends chunk %d to %d, which does not receive "
                "it", an, cn, n, key, r, sends[r][q] - 1, q);
          ok = 0;
        }
  }
  set_t all = n == 32 ? ~0u : (1u << n) - 1;
  for (int r = 0; r < n; r++)
    for (int c = 0; c < n; c++) {
      set_t want = coll == BATON__COLL_ALLREDUCE        ? all
                   : coll == BATON__COLL_REDUCE_SCATTER ? (c == r ? all : held[r][c])
                   : coll == BATON__COLL_BROADCAST      ? (c == root ? 1u << root : 0)
                                                        : 1u << c;
      if (held[r][c] != want) {
        check(0, "%s %s n=%d: at the end rank %d holds contributions %#x of chunk %d, want "
              "%#x", an, cn, n, r, held[r][c], c, want);
        ok = 0;
      }
    }
  check(ok, "%s %s n=%d: data flow", an, cn, n);
}

/* --------------------------------------------------- chunks, uneven counts */

static void layout(int n, size_t count) {
  size_t off = 0, min = (size_t)-1, max = 0;
  int ok = 1;
  for (int c = 0; c < n; c++) {
    size_t len = baton__chunk_len(count, n, c);
    ok &= baton__chunk_off(count, n, c) == off;
    ok &= c == 0 || len <= baton__chunk_len(count, n, c - 1);
    off += len;
    min = len < min ? len : min;
    max = len > max ? len : max;
  }
  check(ok && off == count && max - min <= 1,
        "n=%d count %zu: chunks do not tile the buffer evenly", n, count);
  /* Ring allreduce: rank r sends every chunk but its own in reduce-scatter
   * and every chunk but r+1's in allgather. */
  static all_t A;
  build_all(&A, BATON__COLL_ALLREDUCE, baton__algo_find("ring"), n, count, 0);
  for (int r = 0; r < n && n > 1; r++) {
    size_t sent = 0;
    for (int i = 0; i < A.s[r].nsteps; i++)
      sent += baton__chunk_len(count, n, A.s[r].steps[i].send_chunk);
    size_t want = 2 * count - baton__chunk_len(count, n, r) -
                  baton__chunk_len(count, n, mod(r + 1, n));
    check(sent == want, "ring allreduce n=%d count %zu: rank %d sends %zu elements, want %zu",
          n, count, r, sent, want);
  }
}

int main(void) {
  int nalgos;
  const baton__algo_t *algos = baton__algos(&nalgos);
  for (int n = 1; n <= MAX_N; n++) {
    for (int c = 0; c <= BATON__COLL_ALLGATHER; c++)
      ring_against_statement((baton__coll_t)c, n);
    for (int root = 0; root < n; root += n > 4 ? 3 : 1)
      chain_against_statement(n, root);
    for (int c = 0; c <= BATON__COLL_BROADCAST; c++)
      for (int a = 0; a < nalgos; a++)
        for (int root = 0; root < n && (algos[a].colls & (1u << c)); root += n > 4 ? 3 : 1) {
          simulate((baton__coll_t)c, &algos[a], n, root);
          if (c != BATON__COLL_BROADCAST)
            break; /* only broadcast has a root */
        }
    size_t counts[] = {0, 1, (size_t)n - 1, (size_t)n, (size_t)n + 1, 7 * (size_t)n + 3,
                       1000003};
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++)
      layout(n, counts[i]);
  }
  /* Bad arguments are refused, not drawn. */
  static all_t A;
  A.s[0].steps = A.steps[0];
  const baton__algo_t *ring = baton__algo_find("ring");
  check(baton__schedule_for(&A.s[0], BATON__COLL_ALLREDUCE, ring, 4, 4, 1, 0) == -1,
        "rank 4 of 4 refused");
  check(baton__schedule_for(&A.s[0], BATON__COLL_COUNT, ring, 0, 4, 1, 0) == -1,
        "unknown collective refused");
  check(baton__schedule_for(&A.s[0], BATON__COLL_BROADCAST, ring, 0, 4, 1, 4) == -1,
        "root 4 of 4 refused");
  check(baton__algo_find("no-such-algo") == NULL, "unknown algorithm not found");
  check(baton__coll_find("allgather") == BATON__COLL_ALLGATHER, "collective by name");
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
