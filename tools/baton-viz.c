/*
 * baton-viz - draws a collective's schedule as a data-flow diagram.
 *
 *   baton-viz --coll allreduce --algo ring -n 4 [--count K] [-o ring4.svg]
 *   baton-viz --trace 'trace.%r' [--seq S] -o run.html
 *
 * The steps come from the library itself (baton__schedule_build(), the
 * table in src/algo.c), so the picture is the schedule that runs, for any
 * algorithm in that table, flat's mailbox steps included; the library's
 * simulator (src/sim.h) runs them on all ranks at once and checks them.
 * One panel per round: the ranks as nodes (on a ring, or as the tree the
 * transfers make when the table's layout says "tree"), an arrow for every
 * message or mailbox read labelled with its run of chunks (dashed when it
 * comes from the sender's INPUT), and in every rank its WORK as a bar of
 * chunks coloured
 * by how many ranks' contributions each holds before the step, over a
 * strip for its INPUT; a last panel shows the result and whether it is
 * what the collective promises (exit 1 when not). With --trace the
 * collective is a real run's (BATON_TRACE, see docs/trace.md): its
 * schedule is checked against the trace, step by step (kind, run, peers,
 * src, finish), and each panel gives every rank's
 * measured step time, the slowest in red, under a timeline of all steps of
 * all ranks. docs/diagrams.md says how to read one.
 *
 * The output is SVG, or with an .html output (or --html) a page that shows
 * one step at a time with a slider.
 *
 * A new algorithm needs nothing here. A new collective needs its name in
 * baton__coll_name(), its row of baton__layout_fill() and, in src/sim.c,
 * what it promises (promise()).
 */
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

#define MAX_N 64 /* ranks a drawing holds */

/* A rank's measured time in each panel, from a trace; < 0: none. */
typedef struct {
  double t0[MAX_N], t1[MAX_N];
} times_t;

typedef struct {
  baton__sim_call_t call; /* the collective and the algorithm */
  baton__sim_t s;         /* its schedules, simulated into panels */
  int host[MAX_N];        /* per rank its host's index (hier), when has_hosts */
  int has_hosts;
  char bad[400]; /* why the result is not what the collective promises */
  times_t *tm;   /* [panel] */
  int tree, html;
  size_t counts[MAX_N]; /* the v-variants' count per rank, when given */
  int has_counts;
  /* the trace, when drawing one */
  const char *trace;
  unsigned long long seq;
  char dtype[32];
  double span; /* seconds from the first start to the last end */
  /* geometry */
  double cw, bw, bh, pw, ph, cx[MAX_N], cy[MAX_N];
} viz_t;

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("baton-viz: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(2);
}

static void *xcalloc(size_t n, size_t size) {
  void *p = calloc(n ? n : 1, size);
  if (!p)
    die("out of memory");
  return p;
}

static int reduces(const viz_t *v) { return baton__sim_reduces(v->call.coll); }

static int drawn(const viz_t *v, int c) { return baton__sim_chunk_used(&v->call, c); }

static const times_t *times(const viz_t *v, const baton__sim_panel_t *p) {
  return &v->tm[p - v->s.panels];
}

/* Builds and runs every rank's schedule into panels; the result's faults,
 * when it has any, in v->bad. A schedule the library cannot build is
 * fatal. */
static void simulate(viz_t *v) {
  v->call.host = v->has_hosts ? v->host : NULL;
  v->call.panels = 1;
  if (baton__sim_build(&v->s, &v->call) != 0)
    die("%s", v->s.errors[0]);
  if (baton__sim_run(&v->s) != 0)
    snprintf(v->bad, sizeof v->bad, "%s%s", v->s.errors[0],
             v->s.nerrors > 1 ? " (and more; the first is shown)" : "");
  v->tm = xcalloc((size_t)v->s.npanels, sizeof *v->tm);
  for (int i = 0; i < v->s.npanels; i++)
    for (int r = 0; r < MAX_N; r++)
      v->tm[i].t0[r] = v->tm[i].t1[r] = -1;
}

/* "3,5,7": n numbers separated by commas, into out[]; returns their sum. */
static size_t parse_list(int n, const char *list, const char *what, const char *unit, size_t *out) {
  const char *p = list;
  size_t sum = 0;
  for (int r = 0; r < n; r++) {
    char *end;
    unsigned long long x = strtoull(p, &end, 10);
    if (end == p || *p == '-' || (r < n - 1 ? *end != ',' : *end != '\0'))
      die("%s \"%s\": expected %d %s separated by commas", what, list, n, unit);
    out[r] = (size_t)x;
    sum += (size_t)x;
    p = end + 1;
  }
  return sum;
}

/* The count of every rank of a v-variant; their sum is the call's count,
 * as the library passes it to the schedule. */
static void parse_counts(viz_t *v, const char *list, const char *what) {
  v->call.count = parse_list(v->call.size, list, what, "counts", v->counts);
  v->call.counts = v->counts;
  v->has_counts = 1;
}

/* The host of every rank, numbered from 0 along the ring (hier). */
static void parse_hosts(viz_t *v, const char *list) {
  size_t h[MAX_N];
  parse_list(v->call.size, list, "--hosts", "host numbers", h);
  for (int r = 0; r < v->call.size; r++) {
    if (h[r] >= (size_t)v->call.size)
      die("--hosts \"%s\": host %zu of rank %d is not below %d", list, h[r], r, v->call.size);
    v->host[r] = (int)h[r];
  }
  v->has_hosts = 1;
}

/* ------------------------------------------------------------ the trace */

/* The value of "key" in a JSON line of docs/trace.md: a number or a string. */
static const char *field(const char *line, const char *key) {
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\":", key);
  const char *f = strstr(line, pat);
  return f ? f + strlen(pat) : NULL;
}

static double num(const char *line, const char *key, const char *where) {
  const char *f = field(line, key);
  char *end;
  double d = f ? strtod(f, &end) : 0;
  if (!f || end == f)
    die("%s: no number \"%s\" in: %.120s", where, key, line);
  return d;
}

static void str(const char *line, const char *key, char *out, size_t cap, const char *where) {
  const char *f = field(line, key);
  size_t len = 0;
  if (!f || *f != '"')
    die("%s: no string \"%s\" in: %.120s", where, key, line);
  for (f++; *f && *f != '"' && len + 1 < cap; f++)
    out[len++] = *f;
  out[len] = '\0';
}

