/*
 * baton-tune - measures the alpha, beta and gamma of this machine's links
 * and writes them where baton_comm_init reads them (BATON_TUNE_FILE, else
 * $XDG_CACHE_HOME/baton/tune, else ~/.cache/baton/tune).
 *
 *   baton-run -n 2 baton-tune                           shared memory: shm, pair
 *   BATON_TRANSPORT=tcp baton-run -n 2 baton-tune       TCP
 *   baton-run -n 4 baton-tune     (on 2 cores)          oversub and obeta
 *
 * alpha and beta come from the collectives themselves: allgather through
 * the ring (the shm line, or tcp) and through a non-ring algorithm (the
 * pair channels), at a small and a large size. What the selection
 * predicts for that algorithm (the model's formula and the executor's
 * rounds, baton__select_predict) is linear in alpha and beta, T = a*alpha +
 * b*beta, so the two times give both. Each time is the median of several batches of
 * calls, of the slowest rank. gamma is the reduction kernel (float32 sum)
 * on a buffer that stays in cache.
 *
 * With more ranks on a host than cores (p ranks per core), the small-size
 * time measures the oversubscribed latency: it is written as `oversub`
 * (what alpha grows by per rank per core beyond one), from the alpha
 * already in the file; a 32 MiB allreduce through the ring and through
 * rhd gives each kind of channel its `obeta`, its beta above the cache
 * with more ranks than cores; beta stays what a run with a rank per core
 * measured, and gamma is divided by p, as the library multiplies it by p.
 * Lines for links not measured in this run are kept.
 */
#include <errno.h>
#include <stdarg.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "baton.h"
#include "comm.h"
#include "model.h"
#include "select.h"

#define REPS 7

static baton_comm_t *comm;
static int rank, size;

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "baton-tune: rank %d: ", rank);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(2);
}

