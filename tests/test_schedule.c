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
 * Every algorithm of the table (so also those added later) is then checked,
 * for every collective it serves, by what its steps do, simulated here on
 * all ranks side by side: in each step the chunks every rank receives are
 * exactly the ones its peers send it, nobody sends what it does not hold, a
 * reduction never adds a rank's contribution twice nor adds to a finished
 * (averaged) sum, and at the end every rank holds in WORK what the
 * collective promises (every chunk summed over all ranks and finished once
 * for allreduce, its own chunk for reduce-scatter, every rank's block for
 * allgather, the root's buffer for broadcast, ...; blocks of scatter and
 * alltoall are tagged with their destination). And the
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

/* The hosts the schedules are built for (hier reads them); NULL: one rank
 * per host. */
static const int *sim_host;

static int build_all(all_t *A, baton__coll_t coll, const baton__algo_t *algo, int n, size_t count,
                     int root) {
  if (algo->max_steps(n) > MAX_STEPS)
    return -1;
  for (int r = 0; r < n; r++) {
    A->s[r].steps = A->steps[r];
    A->s[r].host = sim_host;
    if (baton__schedule_for(&A->s[r], coll, algo, r, n, count, root) != 0)
      return -1;
  }
  return 0;
}

/* ---------------------------------------------- the ring, as stated above */

static void ring_against_statement(baton__coll_t coll, int n) {
  static all_t A;
  const char *cn = baton__coll_name(coll);
  check(build_all(&A, coll, baton__algo_find("ring"), n, 1000, 0) == 0, "ring %s n=%d builds", cn,
        n);
  int rs = coll != BATON__COLL_ALLGATHER, ag = coll != BATON__COLL_REDUCE_SCATTER;
  for (int r = 0; r < n; r++) {
    const baton__sched_t *s = &A.s[r];
    int want = n == 1 ? 0 : (rs + ag) * (n - 1);
    check(s->nsteps == want, "ring %s n=%d rank %d: %d steps, want %d", cn, n, r, s->nsteps, want);
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
            st->recv_peer, st->recv_op, phase, k, send, mod(r + 1, n), recv, mod(r - 1, n), op);
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
    check(ok && s->nsteps == i, "chain broadcast n=%d root %d rank %d: %d steps, not as stated", n,
          root, r, s->nsteps);
  }
}

/* ------------------------------------- any algorithm, by what it computes */

/* What a chunk holds, as a value: bit q of the low 32 bits says rank q's
 * contribution is in it; for blocks that travel without being reduced
 * (scatter, alltoall) bits 32..47 carry the block's destination + 1, so a
 * block delivered to the wrong rank shows; FINISHED says the reduction was
 * completed (AVG divided) once. */
typedef uint64_t val_t;
#define UNDEF ((val_t)-1)
#define FINISHED ((val_t)1 << 62)
#define RANKS(v) ((v)&0xffffffffu)
#define TAG(dest) ((val_t)((dest) + 1) << 32)

static int coll_reduces(baton__coll_t coll) {
  return coll == BATON__COLL_ALLREDUCE || coll == BATON__COLL_REDUCE_SCATTER ||
         coll == BATON__COLL_REDUCE_SCATTERV || coll == BATON__COLL_REDUCE;
}

/* Rank r's input chunk c, UNDEF where the collective gives it none. */
static val_t input_of(baton__coll_t coll, int r, int c, int root) {
  switch (coll) {
  case BATON__COLL_ALLREDUCE:
  case BATON__COLL_REDUCE_SCATTER:
  case BATON__COLL_REDUCE_SCATTERV:
    return 1u << r;
  case BATON__COLL_REDUCE:
    return c == root ? 1u << r : UNDEF;
  case BATON__COLL_ALLGATHER:
  case BATON__COLL_ALLGATHERV:
  case BATON__COLL_GATHER:
    return c == r ? 1u << r : UNDEF;
  case BATON__COLL_BROADCAST:
    return c == root && r == root ? 1u << r : UNDEF;
  case BATON__COLL_SCATTER:
    return r == root ? (1u << r) | TAG(c) : UNDEF;
  case BATON__COLL_ALLTOALL:
    return (1u << r) | TAG(c);
  default:
    return UNDEF;
  }
}

/* What rank r must end with in chunk c (UNDEF: nothing promised). */
static val_t promise(baton__coll_t coll, int n, int r, int c, int root) {
  val_t all = n == 32 ? 0xffffffffu : (1u << n) - 1;
  switch (coll) {
  case BATON__COLL_ALLREDUCE:
    return all | FINISHED;
  case BATON__COLL_REDUCE_SCATTER:
  case BATON__COLL_REDUCE_SCATTERV:
    return c == r ? all | FINISHED : UNDEF;
  case BATON__COLL_REDUCE:
    return r == root && c == root ? all | FINISHED : UNDEF;
  case BATON__COLL_ALLGATHER:
  case BATON__COLL_ALLGATHERV:
    return 1u << c;
  case BATON__COLL_GATHER:
    return r == root ? 1u << c : UNDEF;
  case BATON__COLL_BROADCAST:
    return c == root ? 1u << root : UNDEF;
  case BATON__COLL_SCATTER:
    return c == r ? (1u << root) | TAG(r) : UNDEF;
  case BATON__COLL_ALLTOALL:
    return (1u << c) | TAG(r);
  default:
    return UNDEF;
  }
}