static FILE *open_rank(const char *pattern, int rank, char *path, size_t cap) {
  size_t o = 0;
  for (const char *c = pattern; *c && o + 12 < cap; c++) {
    if (c[0] == '%' && c[1] == 'r')
      o += (size_t)snprintf(path + o, cap - o, "%d", rank), c++;
    else if (c[0] == '%' && c[1] == '%')
      path[o++] = '%', c++;
    else
      path[o++] = *c;
  }
  path[o] = '\0';
  return fopen(path, "r");
}

/* One line of a trace: one step (docs/trace.md). */
typedef struct {
  char phase[32], kind[32], src[8];
  int step, chunk, n, send_to, recv_from, finish;
  double t0, t1;
} rec_t;

/* The lines of collective `seq` in one rank's file (seq 0: the last one). */
static int read_rank(viz_t *v, int rank, rec_t *out, int cap, char *coll, char *algo) {
  char path[512], line[2048], where[600];
  FILE *f = open_rank(v->trace, rank, path, sizeof path);
  if (!f)
    die("cannot open the trace of rank %d, %s: %m", rank, path);
  int n = 0, lineno = 0;
  unsigned long long best = 0;
  while (fgets(line, sizeof line, f)) {
    snprintf(where, sizeof where, "%s line %d", path, ++lineno);
    if (line[strspn(line, " \t\r\n")] == '\0')
      continue;
    unsigned long long seq = (unsigned long long)num(line, "seq", where);
    if (v->seq == 0 && seq > best)
      best = seq, n = 0; /* a later collective: keep only the last */
    if (seq != (v->seq ? v->seq : best))
      continue;
    if (rank == 0)
      v->call.size = (int)num(line, "size", where);
    if (n == cap)
      die("%s: more steps in collective %llu than the schedule could have", where, seq);
    rec_t *r = &out[n++];
    str(line, "coll", coll, 32, where);
    str(line, "algo", algo, 32, where);
    str(line, "phase", r->phase, sizeof r->phase, where);
    str(line, "kind", r->kind, sizeof r->kind, where);
    str(line, "src", r->src, sizeof r->src, where);
    str(line, "dtype", v->dtype, sizeof v->dtype, where);
    if (rank == 0) {
      v->call.count = (size_t)num(line, "count", where);
      if (field(line, "counts")) { /* a v-variant: every rank's count */
        char list[16 * MAX_N];
        str(line, "counts", list, sizeof list, where);
        parse_counts(v, list, where);
      }
      v->call.root = (int)num(line, "root", where);
      v->call.root = v->call.root < 0 ? 0 : v->call.root; /* -1: the collective has no root */
    }
    r->step = (int)num(line, "step", where);
    if (field(line, "host")) {
      double h = num(line, "host", where);
      if (h < 0 || h >= v->call.size || h >= MAX_N)
        die("%s: host %g is not a host of %d ranks", where, h, v->call.size);
      v->host[rank] = (int)h;
      v->has_hosts |= v->host[rank] != rank;
    }
    r->chunk = (int)num(line, "chunk", where);
    r->n = (int)num(line, "n", where);
    r->send_to = (int)num(line, "send_to", where);
    r->recv_from = (int)num(line, "recv_from", where);
    r->finish = (int)num(line, "finish", where);
    r->t0 = num(line, "t_start_us", where) * 1e-6;
    r->t1 = num(line, "t_end_us", where) * 1e-6;
    if ((int)num(line, "rank", where) != rank)
      die("%s: a line of rank %d in the file of rank %d", where, (int)num(line, "rank", where),
          rank);
  }
  fclose(f);
  if (v->seq == 0)
    v->seq = best;
  if (n == 0 && rank == 0) /* another rank may have no step in a call */
    die("%s: no steps of collective %llu (a barrier, a call of count 0 and any call on 1 rank "
        "write none)",
        path, v->seq);
  return n;
}

/* Is the record the step st of the schedule? Every field the trace has
 * for it; src only where the kind reads it, recv_from -1 for a
 * mailbox_reduce (every rank's mailbox). */
static int same_step(const rec_t *r, const baton__step_t *st) {
  unsigned does = baton__step_does(st->kind);
  int reads_src = st->kind == BATON__STEP_SEND || (does & BATON__DOES_REDUCE && st->recv_peer >= 0);
  const char *src = st->src == BATON__FROM_WORK ? "work" : "input";
  return !strcmp(r->phase, baton__phase_name((baton__phase_t)st->phase)) && r->step == st->step &&
         !strcmp(r->kind, baton__kinds[st->kind].name) && r->chunk == st->chunk && r->n == st->n &&
         r->send_to == st->send_peer && r->recv_from == st->recv_peer && r->finish == st->finish &&
         (!reads_src || !strcmp(r->src, src));
}

/* Reads every rank's lines of one collective, checks them, one by one,
 * against the steps of the schedule the library builds for the same call,
 * and puts the times on the panels the steps ran in. */
static void load_trace(viz_t *v) {
  char coll[32], algo[32], c2[32], a2[32];
  int cap = baton__max_steps(MAX_N) + 8;
  rec_t *rec = xcalloc((size_t)cap, sizeof *rec);
  read_rank(v, 0, rec, cap, coll, algo);
  if (v->call.size < 1 || v->call.size > MAX_N)
    die("the trace is of %d ranks; baton-viz draws 1..%d", v->call.size, MAX_N);
  if ((v->call.coll = baton__coll_find(coll)) == BATON__COLL_COUNT)
    die("collective \"%s\" of the trace is not one this baton knows", coll);
  if (!(v->call.algo = baton__algo_find(algo)))
    die("algorithm \"%s\" of the trace is not one this baton knows", algo);
  if (v->call.root >= v->call.size)
    die("the trace's root %d is not a rank of its %d", v->call.root, v->call.size);
  for (int r = 1; r < v->call.size; r++) /* every rank's host, before the schedules are built */
    read_rank(v, r, rec, cap, c2, a2);
  simulate(v);
  double tmin = 1e300, tmax = -1e300;
  for (int r = 0; r < v->call.size; r++) {
    int nrec = read_rank(v, r, rec, cap, c2, a2);
    const baton__sched_t *s = &v->s.sched[r];
    if (strcmp(c2, coll) || strcmp(a2, algo))
      die("collective %llu is %s/%s on rank 0 but %s/%s on rank %d", v->seq, coll, algo, c2, a2, r);
    for (int i = 0; i < nrec; i++) {
      if (i >= s->nsteps || !same_step(&rec[i], &s->steps[i]))
        die("rank %d, collective %llu: the trace's step %d (%s %s round %d, chunks %d+%d, to %d, "
            "from %d) is not step %d of the schedule of %s %s; was the trace written by another "
            "version of baton?",
            r, v->seq, i, rec[i].kind, rec[i].phase, rec[i].step, rec[i].chunk, rec[i].n,
            rec[i].send_to, rec[i].recv_from, i, algo, coll);
      int pi = v->s.panel_of[r * v->s.cap + i];
      if (pi >= 0) {
        times_t *t = &v->tm[pi];
        if (t->t0[r] < 0 || rec[i].t0 < t->t0[r])
          t->t0[r] = rec[i].t0;
        t->t1[r] = rec[i].t1 > t->t1[r] ? rec[i].t1 : t->t1[r];
      }
      tmin = rec[i].t0 >= 0 && rec[i].t0 < tmin ? rec[i].t0 : tmin;
      tmax = rec[i].t1 > tmax ? rec[i].t1 : tmax;
    }
  }
  for (int p = 0; p < v->s.npanels; p++)
    for (int r = 0; r < v->call.size; r++) {
      times_t *t = &v->tm[p];
      if (t->t0[r] < 0 || t->t1[r] < 0)
        t->t0[r] = t->t1[r] = -1; /* not run, or a failed collective */
      else
        t->t0[r] -= tmin, t->t1[r] -= tmin;
    }
  v->span = tmax - tmin;
  free(rec);
}

