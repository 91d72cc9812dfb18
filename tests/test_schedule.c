/*
 * test_schedule.c - the schedules of algo.c, checked without running them.
 *
 * The ring is checked against a statement of it written here from the
 * textbook, not from ring.c: on ranks 0..N-1 in a ring, rank r always sends
 * to r+1 and receives from r-1; in reduce-scatter round s (s = 0..N-2) it
 * sends its partial sum of chunk r-s-1 and receives chunk r-s-2, adding its
 * own input, so that after N-1 rounds it holds the whole sum of chunk r; in
 * allgather round s it sends chunk r-s and receives chunk r-s-1 (all mod N).
 * Broadcast on the ring is the chain from the root: the rank q places after
 * the root receives the root's chunk from r-1 in round q-1 and, unless it is
 * the last, passes it on to r+1.
 *
 * Every algorithm of the table (so also those added later) is then run, for
 * every collective it serves, on the simulator (src/sim.c), which checks
 * the rules of schedule.h and the collective's promise: N = 1..16, counts
 * 0, 1, N-1, N+1 and a prime, every root of a rooted collective, hier on
 * several host maps, and N = 5000 for hier (hosts of 4) and the ring. The
 * bounds max_steps are checked to be reached, and a set of deliberately
 * broken schedules shows that the simulator catches each class of error.
 * And the chunk layout of uneven counts: chunks tile the buffer, differ by
 * at most one element, larger ones first; the bytes a ring rank sends add
 * up.
 *
 * Prints "N passed, M failed" last; exits 1 on a failure.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

#define MAX_N 16

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

static int rooted(baton__coll_t c) {
  return c == BATON__COLL_BROADCAST || c == BATON__COLL_REDUCE || c == BATON__COLL_GATHER ||
         c == BATON__COLL_SCATTER;
}

/* Builds the call on the simulator; the caller runs and frees it. */
static int sim_of(baton__sim_t *s, baton__coll_t coll, const char *algo, int n, size_t count,
                  int root) {
  baton__sim_call_t call = {
      .coll = coll, .algo = baton__algo_find(algo), .size = n, .root = root, .count = count};
  return baton__sim_build(s, &call);
}

/* ---------------------------------------------- the ring, as stated above */

static void ring_against_statement(baton__coll_t coll, int n) {
  baton__sim_t s;
  const char *cn = baton__coll_name(coll);
  check(sim_of(&s, coll, "ring", n, 1000, 0) == 0, "ring %s n=%d builds", cn, n);
  int rs = coll != BATON__COLL_ALLGATHER, ag = coll != BATON__COLL_REDUCE_SCATTER;
  for (int r = 0; r < n && s.sched; r++) {
    const baton__sched_t *sc = &s.sched[r];
    /* The receives in order, then the sends in order, as stated. */
    int want_recv[2 * MAX_N], want_send[2 * MAX_N], nr = 0, ns = 0, ok = 1;
    for (int k = 0; k < n - 1 && rs; k++)
      want_send[ns++] = mod(r - k - 1, n), want_recv[nr++] = mod(r - k - 2, n);
    for (int k = 0; k < n - 1 && ag; k++)
      want_send[ns++] = mod(r - k, n), want_recv[nr++] = mod(r - k - 1, n);
    int gr = 0, gs = 0, copies = 0;
    for (int i = 0; i < sc->nsteps; i++) {
      const baton__step_t *st = &sc->steps[i];
      unsigned does = baton__step_does(st->kind);
      int in_rs = st->phase == BATON__PHASE_REDUCE_SCATTER;
      copies += st->kind == BATON__STEP_COPY && st->chunk == r;
      if (does & BATON__DOES_RECV) {
        ok &= gr < nr && st->chunk == want_recv[gr] && st->recv_peer == mod(r - 1, n) &&
              st->step == (in_rs ? gr : gr - (rs ? n - 1 : 0)) &&
              !!(does & BATON__DOES_REDUCE) == in_rs;
        gr++;
      }
      if (does & BATON__DOES_SEND) {
        ok &= gs < ns && st->chunk == want_send[gs] && st->send_peer == mod(r + 1, n) && st->n == 1;
        gs++;
      }
      /* Only the last receive of each part lands, with the finished sum. */
      int last = st->step == n - 2 && (does & BATON__DOES_RECV);
      ok &= !(does & BATON__DOES_RECV) || !!(does & BATON__DOES_LAND) == (!in_rs || last);
      ok &= st->finish == (in_rs && last);
    }
    ok &= gr == nr && gs == ns && copies == (ag && !rs && n > 1);
    check(ok || n == 1, "ring %s n=%d rank %d: %d steps, not the statement's", cn, n, r,
          sc->nsteps);
  }
  baton__sim_free(&s);
}

