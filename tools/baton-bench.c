/*
 * baton-bench - collective bandwidth and latency, in the columns of
 * nccl-tests:
 *
 *   baton-run -n 2 build/bin/baton-bench -c allreduce -b 8 -e 128M -f 4 \
 *       -w 5 -n 20
 *
 * bench/peers/ prints the same columns for Open MPI, MPICH and Gloo, with
 * the same flags and the same timing, and bench/compare.sh puts them side
 * by side. The benchmark itself, which they share (flags, data and their
 * check, timing, columns), is in tools/bench_common.h, with how it times;
 * this file holds what is baton's: the calls, the version, -a, --params.
 *
 * broadcast, reduce, alltoall, gather and scatter are compiled in when
 * include/baton.h declares them: the Makefile greps the header and defines
 * BENCH_HAVE_<name>. A build without one says so for -c <name>.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "baton.h"
#include "bench_common.h"

/* bench_common.h's dtypes and ops, as baton names them. */
static const baton_dtype_t baton_dtypes[DT_COUNT] = {
    [DT_INT8] = BATON_INT8,       [DT_UINT8] = BATON_UINT8,       [DT_INT32] = BATON_INT32,
    [DT_UINT32] = BATON_UINT32,   [DT_INT64] = BATON_INT64,       [DT_UINT64] = BATON_UINT64,
    [DT_FLOAT16] = BATON_FLOAT16, [DT_BFLOAT16] = BATON_BFLOAT16, [DT_FLOAT32] = BATON_FLOAT32,
    [DT_FLOAT64] = BATON_FLOAT64};
_Static_assert((int)DT_COUNT == (int)BATON_DTYPE_COUNT, "one row per baton_dtype_t");

static const baton_op_t baton_ops[OP_COUNT] = {[OP_SUM] = BATON_SUM,
                                               [OP_PROD] = BATON_PROD,
                                               [OP_MIN] = BATON_MIN,
                                               [OP_MAX] = BATON_MAX,
                                               [OP_AVG] = BATON_AVG};
_Static_assert((int)OP_COUNT == (int)BATON_OP_COUNT, "one row per baton_op_t");

/* Under baton-run every rank parses the arguments; only one should print
 * the help or the knob table. */
static int is_first_rank(void) {
  const char *r = getenv("BATON_RANK");
  return r == NULL || strcmp(r, "0") == 0;
}

static void usage(FILE *f) {
  fprintf(f, "usage: baton-run -n N baton-bench [options]\n"
             "  -c, --collective NAME   allreduce (default), reduce_scatter, "
             "allgather,\n"
             "                          broadcast, reduce, alltoall, gather, "
             "scatter,\n"
             "                          allgatherv, reduce_scatterv (even "
             "counts)\n" BENCH_USAGE_SIZES
             "  -d, --datatype DTYPE    int8 uint8 int32 uint32 int64 uint64 "
             "float16 bfloat16\n"
             "                          float32 (default) float64\n"
             "  -o, --op OP             sum (default) prod min max avg\n"
             "  -a, --algo ALGO         sets BATON_ALGO for this run (ring, "
             "naive, rhd, rd, tree,\n"
             "                          pairwise, or COLL:ALGO,...)\n" BENCH_USAGE_CHECK
             "      --params            print the table of BATON_* knobs and "
             "exit\n"
             "  -h, --help              this text\n"
             "Sizes are of the whole buffer, as in nccl-tests; time is the "
             "slowest rank's\n"
             "average per call; busbw = algbw * 2(n-1)/n (allreduce), "
             "(n-1)/n (reduce_scatter,\n"
             "allgather, alltoall, gather, scatter and the v-variants) or 1 "
             "(broadcast, reduce).\n");
}

static void check_rc(const bench_t *b, int rc, const char *what) {
  if (rc != BATON_OK)
    bench_die("%s failed: %s (%s): %s", what, baton_err_name(rc), baton_strerror(rc),
              baton_comm_last_error(b->comm));
}

