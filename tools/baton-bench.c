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
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__x86_64__)
#include <immintrin.h>
#elif defined(__SSE2__)
#include <emmintrin.h>
#endif
#include <stdint.h>

#include "baton.h"
#include "bench_common.h"

/* bench_common.h's dtypes and ops, as baton names them. */
static const baton_dtype_t baton_dtypes[DT_COUNT] = {
    [DT_INT8] = BATON_INT8,       [DT_UINT8] = BATON_UINT8,       [DT_INT32] = BATON_INT32,
    [DT_UINT32] = BATON_UINT32,   [DT_INT64] = BATON_INT64,       [DT_UINT64] = BATON_UINT64,
    [DT_FLOAT16] = BATON_FLOAT16, [DT_BFLOAT16] = BATON_BFLOAT16, [DT_FLOAT32] = BATON_FLOAT32,
    [DT_FLOAT64] = BATON_FLOAT64, [DT_INT16] = BATON_INT16,       [DT_UINT16] = BATON_UINT16,
    [DT_BOOL] = BATON_BOOL};
_Static_assert((int)DT_COUNT == (int)BATON_DTYPE_COUNT, "one row per baton_dtype_t");

static const baton_op_t baton_ops[OP_COUNT] = {
    [OP_SUM] = BATON_SUM, [OP_PROD] = BATON_PROD, [OP_MIN] = BATON_MIN, [OP_MAX] = BATON_MAX,
    [OP_AVG] = BATON_AVG, [OP_BAND] = BATON_BAND, [OP_BOR] = BATON_BOR, [OP_BXOR] = BATON_BXOR};
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
             "                          allgatherv, reduce_scatterv, alltoallv (even "
             "counts),\n"
             "                          sendrecv (ping-pong of ranks 2k and 2k+1; "
             "time: one way)\n" BENCH_USAGE_SIZES
             "  -d, --datatype DTYPE    int8 uint8 int32 uint32 int64 uint64 "
             "float16 bfloat16\n"
             "                          float32 (default) float64 int16 uint16 bool\n"
             "  -o, --op OP             sum (default) prod min max avg band bor bxor\n"
             "  -a, --algo ALGO         sets BATON_ALGO for this run (ring, "
             "naive, rhd, rd, tree,\n"
             "                          pairwise, or COLL:ALGO,...)\n" BENCH_USAGE_CHECK
             "      --params            print the table of BATON_* knobs and "
             "exit\n"
             "      --overlap MS        each rank busy MS ms while an iallreduce of -b "
             "bytes is in\n"
             "                          flight: busy alone, allreduce alone, both\n"
             "      --busy cpu|sleep    how --overlap is busy: a fixed arithmetic loop "
             "(cpu) or\n"
             "                          away from the CPU (sleep, the default)\n"
             "      --registered        send and receive buffers from baton_mem_alloc "
             "(the direct\n"
             "                          algorithm on one host)\n"
             "      --membw             instead of the sweep: every rank copies -e bytes "
             "at once,\n"
             "                          the copy rate per rank for the memory-bound "
             "limit\n"
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
#ifndef BENCH_HAVE_send
  case COLL_SENDRECV:
    return missing;
#endif
#ifndef BENCH_HAVE_alltoallv
  case COLL_ALLTOALLV:
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
#ifdef BENCH_HAVE_alltoallv
  case COLL_ALLTOALLV: {
    const size_t *displs, *counts = even_counts(b, &displs);
    return baton_alltoallv(L->send, counts, displs, L->recv, counts, displs, dt, b->comm);
  }
#endif
#ifdef BENCH_HAVE_send
  case COLL_SENDRECV: { /* ping-pong: the odd rank sends back what it got */
    int peer = b->rank ^ 1, rc;
    if (b->rank % 2 == 0)
      return (rc = baton_send(L->send, b->total, dt, peer, 0, b->comm)) != 0
                 ? rc
                 : baton_recv(L->recv, b->total, dt, peer, 0, b->comm);
    return (rc = baton_recv(L->recv, b->total, dt, peer, 0, b->comm)) != 0
               ? rc
               : baton_send(L->recv, b->total, dt, peer, 0, b->comm);
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

/* ---- --overlap MS [--busy cpu|sleep]: what an i-call in flight gains.
 *
 * Per iteration, between barriers: the caller busy alone for MS ms; the
 * allreduce alone (blocking); the iallreduce issued, the caller busy, then
 * baton_wait. `sleep` is a caller busy away from the CPU (a disk, an
 * accelerator); `cpu` is a fixed arithmetic loop on its own buffer, sized
 * once to take MS ms on this rank alone, so that a slower overlapped run
 * shows what sharing the cores with the progress thread and the transfer
 * costs. Each figure is the slowest rank's average. */

static double overlap_ms = -1;
static int overlap_cpu;
static int registered, membw; /* --registered, --membw (below) */

static void own_opt(int c, const char *arg) {
  char *end;
  if (c == 'O') {
    overlap_ms = strtod(arg, &end);
    if (end == arg || *end || overlap_ms < 0 || overlap_ms > 1e6)
      bench_die("--overlap %s: expected milliseconds in [0, 1e6]", arg);
  } else if (c == 'R') {
    registered = 1;
  } else if (c == 'W') {
    membw = 1;
  } else if (c == 'B') {
    if (strcmp(arg, "cpu") && strcmp(arg, "sleep"))
      bench_die("--busy %s: expected cpu or sleep", arg);
    overlap_cpu = !strcmp(arg, "cpu");
  }
}

static double now(void);

/* The cpu kind of busy: `rounds` passes over a 256 KiB buffer of its own. */
static volatile double busy_sink;
static void busy_loop(long rounds) {
  static double w[1 << 15];
  double acc = 0;
  for (long r = 0; r < rounds; r++)
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++)
      acc += w[i] = w[i] * 0.999 + 1.0;
  busy_sink = acc;
}