/* ------------------------------------------------------------- drawing */

static const char *phase_label(int phase) {
  return phase < 0 ? "result" : baton__phase_name((baton__phase_t)phase);
}

static const char *phase_colour(int phase) {
  static const char *const c[] = {"#8c564b", "#e6550d", "#d62728", "#9467bd", "#17becf",
                                  "#3182bd", "#2ca02c", "#31a354", "#7f7f7f", "#636363"};
  return phase < 0 ? "#999" : c[phase % 10];
}

/* Partial sums in blues that darken as contributions arrive; a chunk
 * that holds all it needs in green; an absent one in pale grey. */
static void cell_colour(double f, char *out) {
  if (f <= 0) {
    strcpy(out, "#f2f2f2");
    return;
  }
  if (f >= 1) {
    strcpy(out, "#2ca25f");
    return;
  }
  int r = (int)(198 + (33 - 198) * f), g = (int)(219 + (113 - 219) * f),
      b = (int)(239 + (181 - 239) * f);
  sprintf(out, "#%02x%02x%02x", r, g, b);
}

/* Elements of chunk c in the call drawn, as the simulator laid the call
 * out; the v-variants' counts as given. */
static size_t chunk_len(const viz_t *v, int c) {
  if (v->has_counts)
    return v->counts[c];
  return drawn(v, c) ? baton__sim_chunk_len(&v->s, c) : 0;
}

static int uneven(const viz_t *v) {
  for (int c = 1; c < v->call.size && v->call.count; c++)
    if (drawn(v, c) && chunk_len(v, c) != chunk_len(v, 0))
      return 1;
  return 0;
}

/* Tree layout: levels by distance from the root (rank 0 for collectives
 * without one) over every transfer of the schedule, each rank under the
 * lowest-numbered rank one level up that it talks to, and the leaves side
 * by side in depth-first order with every parent centred over its
 * children: the edges of a binomial tree or a star never cross. */
static int tree_place(viz_t *v, const int *parent, int q, int level, int *slot, double *x) {
  int first = -1, last = -1;
  for (int c = 0; c < v->call.size; c++)
    if (parent[c] == q && c != q) {
      int k = tree_place(v, parent, c, level + 1, slot, x);
      first = first < 0 ? k : first;
      last = k;
    }
  x[q] = first < 0 ? (*slot)++ : (x[first] + x[last]) / 2;
  v->cy[q] = level;
  return q;
}

static void tree_geometry(viz_t *v) {
  int n = v->call.size, level[MAX_N], parent[MAX_N], slot = 0, depth = 1;
  double x[MAX_N];
  for (int q = 0; q < n; q++)
    level[q] = q == v->call.root ? 0 : -1, parent[q] = q == v->call.root ? q : -1;
  for (int l = 0, grew = 1; grew; l++) {
    grew = 0;
    for (int p = 0; p < v->s.npanels; p++)
      for (int i = 0; i < v->s.panels[p].nx; i++) {
        const baton__sim_xfer_t *t = &v->s.panels[p].x[i];
        int ends[2][2] = {{t->from, t->to}, {t->to, t->from}};
        for (int e = 0; e < 2; e++) {
          int a = ends[e][0], b = ends[e][1];
          if (level[a] == l && (level[b] < 0 || (level[b] == l + 1 && a < parent[b])))
            level[b] = l + 1, parent[b] = a, grew = 1;
        }
      }
  }
  for (int q = 0; q < n; q++)
    if (parent[q] < 0)
      parent[q] = q, level[q] = 0; /* not reached from the root: a root of its own */
  for (int q = 0; q < n; q++)
    if (parent[q] == q)
      tree_place(v, parent, q, 0, &slot, x);
  for (int q = 0; q < n; q++)
    depth = (int)v->cy[q] + 1 > depth ? (int)v->cy[q] + 1 : depth;
  v->pw = fmax(slot * (v->bw + 24) + 40, 190); /* room for the title */
  v->ph = depth * (v->bh + 60) + 60;
  for (int q = 0; q < n; q++) {
    v->cx[q] = 20 + (v->bw + 24) / 2 + x[q] * (v->bw + 24);
    v->cy[q] = 50 + v->bh / 2 + v->cy[q] * (v->bh + 60);
  }
}

static void geometry(viz_t *v) {
  int n = v->call.size;
  v->cw = n <= 4 ? 16 : n <= 8 ? 11 : n <= 16 ? 7 : 4;
  v->bw = fmax(52, n * v->cw + 10);
  v->bh = v->trace ? 56 : 46;
  if (v->tree) {
    tree_geometry(v);
    return;
  }
  double r = fmax(n <= 2 ? 70 : 100, n * (v->bw + 20) / (2 * M_PI));
  v->pw = 2 * r + v->bw + 40;
  v->ph = 2 * r + v->bh + 90;
  for (int q = 0; q < n; q++) {
    double a = -M_PI / 2 + 2 * M_PI * q / n;
    v->cx[q] = v->pw / 2 + r * cos(a);
    v->cy[q] = 36 + v->bh / 2 + r + r * sin(a);
  }
}

/* Pulls the point (x, y) on the line from the centre of rank q's box
 * towards (tx, ty) out to the box's edge, plus a gap. */
