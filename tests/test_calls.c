/*
 * test_calls.c - two calls of one communicator, interleaved step by step.
 *
 * Each collective is a call object (src/call.h) that the executor runs one
 * step at a time, so several can be in flight on one communicator. Here
 * every rank issues two calls and then alternates between them, one step
 * of the first, one of the second, until both are done; both results must
 * be those of the collectives run alone. Every rank interleaves the same
 * way, as a progress engine that runs calls in issue order would.
 *
 * The pairs cover every algorithm that serves each collective (forced
 * through the communicator's BATON_ALGO table), counts that do not divide
 * evenly, and a pair whose second call finishes first.
 *
 * Then runs of blocking calls that each differ from the one before in one
 * argument only (a call equal to the last one reuses its plan, call.c):
 * every result must be that argument's.
 *
 *   baton-run -n N test_calls
 */
#include <math.h>

#include "call.h"
#include "comm.h"
#include "common.h"

#define MAXC 4099

typedef struct {
  baton__coll_t coll;
  size_t count;
  float *in, *out;
  baton__call_t *call;
} job_t;

static float input_of(int rank, size_t i, int salt) {
  return (float)((rank + 1) * 3 + (int)(i % 97) + salt);
}

/* The expected element i of job j's output on this rank. */
static float expect(const job_t *j, int rank, int size, size_t i, int salt) {
  float sum = 0;
  switch (j->coll) {
  case BATON__COLL_ALLREDUCE:
    for (int r = 0; r < size; r++)
      sum += input_of(r, i, salt);
    return sum;
  case BATON__COLL_REDUCE_SCATTER:
    for (int r = 0; r < size; r++)
      sum += input_of(r, (size_t)rank * j->count + i, salt);
    return sum;
  default: /* allgather: block r is rank r's input */
    return input_of((int)(i / j->count), i % j->count, salt);
  }
}

static size_t in_elems(const job_t *j, int size) {
  return j->coll == BATON__COLL_REDUCE_SCATTER ? j->count * (size_t)size : j->count;
}
static size_t out_elems(const job_t *j, int size) {
  return j->coll == BATON__COLL_ALLGATHER ? j->count * (size_t)size : j->count;
}

static int issue(tally_t *T, job_t *j, int salt) {
  size_t n = in_elems(j, T->size), m = out_elems(j, T->size);
  j->in = calloc(n ? n : 1, sizeof *j->in);
  j->out = calloc(m ? m : 1, sizeof *j->out);
  for (size_t i = 0; i < n; i++)
    j->in[i] = input_of(T->rank, i, salt);
  baton__call_args_t a = {.name = baton__coll_name(j->coll),
                          .coll = j->coll,
                          .sendbuf = j->in,
                          .recvbuf = j->out,
                          .count = j->count,
                          .dtype = BATON_FLOAT32,
                          .op = j->coll == BATON__COLL_ALLGATHER ? BATON_OP_COUNT : BATON_SUM,
                          .root = BATON__NO_ROOT};
  return tally_rc(T, baton__call_issue(T->comm, &a, &j->call), "baton__call_issue");
}

static void check(tally_t *T, const job_t *j, const char *what, int salt) {
  size_t m = out_elems(j, T->size), bad = 0, first = 0;
  for (size_t i = 0; i < m; i++)
    if (j->out[i] != expect(j, T->rank, T->size, i, salt) && bad++ == 0)
      first = i;
  if (!tally_record(T, bad == 0))
    tally_say(T, "%s: %zu of %zu elements wrong, first at %zu: got %g, want %g", what, bad, m,
              first, (double)j->out[first], (double)expect(j, T->rank, T->size, first, salt));
}

/* Issues both, steps them alternately, finishes both and checks them. */
static int interleaved; /* pairs in which b ran a step while a was not done */

