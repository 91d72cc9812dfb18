/*
 * baton-model - what the alpha-beta-gamma model predicts for each
 * algorithm, and with --measure what the real collective takes.
 *
 *   baton-model -c allreduce -n 16 -s 64M --alpha 5us --bw 12.5GB/s [--gamma 20GB/s]
 *   baton-model -c allreduce -n 4 -s 16M --alpha 2us --bw 8GB/s --measure
 *
 * The formulas are the library's own (src/model.c), the ones its algorithm
 * choice uses. --measure starts `baton-run -n N` (the baton-run next to
 * this program, else the one on PATH) once for each algorithm this baton
 * has for the collective, forcing the algorithm with its knobs, and prints
 * the slowest rank's average time per call beside the prediction. Sizes
 * are of the larger buffer, as baton-bench counts them (model.h).
 */
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "baton.h"
#include "model.h"
#include "schedule.h"

typedef struct {
  const char *coll;
  int n, measure, iters;
  double bytes;
  baton__cost_t cost;
} opts_t;

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("baton-model: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(2);
}

/* ---------------------------------------------------- numbers with units */

typedef struct {
  const char *suffix;
  double scale;
} unit_t;

/* "5us", "12.5GB/s", "64M": the number times its unit's scale; a bare
 * number has scale `bare`. Dies naming `what` on anything else. */
static double parse_unit(const char *s, const unit_t *units, double bare, const char *what,
                         const char *expect) {
  char *end;
  double x = strtod(s, &end);
  if (end == s || x < 0)
    die("%s \"%s\": expected %s", what, s, expect);
  if (!*end)
    return x * bare;
  /* Exact case first: Gb/s is bits, GB/s bytes; then any case. */
  for (const unit_t *u = units; u->suffix; u++)
    if (strcmp(end, u->suffix) == 0)
      return x * u->scale;
  for (const unit_t *u = units; u->suffix; u++)
    if (strcasecmp(end, u->suffix) == 0 && strcmp(u->suffix, "Gb/s") != 0)
      return x * u->scale;
  die("%s \"%s\": expected %s", what, s, expect);
}

static const unit_t time_units[] = {{"s", 1},     {"ms", 1e-3}, {"us", 1e-6}, {"\xc2\xb5s", 1e-6},
                                    {"ns", 1e-9}, {NULL, 0}};
static const unit_t rate_units[] = {{"Gb/s", 1e9 / 8}, {"GB/s", 1e9}, {"MB/s", 1e6},
                                    {"KB/s", 1e3},     {"B/s", 1},    {NULL, 0}};
static const unit_t size_units[] = {{"K", 1024},     {"M", 1 << 20},  {"G", 1 << 30}, {"KB", 1024},
                                    {"MB", 1 << 20}, {"GB", 1 << 30}, {"B", 1},       {NULL, 0}};

/* gamma as a rate ("20GB/s") or as seconds per byte ("0.05ns"). */
static double parse_gamma(const char *s) {
  if (strstr(s, "/s")) {
    double rate = parse_unit(s, rate_units, 1, "--gamma",
                             "a rate like 20GB/s or a time per byte like 0.05ns");
    if (rate <= 0)
      die("--gamma \"%s\": a rate must be above 0", s);
    return 1 / rate;
  }
  return parse_unit(s, time_units, 1, "--gamma",
                    "a rate like 20GB/s or a time per byte like 0.05ns");
}

static void fmt_time(double t, char *out, size_t cap) {
  if (t < 0)
    snprintf(out, cap, "-");
  else if (t < 1e-3)
    snprintf(out, cap, "%.2f us", t * 1e6);
  else if (t < 1)
    snprintf(out, cap, "%.3f ms", t * 1e3);
  else
    snprintf(out, cap, "%.3f s", t);
}