static void to_edge(const viz_t *v, int q, double tx, double ty, double *x, double *y) {
  double dx = tx - v->cx[q], dy = ty - v->cy[q], len = hypot(dx, dy);
  if (len < 1e-9) {
    *x = v->cx[q], *y = v->cy[q];
    return;
  }
  double t = fmin(dx ? (v->bw / 2 + 4) / fabs(dx) : 1e9, dy ? (v->bh / 2 + 4) / fabs(dy) : 1e9);
  *x = v->cx[q] + dx * t;
  *y = v->cy[q] + dy * t;
}

/* "c3", a run "c3–c5" (modulo N, so "c6–c1" wraps), "all" for every
 * chunk. */
static void run_label(const viz_t *v, int chunk, int n, char *out, size_t cap) {
  if (n == v->call.size && n > 1) {
    snprintf(out, cap, "all");
    return;
  }
  if (n == 1)
    snprintf(out, cap, "c%d", chunk);
  else
    snprintf(out, cap,
             "c%d\xe2\x80\x93"
             "c%d",
             chunk, (chunk + n - 1) % v->call.size);
}

static size_t run_elems(const viz_t *v, int chunk, int n) {
  size_t e = 0;
  for (int i = 0; i < n; i++)
    e += chunk_len(v, (chunk + i) % v->call.size);
  return e;
}

/* Where the sender took a message from, for an arrow's title. */
static const char *source(const baton__sim_xfer_t *x) {
  if (x->send_kind < 0 && (baton__step_does(x->recv_kind) & BATON__DOES_DIRECT))
    return x->src == BATON__FROM_WORK ? "the result, written into its output"
                                      : "its INPUT, read where it lies";
  if (x->send_kind < 0)
    return "its mailbox";
  return x->src < 0                   ? "what it just received"
         : x->src == BATON__FROM_WORK ? "its WORK"
                                      : "its INPUT";
}

/* What the receiver does with it. */
static const char *use(const baton__sim_xfer_t *x) {
  if (!(baton__step_does(x->recv_kind) & BATON__DOES_REDUCE))
    return "stores it";
  if (x->send_kind < 0 && (baton__step_does(x->recv_kind) & BATON__DOES_DIRECT))
    return x->src == BATON__FROM_WORK ? "has it in its output" : "combines every rank's INPUT";
  if (x->send_kind < 0)
    return "combines every rank's mailbox";
  return x->with == BATON__FROM_INPUT ? "adds its INPUT" : "adds it into its WORK";
}

/* An arrow bent to the left of its direction (outwards on a ring), so that
 * the two directions between a pair of ranks do not overlap, labelled with
 * its run of chunks; dashed when it comes from the sender's INPUT. For
 * alltoall the label reads sender's chunk -> receiver's chunk. */
/* Labels already placed in a panel, as boxes, so that the next one can
 * move along its arrow to a free place. */
typedef struct {
  double x0[5 * MAX_N], y0[5 * MAX_N], x1[5 * MAX_N], y1[5 * MAX_N]; /* ranks, 3N labels */
  int n;
} placed_t;

static int label_free(const placed_t *pl, double x0, double y0, double x1, double y1) {
  for (int i = 0; i < pl->n; i++)
    if (x0 < pl->x1[i] && pl->x0[i] < x1 && y0 < pl->y1[i] && pl->y0[i] < y1)
      return 0;
  return 1;
}

static void draw_arrow(FILE *o, const viz_t *v, const baton__sim_xfer_t *x, placed_t *pl) {
  double ax = v->cx[x->from], ay = v->cy[x->from], bx = v->cx[x->to], by = v->cy[x->to];
  double dx = bx - ax, dy = by - ay, len = hypot(dx, dy), bend = fmin(0.18 * len, 40);
  double mx = (ax + bx) / 2 + dy / len * bend, my = (ay + by) / 2 - dx / len * bend;
  double sx, sy, ex, ey;
  to_edge(v, x->from, mx, my, &sx, &sy);
  to_edge(v, x->to, mx, my, &ex, &ey);
  int red = (baton__step_does(x->recv_kind) & BATON__DOES_REDUCE) != 0;
  const char *col = red ? "#d95f02" : "#1f78b4";
  char text[96], other[40];
  run_label(v, x->schunk, x->n, text, sizeof text);
  if (x->schunk != x->rchunk) {
    run_label(v, x->rchunk, x->n, other, sizeof other);
    snprintf(text + strlen(text), sizeof text - strlen(text), "\xe2\x86\x92%s", other);
  }
  if (uneven(v))
    snprintf(text + strlen(text), sizeof text - strlen(text), "\xc2\xb7%zu",
             run_elems(v, x->schunk, x->n));
  fprintf(o,
          "<path d='M%.1f,%.1f Q%.1f,%.1f %.1f,%.1f' fill='none' stroke='%s' "
          "stroke-width='%.1f'%s marker-end='url(#%s)'><title>rank %d to rank %d: %s from %s, "
          "with the contributions of %d rank(s); rank %d %s (%s)</title></path>\n",
          sx, sy, mx, my, ex, ey, col, v->call.size > 8 ? 1.2 : 1.8,
          x->src == BATON__FROM_INPUT ? " stroke-dasharray='5,3'" : "", red ? "hr" : "hc", x->from,
          x->to, text, source(x), x->carried, x->to, use(x), baton__kinds[x->recv_kind].name);
  if (!pl)
    return;
  /* On the outer side of the bend, clear of the line: at the middle of
   * the curve, or further along where another label is in the way. */
  static const double at[] = {0.5, 0.35, 0.65, 0.25, 0.75};
  double lx = 0, ly = 0, w = 6.5 * (double)strlen(text) * 0.85;
  for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) {
    double t = at[i], a = (1 - t) * (1 - t), b = 2 * (1 - t) * t, c = t * t;
    lx = a * sx + b * mx + c * ex + dy / len * 10;
    ly = a * sy + b * my + c * ey - dx / len * 10;
    if (label_free(pl, lx - w / 2, ly - 6, lx + w / 2, ly + 6))
      break;
  }
  if (pl->n < (int)(sizeof pl->x0 / sizeof pl->x0[0])) {
    pl->x0[pl->n] = lx - w / 2, pl->y0[pl->n] = ly - 6;
    pl->x1[pl->n] = lx + w / 2, pl->y1[pl->n++] = ly + 6;
  }
  fprintf(o, "<text x='%.1f' y='%.1f' class='lab' fill='%s'>%s</text>\n", lx, ly + 4, col, text);
}

/* One cell of a rank's bar: the chunk's value, coloured by how much of
 * what it needs it holds. */