static void chain_against_statement(int n, int root) {
  baton__sim_t s;
  check(sim_of(&s, BATON__COLL_BROADCAST, "ring", n, 1000, root) == 0,
        "ring broadcast n=%d root %d builds", n, root);
  for (int r = 0; r < n && n > 1; r++) {
    const baton__sched_t *sc = &s.sched[r];
    const baton__step_t *st = sc->steps;
    int q = mod(r - root, n), ok = sc->nsteps == (q == 0 ? 2 : 1);
    if (q == 0)
      ok &= st[0].kind == BATON__STEP_SEND && st[0].send_peer == mod(r + 1, n) &&
            st[0].chunk == root && st[0].src == BATON__FROM_INPUT &&
            st[1].kind == BATON__STEP_COPY && st[1].chunk == root;
    else
      ok &= st->kind == (q < n - 1 ? BATON__STEP_RECV_COPY_SEND : BATON__STEP_RECV_COPY) &&
            st->step == q - 1 && st->recv_peer == mod(r - 1, n) && st->chunk == root &&
            (q == n - 1 || st->send_peer == mod(r + 1, n));
    check(ok, "chain broadcast n=%d root %d rank %d: %d steps, not as stated", n, root, r,
          sc->nsteps);
  }
  baton__sim_free(&s);
}

/* ------------------------------------- any algorithm, by what it computes */

/* Runs the call on the simulator; 1 when it does what it promises. */
static int simulate(const baton__sim_call_t *call) {
  baton__sim_t s;
  int ok = baton__sim_build(&s, call) == 0 && baton__sim_run(&s) == 0;
  for (int i = 0; !ok && i < s.nerrors && i < 3; i++)
    check(0, "%s %s n=%d count %zu root %d: %s", call->algo->name, baton__coll_name(call->coll),
          call->size, call->count, call->root, s.errors[i]);
  baton__sim_free(&s);
  return ok;
}

/* Every (collective, algorithm) of the table on n ranks; returns how many
 * calls passed. */
static void every_call(int n) {
  int nalgos;
  const baton__algo_t *algos = baton__algos(&nalgos);
  size_t counts[] = {0, 1, (size_t)n - 1, (size_t)n + 1, 7919};
  size_t vcounts[MAX_N]; /* uneven, some 0 */
  for (int r = 0; r < n; r++)
    vcounts[r] = (size_t)(r * 7 % 5);
  for (int a = 0; a < nalgos; a++)
    for (int c = 0; c < BATON__COLL_COUNT; c++) {
      if (!(algos[a].colls & (1u << c)))
        continue;
      int ok = 1, runs = 0;
      for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++)
        for (int root = 0; root < (rooted((baton__coll_t)c) ? n : 1); root++) {
          baton__sim_call_t call = {.coll = (baton__coll_t)c,
                                    .algo = &algos[a],
                                    .size = n,
                                    .root = root,
                                    .count = counts[k]};
          ok &= simulate(&call), runs++;
        }
      if (c == BATON__COLL_ALLGATHERV || c == BATON__COLL_REDUCE_SCATTERV) {
        size_t sum = 0;
        for (int r = 0; r < n; r++)
          sum += vcounts[r];
        baton__sim_call_t call = {.coll = (baton__coll_t)c,
                                  .algo = &algos[a],
                                  .size = n,
                                  .count = sum,
                                  .counts = vcounts};
        ok &= simulate(&call), runs++;
      }
      check(ok, "%s %s n=%d: %d calls simulated", algos[a].name, baton__coll_name((baton__coll_t)c),
            n, runs);
    }
}