static void fmt_bytes(double b, char *out, size_t cap) {
  if (b >= 1 << 30)
    snprintf(out, cap, "%.4g GiB", b / (1 << 30));
  else if (b >= 1 << 20)
    snprintf(out, cap, "%.4g MiB", b / (1 << 20));
  else if (b >= 1024)
    snprintf(out, cap, "%.4g KiB", b / 1024);
  else
    snprintf(out, cap, "%.0f B", b);
}

/* ------------------------------------------------------------ measuring */

/* How to make this baton use an algorithm: knobs for baton-run's
 * environment, and the largest message (bytes) it will take it for. */
static const struct {
  const char *algo, *env;
  double max_bytes;
} forcing[] = {
    {"ring", "BATON_FLAT_BYTES=0", 1e18},
    {"flat", "BATON_FLAT_BYTES=16M", 16 << 20},
};

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int call(baton__coll_t coll, const float *in, float *out, size_t block, int n,
                baton_comm_t *comm) {
  switch (coll) {
  case BATON__COLL_ALLREDUCE:
    return baton_allreduce(in, out, block * (size_t)n, BATON_FLOAT32, BATON_SUM, comm);
  case BATON__COLL_REDUCE_SCATTER:
    return baton_reduce_scatter(in, out, block, BATON_FLOAT32, BATON_SUM, comm);
  case BATON__COLL_BROADCAST:
    return baton_broadcast(in, out, block * (size_t)n, BATON_FLOAT32, 0, comm);
  case BATON__COLL_ALLGATHER:
    return baton_allgather(in, out, block, BATON_FLOAT32, comm);
  default:
    return BATON_EINVAL;
  }
}

/* One rank of a measurement, under baton-run: rank 0 prints
 * "measured SECONDS", the slowest rank's average per call. */
static int child(const opts_t *o) {
  baton_comm_t *comm;
  int rc = baton_comm_init(&comm);
  if (rc)
    die("baton_comm_init: %s: %s", baton_err_name(rc), baton_last_init_error());
  baton__coll_t coll = baton__coll_find(o->coll);
  int n = baton_comm_size(comm);
  size_t block = (size_t)(o->bytes / sizeof(float) / n);
  float *in = calloc(block * (size_t)n + 1, sizeof *in),
        *out = calloc(block * (size_t)n + 1, sizeof *out);
  if (!in || !out)
    die("out of memory for %zu floats", 2 * block * (size_t)n);
  for (int i = 0; i < 2 && rc == 0; i++)
    rc = call(coll, in, out, block, n, comm);
  rc = rc ? rc : baton_barrier(comm);
  double t0 = now();
  for (int i = 0; i < o->iters && rc == 0; i++)
    rc = call(coll, in, out, block, n, comm);
  double t = (now() - t0) / o->iters, worst = t;
  rc = rc ? rc : baton_allreduce(&t, &worst, 1, BATON_FLOAT64, BATON_MAX, comm);
  if (rc)
    die("%s: %s: %s", o->coll, baton_err_name(rc), baton_comm_last_error(comm));
  if (baton_comm_rank(comm) == 0)
    printf("measured %.9g\n", worst);
  free(in);
  free(out);
  return baton_comm_destroy(comm) ? 1 : 0;
}

/* Shell-quotes s into out. */
static void quote(const char *s, char *out, size_t cap) {
  size_t o = 0;
  out[o++] = '\'';
  for (; *s && o + 5 < cap; s++) {
    if (*s == '\'') {
      memcpy(out + o, "'\\''", 4);
      o += 4;
    } else {
      out[o++] = *s;
    }
  }
  out[o++] = '\'';
  out[o] = '\0';
}