static long cpu_rounds; /* passes that take overlap_ms on this rank alone */
static void busy(void) {
  if (!overlap_cpu) {
    struct timespec ts = {(time_t)(overlap_ms / 1e3), (long)(fmod(overlap_ms, 1e3) * 1e6)};
    nanosleep(&ts, NULL);
    return;
  }
  busy_loop(cpu_rounds);
}

static void calibrate(void) {
  double t0 = now();
  long n = 1;
  while (now() - t0 < 0.05)
    busy_loop(1), n++;
  cpu_rounds = (long)((double)n * overlap_ms / 1e3 / (now() - t0) + 0.5);
}

static void overlap_run(bench_t *b) {
  size_t count = b->o.min_bytes / sizeof(float);
  float *in = calloc(count + 1, sizeof *in), *out = calloc(count + 1, sizeof *out);
  if (!in || !out)
    bench_die("--overlap: out of memory for %zu bytes", b->o.min_bytes);
  if (overlap_cpu)
    calibrate();
  for (int i = 0; i < b->o.warmup; i++)
    check_rc(b, baton_allreduce(in, out, count, BATON_FLOAT32, BATON_SUM, b->comm), "warm-up");
  double t[3] = {0, 0, 0}; /* busy alone, allreduce alone, both */
  for (int it = 0; it < b->o.iters; it++) {
    barrier(b);
    double t0 = now();
    busy();
    t[0] += now() - t0;
    barrier(b);
    t0 = now();
    check_rc(b, baton_allreduce(in, out, count, BATON_FLOAT32, BATON_SUM, b->comm), "allreduce");
    t[1] += now() - t0;
    barrier(b);
    t0 = now();
    baton_request_t *req;
    check_rc(b, baton_iallreduce(in, out, count, BATON_FLOAT32, BATON_SUM, b->comm, &req),
             "iallreduce");
    busy();
    check_rc(b, baton_wait(req), "baton_wait");
    t[2] += now() - t0;
  }
  for (int k = 0; k < 3; k++)
    t[k] /= b->o.iters;
  max_over_ranks(b, t, 3);
  double longer = t[0] > t[1] ? t[0] : t[1];
  if (b->rank == 0)
    printf("# overlap: allreduce of %zu B float32 on %d ranks, busy %s %.3g ms, %d iterations\n"
           "%-24s %10.3f ms\n%-24s %10.3f ms\n%-24s %10.3f ms   %.3f x the longer, "
           "%.3f x the sum\n",
           count * sizeof(float), b->nranks, overlap_cpu ? "cpu" : "sleep", overlap_ms, b->o.iters,
           "busy alone", t[0] * 1e3, "allreduce alone", t[1] * 1e3, "iallreduce + busy", t[2] * 1e3,
           t[2] / longer, t[2] / (t[0] + t[1]));
  free(in);
  free(out);
}

static const struct option baton_longopts[] = {
    {"params", no_argument, NULL, 'P'},     {"overlap", required_argument, NULL, 'O'},
    {"busy", required_argument, NULL, 'B'}, {"registered", no_argument, NULL, 'R'},
    {"membw", no_argument, NULL, 'W'},      {NULL, 0, NULL, 0}};

/* ---- --registered: the buffers every rank of the host maps. */

static char *alloc_registered(const bench_t *b, size_t bytes) {
  void *p = NULL;
  check_rc(b, baton_mem_alloc(b->comm, bytes ? bytes : 1, &p), "baton_mem_alloc");
  return p;
}

static void release_registered(const bench_t *b, char *p) {
  check_rc(b, baton_mem_free(b->comm, p), "baton_mem_free");
}

/* ---- --membw: the copy rate of every rank copying at once.
 *
 * Each rank copies a buffer of -e bytes into another, both faulted in,
 * between barriers, -n times after -w warm-ups, two ways: memcpy, and a
 * loop of non-temporal stores (which skips reading the destination before
 * writing it, as the library does for large outputs). The rate is bytes
 * copied per second per rank (each byte read once and written once), from
 * the slowest rank's median, and the faster way counts. With as many ranks
 * as cores it is what the cores together get from memory: the bound that a
 * collective which must read and write its bytes cannot beat. */
