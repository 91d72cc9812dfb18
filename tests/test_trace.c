/*
 * test_trace.c - BATON_TRACE under baton-run: the lines a run writes.
 *
 *   BATON_TRACE=DIR/trace.%r baton-run -n 4 build/tests/test_trace
 *   BATON_ALGO=rhd BATON_TRACE=... baton-run -n 5 build/tests/test_trace
 *
 * Each rank makes an allreduce of an uneven count, a reduce-scatter, an
 * allgather, a broadcast from rank 1, a small allreduce, a barrier, a
 * reduce, an alltoall, a gather and a scatter (root 1), an allgatherv and
 * a reduce_scatterv (uneven counts, one of them 0), then reads its own
 * trace file back. Every line must be one flat JSON
 * object, checked by a strict parser written here, with the fields of
 * docs/trace.md. Whatever algorithm ran (the line's "algo", forced or
 * chosen), its lines must be the steps of the schedule the library builds
 * for that call, one for one: kind, round, peers, run of chunks, source,
 * and the bytes of every run, which this test computes from its own
 * statement of each collective's chunks (not from the library's layout).
 * Times do not go backwards. Where the ring ran, its lines are also
 * checked against the textbook ring (a send, then N-1 receives per phase
 * that pass chunk r-k-2 on, ...) and the broadcast against the chain; a
 * small flat allreduce writes a mailbox_put and a mailbox_reduce, the
 * barrier nothing. Prints "N passed, M failed".
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "common.h"

#define MAX_FIELDS 48

typedef struct {
  char key[MAX_FIELDS][32];
  char val[MAX_FIELDS][64]; /* strings without their quotes */
  int is_str[MAX_FIELDS];
  int n;
} obj_t;

/* One JSON object of string keys and string or number values; -1 when the
 * line is anything else. */
static int parse_object(const char *s, obj_t *o) {
  o->n = 0;
  if (*s++ != '{')
    return -1;
  for (;;) {
    if (o->n == MAX_FIELDS || *s++ != '"')
      return -1;
    size_t k = 0;
    while (*s && *s != '"' && k < sizeof o->key[0] - 1)
      o->key[o->n][k++] = *s++;
    o->key[o->n][k] = '\0';
    if (*s++ != '"' || *s++ != ':')
      return -1;
    size_t v = 0;
    if (*s == '"') {
      for (s++; *s && *s != '"' && *s != '\\' && v < sizeof o->val[0] - 1;)
        o->val[o->n][v++] = *s++;
      if (*s++ != '"')
        return -1;
      o->is_str[o->n] = 1;
    } else {
      char *end;
      strtod(s, &end);
      if (end == s || !(*s == '-' || isdigit((unsigned char)*s)) ||
          (size_t)(end - s) >= sizeof o->val[0])
        return -1;
      memcpy(o->val[o->n], s, (size_t)(end - s));
      v = (size_t)(end - s);
      s = end;
      o->is_str[o->n] = 0;
    }
    o->val[o->n++][v] = '\0';
    if (*s == '}')
      return strcmp(s, "}\n") == 0 || strcmp(s, "}") == 0 ? 0 : -1;
    if (*s++ != ',')
      return -1;
  }
}

static const char *get(const obj_t *o, const char *key, int want_str) {
  for (int i = 0; i < o->n; i++)
    if (strcmp(o->key[i], key) == 0)
      return o->is_str[i] == want_str ? o->val[i] : NULL;
  return NULL;
}

static double num(const obj_t *o, const char *key) {
  const char *v = get(o, key, 0);
  return v ? atof(v) : -1e300;
}

static int mod(int a, int n) { return ((a % n) + n) % n; }

#define BCAST_ROOT 1

typedef struct {
  const char *coll;
  size_t count; /* of the public call */
  size_t chunk[64];
} call_t;

static int is(const obj_t *o, const char *key, const char *want) {
  const char *v = get(o, key, 1);
  return v && !strcmp(v, want);
}