/* Seconds per call of `algo`, or -1 with why filled in. */
static double measure(const opts_t *o, const char *algo, char *why, size_t whylen) {
  const char *env = NULL;
  for (size_t i = 0; i < sizeof forcing / sizeof forcing[0]; i++)
    if (strcmp(forcing[i].algo, algo) == 0) {
      env = forcing[i].env;
      if (o->bytes > forcing[i].max_bytes) {
        snprintf(why, whylen, "larger than %s takes", algo);
        return -1;
      }
    }
  if (!env) {
    snprintf(why, whylen, "no knob selects %s", algo);
    return -1;
  }
  char self[PATH_MAX], run[PATH_MAX + 16], qself[2 * PATH_MAX], qrun[2 * PATH_MAX + 40];
  ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  if (len <= 0)
    die("cannot find this program (/proc/self/exe): %m");
  self[len] = '\0';
  snprintf(run, sizeof run, "%.*s/baton-run", (int)(strrchr(self, '/') - self), self);
  if (access(run, X_OK) != 0)
    strcpy(run, "baton-run");
  quote(self, qself, sizeof qself);
  quote(run, qrun, sizeof qrun);
  char cmd[3 * PATH_MAX + 256];
  if (snprintf(cmd, sizeof cmd, "env %s %s -n %d %s --child -c %s -s %.0f --iters %d", env, qrun,
               o->n, qself, o->coll, o->bytes, o->iters) >= (int)sizeof cmd)
    die("the path of this program is too long to run it under baton-run");
  FILE *p = popen(cmd, "r");
  double t = -1;
  char line[256];
  while (p && fgets(line, sizeof line, p))
    if (sscanf(line, "measured %lf", &t) != 1)
      t = -1;
  int st = p ? pclose(p) : -1;
  if (st != 0 || t < 0) {
    snprintf(why, whylen, "the run failed (status %d): %.160s", st, cmd);
    return -1;
  }
  return t;
}

/* --------------------------------------------------------------- report */

typedef struct {
  const baton__algo_t *algo;
  double predicted, measured;
  char why[256];
} row_t;

static int by_prediction(const void *a, const void *b) {
  double x = ((const row_t *)a)->predicted, y = ((const row_t *)b)->predicted;
  return (x > y) - (x < y);
}

static void report(const opts_t *o) {
  int nrows = 0, na;
  const baton__algo_t *algos = baton__algos(&na);
  row_t rows[64];
  baton__coll_t coll = baton__coll_find(o->coll);
  for (int i = 0; i < na && nrows < 64; i++) {
    if (!baton__model_formula(&algos[i], coll))
      continue;
    row_t *r = &rows[nrows++];
    r->algo = &algos[i];
    r->predicted = baton__model_time(&algos[i], coll, o->n, o->bytes, &o->cost);
    r->measured = -1;
    snprintf(r->why, sizeof r->why, "-");
  }
  if (!nrows)
    die("-c \"%s\": the model knows allreduce, reduce_scatter, allgather, broadcast, "
        "reduce, alltoall, gather and scatter",
        o->coll);
  qsort(rows, (size_t)nrows, sizeof *rows, by_prediction);
  char size[32];
  fmt_bytes(o->bytes, size, sizeof size);
  printf("# %s, N=%d, %s; alpha %.3g us, bandwidth %.4g GB/s, gamma %.3g ns/B, segment %.0f "
         "bytes\n",
         o->coll, o->n, size, o->cost.alpha * 1e6, 1e-9 / o->cost.beta, o->cost.gamma * 1e9,
         o->cost.segment);
  printf("# %s\n", baton__cost_legend);
  printf("%-10s %12s %12s  %s\n", "algorithm", "predicted", o->measure ? "measured" : "",
         "formula");
  for (int i = 0; i < nrows; i++) {
    row_t *r = &rows[i];
    char pt[32], mt[32] = "";
    fmt_time(r->predicted, pt, sizeof pt);
    if (o->measure && strcmp(r->why, "-") == 0)
      r->measured = measure(o, r->algo->name, r->why, sizeof r->why);
    if (o->measure)
      fmt_time(r->measured, mt, sizeof mt);
    printf("%-10s %12s %12s  %s", r->algo->name, pt, mt, baton__model_formula(r->algo, coll));
    if (o->measure && r->measured < 0)
      printf("  (measured: %s)", r->why);
    printf("\n");
  }
}