/* hier on ranks spread over hosts: pairs, threes, one host of three beside
 * hosts of one, and hosts that follow a shuffled ring. */
static void hier_hosts(int n) {
  int host[MAX_N], order[MAX_N];
  for (int kind = 0; kind < 4; kind++) {
    for (int i = 0; i < n; i++)
      order[i] = kind == 3 ? (i * 5 + 3) % n : i;
    for (int i = 0; i < n; i++)
      host[order[i]] = kind == 0   ? i / 2
                       : kind == 1 ? i / 3
                       : kind == 2 ? (i < 3 ? 0 : i - 2)
                                   : i / 4;
    if (kind == 3 && (n % 5 == 0))
      continue; /* 5 i + 3 is no permutation then */
    baton__sim_call_t call = {.coll = BATON__COLL_ALLREDUCE,
                              .algo = baton__algo_find("hier"),
                              .size = n,
                              .count = (size_t)n + 1,
                              .host = host,
                              .order = kind == 3 ? order : NULL};
    check(simulate(&call), "hier allreduce n=%d on host map %d", n, kind);
  }
}

/* The bound of every builder is reached on some rank of some call (the
 * ring's 2N is one more than it needs; not checked). */
static void bounds_reached(int n) {
  int nalgos;
  const baton__algo_t *algos = baton__algos(&nalgos);
  for (int a = 0; a < nalgos && n > 1; a++) {
    if (!strcmp(algos[a].name, "ring"))
      continue;
    int most = 0;
    for (int c = 0; c < BATON__COLL_COUNT; c++)
      for (int root = 0; root < n && (algos[a].colls & (1u << c)); root++) {
        baton__sim_t s;
        baton__sim_call_t call = {
            .coll = (baton__coll_t)c, .algo = &algos[a], .size = n, .root = root, .count = 9};
        if (baton__sim_build(&s, &call) == 0)
          for (int r = 0; r < n; r++)
            most = s.sched[r].nsteps > most ? s.sched[r].nsteps : most;
        baton__sim_free(&s);
      }
    check(most == algos[a].max_steps(n) && most <= baton__max_steps(n),
          "%s n=%d: at most %d steps, but max_steps says %d", algos[a].name, n, most,
          algos[a].max_steps(n));
  }
}

/* ---------------------------------------------------- beyond 4096 ranks */

static void large(void) {
  int n = 5000, *host = malloc((size_t)n * sizeof *host);
  for (int r = 0; r < n; r++)
    host[r] = r / 4;
  baton__sim_call_t call = {.coll = BATON__COLL_ALLREDUCE,
                            .algo = baton__algo_find("hier"),
                            .size = n,
                            .count = 7919,
                            .host = host};
  check(simulate(&call), "hier allreduce n=5000 on hosts of 4");
  call = (baton__sim_call_t){
      .coll = BATON__COLL_ALLREDUCE, .algo = baton__algo_find("ring"), .size = n, .count = 7919};
  check(simulate(&call), "ring allreduce n=5000");
  free(host);
}

/* -------------------------------------- broken schedules, one per class */

/* The call, built; alter() breaks it; the simulator must name `want`. */
static void broken(const char *what, baton__coll_t coll, const char *algo, int n, int root,
                   void (*alter)(baton__sim_t *), baton__sim_err_t want) {
  baton__sim_t s;
  int built = sim_of(&s, coll, algo, n, 10, root) == 0;
  if (built && alter)
    alter(&s);
  int rc = built ? baton__sim_run(&s) : -1;
  check(rc != 0 && (s.found & (1u << want)) && s.nerrors > 0 && s.errors[0][0],
        "broken schedule (%s) not caught as class %d: found %#x, first error \"%s\"", what, want,
        s.found, s.nerrors ? s.errors[0] : "");
  baton__sim_free(&s);
}

static baton__step_t *step(baton__sim_t *s, int r, int i) { return &s->sched[r].steps[i]; }