/* One expected line: what the textbook says a step is. */
typedef struct {
  const char *kind, *phase;
  int step, chunk, to, from;
} want_t;

static int line_is(const obj_t *o, const want_t *w) {
  return is(o, "kind", w->kind) && is(o, "phase", w->phase) && num(o, "step") == w->step &&
         num(o, "chunk") == w->chunk && num(o, "n") == 1 && num(o, "send_to") == w->to &&
         num(o, "recv_from") == w->from && num(o, "rc") == 0;
}

/* Compares lines l[0..n) with w[0..nw); one check. */
static void check_lines(tally_t *t, const char *what, obj_t *l, int n, const want_t *w, int nw) {
  int bad = -1;
  for (int i = 0; i < n && i < nw && bad < 0; i++)
    if (!line_is(&l[i], &w[i]))
      bad = i;
  if (tally_record(t, n == nw && bad < 0))
    return;
  if (bad < 0) {
    tally_say(t, "%s: %d lines, want %d", what, n, nw);
    return;
  }
  const obj_t *o = &l[bad];
  tally_say(t,
            "%s line %d: %s %s step %g chunk %g to %g from %g; want %s %s step %d chunk %d to %d "
            "from %d",
            what, bad, get(o, "kind", 1) ? get(o, "kind", 1) : "?",
            get(o, "phase", 1) ? get(o, "phase", 1) : "?", num(o, "step"), num(o, "chunk"),
            num(o, "send_to"), num(o, "recv_from"), w[bad].kind, w[bad].phase, w[bad].step,
            w[bad].chunk, w[bad].to, w[bad].from);
}

/* The chain broadcast from `root`: the root sends the buffer to r+1 and
 * copies it to its output; the rank q places after the root receives it
 * from r-1 in round q-1 and passes it on, the last one only receives. */
static void check_chain(tally_t *t, obj_t *l, int n, int root, size_t count) {
  int N = t->size, r = t->rank, q = mod(r - root, N), nw = 0;
  want_t w[2];
  if (q == 0) {
    w[nw++] = (want_t){"send", "broadcast", 0, root, mod(r + 1, N), -1};
    w[nw++] = (want_t){"copy", "broadcast", 0, root, -1, -1};
  } else {
    int last = q == N - 1;
    w[nw++] = (want_t){last ? "recv_copy" : "recv_copy_send",
                       "broadcast",
                       q - 1,
                       root,
                       last ? -1 : mod(r + 1, N),
                       mod(r - 1, N)};
  }
  check_lines(t, "chain broadcast", l, n, w, nw);
  int ok = 1;
  for (int k = 0; k < n; k++)
    ok &= num(&l[k], "root") == root && num(&l[k], "bytes") == (double)(count * sizeof(float));
  if (!tally_record(t, ok))
    tally_say(t, "broadcast from %d: a line's root or bytes are not the whole buffer's", root);
}

/* The ring of rank r on N ranks, from its statement (src/coll/ring.c):
 * reduce-scatter sends chunk r-1, then in round k receives chunk r-k-2,
 * adds its own and passes it on, the last round's chunk being its own;
 * allgather passes chunk r-k-1 on in round k and keeps the last, r+1. */
static int ring_want(const char *coll, int r, int N, want_t *w) {
  int reduce = strcmp(coll, "allgather") != 0, gather = strcmp(coll, "reduce_scatter") != 0;
  int nw = 0, next = mod(r + 1, N), prev = mod(r - 1, N);
  if (reduce) {
    w[nw++] = (want_t){"send", "reduce_scatter", 0, mod(r - 1, N), next, -1};
    for (int k = 0; k < N - 2; k++)
      w[nw++] = (want_t){"recv_reduce_send", "reduce_scatter", k, mod(r - k - 2, N), next, prev};
    w[nw++] = (want_t){gather ? "recv_reduce_copy_send" : "recv_reduce",
                       "reduce_scatter",
                       N - 2,
                       r,
                       gather ? next : -1,
                       prev};
  }
  if (gather && !reduce) {
    w[nw++] = (want_t){"send", "allgather", 0, r, next, -1};
    w[nw++] = (want_t){"copy", "allgather", 0, r, -1, -1};
  }
  for (int k = 0; gather && k < N - 2; k++)
    w[nw++] = (want_t){"recv_copy_send", "allgather", k, mod(r - k - 1, N), next, prev};
  if (gather)
    w[nw++] = (want_t){"recv_copy", "allgather", N - 2, next, -1, prev};
  return nw;
}