static void usage(FILE *f) {
  fprintf(f, "usage: baton-model -c COLL -n N -s SIZE [--alpha T] [--bw RATE] [--gamma G]\n"
             "                   [--segment BYTES] [--measure [--iters I]]\n"
             "  -c, --coll COLL   allreduce (default), reduce_scatter, allgather, broadcast,\n"
             "                    reduce, alltoall, gather, scatter\n"
             "  -n N              ranks\n"
             "  -s, --size SIZE   bytes of the larger buffer: 8, 64K, 64M, 1G\n"
             "      --alpha T     latency per message: 5us (default 1us)\n"
             "      --bw RATE     bandwidth per link: 12.5GB/s, 100Gb/s (default 10GB/s)\n"
             "      --gamma G     reduction cost: a rate (20GB/s) or time per byte (0.05ns);\n"
             "                    default 0\n"
             "      --segment B   pipeline segment of chain algorithms (default 256K)\n"
             "      --measure     also run each algorithm this baton has, under baton-run -n N\n"
             "      --iters I     calls timed per measurement (default 5)\n");
}

int main(int argc, char **argv) {
  static const struct option longopts[] = {{"coll", required_argument, NULL, 'c'},
                                           {"size", required_argument, NULL, 's'},
                                           {"alpha", required_argument, NULL, 'A'},
                                           {"bw", required_argument, NULL, 'B'},
                                           {"gamma", required_argument, NULL, 'G'},
                                           {"segment", required_argument, NULL, 'S'},
                                           {"measure", no_argument, NULL, 'M'},
                                           {"iters", required_argument, NULL, 'I'},
                                           {"child", no_argument, NULL, 'C'},
                                           {"help", no_argument, NULL, 'h'},
                                           {NULL, 0, NULL, 0}};
  opts_t o = {.coll = "allreduce",
              .iters = 5,
              .bytes = -1,
              .cost = {.alpha = 1e-6, .beta = 1e-10, .gamma = 0, .segment = 256 << 10}};
  int opt, is_child = 0;
  char *end;
  while ((opt = getopt_long(argc, argv, "c:n:s:h", longopts, NULL)) != -1) {
    switch (opt) {
    case 'c':
      o.coll = optarg;
      break;
    case 'n':
      o.n = (int)strtol(optarg, &end, 10);
      if (*end || end == optarg || o.n < 1 || o.n > 1 << 20)
        die("-n \"%s\": expected a number of ranks, 1..1048576", optarg);
      break;
    case 's':
      o.bytes = parse_unit(optarg, size_units, 1, "--size", "bytes like 64M");
      break;
    case 'A':
      o.cost.alpha = parse_unit(optarg, time_units, 1, "--alpha", "a time like 5us");
      break;
    case 'B': {
      double bw = parse_unit(optarg, rate_units, 1, "--bw", "a rate like 12.5GB/s");
      if (bw <= 0)
        die("--bw \"%s\": must be above 0", optarg);
      o.cost.beta = 1 / bw;
      break;
    }
    case 'G':
      o.cost.gamma = parse_gamma(optarg);
      break;
    case 'S':
      o.cost.segment = parse_unit(optarg, size_units, 1, "--segment", "bytes like 256K");
      break;
    case 'M':
      o.measure = 1;
      break;
    case 'I':
      o.iters = (int)strtol(optarg, &end, 10);
      if (*end || end == optarg || o.iters < 1 || o.iters > 100000)
        die("--iters \"%s\": expected 1..100000", optarg);
      break;
    case 'C':
      is_child = 1;
      break;
    case 'h':
      usage(stdout);
      return 0;
    default:
      usage(stderr);
      return 2;
    }
  }
  if (optind < argc)
    die("unexpected argument \"%s\"", argv[optind]);
  if (o.bytes < 0)
    die("say how large the message is, e.g. -s 64M");
  if (is_child)
    return child(&o);
  if (!o.n)
    die("say how many ranks, e.g. -n 16");
  if (o.measure && baton__coll_find(o.coll) == BATON__COLL_COUNT)
    die("--measure: this baton has no %s to run yet", o.coll);
  report(&o);
  return 0;
}