/* The collectives of issue 4, each compiled in once baton.h has it. */
static const char *why_not(coll_t c) {
  static const char *const missing =
      "not supported by this build of baton (include/baton.h does not "
      "declare it)";
  (void)missing; /* when every one is there */
  switch (c) {
#ifndef BENCH_HAVE_broadcast
  case COLL_BROADCAST:
    return missing;
#endif
#ifndef BENCH_HAVE_reduce
  case COLL_REDUCE:
    return missing;
#endif
#ifndef BENCH_HAVE_alltoall
  case COLL_ALLTOALL:
    return missing;
#endif
#ifndef BENCH_HAVE_gather
  case COLL_GATHER:
    return missing;
#endif
#ifndef BENCH_HAVE_scatter
  case COLL_SCATTER:
    return missing;
#endif
#ifndef BENCH_HAVE_allgatherv
  case COLL_ALLGATHERV:
    return missing;
#endif
#ifndef BENCH_HAVE_reduce_scatterv
  case COLL_REDUCE_SCATTERV:
    return missing;
#endif
  default:
    return NULL;
  }
}

/* The v-variants' counts and displacements: every rank's count `part`,
 * the blocks one after the other. Set up once per size, outside the timed
 * loop's allocations. */
static const size_t *even_counts(const bench_t *b, const size_t **displs) {
  static size_t *counts, part = (size_t)-1;
  static int n;

  if (!counts || n != b->nranks) {
    free(counts);
    n = b->nranks;
    counts = calloc(2 * (size_t)n, sizeof *counts);
    if (!counts)
      bench_die("out of memory for %d counts", n);
    part = (size_t)-1;
  }
  if (part != b->part) {
    part = b->part;
    for (int r = 0; r < n; r++) {
      counts[r] = part;
      counts[n + r] = (size_t)r * part;
    }
  }
  *displs = counts + n;
  return counts;
}

/* The rooted collectives, alltoall and the v-variants. */
static int run_more(const bench_t *b, const layout_t *L, baton_dtype_t dt, baton_op_t op) {
  int root = b->o.root;

  (void)L, (void)dt, (void)op, (void)root;
  switch (b->o.coll) {
#ifdef BENCH_HAVE_broadcast
  case COLL_BROADCAST:
    return baton_broadcast(L->send, L->recv, b->total, dt, root, b->comm);
#endif
#ifdef BENCH_HAVE_reduce
  case COLL_REDUCE:
    return baton_reduce(L->send, L->recv, b->total, dt, op, root, b->comm);
#endif
#ifdef BENCH_HAVE_alltoall
  case COLL_ALLTOALL:
    return baton_alltoall(L->send, L->recv, b->part, dt, b->comm);
#endif
#ifdef BENCH_HAVE_gather
  case COLL_GATHER:
    return baton_gather(L->send, L->recv, b->part, dt, root, b->comm);
#endif
#ifdef BENCH_HAVE_scatter
  case COLL_SCATTER:
    return baton_scatter(L->send, L->recv, b->part, dt, root, b->comm);
#endif
#ifdef BENCH_HAVE_allgatherv
  case COLL_ALLGATHERV: {
    const size_t *displs, *counts = even_counts(b, &displs);
    return baton_allgatherv(L->send, b->part, L->recv, counts, displs, dt, b->comm);
  }
#endif
#ifdef BENCH_HAVE_reduce_scatterv
  case COLL_REDUCE_SCATTERV: {
    const size_t *displs, *counts = even_counts(b, &displs);
    return baton_reduce_scatterv(L->send, L->recv, counts, dt, op, b->comm);
  }
#endif
  default: { /* when every collective is compiled in, only a bad value */
    const char *why = why_not(b->o.coll);
    bench_die("-c %s: %s", (unsigned)b->o.coll < COLL_COUNT ? coll_names[b->o.coll] : "?",
              why ? why : "not a collective");
  }
  }
}