/* The lines of one ring collective, lines[0..n), with their bytes. */
static void check_ring(tally_t *t, const call_t *c, obj_t *l, int n) {
  want_t w[3 * 64];
  int nw = ring_want(c->coll, t->rank, t->size, w);
  check_lines(t, c->coll, l, n, w, nw);
  int ok = 1;
  for (int i = 0; i < n; i++)
    ok &= num(&l[i], "bytes") == (double)(c->chunk[(int)num(&l[i], "chunk")] * sizeof(float)) &&
          num(&l[i], "count") == (double)c->count;
  if (!tally_record(t, ok))
    tally_say(t, "%s: a line's bytes are not its chunk's, or its count not the call's", c->coll);
}

/* One call of run_calls: the collective, the count of the public call,
 * the root (0 when it has none) and, for the v-variants, every rank's
 * count. */
typedef struct {
  const char *coll;
  size_t count;
  int root;
  const size_t *counts;
} traced_t;

/* Elements of chunk c, from the collective's definition (schedule.h):
 * allreduce cuts the buffer into N chunks, the first count % N one longer;
 * broadcast and reduce have one chunk, the root's; the v-variants a count
 * per rank; the others (reduce-scatter, allgather, alltoall, gather,
 * scatter) a block of `count` per rank. */
/* Chunk k's elements; a broadcast or reduce is one chunk, root's, or two
 * halves (root's and the next) by an algorithm that splits it. */
static size_t chunk_elems(const traced_t *c, const baton__algo_t *a, int n, int k) {
  int halves = a && (a->traits & BATON__ALGO_HALVES) && n > 1;
  if (!strcmp(c->coll, "allreduce") && halves) /* chunks 0 and 1 */
    return k == 0 ? c->count - c->count / 2 : k == 1 ? c->count / 2 : 0;
  if (!strcmp(c->coll, "allreduce"))
    return c->count / (size_t)n + ((size_t)k < c->count % (size_t)n);
  if (!strcmp(c->coll, "broadcast") || !strcmp(c->coll, "reduce")) {
    if (!halves)
      return k == c->root ? c->count : 0;
    return k == c->root ? c->count - c->count / 2 : k == (c->root + 1) % n ? c->count / 2 : 0;
  }
  if (c->counts)
    return c->counts[k];
  return c->count;
}

static size_t run_elems(const traced_t *c, const baton__algo_t *a, int n, int first, int len) {
  size_t e = 0;
  for (int i = 0; i < len && first >= 0; i++)
    e += chunk_elems(c, a, n, (first + i) % n);
  return e;
}

static const char *src_of(const baton__step_t *st) {
  unsigned does = baton__step_does(st->kind);
  if (st->kind != BATON__STEP_SEND && !((does & BATON__DOES_REDUCE) && (does & BATON__DOES_RECV)))
    return "none";
  return st->src == BATON__FROM_WORK ? "work" : "input";
}

/* The lines of one call against the schedule the library builds for it on
 * this communicator: one line per step, field for field. Ranks have
 * different numbers of steps, so this records a fixed three checks (the
 * count of lines, their fields, their times) whatever the lines. */