static void draw_cell(FILE *o, const viz_t *v, double x, double y, double w, double h, int q, int c,
                      baton__sim_cell_t val, const char *what, int sent, int passing) {
  int all = baton__sim_need(&v->call), k = baton__sim_val_count(val.v);
  char col[8];
  k = k < all ? k : all;
  cell_colour(val.v ? fmax((double)k / all, 0.08) : 0, col);
  fprintf(o,
          "<rect x='%.1f' y='%.1f' width='%.1f' height='%.0f' fill='%s'%s stroke='%s' "
          "stroke-width='%s'%s><title>rank %d, chunk %d in %s: ",
          x, y, fmax(w, 1), h, col, passing ? " fill-opacity='0.45'" : "", sent ? "#000" : "#bbb",
          sent ? "1.5" : "0.5", passing ? " stroke-dasharray='2,2'" : "", q, c, what);
  if (val.v)
    fprintf(o, "%d of %d contributions%s", k, all,
            val.origin != c ? " (another rank's block)" : "");
  else
    fprintf(o, "nothing");
  fprintf(o, "%s%s</title></rect>\n", passing ? "; received and passed on, not stored" : "",
          sent ? "; sent in this step" : "");
  if (all > 1 && k > 0 && v->cw >= 11 && w >= 8 && h >= 10)
    fprintf(o, "<text x='%.1f' y='%.1f' class='cn'%s>%d</text>\n", x + w / 2, y + 10,
            (double)k / all > 0.5 ? " fill='white'" : "", k);
}

/* One chunk of a rank's INPUT: there or not (what it holds is the rank's
 * own part, or the root's blocks). */
static void draw_input(FILE *o, double x, double y, double w, int q, int c, int there, int sent) {
  fprintf(o,
          "<rect x='%.1f' y='%.1f' width='%.1f' height='5' fill='%s' stroke='%s' "
          "stroke-width='%s'><title>rank %d, chunk %d in INPUT: %s%s</title></rect>\n",
          x, y, fmax(w, 1), there ? "#9e9ac8" : "#f2f2f2", sent ? "#000" : "#bbb",
          sent ? "1.5" : "0.5", q, c, there ? "the caller's data" : "nothing",
          sent ? "; sent in this step" : "");
}

/* A rank: its WORK (output or scratch) as a bar of chunks, a chunk it
 * only passes on drawn faded, and its INPUT as a thin strip below. */
static void draw_node(FILE *o, const viz_t *v, const baton__sim_panel_t *p, int q, int slowest) {
  double x = v->cx[q] - v->bw / 2, y = v->cy[q] - v->bh / 2;
  fprintf(o,
          "<rect x='%.1f' y='%.1f' width='%.1f' height='%.1f' rx='5' fill='white' "
          "stroke='%s' stroke-width='%s'/>\n",
          x, y, v->bw, v->bh, slowest ? "#d7191c" : "#444", slowest ? "2.5" : "1");
  fprintf(o, "<text x='%.1f' y='%.1f' class='rk'>rank %d</text>\n", v->cx[q], y + 14, q);
  size_t total = 0;
  int shown = 0, n = v->call.size;
  for (int c = 0; c < n; c++)
    total += drawn(v, c) ? chunk_len(v, c) : 0, shown += drawn(v, c);
  double bar = shown == 1 ? v->cw * 2 : n * v->cw;
  double cx = v->cx[q] - bar / 2;
  for (int c = 0; c < n; c++) {
    if (!drawn(v, c))
      continue;
    double w = total ? bar * (double)chunk_len(v, c) / (double)total : bar / shown;
    baton__sim_cell_t work = p->work[q * n + c];
    int passing = !work.v && p->pass[q].origin == c && p->pass[q].v;
    unsigned sent = p->sent[q * n + c];
    draw_cell(o, v, cx, y + 20, w, 12, q, c, passing ? p->pass[q] : work, "WORK",
              (sent & BATON__SIM_SENT_WORK) != 0, passing);
    draw_input(o, cx, y + 35, w, q, c, baton__sim_has_input(&v->s, q, c),
               (sent & BATON__SIM_SENT_INPUT) != 0);
    cx += w;
  }
  for (int i = 0, line = 0; i < p->ncp; i++) {
    char run[40];
    if (p->cp[i].rank != q)
      continue;
    run_label(v, p->cp[i].chunk, p->cp[i].n, run, sizeof run);
    fprintf(o,
            "<text x='%.1f' y='%.1f' class='tm' fill='#2ca02c'>%s: INPUT\xe2\x86\x92"
            "WORK</text>\n",
            v->cx[q], y + v->bh + 12 + 12 * line++, run);
  }
  if (v->trace && times(v, p)->t1[q] >= 0)
    fprintf(o, "<text x='%.1f' y='%.1f' class='tm'%s>%.1f \xc2\xb5s</text>\n", v->cx[q], y + 52,
            slowest ? " fill='#d7191c'" : "", (times(v, p)->t1[q] - times(v, p)->t0[q]) * 1e6);
}

static void draw_panel(FILE *o, const viz_t *v, int i) {
  const baton__sim_panel_t *p = &v->s.panels[i];
  int slow = -1;
  double worst = -1;
  for (int q = 0; v->trace && q < v->call.size; q++)
    if (times(v, p)->t1[q] >= 0 && times(v, p)->t1[q] - times(v, p)->t0[q] > worst)
      worst = times(v, p)->t1[q] - times(v, p)->t0[q], slow = q;
  fprintf(o, "<rect width='%.0f' height='%.0f' fill='#fcfcfc' stroke='#ddd'/>\n", v->pw, v->ph);
  fprintf(o, "<text x='10' y='20' class='ttl' fill='%s'>%s", phase_colour(p->phase),
          phase_label(p->phase));
  if (p->phase >= 0)
    fprintf(o, " step %d", p->step);
  else if (v->bad[0])
    fprintf(o, ": NOT what %s promises</text><text x='10' y='36' class='sl'>%s",
            baton__coll_name(v->call.coll), v->bad);
  else
    fprintf(o, ": what %s promises", baton__coll_name(v->call.coll));
  if (slow >= 0)
    fprintf(o,
            "</text><text x='10' y='36' class='sl'>slowest: rank %d, "
            "%.1f \xc2\xb5s",
            slow, worst * 1e6);
  fprintf(o, "</text>\n");
  int label = p->nx <= 3 * v->call.size; /* beyond that the labels only hide the arrows */
  placed_t pl = {.n = 0};
  for (int q = 0; q < v->call.size; q++) { /* the ranks' boxes: no label on them */
    pl.x0[pl.n] = v->cx[q] - v->bw / 2, pl.y0[pl.n] = v->cy[q] - v->bh / 2;
    pl.x1[pl.n] = v->cx[q] + v->bw / 2, pl.y1[pl.n++] = v->cy[q] + v->bh / 2;
  }
  for (int k = 0; k < p->nx; k++)
    draw_arrow(o, v, &p->x[k], label ? &pl : NULL);
  for (int q = 0; q < v->call.size; q++)
    draw_node(o, v, p, q, q == slow && v->call.size > 1);
}

