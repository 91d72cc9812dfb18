/*
 * baton-model - what the alpha-beta-gamma model predicts for each
 * algorithm, and with --measure what the real collective takes.
 *
 *   baton-model -c allreduce -n 16 -s 64M --alpha 5us --bw 12.5GB/s [--gamma 20GB/s]
 *   baton-model -c allreduce -n 4 -s 16M --alpha 2us --bw 8GB/s --measure
 *
 *   baton-model --list-algorithms [--markdown]
 *
 * The algorithms are the rows of the library's table (src/algo.c) and the
 * formulas their costs (src/model.c), the ones its algorithm choice uses.
 * --measure starts `baton-run -n N` (the baton-run next to this program,
 * else the one on PATH) once for each algorithm of the table that serves
 * the collective, forced with BATON_ALGO=coll:name, and prints the slowest
 * rank's average time per call beside the prediction; an algorithm that
 * cannot run there says why, from its traits, and one that gave way to
 * another (BATON_ALGO yields where it cannot serve a call) says so.
 * --list-algorithms prints the table: each algorithm's summary, the
 * collectives it serves and its formula for each (--markdown: the table
 * of docs/algorithms.md, which tests/test_readme.sh checks). Sizes are of
 * the larger buffer, as baton-bench counts them (model.h).
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
#include "comm.h"
#include "model.h"
#include "algo.h"

typedef struct {
  const char *coll;
  int n, measure, iters;
  int registered; /* --child --registered: buffers from baton_mem_alloc (direct) */
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

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The count argument of the call for `block` floats per rank: what
 * coll.c hands the selection. */
static size_t count_of(baton__coll_t coll, size_t block, int n) {
  return coll == BATON__COLL_ALLREDUCE || coll == BATON__COLL_BROADCAST ||
                 coll == BATON__COLL_REDUCE
             ? block * (size_t)n
             : block;
}

/* Whether call() can run coll: the collectives with one count. */
static int runnable(baton__coll_t coll) {
  return coll == BATON__COLL_ALLREDUCE || coll == BATON__COLL_REDUCE_SCATTER ||
         coll == BATON__COLL_ALLGATHER || coll == BATON__COLL_BROADCAST ||
         coll == BATON__COLL_REDUCE || coll == BATON__COLL_ALLTOALL || coll == BATON__COLL_GATHER ||
         coll == BATON__COLL_SCATTER;
}

static int call(baton__coll_t coll, const float *in, float *out, size_t block, int n,
                baton_comm_t *comm) {
  size_t count = count_of(coll, block, n);
  switch (coll) {
  case BATON__COLL_ALLREDUCE:
    return baton_allreduce(in, out, count, BATON_FLOAT32, BATON_SUM, comm);
  case BATON__COLL_REDUCE_SCATTER:
    return baton_reduce_scatter(in, out, count, BATON_FLOAT32, BATON_SUM, comm);
  case BATON__COLL_BROADCAST:
    return baton_broadcast(in, out, count, BATON_FLOAT32, 0, comm);
  case BATON__COLL_ALLGATHER:
    return baton_allgather(in, out, count, BATON_FLOAT32, comm);
  case BATON__COLL_REDUCE:
    return baton_reduce(in, out, count, BATON_FLOAT32, BATON_SUM, 0, comm);
  case BATON__COLL_ALLTOALL:
    return baton_alltoall(in, out, count, BATON_FLOAT32, comm);
  case BATON__COLL_GATHER:
    return baton_gather(in, out, count, BATON_FLOAT32, 0, comm);
  case BATON__COLL_SCATTER:
    return baton_scatter(in, out, count, BATON_FLOAT32, 0, comm);
  default:
    return BATON_EINVAL;
  }
}

/* One rank of a measurement, under baton-run: rank 0 prints "algo NAME",
 * the algorithm the library picks for the call (BATON_ALGO's, unless it
 * could not serve it), and "measured SECONDS", the slowest rank's average
 * per call. */