static void check_schedule(tally_t *t, const traced_t *c, obj_t *l, int n) {
  const char *coll = c->coll;
  size_t count = c->counts ? 0 : c->count;
  for (int k = 0; c->counts && k < t->size; k++)
    count += c->counts[k]; /* the library's count of a v-variant: the sum */
  const char *algo = n ? get(&l[0], "algo", 1) : NULL;
  const baton__algo_t *a = algo ? baton__algo_find(algo) : NULL;
  int cap = baton__max_steps(t->size);
  baton__sched_t s = {.cap = cap, .steps = calloc((size_t)cap, sizeof(baton__step_t))};
  baton__build_t b = {.coll = baton__coll_find(coll),
                      .rank = t->rank,
                      .size = t->size,
                      .count = count,
                      .root = c->root,
                      .order = t->comm->order,
                      .host = t->comm->host};
  int fields_ok = 1, times_ok = 1;
  int built = (n == 0 || a) && s.steps && (n == 0 || baton__schedule_build(&s, a, &b) == 0);
  if (!tally_record(t, built && s.nsteps == n))
    tally_say(t, "%s by %s: %d lines, the schedule has %d steps", coll, algo ? algo : "-", n,
              built ? s.nsteps : -1);
  for (int i = 0; built && i < n && i < s.nsteps; i++) {
    const baton__step_t *st = &s.steps[i];
    const obj_t *o = &l[i];
    size_t bytes = run_elems(c, a, t->size, st->chunk, st->n) * sizeof(float);
    int ok = is(o, "phase", baton__phase_name((baton__phase_t)st->phase)) &&
             num(o, "step") == st->step && is(o, "kind", baton__kinds[st->kind].name) &&
             num(o, "chunk") == st->chunk && num(o, "n") == st->n && is(o, "src", src_of(st)) &&
             num(o, "send_to") == st->send_peer && num(o, "recv_from") == st->recv_peer &&
             num(o, "finish") == st->finish && num(o, "bytes") == (double)bytes &&
             num(o, "rc") == 0;
    if (!ok && fields_ok)
      tally_say(t,
                "%s by %s line %d: %s %s step %g chunk %g+%g src %s to %g from %g (%g B); the "
                "schedule says %s %s step %d chunk %d+%d src %s to %d from %d (%zu B)",
                coll, algo, i, get(o, "kind", 1) ? get(o, "kind", 1) : "?",
                get(o, "phase", 1) ? get(o, "phase", 1) : "?", num(o, "step"), num(o, "chunk"),
                num(o, "n"), get(o, "src", 1) ? get(o, "src", 1) : "?", num(o, "send_to"),
                num(o, "recv_from"), num(o, "bytes"), baton__kinds[st->kind].name,
                baton__phase_name((baton__phase_t)st->phase), st->step, st->chunk, st->n,
                src_of(st), st->send_peer, st->recv_peer, bytes);
    fields_ok &= ok;
    double t0 = num(o, "t_start_us"), t1 = num(o, "t_end_us");
    ok = t0 > 0 && t1 >= t0 && (i == 0 || t0 >= num(&l[i - 1], "t_start_us"));
    if (!ok && times_ok)
      tally_say(t, "%s by %s line %d: times %.3f..%.3f us (previous step started at %.3f)", coll,
                algo, i, t0, t1, i ? num(&l[i - 1], "t_start_us") : 0.0);
    times_ok &= ok;
  }
  tally_record(t, fields_ok);
  tally_record(t, times_ok);
  free(s.steps);
}

/* Did `algo` run the call whose lines these are? */
static int ran(const obj_t *l, int n, const char *algo) { return n > 0 && is(&l[0], "algo", algo); }

#define NCALLS 12 /* seq 1..12; seq 6 is the barrier */

/* The calls, in order; every one moves uneven sizes on purpose (a v-count
 * of 0 included), large enough for several rounds at the default knobs. */
static void make_calls(const tally_t *t, traced_t *c, size_t *vcounts) {
  size_t ar = 50003, block = 20001;
  int root = BCAST_ROOT % t->size;
  for (int r = 0; r < t->size; r++)
    vcounts[r] = r == 1 ? 0 : 1000 + 37 * (size_t)r;
  traced_t calls[NCALLS] = {{"allreduce", ar, 0, NULL},    {"reduce_scatter", block, 0, NULL},
                            {"allgather", block, 0, NULL}, {"broadcast", ar, root, NULL},
                            {"allreduce", 3, 0, NULL},     {NULL, 0, 0, NULL}, /* the barrier */
                            {"reduce", ar, root, NULL},    {"alltoall", 2001, 0, NULL},
                            {"gather", 2001, root, NULL},  {"scatter", 2001, root, NULL},
                            {"allgatherv", 0, 0, vcounts}, {"reduce_scatterv", 0, 0, vcounts}};
  memcpy(c, calls, sizeof calls);
}