static void to_self(baton__sim_t *s) { step(s, 0, 0)->send_peer = 0; }
static void two_passed(baton__sim_t *s) { step(s, 0, 1)->n = 2; }
static void too_many(baton__sim_t *s) {
  for (int i = 0; i < 3; i++) /* ring allreduce on 4: 7 steps, max 8 */
    *step(s, 1, s->sched[1].nsteps++) = *step(s, 1, 0);
}
static void back_in_time(baton__sim_t *s) { step(s, 2, 1)->phase = BATON__PHASE_FOLD; }
static void mailbox_in_ring(baton__sim_t *s) {
  step(s, 0, 1)->kind = BATON__STEP_MAILBOX_PUT; /* ring allgather: the copy */
}
static void send_from_empty(baton__sim_t *s) { step(s, 0, 0)->src = BATON__FROM_WORK; }
static void wrong_chunk(baton__sim_t *s) { step(s, 1, 1)->chunk = (step(s, 1, 1)->chunk + 1) % 4; }
static void twice(baton__sim_t *s) { /* naive allreduce: the result added to the own input */
  step(s, 1, 1)->kind = BATON__STEP_RECV_REDUCE;
  step(s, 1, 1)->src = BATON__FROM_INPUT;
}
static void mixes(baton__sim_t *s) {
  step(s, 0, 2)->kind = BATON__STEP_RECV_REDUCE; /* pairwise: block from 1 onto chunk 1's */
  step(s, 0, 2)->src = BATON__FROM_INPUT;
}
static void early_finish(baton__sim_t *s) { step(s, 0, 1)->finish = 1; }
static void never_sent(baton__sim_t *s) {
  step(s, 0, 0)->kind = BATON__STEP_COPY; /* naive broadcast: the first send */
  step(s, 0, 0)->send_peer = -1;
}
static void never_received(baton__sim_t *s) { /* ring allgather: 5 of 8 steps on 4 ranks */
  baton__step_t *st = step(s, 0, s->sched[0].nsteps++);
  *st = *step(s, 0, 0);
  st->phase = BATON__PHASE_BROADCAST;
}
static void overwrites(baton__sim_t *s) { /* ring allgather on 2: send, copy, recv-copy */
  baton__step_t send = *step(s, 0, 0), copy = *step(s, 0, 1), recv = *step(s, 0, 2);
  send.src = BATON__FROM_WORK;
  *step(s, 0, 0) = copy, *step(s, 0, 1) = send, *step(s, 0, 2) = copy, *step(s, 0, 3) = recv;
  s->sched[0].nsteps = 4;
}
static void reads_clobbered(baton__sim_t *s) { step(s, 0, 1)->src = BATON__FROM_INPUT; }
static void drops_copy(baton__sim_t *s) { s->sched[0].nsteps--; } /* tree broadcast root */