static const char *style =
    "<style>text{font-family:DejaVu Sans,Arial,sans-serif;font-size:11px}"
    ".rk{text-anchor:middle;font-weight:bold}.cn{text-anchor:middle;font-size:9px}.sl{font-size:"
    "10px;fill:#d7191c}.tm{text-anchor:middle;font-size:10px}"
    ".ttl,.tl{font-size:13px;font-weight:bold}.hd{font-size:15px;font-weight:bold}"
    ".lab{text-anchor:middle;font-weight:bold;paint-order:stroke;stroke:#fff;"
    "stroke-width:3px}</style>\n"
    "<defs><marker id='hr' viewBox='0 0 10 10' refX='9' refY='5' markerWidth='6' "
    "markerHeight='6' orient='auto'><path d='M0,0L10,5L0,10z' fill='#d95f02'/></marker>"
    "<marker id='hc' viewBox='0 0 10 10' refX='9' refY='5' markerWidth='6' markerHeight='6' "
    "orient='auto'><path d='M0,0L10,5L0,10z' fill='#1f78b4'/></marker></defs>\n";

static void xml_text(FILE *o, const char *s) {
  for (; *s; s++)
    if (*s == '<')
      fputs("&lt;", o);
    else if (*s == '>')
      fputs("&gt;", o);
    else if (*s == '&')
      fputs("&amp;", o);
    else if (*s == '\'')
      fputs("&apos;", o);
    else
      fputc(*s, o);
}

/* The title and the key: 76 px high. */
static void draw_header(FILE *o, const viz_t *v) {
  fprintf(o, "<text x='10' y='22' class='hd'>%s \xc2\xb7 %s \xc2\xb7 N=%d",
          baton__coll_name(v->call.coll), v->call.algo->name, v->call.size);
  if (v->call.coll == BATON__COLL_BROADCAST || v->call.coll == BATON__COLL_REDUCE ||
      v->call.coll == BATON__COLL_GATHER || v->call.coll == BATON__COLL_SCATTER || v->tree)
    fprintf(o, " \xc2\xb7 root %d", v->call.root);
  if (v->has_counts) {
    fprintf(o, " \xc2\xb7 counts");
    for (int c = 0; c < v->call.size; c++)
      fprintf(o, "%s%zu", c ? "," : " ", v->counts[c]);
    fprintf(o, "%s%s elements", v->dtype[0] ? " " : "", v->dtype);
  } else if (v->call.count) {
    size_t lo = (size_t)-1, hi = 0; /* over the chunks drawn */
    for (int c = 0; c < v->call.size; c++)
      if (drawn(v, c)) {
        size_t len = chunk_len(v, c);
        lo = len < lo ? len : lo;
        hi = len > hi ? len : hi;
      }
    fprintf(o, " \xc2\xb7 count %zu%s%s: chunks of %zu", v->call.count, v->dtype[0] ? " " : "",
            v->dtype, hi);
    if (lo != hi)
      fprintf(o, " or %zu", lo);
    fprintf(o, " elements");
  }
  fprintf(o, "</text>\n<g transform='translate(10,36)'>");
  const double fr[] = {0, 0.25, 0.6, 0.85, 1};
  const char *lab =
      !reduces(v) ? "chunk: absent / held" : "chunk: contributions held, few \xe2\x86\x92 all";
  int x = 0;
  for (int i = 0; i < 5; i++) {
    char col[8];
    cell_colour(fr[i], col);
    if (!reduces(v) && i > 0 && i < 4)
      continue;
    fprintf(o, "<rect x='%d' y='0' width='14' height='12' fill='%s' stroke='#bbb'/>", x, col);
    x += 16;
  }
  fprintf(o,
          "<text x='%d' y='10'>%s; black outline: sent in this step</text>"
          "<path d='M530,6h30' stroke='#d95f02' stroke-width='2' marker-end='url(#hr)'/>"
          "<text x='566' y='10'>receive and reduce</text>"
          "<path d='M690,6h30' stroke='#1f78b4' stroke-width='2' marker-end='url(#hc)'/>"
          "<text x='726' y='10'>receive and copy</text>"
          "<text x='0' y='28'>each rank: its WORK above (faded: only passed on), its "
          "INPUT below (purple: there)</text>"
          "<path d='M530,24h30' stroke='#444' stroke-width='2' stroke-dasharray='5,3'/>"
          "<text x='566' y='28'>sent from INPUT</text>"
          "<path d='M690,24h30' stroke='#444' stroke-width='2'/>"
          "<text x='726' y='28'>from WORK or passed on</text></g>\n",
          x + 6, lab);
}

/* Every step of every rank on one time axis: a late rank or a slow step
 * is a long bar. */
static double draw_timeline(FILE *o, const viz_t *v, double y, double width) {
  double left = 60, w = width - left - 50, row = 14;
  if (!v->trace || v->span <= 0)
    return y;
  fprintf(o, "<g transform='translate(0,%.0f)'><text x='10' y='12' class='tl'>", y);
  xml_text(o, v->trace);
  fprintf(o,
          ", collective %llu: %.1f \xc2\xb5s (axis: \xc2\xb5s from the first step's "
          "start)</text>\n",
          v->seq, v->span * 1e6);
  for (int q = 0; q < v->call.size; q++) {
    double ry = 22 + q * row;
    fprintf(o, "<text x='%.0f' y='%.1f' text-anchor='end'>rank %d</text>\n", left - 6, ry + 10, q);
    for (int i = 0; i < v->s.npanels; i++) {
      const baton__sim_panel_t *p = &v->s.panels[i];
      if (times(v, p)->t1[q] < 0)
        continue;
      double x0 = left + w * times(v, p)->t0[q] / v->span,
             x1 = left + w * times(v, p)->t1[q] / v->span;
      fprintf(o,
              "<rect x='%.1f' y='%.1f' width='%.1f' height='%.0f' fill='%s' "
              "fill-opacity='%s' stroke='#fff' stroke-width='0.5'><title>rank %d %s step %d: "
              "%.1f to %.1f \xc2\xb5s</title></rect>\n",
              x0, ry, fmax(x1 - x0, 0.8), row - 2, phase_colour(p->phase),
              p->step % 2 ? "0.6" : "1", q, phase_label(p->phase), p->step,
              times(v, p)->t0[q] * 1e6, times(v, p)->t1[q] * 1e6);
    }
  }
  double ay = 22 + v->call.size * row + 4;
  for (int t = 0; t <= 5; t++) {
    double x = left + w * t / 5;
    fprintf(o,
            "<path d='M%.1f,%.1fv4' stroke='#444'/><text x='%.1f' y='%.1f' "
            "class='tm'>%.1f</text>\n",
            x, ay, x, ay + 15, v->span * 1e6 * t / 5);
  }
  fprintf(o, "</g>\n");
  return y + ay + 26;
}