static void run_calls(tally_t *t, const traced_t *c) {
  size_t most = 0, displs[64];
  for (int r = 0, at = 0; r < t->size; at += (int)c[10].counts[r++])
    displs[r] = (size_t)at;
  for (int i = 0; i < NCALLS; i++)
    most = c[i].count * (size_t)t->size > most ? c[i].count * (size_t)t->size : most;
  float *in = calloc(most + 100000, sizeof *in), *out = calloc(most + 100000, sizeof *out);
  baton_comm_t *m = t->comm;
  tally_rc(t, baton_allreduce(in, out, c[0].count, BATON_FLOAT32, BATON_SUM, m), "allreduce");
  tally_rc(t, baton_reduce_scatter(in, out, c[1].count, BATON_FLOAT32, BATON_SUM, m),
           "reduce_scatter");
  tally_rc(t, baton_allgather(in, out, c[2].count, BATON_FLOAT32, m), "allgather");
  tally_rc(t, baton_broadcast(in, out, c[3].count, BATON_FLOAT32, c[3].root, m), "broadcast");
  tally_rc(t, baton_allreduce(in, out, c[4].count, BATON_FLOAT32, BATON_SUM, m), "small allreduce");
  tally_rc(t, baton_barrier(m), "barrier");
  tally_rc(t, baton_reduce(in, out, c[6].count, BATON_FLOAT32, BATON_SUM, c[6].root, m), "reduce");
  tally_rc(t, baton_alltoall(in, out, c[7].count, BATON_FLOAT32, m), "alltoall");
  tally_rc(t, baton_gather(in, out, c[8].count, BATON_FLOAT32, c[8].root, m), "gather");
  tally_rc(t, baton_scatter(in, out, c[9].count, BATON_FLOAT32, c[9].root, m), "scatter");
  tally_rc(t,
           baton_allgatherv(in, c[10].counts[t->rank], out, c[10].counts, displs, BATON_FLOAT32, m),
           "allgatherv");
  tally_rc(t, baton_reduce_scatterv(in, out, c[11].counts, BATON_FLOAT32, BATON_SUM, m),
           "reduce_scatterv");
  free(in);
  free(out);
}