static void broken_schedules(void) {
  static const struct {
    const char *what;
    baton__coll_t coll;
    const char *algo;
    int n;
    void (*alter)(baton__sim_t *);
    baton__sim_err_t want;
  } cases[] = {
      {"send to self", BATON__COLL_ALLREDUCE, "ring", 4, to_self, BATON__SIM_E_STEP},
      {"recv_reduce_send of 2 chunks", BATON__COLL_ALLREDUCE, "ring", 4, two_passed,
       BATON__SIM_E_STEP},
      {"more steps than max_steps", BATON__COLL_ALLREDUCE, "ring", 4, too_many, BATON__SIM_E_STEPS},
      {"rounds out of order", BATON__COLL_ALLREDUCE, "ring", 4, back_in_time, BATON__SIM_E_ORDER},
      {"mailbox step in the ring", BATON__COLL_ALLGATHER, "ring", 4, mailbox_in_ring,
       BATON__SIM_E_MAILBOX},
      {"send from empty WORK", BATON__COLL_ALLREDUCE, "ring", 4, send_from_empty,
       BATON__SIM_E_EMPTY},
      {"receive of another chunk", BATON__COLL_ALLREDUCE, "ring", 4, wrong_chunk, BATON__SIM_E_RUN},
      {"own input added twice", BATON__COLL_ALLREDUCE, "naive", 2, twice, BATON__SIM_E_TWICE},
      {"blocks of two chunks combined", BATON__COLL_ALLTOALL, "pairwise", 4, mixes,
       BATON__SIM_E_MIX},
      {"finish on a partial sum", BATON__COLL_ALLREDUCE, "ring", 4, early_finish,
       BATON__SIM_E_FINISH},
      {"a receive nothing sends", BATON__COLL_BROADCAST, "naive", 3, never_sent,
       BATON__SIM_E_NO_MESSAGE},
      {"a send nobody receives", BATON__COLL_ALLGATHER, "ring", 4, never_received,
       BATON__SIM_E_UNRECEIVED},
      {"sent WORK overwritten", BATON__COLL_ALLGATHER, "ring", 2, overwrites,
       BATON__SIM_E_OVERWRITE},
      {"INPUT read after it was written in place", BATON__COLL_ALLREDUCE, "naive", 2,
       reads_clobbered, BATON__SIM_E_INPUT},
      {"the root's copy left out", BATON__COLL_BROADCAST, "tree", 2, drops_copy,
       BATON__SIM_E_RESULT},
      {"an algorithm that does not serve the call", BATON__COLL_ALLREDUCE, "pairwise", 4, NULL,
       BATON__SIM_E_BUILD},
  };
  unsigned classes = 0;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    broken(cases[i].what, cases[i].coll, cases[i].algo, cases[i].n, 0, cases[i].alter,
           cases[i].want);
    classes |= 1u << cases[i].want;
  }
  check(classes == (1u << BATON__SIM_E_COUNT) - 1, "a broken schedule for every class of error");
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
  baton__sim_t s;
  sim_of(&s, BATON__COLL_ALLREDUCE, "ring", n, count, 0);
  for (int r = 0; r < n && n > 1; r++) {
    size_t sent = 0;
    for (int i = 0; i < s.sched[r].nsteps; i++)
      if (baton__step_does(s.sched[r].steps[i].kind) & BATON__DOES_SEND)
        sent += baton__chunk_len(count, n, s.sched[r].steps[i].chunk);
    size_t want =
        2 * count - baton__chunk_len(count, n, r) - baton__chunk_len(count, n, mod(r + 1, n));
    check(sent == want, "ring allreduce n=%d count %zu: rank %d sends %zu elements, want %zu", n,
          count, r, sent, want);
  }
  baton__sim_free(&s);
}

int main(void) {
  for (int n = 1; n <= MAX_N; n++) {
    for (int c = 0; c <= BATON__COLL_ALLGATHER; c++)
      ring_against_statement((baton__coll_t)c, n);
    for (int root = 0; root < n; root++)
      chain_against_statement(n, root);
    every_call(n);
    hier_hosts(n);
    bounds_reached(n);
    size_t counts[] = {0, 1, (size_t)n - 1, (size_t)n, (size_t)n + 1, 7 * (size_t)n + 3, 1000003};
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++)
      layout(n, counts[i]);
  }
  broken_schedules();
  large();
  /* Bad arguments are refused, not drawn. */
  baton__step_t steps[64];
  baton__sched_t s = {.steps = steps, .cap = 64};
  const baton__algo_t *ring = baton__algo_find("ring");
  baton__build_t b = {.coll = BATON__COLL_ALLREDUCE, .rank = 4, .size = 4, .count = 1};
  check(baton__schedule_build(&s, ring, &b) == -1, "rank 4 of 4 refused");
  b = (baton__build_t){.coll = BATON__COLL_COUNT, .size = 4, .count = 1};
  check(baton__schedule_build(&s, ring, &b) == -1, "unknown collective refused");
  b = (baton__build_t){.coll = BATON__COLL_BROADCAST, .size = 4, .count = 1, .root = 4};
  check(baton__schedule_build(&s, ring, &b) == -1, "root 4 of 4 refused");
  s.cap = 2;
  b = (baton__build_t){.coll = BATON__COLL_ALLREDUCE, .size = 4, .count = 1};
  check(baton__schedule_build(&s, ring, &b) == -1, "a schedule without room refused");
  check(baton__algo_find("no-such-algo") == NULL, "unknown algorithm not found");
  check(baton__coll_find("allgather") == BATON__COLL_ALLGATHER, "collective by name");
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