/* All panels on one page: a new row for each phase. */
static void write_svg(FILE *o, const viz_t *v) {
  int cols = (int)fmax(2, fmin(6, floor(2400 / v->pw)));
  double *x = xcalloc((size_t)v->s.npanels, sizeof *x),
         *y = xcalloc((size_t)v->s.npanels, sizeof *y);
  double gap = 10, top = 76;
  double width = 0, height, tl = v->trace ? 22 + v->call.size * 14 + 52 : 0;
  int col = 0, row = 0;
  for (int i = 0; i < v->s.npanels; i++) {
    if (col == cols || (i > 0 && v->s.panels[i].phase != v->s.panels[i - 1].phase &&
                        v->s.panels[i].phase >= 0 && col > 0))
      col = 0, row++;
    x[i] = 10 + col * (v->pw + gap);
    y[i] = top + tl + row * (v->ph + gap);
    width = fmax(width, x[i] + v->pw + 10);
    col++;
  }
  width = fmax(width, 860);
  height = top + tl + (row + 1) * (v->ph + gap) + 10;
  fprintf(o,
          "<svg xmlns='http://www.w3.org/2000/svg' width='%.0f' height='%.0f' "
          "viewBox='0 0 %.0f %.0f'>\n%s<rect width='100%%' height='100%%' fill='white'/>\n",
          width, height, width, height, style);
  draw_header(o, v);
  draw_timeline(o, v, top, width);
  for (int i = 0; i < v->s.npanels; i++) {
    fprintf(o, "<g transform='translate(%.0f,%.0f)'>\n", x[i], y[i]);
    draw_panel(o, v, i);
    fprintf(o, "</g>\n");
  }
  fprintf(o, "</svg>\n");
  free(x);
  free(y);
}

/* One step at a time, with a slider, the arrow keys and a play button. */
static void write_html(FILE *o, const viz_t *v) {
  double width = fmax(v->pw + 20, 860), tl = v->trace ? 22 + v->call.size * 14 + 52 : 0;
  fprintf(
      o,
      "<!DOCTYPE html>\n<html xmlns='http://www.w3.org/1999/xhtml'><head><meta "
      "charset='utf-8'/><title>baton-viz: %s %s "
      "N=%d</title>\n<style>body{font-family:DejaVu Sans,Arial,sans-serif;margin:12px}"
      ".p{display:none}.p.on{display:block}#ctl{margin:8px 10px}"
      "#ctl "
      "input{width:%.0fpx;vertical-align:middle}#lbl{white-space:nowrap}</style></head><body>\n",
      baton__coll_name(v->call.coll), v->call.algo->name, v->call.size, fmin(width - 320, 500));
  fprintf(o, "<svg xmlns='http://www.w3.org/2000/svg' width='%.0f' height='%.0f'>%s", width,
          76 + tl, style);
  draw_header(o, v);
  draw_timeline(o, v, 76, width);
  fprintf(o,
          "</svg>\n<div id='ctl'><button id='play'>play</button> <input type='range' "
          "id='s' min='0' max='%d' value='0'/> <span id='lbl'></span></div>\n",
          v->s.npanels - 1);
  for (int i = 0; i < v->s.npanels; i++) {
    fprintf(o,
            "<div class='p' data-name='%s%s%d'><svg xmlns='http://www.w3.org/2000/svg' "
            "width='%.0f' height='%.0f'>\n",
            phase_label(v->s.panels[i].phase), v->s.panels[i].phase >= 0 ? " step " : "",
            v->s.panels[i].step, v->pw, v->ph);
    draw_panel(o, v, i);
    fprintf(o, "</svg></div>\n");
  }
  fprintf(o, "<script>\nconst ps=document.querySelectorAll('.p'),s=document.getElementById"
             "('s'),l=document.getElementById('lbl');let timer=null;\nfunction show(i){ps.forEach"
             "((p,j)=>p.classList.toggle('on',j==i));s.value=i;l.textContent=(+i+1)+' / '+ps."
             "length+': '+ps[i].dataset.name.replace(/result.*/,'result');}\ns.oninput=()=>show("
             "s.value);\ndocument.onkeydown=e=>{if(e.key=='ArrowRight')show(Math.min(ps.length-1,"
             "+s.value+1));if(e.key=='ArrowLeft')show(Math.max(0,s.value-1));};\ndocument."
             "getElementById('play').onclick=()=>{if(timer){clearInterval(timer);timer=null;"
             "return;}timer=setInterval(()=>show((+s.value+1)%%ps.length),900);};\nshow(0);\n"
             "</script></body></html>\n");
}

/* ---------------------------------------------------------------- main */

static void usage(FILE *f) {
  int n;
  const baton__algo_t *a = baton__algos(&n);
  fprintf(f, "usage: baton-viz -c COLL -a ALGO -n N [--count K] [--layout ring|tree] [-o FILE]\n"
             "       baton-viz --trace 'trace.%%r' [--seq S] [-o FILE]\n"
             "  -c, --coll COLL     allreduce, reduce_scatter, allgather, broadcast, reduce,\n"
             "                      alltoall, gather, scatter, allgatherv, reduce_scatterv\n"
             "  -a, --algo ALGO     the algorithm; default ring. Known:");
  for (int i = 0; i < n; i++)
    fprintf(f, " %s", a[i].name);
  fprintf(f,
          "\n"
          "  -n N                ranks, 1..%d\n"
          "      --count K       elements of the call (allreduce: of the buffer;\n"
          "                      others: per rank), to draw uneven chunks\n"
          "      --counts A,B,.. allgatherv, reduce_scatterv: the count of every rank\n"
          "      --hosts A,B,..  the host of every rank, numbered from 0 (hier)\n"
          "      --root R        the root of a rooted collective (default 0)\n"
          "      --layout L      ring or tree (default: what the algorithm's row says)\n"
          "      --trace PATTERN draw a run traced with BATON_TRACE=PATTERN\n"
          "      --seq S         which collective of the trace (default: the last)\n"
          "  -o, --output FILE   default stdout; a .html name writes the page with a slider\n"
          "      --html          write the page with a slider\n"
          "      --list          the collectives and algorithms it can draw\n",
          MAX_N);
}