static void check(int rc, const char *what) {
  if (rc != BATON_OK)
    die("%s: %s: %s", what, baton_err_name(rc), baton_comm_last_error(comm));
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* One allgather of `count` floats per rank, or a float32 sum allreduce
 * of `count`. */
static void one_call(baton__coll_t coll, const float *in, float *out, size_t count) {
  check(coll == BATON__COLL_ALLGATHER
            ? baton_allgather(in, out, count, BATON_FLOAT32, comm)
            : baton_allreduce(in, out, count, BATON_FLOAT32, BATON_SUM, comm),
        baton__coll_name(coll));
}

/* Seconds per call of one_call: the median of REPS batches of `iters`
 * calls, each the slowest rank's average. */
static double time_calls(baton__coll_t coll, const float *in, float *out, size_t count, int iters) {
  double t[REPS];
  for (int w = 0; w < 3; w++)
    one_call(coll, in, out, count);
  for (int r = 0; r < REPS; r++) {
    check(baton_barrier(comm), "barrier");
    double t0 = baton__now();
    for (int i = 0; i < iters; i++)
      one_call(coll, in, out, count);
    t[r] = (baton__now() - t0) / iters;
    check(baton_allreduce(&t[r], &t[r], 1, BATON_FLOAT64, BATON_MAX, comm), "allreduce");
  }
  qsort(t, REPS, sizeof t[0], cmp_double);
  return t[REPS / 2];
}

/* What the selection predicts for `coll` of `bytes` through algo with
 * these costs, as they stand after the ranks per core (link_cost). */
static double predict(const baton__algo_t *algo, baton__coll_t coll, double bytes, double alpha,
                      double beta, double gamma) {
  baton__select_in_t in = {.size = size};
  in.ring = (baton__cost_t){
      .alpha = alpha, .beta = beta, .gamma = gamma, .segment = (double)comm->slot_bytes};
  in.pair = (baton__cost_t){
      .alpha = alpha, .beta = beta, .gamma = gamma, .segment = (double)comm->stream_slot_bytes};
  in.ring_piece = baton__select_piece(comm, 1);
  in.pair_piece = baton__select_piece(comm, 0);
  return baton__select_predict(&in, algo, coll, bytes);
}

/* What the selection predicts for allgather of `bytes` through algo with
 * alpha and beta set to these values (gamma 0, no oversubscription). */
static double coefficient(const baton__algo_t *algo, double bytes, double alpha, double beta) {
  return predict(algo, BATON__COLL_ALLGATHER, bytes, alpha, beta, 0);
}

/* alpha and beta of `algo` from allgather at two sizes. */
static void fit(const baton__algo_t *algo, double *alpha, double *beta, FILE *out) {
  size_t small = 1, large = (size_t)1 << 18; /* floats per rank: 4 B and 1 MiB */
  float *in = calloc(large, sizeof *in), *buf = calloc(large * (size_t)size, sizeof *buf);
  if (!in || !buf)
    die("out of memory");
  baton__select_force(comm, BATON__COLL_ALLGATHER, algo);
  double t0 = time_calls(BATON__COLL_ALLGATHER, in, buf, small, 300),
         t1 = time_calls(BATON__COLL_ALLGATHER, in, buf, large, 10);
  baton__select_force(comm, BATON__COLL_ALLGATHER, NULL);
  free(in);
  free(buf);
  double k0 = 4.0 * small * size, k1 = 4.0 * large * size;
  /* The coefficients of alpha and beta as the selection prices the
   * algorithm (with its pieces), so that it predicts these times back. */
  double a0 = coefficient(algo, k0, 1, 0), b0 = coefficient(algo, k0, 0, 1);
  double a1 = coefficient(algo, k1, 1, 0), b1 = coefficient(algo, k1, 0, 1);
  double det = a0 * b1 - a1 * b0;
  if (a0 <= 0 || det == 0)
    die("the model has no usable allgather formula for %s", algo->name);
  *alpha = (t0 * b1 - t1 * b0) / det;
  *beta = (a0 * t1 - a1 * t0) / det;
  if (*alpha <= 0) /* the small time is all latency */
    *alpha = t0 / a0;
  if (*beta <= 0)
    *beta = 1e-12;
  if (out)
    fprintf(out, "  allgather %-8s %9.0f B: %10.2f us   %9.0f B: %10.2f us\n", algo->name, k0,
            t0 * 1e6, k1, t1 * 1e6);
}

/* Oversubscribed: the beta (obeta) of `algo` from a float32 sum allreduce
 * of 32 MiB, far above any core's L2, where the channels' copies share the
 * memory bus. Each kind of channel pays its own there (N=4 on 2 cores,
 * 32-128 MiB: rhd 1.4-1.7x the ring's time, where their formulas move the
 * same bytes), so the reducing collective that decides between them
 * measures it, with alpha and gamma as already fitted. Not per rank per
 * core: the ring's came out 0.20 ns/B at N=3 and at N=4 on 2 cores. */
static double fit_obeta(const baton__algo_t *algo, double alpha, double gamma, FILE *out) {
  size_t count = (size_t)8 << 20;
  float *in = calloc(count, sizeof *in), *res = calloc(count, sizeof *res);
  if (!in || !res)
    die("out of memory");
  baton__select_force(comm, BATON__COLL_ALLREDUCE, algo);
  double got = time_calls(BATON__COLL_ALLREDUCE, in, res, count, 2);
  baton__select_force(comm, BATON__COLL_ALLREDUCE, NULL);
  free(in);
  free(res);
  double k = 4.0 * (double)count;
  double rest = predict(algo, BATON__COLL_ALLREDUCE, k, alpha, 0, gamma);
  double per_beta = predict(algo, BATON__COLL_ALLREDUCE, k, 0, 1, 0);
  if (out)
    fprintf(out, "  allreduce %-8s %9.0f B: %10.2f us\n", algo->name, k, got * 1e6);
  if (!(per_beta > 0) || got <= rest)
    return 0; /* no usable formula, or nothing left for the bytes: beta stands */
  return (got - rest) / per_beta;
}

/* Seconds per byte of the float32 sum kernel on 64 KiB that stay in cache. */
static double time_gamma(void) {
  size_t n = 16384;
  float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
  if (!a || !b)
    die("out of memory");
  for (size_t i = 0; i < n; i++)
    a[i] = 1, b[i] = (float)i;
  baton__reduce_fn sum = baton__reduce_get(BATON_FLOAT32, BATON_SUM);
  double t[REPS];
  for (int r = 0; r < REPS; r++) {
    double t0 = baton__now();
    for (int i = 0; i < 200; i++)
      sum(a, a, b, n);
    t[r] = (baton__now() - t0) / (200.0 * n * sizeof *a);
  }
  qsort(t, REPS, sizeof t[0], cmp_double);
  volatile float sink = a[n - 1];
  (void)sink;
  free(a);
  free(b);
  check(baton_allreduce(&t[REPS / 2], &t[REPS / 2], 1, BATON_FLOAT64, BATON_MAX, comm),
        "allreduce");
  return t[REPS / 2];
}

/* The first algorithm of the table that serves allgather off the ring's
 * channels: it runs on the pair channels. */
static const baton__algo_t *pair_algo(void) {
  int n;
  const baton__algo_t *all = baton__algos(&n);
  for (int i = 0; i < n; i++)
    if ((all[i].colls & (1u << BATON__COLL_ALLGATHER)) && !(all[i].traits & BATON__ALGO_RING_LINKS))
      return &all[i];
  return NULL;
}

static void mkdirs(const char *path) {
  char dir[512];
  snprintf(dir, sizeof dir, "%s", path);
  for (char *p = dir + 1; *p; p++)
    if (*p == '/') {
      *p = '\0';
      mkdir(dir, 0755);
      *p = '/';
    }
}

static void usage(FILE *f) {
  fputs("usage: baton-run -n N baton-tune [-o FILE] [--print]\n"
        "  measures alpha, beta (allgather at two sizes) and gamma (the reduction kernel)\n"
        "  of the links this communicator uses and writes them to the tune file\n"
        "  -o, --output FILE  where to write (default: BATON_TUNE_FILE, else\n"
        "                     $XDG_CACHE_HOME/baton/tune, else ~/.cache/baton/tune)\n"
        "  -p, --print        print the file's new text, write nothing\n"
        "  -h, --help         this text\n",
        f);
}

int main(int argc, char **argv) {
  static const struct option longopts[] = {{"output", required_argument, NULL, 'o'},
                                           {"print", no_argument, NULL, 'p'},
                                           {"help", no_argument, NULL, 'h'},
                                           {NULL, 0, NULL, 0}};
  const char *output = NULL;
  int print = 0, c;
  while ((c = getopt_long(argc, argv, "o:ph", longopts, NULL)) != -1) {
    if (c == 'o')
      output = optarg;
    else if (c == 'p')
      print = 1;
    else {
      usage(c == 'h' ? stdout : stderr);
      return c == 'h' ? 0 : 2;
    }
  }
  int rc = baton_comm_init(&comm);
  if (rc != BATON_OK) {
    fprintf(stderr, "baton-tune: baton_comm_init: %s: %s\n", baton_err_name(rc),
            baton_last_init_error());
    return 2;
  }
  rank = baton_comm_rank(comm);
  size = baton_comm_size(comm);
  if (size < 2)
    die("needs at least 2 ranks: baton-run -n 2 baton-tune");
  double per_core;
  const char *net = baton__select_net(comm, &per_core);
  int tcp = strcmp(net, "shm") != 0;
  FILE *log = rank == 0 ? stdout : NULL;
  if (log)
    fprintf(log, "baton-tune: %d ranks, links %s, %.2f ranks per core\n", size, net, per_core);

  /* Start from what the file says, so lines not measured here are kept. */
  char path[512], why[700];
  baton__tune_path(output ? output : comm->params.tune_file, path, sizeof path);
  baton__link_cost_t cost[BATON__LINK_COUNT];
  baton__link_defaults(cost);
  if (rank == 0 && baton__tune_read(path, cost, why, sizeof why) < 0)
    fprintf(stderr, "baton-tune: %s; starting from the built-in costs\n", why);

  baton__link_t links[2] = {tcp ? BATON__LINK_TCP : BATON__LINK_SHM, BATON__LINK_PAIR};
  const baton__algo_t *algos[2] = {baton__algo_default(), tcp ? NULL : pair_algo()};
  /* What decides between the channels above the cache: the ring against
   * recursive halving, both bandwidth-optimal. */
  const baton__algo_t *reducers[2] = {baton__algo_default(), tcp ? NULL : baton__algo_find("rhd")};
  double gamma = time_gamma();
  for (int i = 0; i < 2; i++) {
    if (!algos[i]) {
      if (log && !tcp)
        fprintf(log, "  pair: no algorithm besides the ring serves allgather in this build; "
                     "line kept\n");
      continue;
    }
    double alpha, beta;
    fit(algos[i], &alpha, &beta, log);
    baton__link_cost_t *l = &cost[links[i]];
    /* Oversubscribed, the latency measured is alpha + oversub * (p - 1),
     * and copies and reductions run p times slower (select.c, link_cost). */
    double p = per_core > 1.0 ? per_core : 1.0;
    if (p > 1.0) {
      double o = (alpha - l->alpha) / (p - 1.0);
      l->oversub = o > 0 ? o : 0;
      if (reducers[i])
        l->obeta = fit_obeta(reducers[i], alpha, gamma, log);
    } else {
      l->alpha = alpha;
      l->beta = beta;
    }
    l->gamma = gamma / p;
    if (log)
      fprintf(log,
              "  %-4s alpha %.3g us, beta %.3g ns/B (%.2f GB/s), gamma %.3g ns/B, "
              "oversub %.3g us, obeta %.3g ns/B\n",
              baton__link_names[links[i]], l->alpha * 1e6, l->beta * 1e9, 1e-9 / l->beta,
              l->gamma * 1e9, l->oversub * 1e6, l->obeta * 1e9);
  }
  if (rank == 0) {
    char comment[256], host[64] = "?";
    time_t now = time(NULL);
    struct tm tm;
    gethostname(host, sizeof host - 1);
    strftime(comment, sizeof comment, "baton-tune %Y-%m-%d %H:%M UTC", gmtime_r(&now, &tm));
    size_t off = strlen(comment);
    snprintf(comment + off, sizeof comment - off, " on %s: %d ranks, %s, %.2f ranks per core", host,
             size, net, per_core);
    if (print) {
      baton__tune_print(stdout, cost, comment);
    } else {
      mkdirs(path);
      if (baton__tune_write(path, cost, comment) != 0)
        die("cannot write %s: %s", path, strerror(errno));
      printf("baton-tune: wrote %s\n", path);
    }
  }
  check(baton_comm_destroy(comm), "baton_comm_destroy");
  return 0;
}