/* The phases in the order they happen, then steps within them. */
static int key_of(const baton__step_t *st) { return st->phase * 65536 + st->step; }

typedef struct {
  int n;     /* chunks; 0: no message */
  int first; /* the sender's first chunk */
  val_t v[MAX_N];
} msg_t;

/* Runs every rank's schedule of `algo` side by side, step key by step key:
 * all sends of a key read the state before any receive of that key. Checks
 * that each message is received by the rank it is sent to with the same
 * chunks, that nothing undefined is sent, that no contribution is added
 * twice, that a finished sum is never added to, and at the end that every
 * rank holds in WORK what the collective promises. */
static void simulate(baton__coll_t coll, const baton__algo_t *algo, int n, int root) {
  static all_t A;
  static val_t in[MAX_N][MAX_N], work[MAX_N][MAX_N], fwd[MAX_N];
  static msg_t sent[MAX_N][MAX_N]; /* [from][to] */
  const char *cn = baton__coll_name(coll), *an = algo->name;
  if (n == 1)
    return; /* one rank copies its input itself (coll.c): no schedule runs */
  if (build_all(&A, coll, algo, n, 1000, root) != 0) {
    check(0, "%s %s n=%d root %d: no schedule", an, cn, n, root);
    return;
  }
  for (int r = 0; r < n; r++) {
    fwd[r] = UNDEF;
    for (int c = 0; c < n; c++)
      in[r][c] = input_of(coll, r, c, root), work[r][c] = UNDEF;
  }
  int at[MAX_N] = {0}, ok = 1, alltoall = coll == BATON__COLL_ALLTOALL;
#define BAD(...)                                                                                   \
  do {                                                                                             \
    check(0, __VA_ARGS__);                                                                         \
    ok = 0;                                                                                        \
  } while (0)
  for (int guard = 0; ok && guard < 100000; guard++) {
    int key = -1;
    for (int r = 0; r < n; r++)
      if (at[r] < A.s[r].nsteps && (key < 0 || key_of(&A.s[r].steps[at[r]]) < key))
        key = key_of(&A.s[r].steps[at[r]]);
    if (key < 0)
      break;
    memset(sent, 0, sizeof sent);
    /* Sends and local copies, from the state before this key. */
    for (int r = 0; r < n; r++)
      for (int i = at[r]; i < A.s[r].nsteps && key_of(&A.s[r].steps[i]) == key; i++) {
        const baton__step_t *st = &A.s[r].steps[i];
        int fed = i > 0 && A.s[r].steps[i - 1].forward;
        if (st->send_peer < 0 && st->send_keep) {
          for (int j = 0; j < st->send_n; j++) {
            int c = (st->send_chunk + j) % n;
            if (in[r][c] == UNDEF)
              BAD("%s %s n=%d root %d: rank %d copies chunk %d, which it has no input for", an, cn,
                  n, root, r, c);
            work[r][c] = in[r][c];
          }
          continue;
        }
        if (st->send_peer < 0)
          continue;
        int q = st->send_peer;
        if (q >= n || q == r || st->send_n < 1 || st->send_n > n || st->send_chunk < 0) {
          BAD("%s %s n=%d: rank %d step %d sends %d chunks from %d to rank %d", an, cn, n, r, i,
              st->send_n, st->send_chunk, q);
          continue;
        }
        if (sent[r][q].n)
          BAD("%s %s n=%d key %d: rank %d sends twice to %d", an, cn, n, key, r, q);
        msg_t *m = &sent[r][q];
        m->n = st->send_n, m->first = st->send_chunk;
        for (int j = 0; j < st->send_n; j++) {
          int c = (st->send_chunk + j) % n;
          val_t v = fed ? fwd[r] : st->send_from == BATON__FROM_INPUT ? in[r][c] : work[r][c];
          if (fed && st->send_n != 1)
            BAD("%s %s n=%d: rank %d forwards into a message of %d chunks", an, cn, n, r,
                st->send_n);
          if (v == UNDEF)
            BAD("%s %s n=%d key %d: rank %d sends chunk %d from %s, where it holds nothing", an, cn,
                n, key, r, c,
                fed                                  ? "the previous receive"
                : st->send_from == BATON__FROM_INPUT ? "INPUT"
                                                     : "WORK");
          m->v[j] = v;
          if (st->send_keep && !fed && st->send_from == BATON__FROM_INPUT)
            work[r][c] = in[r][c];
        }
        fwd[r] = fed ? UNDEF : fwd[r];
      }
    /* Receives. */
    for (int r = 0; r < n; r++)
      for (; at[r] < A.s[r].nsteps && key_of(&A.s[r].steps[at[r]]) == key; at[r]++) {
        const baton__step_t *st = &A.s[r].steps[at[r]];
        int q = st->recv_peer;
        if (q < 0)
          continue;
        msg_t *m = q < n ? &sent[q][r] : NULL;
        if (!m || !m->n || m->n != st->recv_n ||
            (!alltoall && m->first % n != st->recv_chunk % n)) {
          BAD("%s %s n=%d key %d: rank %d receives chunks %d+%d from %d, which sends it %d+%d", an,
              cn, n, key, r, st->recv_chunk, st->recv_n, q, m ? m->first : -1, m ? m->n : 0);
          continue;
        }
        for (int j = 0; j < st->recv_n; j++) {
          int c = (st->recv_chunk + j) % n;
          val_t v = m->v[j], res = v;
          if (v == UNDEF)
            continue; /* reported by the sender */
          if (st->recv_op == BATON__RECV_REDUCE) {
            val_t acc = st->recv_with == BATON__FROM_INPUT ? in[r][c] : work[r][c];
            if (acc == UNDEF) {
              BAD("%s %s n=%d key %d: rank %d combines chunk %d with %s, which holds nothing", an,
                  cn, n, key, r, c, st->recv_with == BATON__FROM_INPUT ? "INPUT" : "WORK");
              continue;
            }
            if (RANKS(acc) & RANKS(v))
              BAD("%s %s n=%d key %d: rank %d adds rank(s) %#llx into chunk %d twice", an, cn, n,
                  key, r, (unsigned long long)(RANKS(acc) & RANKS(v)), c);
            if ((acc | v) & FINISHED)
              BAD("%s %s n=%d key %d: rank %d adds to chunk %d after its sum was finished", an, cn,
                  n, key, r, c);
            res = acc | v;
          }
          if (st->finish) {
            if (res & FINISHED)
              BAD("%s %s n=%d key %d: rank %d finishes chunk %d twice", an, cn, n, key, r, c);
            res |= FINISHED;
          }
          if (st->forward)
            fwd[r] = res;
          if (st->keep || !st->forward)
            work[r][c] = res;
        }
        m->n = 0;
      }
    for (int r = 0; r < n; r++)
      for (int q = 0; q < n; q++)
        if (sent[r][q].n)
          BAD("%s %s n=%d key %d: rank %d sends chunks %d+%d to %d, which does not receive them",
              an, cn, n, key, r, sent[r][q].first, sent[r][q].n, q);
  }
  for (int r = 0; r < n && ok; r++)
    for (int c = 0; c < n; c++) {
      val_t want = promise(coll, n, r, c, root);
      if (want == UNDEF)
        continue;
      /* Only reductions need AVG's division; elsewhere FINISHED is moot. */
      val_t got = work[r][c];
      if (!coll_reduces(coll) && got != UNDEF)
        got &= ~FINISHED;
      if (got != want)
        BAD("%s %s n=%d root %d: at the end rank %d holds %#llx in chunk %d, want %#llx", an, cn, n,
            root, r, (unsigned long long)got, c, (unsigned long long)want);
    }
#undef BAD
  check(ok, "%s %s n=%d root %d: data flow", an, cn, n, root);
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
    size_t want =
        2 * count - baton__chunk_len(count, n, r) - baton__chunk_len(count, n, mod(r + 1, n));
    check(sent == want, "ring allreduce n=%d count %zu: rank %d sends %zu elements, want %zu", n,
          count, r, sent, want);
  }
}

