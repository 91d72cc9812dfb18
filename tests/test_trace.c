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
 * for that call, one for one: peers, runs of chunks (send_chunk + send_n,
 * recv_chunk + recv_n), where the send comes from, what the receive does,
 * and the bytes of every message, which this test computes from its own
 * statement of each collective's chunks (not from the library's layout).
 * Times do not go backwards. Where the ring ran, its lines are also
 * checked against the textbook ring (N-1 steps per phase, chunk r-s-1 to
 * r+1, ...) and the broadcast against the chain; a flat call writes one
 * line, the barrier none. Prints "N passed, M failed".
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

/* The chain broadcast from `root` of `count` floats: the rank q places
 * after the root receives at step q-1 from r-1 and sends at step q to r+1,
 * the last one only receives. */
static void check_chain(tally_t *t, obj_t *l, int n, int root, size_t count) {
  int N = t->size, r = t->rank, q = mod(r - root, N), i = 0, ok = 1;
  int want = (q > 0) + (q < N - 1);
  if (q > 0 && i < n) {
    const char *op = get(&l[i], "op", 1);
    ok &= num(&l[i], "step") == q - 1 && num(&l[i], "recv_from") == mod(r - 1, N) &&
          num(&l[i], "recv_chunk") == root && num(&l[i], "send_to") == -1 && op &&
          !strcmp(op, "copy");
    i++;
  }
  if (q < N - 1 && i < n) {
    ok &= num(&l[i], "step") == q && num(&l[i], "send_to") == mod(r + 1, N) &&
          num(&l[i], "send_chunk") == root && num(&l[i], "recv_from") == -1;
    i++;
  }
  for (int k = 0; k < n; k++) {
    const char *phase = get(&l[k], "phase", 1);
    ok &= phase && !strcmp(phase, "broadcast") && num(&l[k], "root") == root &&
          num(&l[k], "bytes") == (double)(count * sizeof(float));
  }
  if (!tally_record(t, ok && n == want))
    tally_say(t, "broadcast from %d: %d lines (want %d) or their fields are not the chain's", root,
              n, want);
}