static void pair(tally_t *T, const baton__algo_t *algo, job_t a, job_t b) {
  char what[160];
  snprintf(what, sizeof what, "%s %s (count %zu) with %s (count %zu)", algo->name,
           baton__coll_name(a.coll), a.count, baton__coll_name(b.coll), b.count);
  T->comm->forced[a.coll] = T->comm->forced[b.coll] = algo;
  int ok = issue(T, &a, 1) && issue(T, &b, 2);
  /* One step of each per turn; a step of b that must wait for a's use of
   * a connection does not run (BATON__EXEC_WAITING). */
  int ra = 1, rb = 1, steps = 0, b_early = 0;
  while (ok && (ra > 0 || rb > 0)) {
    if (ra > 0)
      ra = baton__exec_step(a.call);
    if (rb > 0)
      rb = baton__exec_step(b.call);
    b_early += ra > 0 && rb == BATON__EXEC_MORE;
    steps++;
  }
  T->comm->forced[a.coll] = T->comm->forced[b.coll] = NULL;
  if (ok) {
    ok = tally_rc(T, baton__call_finish(a.call), what) &
         tally_rc(T, baton__call_finish(b.call), what);
    ok = ok && ra == 0 && rb == 0;
    if (!tally_record(T, ok))
      tally_say(T, "%s: ended with %d and %d", what, ra, rb);
    interleaved += b_early > 0;
    check(T, &a, what, 1);
    check(T, &b, what, 2);
  }
  free(a.in), free(a.out), free(b.in), free(b.out);
}

/* A step kind means the same under every algorithm (the old executor
 * forwarded only under the name "ring"): a broadcast issued as the tree's,
 * its steps replaced by the chain's recv-copy-send steps, still runs on
 * the tree's segments and gets the root's buffer to every rank. */
static void borrowed_chain(tally_t *T) {
  const baton__algo_t *tree = baton__algo_find("tree");
  size_t count = 3001;
  float *buf = calloc(count, sizeof *buf);
  int root = T->size - 1;
  for (size_t i = 0; i < count && T->rank == root; i++)
    buf[i] = (float)(i % 251);
  T->comm->forced[BATON__COLL_BROADCAST] = tree;
  baton__call_args_t a = {.name = "broadcast",
                          .coll = BATON__COLL_BROADCAST,
                          .sendbuf = buf,
                          .recvbuf = buf,
                          .count = count,
                          .dtype = BATON_FLOAT32,
                          .op = BATON_OP_COUNT,
                          .root = root};
  baton__call_t *c = NULL;
  int ok = tally_rc(T, baton__call_issue(T->comm, &a, &c), "tree broadcast");
  T->comm->forced[BATON__COLL_BROADCAST] = NULL;
  if (!ok)
    return;
  if (T->size > 1) {
    baton__build_t b = {.coll = BATON__COLL_BROADCAST,
                        .rank = T->rank,
                        .size = T->size,
                        .count = count,
                        .root = root,
                        .order = T->comm->order};
    c->sched.nsteps = 0;
    ok = baton__ring_build(&c->sched, &b) == 0;
    c->planned.valid = 0; /* the next broadcast builds its own again */
    baton__exec_prepare(c);
  }
  baton__exec(c);
  ok = tally_rc(T, baton__call_finish(c), "broadcast on the chain's steps") && ok;
  size_t bad = 0;
  for (size_t i = 0; i < count; i++)
    bad += buf[i] != (float)(i % 251);
  if (!tally_record(T, ok && bad == 0))
    tally_say(T, "a tree broadcast run on the chain's steps: %zu of %zu elements wrong", bad,
              count);
  free(buf);
}

static int serves(const baton_comm_t *comm, const baton__algo_t *algo, baton__coll_t coll) {
  if (!(algo->colls & (1u << coll)))
    return 0;
  if ((algo->traits & BATON__ALGO_MAILBOX) && !baton__flat_fits(comm, coll, MAXC, 4))
    return 0;
  return !(algo->traits & BATON__ALGO_HOST_LEADERS) || comm->nhosts > 1;
}