static int child(const opts_t *o) {
  baton_comm_t *comm;
  int rc = baton_comm_init(&comm);
  if (rc)
    die("baton_comm_init: %s: %s", baton_err_name(rc), baton_last_init_error());
  baton__coll_t coll = baton__coll_find(o->coll);
  int n = baton_comm_size(comm);
  size_t block = (size_t)(o->bytes / sizeof(float) / n), bytes = (block * (size_t)n + 1) * 4;
  float *in = NULL, *out = NULL;
  if (o->registered) { /* direct: registered on every rank */
    if ((rc = baton_mem_alloc(comm, bytes, (void **)&in)) != 0 ||
        (rc = baton_mem_alloc(comm, bytes, (void **)&out)) != 0)
      die("baton_mem_alloc: %s: %s", baton_err_name(rc), baton_comm_last_error(comm));
  } else {
    in = calloc(bytes, 1), out = calloc(bytes, 1);
  }
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
    printf("algo %s\nmeasured %.9g\n",
           baton__select(comm, coll, count_of(coll, block, n), sizeof(float))->name, worst);
  if (!o->registered) /* registered memory goes with the communicator */
    free(in), free(out);
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

/* The largest BATON_FLAT_BYTES takes (param.c's range), and its default. */
#define FLAT_BYTES_MAX (16 << 20)
#define FLAT_MAILBOX (64 << 10)

/* Why `algo` cannot run `coll` here (baton-run -n N on this host, the
 * transport the environment asks for), from its traits; NULL when it can.
 * The bytes a rank puts in its mailbox under BATON__ALGO_MAILBOX go to
 * *mailbox. */
static const char *cannot_run(const opts_t *o, const baton__algo_t *algo, baton__coll_t coll,
                              double *mailbox, char *why, size_t whylen) {
  const char *transport = getenv("BATON_TRANSPORT");
  *mailbox = coll == BATON__COLL_ALLGATHER ? o->bytes / o->n : o->bytes;
  if (!runnable(coll))
    snprintf(why, whylen, "baton-model runs only the collectives with one count");
  else if (algo->traits & BATON__ALGO_HOST_LEADERS)
    snprintf(why, whylen,
             "%s folds each host into a leader: it needs several hosts, and baton-run -n %d "
             "puts every rank on this one",
             algo->name, o->n);
  else if ((algo->traits & BATON__ALGO_MAILBOX) && transport && strcmp(transport, "tcp") == 0)
    snprintf(why, whylen, "%s meets in shared-memory mailboxes, and BATON_TRANSPORT=tcp",
             algo->name);
  else if ((algo->traits & BATON__ALGO_REGISTERED) && transport && strcmp(transport, "tcp") == 0)
    snprintf(why, whylen, "%s works on memory the host's ranks share, and BATON_TRANSPORT=tcp",
             algo->name);
  else if ((algo->traits & BATON__ALGO_MAILBOX) && coll != BATON__COLL_BROADCAST &&
           *mailbox > FLAT_BYTES_MAX)
    snprintf(why, whylen, "%s takes at most %d MiB per rank (BATON_FLAT_BYTES)", algo->name,
             FLAT_BYTES_MAX >> 20);
  else
    return NULL;
  return why;
}

/* Seconds per call of `algo`, forced with BATON_ALGO=coll:name, or -1 with
 * why filled in. */
static double measure(const opts_t *o, const baton__algo_t *algo, char *why, size_t whylen) {
  baton__coll_t coll = baton__coll_find(o->coll);
  double mailbox;
  if (cannot_run(o, algo, coll, &mailbox, why, whylen))
    return -1;
  char env[128];
  int len = snprintf(env, sizeof env, "BATON_ALGO=%s:%s", o->coll, algo->name);
  /* The mailbox as large as the message; a broadcast fans out past the
   * default one instead, as the prediction has it. */
  if ((algo->traits & BATON__ALGO_MAILBOX) && coll != BATON__COLL_BROADCAST)
    snprintf(env + len, sizeof env - (size_t)len, " BATON_FLAT_BYTES=%.0f",
             mailbox > 64 << 10 ? mailbox : 64 << 10);
  char self[PATH_MAX], run[PATH_MAX + 16], qself[2 * PATH_MAX], qrun[2 * PATH_MAX + 40];
  ssize_t self_len = readlink("/proc/self/exe", self, sizeof self - 1);
  if (self_len <= 0)
    die("cannot find this program (/proc/self/exe): %m");
  self[self_len] = '\0';
  snprintf(run, sizeof run, "%.*s/baton-run", (int)(strrchr(self, '/') - self), self);
  if (access(run, X_OK) != 0)
    strcpy(run, "baton-run");
  quote(self, qself, sizeof qself);
  quote(run, qrun, sizeof qrun);
  char cmd[3 * PATH_MAX + 256];
  if (snprintf(cmd, sizeof cmd, "env %s %s -n %d %s --child%s -c %s -s %.0f --iters %d", env, qrun,
               o->n, qself, algo->traits & BATON__ALGO_REGISTERED ? " --registered" : "", o->coll,
               o->bytes, o->iters) >= (int)sizeof cmd)
    die("the path of this program is too long to run it under baton-run");
  FILE *p = popen(cmd, "r");
  double t = -1;
  char line[256], ran[64] = "";
  while (p && fgets(line, sizeof line, p))
    if (sscanf(line, "algo %63s", ran) != 1 && sscanf(line, "measured %lf", &t) != 1)
      t = -1;
  int st = p ? pclose(p) : -1;
  if (st != 0 || t < 0) {
    snprintf(why, whylen, "the run failed (status %d): %.160s", st, cmd);
    return -1;
  }
  if (baton__algo_find(ran) != algo) {
    snprintf(why, whylen, "BATON_ALGO=%s:%s gave way to %s (BATON_DEBUG=INFO says why)", o->coll,
             algo->name, ran);
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
    baton__cost_t c = o->cost;
    if (algos[i].traits & BATON__ALGO_MAILBOX) /* flat's broadcast fans out past the mailbox */
      c.room = coll == BATON__COLL_BROADCAST ? FLAT_MAILBOX : 0;
    r->predicted = baton__model_time(&algos[i], coll, o->n, o->bytes, &c);
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
      r->measured = measure(o, r->algo, r->why, sizeof r->why);
    if (o->measure)
      fmt_time(r->measured, mt, sizeof mt);
    printf("%-10s %12s %12s  %s", r->algo->name, pt, mt, baton__model_formula(r->algo, coll));
    if (o->measure && r->measured < 0)
      printf("  (measured: %s)", r->why);
    printf("\n");
  }
  int others = 0;
  for (int i = 0; i < na; i++)
    if (!(algos[i].colls & (1u << coll))) {
      if (others++)
        printf(", %s", algos[i].name);
      else
        printf("# not for %s: %s", o->coll, algos[i].name);
    }
  if (others)
    printf(" (baton-model --list-algorithms)\n");
}

/* ------------------------------------------------------- the algorithms */

/* The formula of `algo` for the collective named `name`, or NULL. */
static const char *formula_of(const baton__algo_t *algo, const char *name) {
  baton__coll_t c = baton__coll_find(name);
  return c == BATON__COLL_COUNT ? NULL : baton__model_formula(algo, c);
}

/* The collectives of `algo`, each with its formula, separated by sep; a
 * v-variant (its collective's name and "v") is named with its collective,
 * "allgather(v)", where their formulas agree. */
static void print_formulas(const baton__algo_t *algo, const char *pre, const char *sep) {
  int first = 1;
  for (int c = 0; c < BATON__COLL_COUNT; c++) {
    const char *name = baton__coll_name((baton__coll_t)c), *f = baton__model_formula(algo, c);
    char variant[64], base[64];
    snprintf(variant, sizeof variant, "%sv", name);
    snprintf(base, sizeof base, "%.*s", (int)strlen(name) - 1, name);
    const char *vf = formula_of(algo, variant), *bf = formula_of(algo, base);
    if (!f || (bf && strcmp(bf, f) == 0))
      continue; /* not served, or a variant named with its collective */
    printf("%s%s%s%s: %s", first ? "" : sep, pre, name, vf && strcmp(vf, f) == 0 ? "(v)" : "", f);
    first = 0;
  }
}

static void list_algorithms(int markdown) {
  int na;
  const baton__algo_t *algos = baton__algos(&na);
  char colls[256];
  if (markdown) {
    printf("| name | what it is | collectives | cost |\n|---|---|---|---|\n");
    for (int i = 0; i < na; i++) {
      printf("| `%s` | %s | %s | ", algos[i].name, algos[i].summary,
             baton__algo_colls(&algos[i], colls, sizeof colls));
      print_formulas(&algos[i], "", "<br>");
      printf(" |\n");
    }
    printf("\n%s.\n", baton__cost_legend);
    return;
  }
  printf("# %s\n", baton__cost_legend);
  for (int i = 0; i < na; i++) {
    printf("%-10s %s\n", algos[i].name, algos[i].summary);
    print_formulas(&algos[i], "           ", "\n");
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
             "      --measure     also run each algorithm that serves COLL, under baton-run -n N\n"
             "                    with BATON_ALGO=COLL:NAME\n"
             "      --iters I     calls timed per measurement (default 5)\n"
             "      --list-algorithms [--markdown]\n"
             "                    the algorithms, the collectives each serves and its formulas\n");
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
                                           {"registered", no_argument, NULL, 'R'},
                                           {"list-algorithms", no_argument, NULL, 'L'},
                                           {"markdown", no_argument, NULL, 'D'},
                                           {"help", no_argument, NULL, 'h'},
                                           {NULL, 0, NULL, 0}};
  opts_t o = {.coll = "allreduce",
              .iters = 5,
              .bytes = -1,
              .cost = {.alpha = 1e-6, .beta = 1e-10, .gamma = 0, .segment = 256 << 10}};
  int opt, is_child = 0, list = 0, markdown = 0;
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
    case 'R':
      o.registered = 1;
      break;
    case 'L':
      list = 1;
      break;
    case 'D':
      markdown = 1;
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
  if (markdown && !list)
    die("--markdown goes with --list-algorithms");
  if (list) {
    list_algorithms(markdown);
    return 0;
  }
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