/* Every collective's name, for a message. */
static const char *coll_names(void) {
  static char buf[256];
  buf[0] = '\0';
  for (int c = 0; c < BATON__COLL_COUNT; c++)
    if (c != BATON__COLL_BARRIER)
      snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%s%s", c ? ", " : "",
               baton__coll_name((baton__coll_t)c));
  return buf;
}

/* The algorithms of the table that serve coll, for a message. */
static const char *algos_for(baton__coll_t coll) {
  static char buf[256];
  int n;
  const baton__algo_t *a = baton__algos(&n);
  buf[0] = '\0';
  for (int i = 0; i < n; i++)
    if (a[i].colls & (1u << coll))
      snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%s%s", buf[0] ? ", " : "", a[i].name);
  return buf[0] ? buf : "none yet";
}

/* "COLL ALGO" for every pair the library can draw, one a line. */
static void list(void) {
  int n;
  const baton__algo_t *a = baton__algos(&n);
  for (int c = 0; c < BATON__COLL_COUNT; c++)
    for (int i = 0; i < n; i++)
      if (a[i].colls & (1u << c))
        printf("%s %s\n", baton__coll_name((baton__coll_t)c), a[i].name);
}

static long parse_long(const char *s, const char *what, long lo, long hi) {
  char *end;
  long x = strtol(s, &end, 10);
  if (end == s || *end || x < lo || x > hi)
    die("%s \"%s\" is not a number in %ld..%ld", what, s, lo, hi);
  return x;
}

int main(int argc, char **argv) {
  static const struct option longopts[] = {
      {"coll", required_argument, NULL, 'c'},   {"algo", required_argument, NULL, 'a'},
      {"count", required_argument, NULL, 'k'},  {"layout", required_argument, NULL, 'l'},
      {"trace", required_argument, NULL, 't'},  {"seq", required_argument, NULL, 's'},
      {"output", required_argument, NULL, 'o'}, {"html", no_argument, NULL, 'H'},
      {"help", no_argument, NULL, 'h'},         {"list", no_argument, NULL, 'L'},
      {"root", required_argument, NULL, 'r'},   {"counts", required_argument, NULL, 'C'},
      {"hosts", required_argument, NULL, 'S'},  {NULL, 0, NULL, 0}};
  viz_t v = {.call.coll = BATON__COLL_COUNT};
  const char *coll = NULL, *algo = baton__algo_default()->name, *out = NULL, *layout = NULL,
             *counts = NULL, *hosts = NULL;
  int opt;
  while ((opt = getopt_long(argc, argv, "c:a:n:o:h", longopts, NULL)) != -1) {
    switch (opt) {
    case 'c':
      coll = optarg;
      break;
    case 'a':
      algo = optarg;
      break;
    case 'n':
      v.call.size = (int)parse_long(optarg, "-n", 1, MAX_N);
      break;
    case 'k':
      v.call.count = (size_t)parse_long(optarg, "--count", 0, 1L << 50);
      break;
    case 'l':
      layout = optarg;
      break;
    case 'C':
      counts = optarg;
      break;
    case 'S':
      hosts = optarg;
      break;
    case 'r':
      v.call.root = (int)parse_long(optarg, "--root", 0, MAX_N - 1);
      break;
    case 't':
      v.trace = optarg;
      break;
    case 's':
      v.seq = (unsigned long long)parse_long(optarg, "--seq", 1, 1L << 62);
      break;
    case 'o':
      out = optarg;
      break;
    case 'H':
      v.html = 1;
      break;
    case 'h':
      usage(stdout);
      return 0;
    case 'L':
      list();
      return 0;
    default:
      usage(stderr);
      return 2;
    }
  }
  if (optind < argc)
    die("unexpected argument \"%s\"", argv[optind]);
  if (layout && strcmp(layout, "ring") && strcmp(layout, "tree"))
    die("--layout \"%s\": expected ring or tree", layout);
  if (v.trace) {
    load_trace(&v);
  } else {
    if (!coll || !v.call.size)
      die("say which collective and how many ranks, e.g. -c allreduce -n 4 (or --trace)");
    if ((v.call.coll = baton__coll_find(coll)) == BATON__COLL_COUNT)
      die("--coll \"%s\" is not a collective; expected one of: %s", coll, coll_names());
    if (counts && v.call.coll != BATON__COLL_ALLGATHERV &&
        v.call.coll != BATON__COLL_REDUCE_SCATTERV)
      die("--counts is for allgatherv and reduce_scatterv, not %s", coll);
    if (counts)
      parse_counts(&v, counts, "--counts");
    if (hosts)
      parse_hosts(&v, hosts);
    if (v.call.coll == BATON__COLL_BARRIER)
      die("--coll barrier moves no data: nothing to draw");
    if (v.call.root >= v.call.size)
      die("--root %d is not a rank of %d", v.call.root, v.call.size);
    if (!(v.call.algo = baton__algo_find(algo)))
      die("--algo \"%s\" is not an algorithm of this baton (see --help)", algo);
    if (!(v.call.algo->colls & (1u << v.call.coll)))
      die("algorithm %s does not serve %s; the algorithms that do: %s", algo, coll,
          algos_for(v.call.coll));
    simulate(&v);
  }
  v.tree = layout ? !strcmp(layout, "tree") : !strcmp(v.call.algo->layout, "tree");
  geometry(&v);
  size_t olen = out ? strlen(out) : 0;
  v.html |= olen > 5 && !strcmp(out + olen - 5, ".html");
  FILE *o = out ? fopen(out, "w") : stdout;
  if (!o)
    die("cannot create %s: %m", out);
  if (v.html)
    write_html(o, &v);
  else
    write_svg(o, &v);
  if (ferror(o) || (out && fclose(o) != 0))
    die("writing %s failed", out ? out : "stdout");
  int broken = v.bad[0] != 0;
  if (broken)
    fprintf(stderr, "baton-viz: %s %s on %d ranks: the result is not what %s promises: %s\n",
            v.call.algo->name, baton__coll_name(v.call.coll), v.call.size,
            baton__coll_name(v.call.coll), v.bad);
  baton__sim_free(&v.s);
  free(v.tm);
  return broken;
}