/* The lines of one ring collective, lines[0..n). */
static void check_ring(tally_t *t, const call_t *c, obj_t *l, int n) {
  int N = t->size, r = t->rank, reduce = strcmp(c->coll, "allgather") != 0;
  int ag = strcmp(c->coll, "reduce_scatter") != 0;
  int want = (reduce + ag) * (N - 1);
  if (!tally_record(t, n == want))
    tally_say(t, "%s: %d lines, want %d (N-1 per phase)", c->coll, n, want);
  for (int i = 0; i < n && n == want; i++) {
    int rs = reduce && i < N - 1, k = rs ? i : i - (reduce ? N - 1 : 0);
    int send = rs ? mod(r - k - 1, N) : mod(r - k, N);
    int recv = rs ? mod(r - k - 2, N) : mod(r - k - 1, N);
    const char *phase = get(&l[i], "phase", 1), *algo = get(&l[i], "algo", 1);
    const char *op = get(&l[i], "op", 1);
    int ok = algo && !strcmp(algo, "ring") && phase &&
             !strcmp(phase, rs ? "reduce_scatter" : "allgather") && num(&l[i], "step") == k &&
             num(&l[i], "send_to") == mod(r + 1, N) && num(&l[i], "recv_from") == mod(r - 1, N) &&
             num(&l[i], "send_chunk") == send && num(&l[i], "recv_chunk") == recv && op &&
             !strcmp(op, rs ? "reduce" : "copy") &&
             num(&l[i], "bytes") == (double)(c->chunk[send] * sizeof(float)) &&
             num(&l[i], "count") == (double)c->count && num(&l[i], "rc") == 0;
    if (!tally_record(t, ok))
      tally_say(t,
                "%s line %d: phase %s step %g send c%g to %g, recv c%g from %g, %g bytes; "
                "want %s step %d send c%d to %d, recv c%d from %d, %zu bytes",
                c->coll, i, phase ? phase : "?", num(&l[i], "step"), num(&l[i], "send_chunk"),
                num(&l[i], "send_to"), num(&l[i], "recv_chunk"), num(&l[i], "recv_from"),
                num(&l[i], "bytes"), rs ? "reduce_scatter" : "allgather", k, send, mod(r + 1, N),
                recv, mod(r - 1, N), c->chunk[send] * sizeof(float));
    double t0 = num(&l[i], "t_start_us"), t1 = num(&l[i], "t_end_us");
    ok = t0 > 0 && t1 >= t0 && (i == 0 || t0 >= num(&l[i - 1], "t_start_us"));
    if (!tally_record(t, ok))
      tally_say(t, "%s line %d: times %.3f..%.3f us (previous step started at %.3f)", c->coll, i,
                t0, t1, i ? num(&l[i - 1], "t_start_us") : 0.0);
  }
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
static size_t chunk_elems(const traced_t *c, int n, int k) {
  if (!strcmp(c->coll, "allreduce"))
    return c->count / (size_t)n + ((size_t)k < c->count % (size_t)n);
  if (!strcmp(c->coll, "broadcast") || !strcmp(c->coll, "reduce"))
    return k == c->root ? c->count : 0;
  if (c->counts)
    return c->counts[k];
  return c->count;
}

static size_t run_elems(const traced_t *c, int n, int first, int len) {
  size_t e = 0;
  for (int i = 0; i < len && first >= 0; i++)
    e += chunk_elems(c, n, (first + i) % n);
  return e;
}

static int is(const obj_t *o, const char *key, const char *want) {
  const char *v = get(o, key, 1);
  return v && !strcmp(v, want);
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
  if (!algo || !strcmp(algo, "flat"))
    algo = "flat"; /* one line for the whole call, checked by the caller */
  const baton__algo_t *a = baton__algo_find(algo);
  baton__sched_t s = {.steps = calloc((size_t)baton__max_steps(t->size), sizeof *s.steps),
                      .host = t->comm->sched.host};
  int fields_ok = 1, times_ok = 1, flat = !strcmp(algo, "flat");
  int built = !flat && a && s.steps &&
              baton__schedule_on(&s, baton__coll_find(coll), a, t->rank, t->size, count, c->root,
                                 t->comm->order) == 0;
  if (!tally_record(t, flat || (built && s.nsteps == n)))
    tally_say(t, "%s by %s: %d lines, the schedule has %d steps", coll, algo, n,
              built ? s.nsteps : -1);
  for (int i = 0; built && i < n && i < s.nsteps; i++) {
    const baton__step_t *st = &s.steps[i];
    int sends = st->send_peer >= 0, local = !sends && st->send_keep, recvs = st->recv_peer >= 0;
    int fed = i > 0 && s.steps[i - 1].forward;
    size_t sb =
        sends || local ? run_elems(c, t->size, st->send_chunk, st->send_n) * sizeof(float) : 0;
    size_t rb = recvs ? run_elems(c, t->size, st->recv_chunk, st->recv_n) * sizeof(float) : 0;
    const char *from = !sends                              ? (local ? "input" : "none")
                       : fed                               ? "received"
                       : st->send_from == BATON__FROM_WORK ? "work"
                                                           : "input";
    const char *with = !recvs || st->recv_op != BATON__RECV_REDUCE ? "none"
                       : st->recv_with == BATON__FROM_WORK         ? "work"
                                                                   : "input";
    const obj_t *o = &l[i];
    int ok = is(o, "phase", baton__phase_name((baton__phase_t)st->phase)) &&
             num(o, "step") == st->step && num(o, "send_to") == st->send_peer &&
             num(o, "send_chunk") == (sends || local ? st->send_chunk : -1) &&
             num(o, "send_n") == (sends || local ? st->send_n : 0) && is(o, "send_from", from) &&
             num(o, "local_copy") == local && num(o, "send_bytes") == (double)sb &&
             num(o, "recv_from") == st->recv_peer &&
             num(o, "recv_chunk") == (recvs ? st->recv_chunk : -1) &&
             num(o, "recv_n") == (recvs ? st->recv_n : 0) &&
             is(o, "op",
                !recvs                              ? "none"
                : st->recv_op == BATON__RECV_REDUCE ? "reduce"
                                                    : "copy") &&
             is(o, "recv_with", with) && num(o, "recv_bytes") == (double)rb &&
             num(o, "bytes") == (double)(sends || local ? sb : rb) &&
             num(o, "forward") == (recvs && st->forward) &&
             num(o, "keep") == (recvs && (st->keep || !st->forward)) &&
             num(o, "finish") == (recvs && st->finish) && num(o, "rc") == 0;
    if (!ok && fields_ok)
      tally_say(t,
                "%s by %s line %d: %s step %g send c%g+%g to %g from %s (%g B), recv "
                "c%g+%g from %g (%g B); the schedule says %s step %d send c%d+%d to %d from %s "
                "(%zu B), recv c%d+%d from %d (%zu B)",
                coll, algo, i, get(o, "phase", 1) ? get(o, "phase", 1) : "?", num(o, "step"),
                num(o, "send_chunk"), num(o, "send_n"), num(o, "send_to"),
                get(o, "send_from", 1) ? get(o, "send_from", 1) : "?", num(o, "send_bytes"),
                num(o, "recv_chunk"), num(o, "recv_n"), num(o, "recv_from"), num(o, "recv_bytes"),
                baton__phase_name((baton__phase_t)st->phase), st->step, st->send_chunk, st->send_n,
                st->send_peer, from, sb, st->recv_chunk, st->recv_n, st->recv_peer, rb);
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
    static const char *const strs[] = {"coll", "algo",      "dtype",    "phase",
                                       "op",   "send_from", "recv_with"};
    static const char *const nums[] = {
        "rank",      "size",       "seq",        "count",      "root",       "step",
        "send_to",   "host",       "send_chunk", "send_n",     "send_bytes", "local_copy",
        "recv_from", "recv_chunk", "recv_n",     "recv_bytes", "keep",       "forward",
        "finish",    "bytes",      "t_start_us", "t_end_us",   "rc"};
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
  /* The small allreduce, where flat ran it: one line for the whole call. */
  const char *algo = nlines[5] ? get(&lines[4][0], "algo", 1) : NULL;
  if (ran(lines[4], nlines[5], "flat") &&
      !tally_record(&t, nlines[5] == 1 && num(&lines[4][0], "send_to") == -1 &&
                            num(&lines[4][0], "root") == -1 &&
                            num(&lines[4][0], "bytes") == 3 * sizeof(float)))
    tally_say(&t, "small allreduce: %d lines (algo %s), want one flat step", nlines[5],
              algo ? algo : "-");
  if (!tally_record(&t, nlines[6] == 0))
    tally_say(&t, "the barrier wrote %d lines, want none", nlines[6]);
  return tally_finish(&t);
}