/* Blocking calls on the same buffers, each differing from the one before
 * in one argument only, each checked against its own definition. */
static void repeats(tally_t *T) {
  enum { N = 64 };
  int32_t a[N], b[N], c[N];
  const int size = T->size, rank = T->rank;
  struct {
    const char *what;
    int32_t *send, *recv;
    size_t count;
    baton_op_t op;
    int root; /* -1: allreduce, else broadcast from it */
  } runs[] = {
      {"allreduce sum", a, b, N, BATON_SUM, -1},
      {"the same again", a, b, N, BATON_SUM, -1},
      {"op max", a, b, N, BATON_MAX, -1},
      {"count 17", a, b, 17, BATON_MAX, -1},
      {"recvbuf c", a, c, 17, BATON_MAX, -1},
      {"sendbuf c (in place)", c, c, 17, BATON_MAX, -1},
      {"sendbuf a again", a, c, 17, BATON_MAX, -1},
      {"broadcast from 0", a, a, N, BATON_SUM, 0},
      {"broadcast from the last", a, a, N, BATON_SUM, size - 1},
      {"the same again", a, a, N, BATON_SUM, size - 1},
  };
  for (size_t r = 0; r < sizeof runs / sizeof runs[0] && !T->broken; r++) {
    for (int i = 0; i < N; i++) {
      int32_t v = (rank + 1) * 100 + i + (int)r; /* in the input, -7 elsewhere */
      a[i] = runs[r].send == a ? v : -7;
      c[i] = runs[r].send == c ? v : -7;
      b[i] = -7;
    }
    int rc = runs[r].root < 0 ? baton_allreduce(runs[r].send, runs[r].recv, runs[r].count,
                                                BATON_INT32, runs[r].op, T->comm)
                              : baton_broadcast(runs[r].send, runs[r].recv, runs[r].count,
                                                BATON_INT32, runs[r].root, T->comm);
    if (!tally_rc(T, rc, runs[r].what))
      return;
    int bad = 0;
    for (size_t i = 0; i < runs[r].count; i++) {
      int32_t want = runs[r].root >= 0 ? (runs[r].root + 1) * 100 + (int32_t)i + (int32_t)r
                     : runs[r].op == BATON_MAX
                         ? size * 100 + (int32_t)i + (int32_t)r
                         : size * (size + 1) / 2 * 100 + size * ((int32_t)i + (int32_t)r);
      bad += runs[r].recv[i] != want;
    }
    if (!tally_record(T, bad == 0))
      tally_say(T, "repeated calls, %s: %d of %zu elements wrong", runs[r].what, bad,
                runs[r].count);
  }
}

int main(void) {
  tally_t T;
  tally_init(&T);
  const baton__coll_t colls[] = {BATON__COLL_ALLREDUCE, BATON__COLL_REDUCE_SCATTER,
                                 BATON__COLL_ALLGATHER};
  const size_t counts[][2] = {{1000, 37}, {1, 4099}, {5, 5}};
  int n;
  const baton__algo_t *algos = baton__algos(&n);
  for (int k = 0; k < n && !T.broken; k++)
    for (int x = 0; x < 3 && !T.broken; x++)
      for (int y = 0; y < 3 && !T.broken; y++) {
        if (!serves(T.comm, &algos[k], colls[x]) || !serves(T.comm, &algos[k], colls[y]))
          continue;
        const size_t *c = counts[(x + y) % 3];
        pair(&T, &algos[k], (job_t){.coll = colls[x], .count = c[0]},
             (job_t){.coll = colls[y], .count = c[1]});
      }
  if (!T.broken)
    borrowed_chain(&T);
  if (!T.broken)
    repeats(&T);
  /* Somewhere the second call must really have run beside the first. */
  if (!tally_record(&T, T.size == 1 || interleaved > 0))
    tally_say(&T, "no pair ran a step of its second call before its first was done");
  return tally_finish(&T);
}