static int rooted(baton__coll_t c) {
  return c == BATON__COLL_BROADCAST || c == BATON__COLL_REDUCE || c == BATON__COLL_GATHER ||
         c == BATON__COLL_SCATTER;
}

int main(void) {
  int nalgos;
  const baton__algo_t *algos = baton__algos(&nalgos);
  for (int n = 1; n <= MAX_N; n++) {
    for (int c = 0; c <= BATON__COLL_ALLGATHER; c++)
      ring_against_statement((baton__coll_t)c, n);
    for (int root = 0; root<n; root += n> 4 ? 3 : 1)
      chain_against_statement(n, root);
    for (int c = 0; c < BATON__COLL_BARRIER; c++)
      for (int a = 0; a < nalgos; a++) {
        /* flat is not run by the executor: it reads the peers' mailboxes. */
        if (strcmp(algos[a].name, "flat") == 0)
          continue;
        for (int root = 0; root < n && (algos[a].colls & (1u << c)); root += n > 4 ? 3 : 1) {
          simulate((baton__coll_t)c, &algos[a], n, root);
          if (!rooted((baton__coll_t)c))
            break;
        }
      }
    /* Ranks on hosts: pairs, threes, and one host of three beside hosts
     * of one; hosts follow the ring (0, 1, ..., N-1) as the library's do. */
    for (int kind = 0; kind < 3; kind++) {
      int host[MAX_N];
      for (int r = 0; r < n; r++)
        host[r] = kind == 0 ? r / 2 : kind == 1 ? r / 3 : r < 3 ? 0 : r - 2;
      sim_host = host;
      simulate(BATON__COLL_ALLREDUCE, baton__algo_find("hier"), n, 0);
      sim_host = NULL;
    }
    size_t counts[] = {0, 1, (size_t)n - 1, (size_t)n, (size_t)n + 1, 7 * (size_t)n + 3, 1000003};
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