int main(void) {
  tally_t t;
  tally_init(&t);
  const char *pattern = getenv("BATON_TRACE");
  if (!pattern || !strstr(pattern, "%r") || t.size > 64) {
    fprintf(stderr, "run with BATON_TRACE=DIR/trace.%%r and at most 64 ranks\n");
    return 1;
  }
  traced_t calls[NCALLS];
  size_t vcounts[64];
  make_calls(&t, calls, vcounts);
  run_calls(&t, calls);
  size_t ar_count = calls[0].count, block = calls[1].count;

  char path[512], line[4096];
  const char *pr = strstr(pattern, "%r");
  snprintf(path, sizeof path, "%.*s%d%s", (int)(pr - pattern), pattern, t.rank, pr + 2);
  FILE *f = fopen(path, "r");
  if (!tally_record(&t, f != NULL))
    tally_say(&t, "cannot open %s", path);
  static obj_t lines[NCALLS][64];
  int nlines[NCALLS + 1] = {0}, bad = 0;
  while (f && fgets(line, sizeof line, f)) {
    obj_t o;
    if (parse_object(line, &o) != 0) {
      if (bad++ < 3)
        tally_say(&t, "%s: not a flat JSON object: %s", path, line);
      continue;
    }
    static const char *const strs[] = {"coll", "algo", "dtype", "phase", "kind", "src"};
    static const char *const nums[] = {
        "rank", "size",    "seq",       "count",  "root",  "step",       "host",     "chunk",
        "n",    "send_to", "recv_from", "finish", "bytes", "t_start_us", "t_end_us", "rc"};
    for (size_t i = 0; i < sizeof strs / sizeof *strs; i++)
      if (!get(&o, strs[i], 1) && bad++ < 3)
        tally_say(&t, "%s: no string \"%s\" in %s", path, strs[i], line);
    for (size_t i = 0; i < sizeof nums / sizeof *nums; i++)
      if (!get(&o, nums[i], 0) && bad++ < 3)
        tally_say(&t, "%s: no number \"%s\" in %s", path, nums[i], line);
    int seq = (int)num(&o, "seq");
    if (num(&o, "rank") != t.rank || num(&o, "size") != t.size)
      bad++;
    if (seq >= 1 && seq <= NCALLS && nlines[seq] < 64)
      lines[seq - 1][nlines[seq]++] = o;
  }
  if (f)
    fclose(f);
  tally_record(&t, bad == 0);

  call_t ar = {"allreduce", ar_count, {0}}, rs = {"reduce_scatter", block, {0}},
         ag = {"allgather", block, {0}};
  for (int c = 0; c < t.size; c++) {
    ar.chunk[c] = ar_count / (size_t)t.size + ((size_t)c < ar_count % (size_t)t.size);
    rs.chunk[c] = ag.chunk[c] = block;
  }
  /* Every call against the library's schedule, whatever ran it. */
  int root = BCAST_ROOT % t.size;
  for (int i = 0; i < NCALLS; i++)
    if (calls[i].coll)
      check_schedule(&t, &calls[i], lines[i], nlines[i + 1]);
  /* Where the ring ran, against the textbook too. */
  if (ran(lines[0], nlines[1], "ring"))
    check_ring(&t, &ar, lines[0], nlines[1]);
  if (ran(lines[1], nlines[2], "ring"))
    check_ring(&t, &rs, lines[1], nlines[2]);
  if (ran(lines[2], nlines[3], "ring"))
    check_ring(&t, &ag, lines[2], nlines[3]);
  if (ran(lines[3], nlines[4], "ring"))
    check_chain(&t, lines[3], nlines[4], root, ar_count);
  /* Every call but the barrier wrote lines on some rank (none at all on
   * one rank); a rank outside a tree's part may have none. */
  for (int i = 1; i <= NCALLS; i++) {
    int64_t any = nlines[i] > 0;
    if (baton_allreduce(&any, &any, 1, BATON_INT64, BATON_MAX, t.comm) != BATON_OK)
      any = -1;
    if (!tally_record(&t, any == (i != 6 && t.size > 1)))
      tally_say(&t, "call %d (%s) on %d ranks: %s", i,
                calls[i - 1].coll ? calls[i - 1].coll : "barrier", t.size,
                any ? "some rank wrote lines" : "no rank wrote a line");
  }
  /* The small allreduce, where flat ran it: the input into the mailbox,
   * then every mailbox combined, each the whole 3 floats. */
  const char *algo = nlines[5] ? get(&lines[4][0], "algo", 1) : NULL;
  if (ran(lines[4], nlines[5], "flat") &&
      !tally_record(&t, nlines[5] == 2 && is(&lines[4][0], "kind", "mailbox_put") &&
                            is(&lines[4][1], "kind", "mailbox_reduce") &&
                            num(&lines[4][0], "root") == -1 &&
                            num(&lines[4][0], "bytes") == 3 * sizeof(float) &&
                            num(&lines[4][1], "bytes") == 3 * sizeof(float)))
    tally_say(&t, "small allreduce: %d lines (algo %s), want a mailbox_put and a mailbox_reduce",
              nlines[5], algo ? algo : "-");
  if (!tally_record(&t, nlines[6] == 0))
    tally_say(&t, "the barrier wrote %d lines, want none", nlines[6]);
  return tally_finish(&t);
}