#if defined(__x86_64__)
__attribute__((target("avx512f"))) static size_t copy_nt_512(char *dst, const char *src, size_t n) {
  size_t done = 0;
  for (; n - done >= 64; done += 64)
    _mm512_stream_si512((__m512i *)(dst + done), _mm512_loadu_si512((const void *)(src + done)));
  return done;
}
#endif

/* Non-temporal stores as the library makes them (exec_stream.c): whole
 * lines with AVX-512 where the CPU has it, else four SSE2 stores. */
static void copy_nt(char *dst, const char *src, size_t n) {
#if defined(__SSE2__)
  size_t head = ((uintptr_t) - (uintptr_t)dst) & 63;
  head = head < n ? head : n;
  memcpy(dst, src, head);
  dst += head, src += head, n -= head;
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx512f")) {
    size_t done = copy_nt_512(dst, src, n);
    dst += done, src += done, n -= done;
  }
#endif
  for (; n >= 64; n -= 64, dst += 64, src += 64) {
    __m128i a = _mm_loadu_si128((const __m128i *)src),
            b = _mm_loadu_si128((const __m128i *)(src + 16));
    __m128i c = _mm_loadu_si128((const __m128i *)(src + 32)),
            d = _mm_loadu_si128((const __m128i *)(src + 48));
    _mm_stream_si128((__m128i *)dst, a);
    _mm_stream_si128((__m128i *)(dst + 16), b);
    _mm_stream_si128((__m128i *)(dst + 32), c);
    _mm_stream_si128((__m128i *)(dst + 48), d);
  }
  _mm_sfence();
#endif
  memcpy(dst, src, n);
}

static double median_copy(bench_t *b, char *dst, char *src, size_t bytes, int nt, double *t,
                          int n) {
  for (int i = 0; i < b->o.warmup; i++)
    nt ? copy_nt(dst, src, bytes) : (void)memcpy(dst, src, bytes);
  for (int i = 0; i < n; i++) {
    barrier(b);
    double t0 = now();
    if (nt)
      copy_nt(dst, src, bytes);
    else
      memcpy(dst, src, bytes);
    t[i] = now() - t0;
    src[i % bytes] = (char)i; /* a copy the compiler must keep */
  }
  max_over_ranks(b, t, n);
  for (int i = 1; i < n; i++) /* insertion sort: the median */
    for (int j = i; j > 0 && t[j] < t[j - 1]; j--) {
      double x = t[j];
      t[j] = t[j - 1], t[j - 1] = x;
    }
  return t[n / 2];
}

static void membw_run(bench_t *b) {
  size_t bytes = b->o.max_bytes ? b->o.max_bytes : 1;
  char *src = alloc_touched(bytes), *dst = alloc_touched(bytes);
  int n = b->o.iters > 0 ? b->o.iters : 1;
  double *t = calloc((size_t)n, sizeof *t);
  if (!t)
    bench_die("--membw: out of memory");
  double plain = median_copy(b, dst, src, bytes, 0, t, n);
  double nt = median_copy(b, dst, src, bytes, 1, t, n);
  double best = plain < nt ? plain : nt;
  if (b->rank == 0)
    printf("# membw: %d ranks each copying %zu B at once (median of %d, slowest rank): memcpy "
           "%.3f ms, non-temporal %.3f ms; %.2f GB/s per rank\n",
           b->nranks, bytes, n, plain * 1e3, nt * 1e3, (double)bytes / best / 1e9);
  free(t);
  free(src);
  free(dst);
}

static const bench_prog_t baton_bench = {
    .name = "baton-bench",
    .run = run_coll,
    .barrier = barrier,
    .now = now,
    .max_over_ranks = max_over_ranks,
    .sum_over_ranks = sum_over_ranks,
    .longopts = baton_longopts,
    .own_opt = own_opt,
    .why_not = why_not,
    .algo_help = "an algorithm name for BATON_ALGO",
    .bad_dtype = "expected int8, uint8, int32, uint32, int64, uint64, "
                 "float16, bfloat16, float32, float64, int16, uint16 or bool",
    .bad_op = "expected sum, prod, min, max, avg, band, bor or bxor",
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

  wrong = 0;
  if (registered) {
    static bench_prog_t with_registered;
    with_registered = baton_bench;
    with_registered.alloc = alloc_registered;
    with_registered.release = release_registered;
    bench_prog = &with_registered;
  }
  if (membw)
    membw_run(&b);
  else if (overlap_ms >= 0)
    overlap_run(&b);
  else
    wrong = bench_run(&b, argc, argv, library);
  rc = baton_comm_destroy(comm);
  if (rc != BATON_OK)
    bench_die("baton_comm_destroy: %s", baton_err_name(rc));
  return wrong ? 1 : 0;
}