/* In place, baton finds the overlap of the buffers by itself. */
static void run_coll(const bench_t *b, const layout_t *L, int inplace) {
  baton_dtype_t dt = baton_dtypes[b->o.dtype];
  baton_op_t op = baton_ops[b->o.op];
  int rc;

  (void)inplace;
  switch (b->o.coll) {
  case COLL_ALLREDUCE:
    rc = baton_allreduce(L->send, L->recv, b->part, dt, op, b->comm);
    break;
  case COLL_REDUCE_SCATTER:
    rc = baton_reduce_scatter(L->send, L->recv, b->part, dt, op, b->comm);
    break;
  case COLL_ALLGATHER:
    rc = baton_allgather(L->send, L->recv, b->part, dt, b->comm);
    break;
  default:
    rc = run_more(b, L, dt, op);
    break;
  }
  check_rc(b, rc, coll_names[b->o.coll]);
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void barrier(const bench_t *b) { check_rc(b, baton_barrier(b->comm), "barrier"); }

/* The MAX over ranks of x[0 .. n), and the SUM over ranks of n. */
static void max_over_ranks(const bench_t *b, double *x, int n) {
  check_rc(b, baton_allreduce(x, x, (size_t)n, BATON_FLOAT64, BATON_MAX, b->comm),
           "allreduce of the times");
}

static long long sum_over_ranks(const bench_t *b, long long n) {
  int64_t mine = n, sum;
  check_rc(b, baton_allreduce(&mine, &sum, 1, BATON_INT64, BATON_SUM, b->comm),
           "allreduce of #wrong");
  return (long long)sum;
}

/* -a sets BATON_ALGO for this process, before baton_comm_init() reads
 * it; a library that has no such knob would silently ignore it, so that
 * is an error. */
static void set_algo(const char *algo) {
  if (strstr(baton_params_describe(), "BATON_ALGO ") == NULL)
    bench_die("-a %s: this build of baton does not read BATON_ALGO "
              "(baton-bench --params lists what it reads)",
              algo);
  if (setenv("BATON_ALGO", algo, 1) != 0)
    bench_die("-a %s: setenv failed", algo);
}

static const struct option baton_longopts[] = {{"params", no_argument, NULL, 'P'},
                                               {NULL, 0, NULL, 0}};

static const bench_prog_t baton_bench = {
    .name = "baton-bench",
    .run = run_coll,
    .barrier = barrier,
    .now = now,
    .max_over_ranks = max_over_ranks,
    .sum_over_ranks = sum_over_ranks,
    .longopts = baton_longopts,
    .why_not = why_not,
    .algo_help = "an algorithm name for BATON_ALGO",
    .bad_dtype = "expected int8, uint8, int32, uint32, int64, uint64, "
                 "float16, bfloat16, float32 or float64",
    .bad_op = "expected sum, prod, min, max or avg",
    .lib = "baton",
};

int main(int argc, char **argv) {
  bench_t b;
  baton_comm_t *comm;
  char library[64];
  long long wrong;
  int rc;

  bench_prog = &baton_bench;
  memset(&b, 0, sizeof b);
  switch (bench_parse_args(argc, argv, &b.o)) {
  case BENCH_ARGS_HELP:
    if (is_first_rank())
      usage(stdout);
    exit(0);
  case BENCH_ARGS_BAD:
    if (is_first_rank())
      usage(stderr);
    exit(2);
  default:
    break;
  }
  if (b.o.params) {
    if (is_first_rank())
      fputs(baton_params_describe(), stdout);
    return 0;
  }
  if (b.o.algo)
    set_algo(b.o.algo);
  if ((rc = baton_comm_init(&comm)) != BATON_OK)
    bench_die("baton_comm_init: %s: %s", baton_err_name(rc), baton_last_init_error());
  b.comm = comm;
  b.rank = bench_rank = baton_comm_rank(comm);
  b.nranks = baton_comm_size(comm);
  snprintf(library, sizeof library, "baton %d.%d.%d", BATON_VERSION_MAJOR, BATON_VERSION_MINOR,
           BATON_VERSION_PATCH);

  wrong = bench_run(&b, argc, argv, library);
  rc = baton_comm_destroy(comm);
  if (rc != BATON_OK)
    bench_die("baton_comm_destroy: %s", baton_err_name(rc));
  return wrong ? 1 : 0;
}
