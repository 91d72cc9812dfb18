/*
 * bench_common.h - the benchmark that tools/baton-bench.c (baton) and the
 * peers in bench/peers/ (mpi_bench.c for Open MPI and MPICH, gloo_bench.c
 * for Gloo) all run, so that their outputs compare line by line: the
 * flags, the data and their check, the timing and the columns of
 * nccl-tests. Header-only and static, so that the MPI peer builds with
 * mpicc alone; it needs neither baton.h nor mpi.h. What differs between
 * the programs (the library calls, the collectives and flags each has, a
 * few messages) comes in one bench_prog_t.
 *
 * Timing, per size and per group (out-of-place, then in-place): a barrier,
 * `warmup` untimed calls, a barrier, then `iters` calls, each between two
 * clock reads. Each rank's average per call is reduced with MAX over the
 * ranks, and that is the time printed, as in nccl-tests. The per-call
 * times are reduced with MAX over the ranks too, call by call, and p50 and
 * p99 are taken over those: the spread a caller of one collective sees.
 * The buffers for the largest size are allocated once and every page is
 * touched before anything is timed: a first-touch page fault costs more
 * than a small collective.
 *
 * allgatherv, reduce_scatterv and alltoallv run with every rank's count
 * equal (the blocks one after the other), so they compare with their plain
 * forms and show what the counts cost; they count like them below.
 *
 * sendrecv is a ping-pong, as OSU's latency test: rank 2k sends the buffer
 * to rank 2k + 1, which receives it and sends it back (so both end with
 * rank 2k's input); the time printed is half the round trip, one message's
 * time, and busbw = algbw. It needs an even number of ranks.
 *
 * Sizes are those of nccl-tests: the bytes of the whole buffer, so for
 * reduce_scatter, allgather, alltoall, gather and scatter it is nranks *
 * (per-rank count) * elsize, rounded down to a multiple of nranks
 * elements. algbw = size / time, in GB/s of 1e9 bytes; busbw = algbw *
 * 2(n-1)/n for allreduce, * (n-1)/n for reduce_scatter, allgather,
 * alltoall, gather and scatter and * 1 for broadcast and reduce: the rate
 * each rank's link would need, comparable across rank counts.
 *
 * --json prints the same figures as one JSON document (times in us), for
 * bench/compare.sh; a sweep that runs for more than two seconds reports
 * its progress on stderr.
 *
 * --check refills the input and poisons the output before every timed call
 * and compares the output (and, out of place, the untouched input) with a
 * reference afterwards; both happen outside the timed region, but the times
 * then include the wait for the slowest rank's verification and are not
 * the figures to quote. The data are small integers, so any reduction
 * order gives bitwise the same result in every dtype, the average included.
 */
#ifndef BENCH_COMMON_H
#define BENCH_COMMON_H

#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------- tables */

/* Every collective -c can name; a program says which of them it has
 * (bench_prog_t.why_not). */
typedef enum {
  COLL_ALLREDUCE,
  COLL_REDUCE_SCATTER,
  COLL_ALLGATHER,
  COLL_BROADCAST,
  COLL_REDUCE,
  COLL_ALLTOALL,
  COLL_GATHER,
  COLL_SCATTER,
  COLL_ALLGATHERV,
  COLL_REDUCE_SCATTERV,
  COLL_SENDRECV, /* ping-pong between ranks 2k and 2k + 1: not a collective */
  COLL_ALLTOALLV,
  COLL_COUNT
} coll_t;

static const char *const coll_names[COLL_COUNT] = {
    "allreduce", "reduce_scatter", "allgather",  "broadcast",       "reduce",   "alltoall",
    "gather",    "scatter",        "allgatherv", "reduce_scatterv", "sendrecv", "alltoallv"};

/* Collectives whose buffer is split into one part per rank: the size is
 * of the whole buffer, nranks parts. */
static int coll_has_parts(coll_t c) {
  return c == COLL_REDUCE_SCATTER || c == COLL_ALLGATHER || c == COLL_ALLTOALL ||
         c == COLL_GATHER || c == COLL_SCATTER || c == COLL_ALLGATHERV ||
         c == COLL_REDUCE_SCATTERV || c == COLL_ALLTOALLV;
}

static int coll_has_op(coll_t c) {
  return c == COLL_ALLREDUCE || c == COLL_REDUCE_SCATTER || c == COLL_REDUCE ||
         c == COLL_REDUCE_SCATTERV;
}

static int coll_has_root(coll_t c) {
  return c == COLL_BROADCAST || c == COLL_REDUCE || c == COLL_GATHER || c == COLL_SCATTER;
}

typedef enum { KIND_SINT, KIND_UINT, KIND_FLOAT, KIND_BOOL } kind_t;

/* baton's dtypes, in the order of baton_dtype_t and with the names of
 * baton_dtype_name(); MPI lacks the two 16-bit floats (and its C bool has
 * only the logical reductions, which baton_dtype_t's bool spells SUM and
 * PROD). */
typedef enum {
  DT_INT8,
  DT_UINT8,
  DT_INT32,
  DT_UINT32,
  DT_INT64,
  DT_UINT64,
  DT_FLOAT16,
  DT_BFLOAT16,
  DT_FLOAT32,
  DT_FLOAT64,
  DT_INT16,
  DT_UINT16,
  DT_BOOL,
  DT_COUNT
} dtype_t;

typedef struct {
  const char *name;
  size_t size;
  kind_t kind;
} dtype_info_t;

static const dtype_info_t dtypes[DT_COUNT] = {
    {"int8", 1, KIND_SINT},     {"uint8", 1, KIND_UINT},     {"int32", 4, KIND_SINT},
    {"uint32", 4, KIND_UINT},   {"int64", 8, KIND_SINT},     {"uint64", 8, KIND_UINT},
    {"float16", 2, KIND_FLOAT}, {"bfloat16", 2, KIND_FLOAT}, {"float32", 4, KIND_FLOAT},
    {"float64", 8, KIND_FLOAT}, {"int16", 2, KIND_SINT},     {"uint16", 2, KIND_UINT},
    {"bool", 1, KIND_BOOL}};

/* baton's reductions, in the order of baton_op_t; MPI lacks the average,
 * Gloo the bitwise ops. */
typedef enum { OP_SUM, OP_PROD, OP_MIN, OP_MAX, OP_AVG, OP_BAND, OP_BOR, OP_BXOR, OP_COUNT } op_t;

static const char *const op_names[OP_COUNT] = {"sum", "prod", "min", "max",
                                               "avg", "band", "bor", "bxor"};

/* ------------------------------------------------------------- types */

typedef struct {
  coll_t coll;
  size_t min_bytes, max_bytes;
  size_t factor; /* > 1: multiply; 0: add step */
  size_t step;
  int warmup, iters;
  dtype_t dtype;
  op_t op;
  int root;         /* -r: of broadcast, reduce, gather and scatter */
  const char *algo; /* -a: the program says what it means; NULL: none */
  int inplace_only;
  int check;
  int json;   /* --json: one JSON document on stdout instead of the table */
  int params; /* --params, baton-bench only */
} opts_t;

typedef struct {
  opts_t o;
  void *comm; /* the program's communicator, if it has one */
  int rank, nranks;
  size_t elsize;
  char *sendbuf, *recvbuf; /* max_bytes each, touched before timing */
  char *pattern, *expect;  /* --check only: this size's input and output */
  double *iter_s;          /* iters: per-call seconds, then their MAX */
  long long reported;      /* mismatches printed so far */
  char note[256];          /* a line the program adds to the header, or "" */
  /* this size */
  size_t total; /* elements of the whole buffer */
  size_t part;  /* per-rank elements when coll_has_parts(), total
                   otherwise */
} bench_t;

/* Where one group's input and output live. In place they overlap. */
typedef struct {
  char *send;
  size_t send_count;
  char *recv;
  size_t recv_count;
} layout_t;

/* What differs between the two programs. */
typedef struct {
  const char *name;          /* "baton-bench": starts every message */
  void (*abort)(int status); /* stops the other ranks too; NULL: no need */

  /* The library's calls. In place, the buffers overlap as layout() says. */
  void (*run)(const bench_t *b, const layout_t *L, int inplace);
  void (*barrier)(const bench_t *b);
  double (*now)(void); /* seconds */
  /* x[i] = MAX over ranks of x[i], for i < n. */
  void (*max_over_ranks)(const bench_t *b, double *x, int n);
  long long (*sum_over_ranks)(const bench_t *b, long long n);
  /* In-place reduce_scatter leaves the result at the start of the buffer
   * (MPI_IN_PLACE) rather than at this rank's chunk (baton.h). */
  int reduce_scatter_at_start;
  /* Broadcast takes one buffer (MPI_Bcast): no out-of-place group. */
  int bcast_one_buffer;
  /* The library works in place only (Gloo's algorithms). */
  int inplace_only;
  /* NULL when this program can run c, else why not, for the -c error. */
  const char *(*why_not)(coll_t c);
  /* What -a selects, for the error when -a is given to a program that
   * has nothing to select; NULL: -a is refused. */
  const char *algo_help;

  /* Flags beyond the shared ones (see bench_parse_args()). */
  const char *shortopts;
  const struct option *longopts;           /* ended by a NULL name */
  void (*own_opt)(int c, const char *arg); /* those of longopts */
  const char *bad_dtype;
  const char *bad_op;
  const char *lib;           /* "MPI" in "-d float16: MPI has no such ..." */
  int (*has_dtype)(dtype_t); /* NULL: all of them */
  int (*has_op)(op_t);
  /* The send and receive buffers, faulted in; NULL: posix_memalign and
   * free. baton-bench --registered takes them from baton_mem_alloc. */
  char *(*alloc)(const bench_t *b, size_t bytes);
  void (*release)(const bench_t *b, char *p);
} bench_prog_t;

/* The program running and its rank, for the messages; main() sets the
 * first before anything else and the second as soon as it is known. */
static const bench_prog_t *bench_prog;
static int bench_rank = -1;

static void bench_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void bench_die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "%s [%d]: ", bench_prog->name, bench_rank);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  if (bench_prog->abort)
    bench_prog->abort(2);
  exit(2);
}

/* ------------------------------------------------------------ options */

/* "128M" -> 134217728. K, M and G are powers of 1024; a trailing "B" or
 * "iB" is accepted. */
static int parse_size(const char *s, size_t *out) {
  char *end;
  unsigned long long v = strtoull(s, &end, 10);
  unsigned long long mult = 1;
  if (end == s || *s == '-')
    return -1;
  switch (*end) {
  case 'k':
  case 'K':
    mult = 1ull << 10;
    end++;
    break;
  case 'm':
  case 'M':
    mult = 1ull << 20;
    end++;
    break;
  case 'g':
  case 'G':
    mult = 1ull << 30;
    end++;
    break;
  default:
    break;
  }
  if (mult > 1 && *end == 'i')
    end++;
  if (*end == 'B' || *end == 'b')
    end++;
  if (*end != '\0' || (v != 0 && v * mult / v != mult))
    return -1;
  *out = (size_t)(v * mult);
  return 0;
}

static int parse_int(const char *s, int lo, int hi, int *out) {
  char *end;
  long v = strtol(s, &end, 10);
  if (end == s || *end != '\0' || v < lo || v > hi)
    return -1;
  *out = (int)v;
  return 0;
}

static int lookup(const char *s, const char *const *names, int n) {
  for (int i = 0; i < n; i++)
    if (strcmp(s, names[i]) == 0)
      return i;
  return -1;
}

/* The help text of the shared flags, for the programs' usage(). */
#define BENCH_USAGE_SIZES                                                                          \
  "  -b, --minbytes SIZE     smallest size, bytes with K/M/G "                                     \
  "suffixes (default 8)\n"                                                                         \
  "  -e, --maxbytes SIZE     largest size (default 128M)\n"                                        \
  "  -f, --stepfactor F      multiply the size by F (default 2)\n"                                 \
  "  -i, --stepbytes STEP    add STEP bytes instead\n"                                             \
  "  -w, --warmup_iters W    untimed calls per size and group "                                    \
  "(default 5)\n"                                                                                  \
  "  -n, --iters N           timed calls per size and group "                                      \
  "(default 20)\n"                                                                                 \
  "  -r, --root R            root of broadcast, reduce, gather, scatter "                          \
  "(default 0)\n"
#define BENCH_USAGE_CHECK                                                                          \
  "  -z, --inplace           in-place group only\n"                                                \
  "      --check             verify every timed call; count "                                      \
  "mismatches in #wrong\n"                                                                         \
  "      --json              one JSON document on stdout instead of the "                          \
  "table\n"

/* What bench_parse_args() found: go on, or print the usage and exit. */
enum { BENCH_ARGS_OK, BENCH_ARGS_HELP, BENCH_ARGS_BAD };

/* One flag that takes a value (all but -z, --check, --params, -h). */
static void parse_value(int c, const char *arg, opts_t *o) {
  const bench_prog_t *p = bench_prog;
  int v, factor;

  switch (c) {
  case 'c':
    if (strcmp(arg, "bcast") == 0)
      arg = "broadcast";
    if ((v = lookup(arg, coll_names, COLL_COUNT)) < 0)
      bench_die("-c %s: expected allreduce, reduce_scatter, allgather, "
                "broadcast, reduce, alltoall, gather, scatter, allgatherv, reduce_scatterv, "
                "alltoallv or sendrecv",
                arg);
    if (p->why_not && p->why_not((coll_t)v))
      bench_die("-c %s: %s", arg, p->why_not((coll_t)v));
    o->coll = (coll_t)v;
    break;
  case 'b':
    if (parse_size(arg, &o->min_bytes) != 0)
      bench_die("-b %s: expected a size such as 8, 64K, 128M", arg);
    break;
  case 'e':
    if (parse_size(arg, &o->max_bytes) != 0)
      bench_die("-e %s: expected a size such as 8, 64K, 128M", arg);
    break;
  case 'f':
    if (parse_int(arg, 2, 1 << 20, &factor) != 0)
      bench_die("-f %s: expected an integer factor >= 2", arg);
    o->factor = (size_t)factor;
    break;
  case 'i':
    if (parse_size(arg, &o->step) != 0 || o->step == 0)
      bench_die("-i %s: expected a step of at least 1 byte", arg);
    o->factor = 0;
    break;
  case 'w':
    if (parse_int(arg, 0, 1 << 30, &o->warmup) != 0)
      bench_die("-w %s: expected an integer >= 0", arg);
    break;
  case 'n':
    if (parse_int(arg, 1, 1 << 30, &o->iters) != 0)
      bench_die("-n %s: expected an integer >= 1", arg);
    break;
  case 'd': {
    const char *names[DT_COUNT];
    for (int i = 0; i < DT_COUNT; i++)
      names[i] = dtypes[i].name;
    if ((v = lookup(arg, names, DT_COUNT)) < 0)
      bench_die("-d %s: %s", arg, p->bad_dtype);
    if (p->has_dtype && !p->has_dtype((dtype_t)v))
      bench_die("-d %s: %s has no such datatype", arg, p->lib);
    o->dtype = (dtype_t)v;
    break;
  }
  case 'o':
    if ((v = lookup(arg, op_names, OP_COUNT)) < 0)
      bench_die("-o %s: %s", arg, p->bad_op);
    if (p->has_op && !p->has_op((op_t)v))
      bench_die("-o %s: %s has no such reduction", arg, p->lib);
    o->op = (op_t)v;
    break;
  case 'r':
    if (parse_int(arg, 0, 1 << 30, &o->root) != 0)
      bench_die("-r %s: expected a rank", arg);
    break;
  case 'a':
    if (!p->algo_help)
      bench_die("-a %s: %s has no algorithm to choose here", arg, p->lib);
    if (*arg == '\0')
      bench_die("-a: expected %s", p->algo_help);
    o->algo = arg;
    break;
  default:
    if (p->own_opt)
      p->own_opt(c, arg);
    break;
  }
}

/* The flags both programs take, and those of bench_prog's shortopts and
 * longopts; dies on a bad value. */
static int bench_parse_args(int argc, char **argv, opts_t *o) {
  static const struct option shared[] = {{"collective", required_argument, NULL, 'c'},
                                         {"minbytes", required_argument, NULL, 'b'},
                                         {"maxbytes", required_argument, NULL, 'e'},
                                         {"stepfactor", required_argument, NULL, 'f'},
                                         {"stepbytes", required_argument, NULL, 'i'},
                                         {"warmup_iters", required_argument, NULL, 'w'},
                                         {"iters", required_argument, NULL, 'n'},
                                         {"datatype", required_argument, NULL, 'd'},
                                         {"op", required_argument, NULL, 'o'},
                                         {"root", required_argument, NULL, 'r'},
                                         {"algo", required_argument, NULL, 'a'},
                                         {"inplace", no_argument, NULL, 'z'},
                                         {"check", no_argument, NULL, 'C'},
                                         {"json", no_argument, NULL, 'J'},
                                         {"help", no_argument, NULL, 'h'}};
  enum { NSHARED = sizeof shared / sizeof shared[0], NMORE = 8 };
  struct option longopts[NSHARED + NMORE + 1];
  char shortopts[64];
  int c, n = NSHARED;

  memcpy(longopts, shared, sizeof shared);
  for (const struct option *x = bench_prog->longopts; x && x->name && n < NSHARED + NMORE; x++)
    longopts[n++] = *x;
  longopts[n] = (struct option){NULL, 0, NULL, 0};
  snprintf(shortopts, sizeof shortopts, "c:b:e:f:i:w:n:d:o:r:a:zh%s",
           bench_prog->shortopts ? bench_prog->shortopts : "");

  *o = (opts_t){.coll = COLL_ALLREDUCE,
                .min_bytes = 8,
                .max_bytes = 128u << 20,
                .factor = 2,
                .warmup = 5,
                .iters = 20,
                .dtype = DT_FLOAT32,
                .op = OP_SUM};
  while ((c = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
    switch (c) {
    case 'z':
      o->inplace_only = 1;
      break;
    case 'C':
      o->check = 1;
      break;
    case 'J':
      o->json = 1;
      break;
    case 'P':
      o->params = 1;
      break;
    case 'h':
      return BENCH_ARGS_HELP;
    case '?':
      return BENCH_ARGS_BAD;
    default:
      parse_value(c, optarg, o);
      break;
    }
  }
  if (optind < argc)
    bench_die("unexpected argument '%s'", argv[optind]);
  if (o->min_bytes > o->max_bytes)
    bench_die("-b %zu is larger than -e %zu", o->min_bytes, o->max_bytes);
  if (bench_prog->inplace_only || (o->coll == COLL_BROADCAST && bench_prog->bcast_one_buffer))
    o->inplace_only = 1; /* no out-of-place group */
  return BENCH_ARGS_OK;
}

/* --------------------------------------------------------------- data */

/* binary16 and bfloat16 with round-to-nearest-even, kept here rather than
 * borrowed from the library so that the check is independent of it. */
static uint16_t float_to_half(float f) {
  uint32_t x, abs, sign, h, rem;
  memcpy(&x, &f, sizeof x);
  sign = (x >> 16) & 0x8000;
  abs = x & 0x7fffffff;
  if (abs > 0x7f800000)
    return (uint16_t)(sign | 0x7e00); /* NaN */
  if (abs >= 0x477ff000)
    return (uint16_t)(sign | 0x7c00); /* rounds to infinity */
  if (abs < 0x38800000) {             /* subnormal: units of 2^-24 */
    float a;
    memcpy(&a, &abs, sizeof a);
    return (uint16_t)(sign | (uint32_t)lrintf(a * 16777216.0f));
  }
  h = ((abs >> 23) - 112) << 10 | (abs & 0x7fffff) >> 13;
  rem = abs & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (h & 1)))
    h++;
  return (uint16_t)(sign | h);
}

static float half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f;
  uint32_t m = h & 0x3ff, x;
  float f;
  if (e == 0) {
    f = ldexpf((float)m, -24);
    return sign ? -f : f;
  }
  x = sign | (e == 31 ? 0x7f800000 : (e + 112) << 23) | m << 13;
  memcpy(&f, &x, sizeof f);
  return f;
}

static uint16_t float_to_bf16(float f) {
  uint32_t x;
  memcpy(&x, &f, sizeof x);
  if ((x & 0x7fffffff) > 0x7f800000)
    return (uint16_t)(x >> 16 | 0x40);
  x += 0x7fff + ((x >> 16) & 1);
  return (uint16_t)(x >> 16);
}

static float bf16_to_float(uint16_t h) {
  uint32_t x = (uint32_t)h << 16;
  float f;
  memcpy(&f, &x, sizeof f);
  return f;
}

/* The value rank r contributes to element i of a reduction over n ranks.
 * Small integers, so every dtype holds them and every partial result
 * (bfloat16 up to about 40 ranks), whatever the order of the reduction.
 * For the additive ops the two rank-dependent terms cancel, so the sum is
 * n * base and the average is exact too. */
static int64_t reduce_input(op_t op, kind_t kind, int r, int n, size_t i) {
  int first = (int)(i % (size_t)n), second = (int)((i + 1) % (size_t)n);
  int64_t base, k;

  if (op == OP_PROD) {
    if (r == first)
      return (kind != KIND_UINT && (i / (size_t)n) % 2) ? -2 : 2;
    return r == second ? 3 : 1;
  }
  base = kind == KIND_UINT ? (int64_t)(i % 7) + 3 : (int64_t)(i % 7) - 3;
  k = 1 + (int64_t)((i / (size_t)n) % 3);
  if (r == first)
    return base + k;
  if (r == second)
    return base - k;
  return base;
}

/* v as the dtype would hold it: integers wrap. */
static int64_t wrap(dtype_t dt, int64_t v) {
  switch (dt) {
  case DT_INT8:
    return (int8_t)v;
  case DT_UINT8:
    return (uint8_t)v;
  case DT_INT32:
    return (int32_t)v;
  case DT_UINT32:
    return (uint32_t)v;
  case DT_INT16:
    return (int16_t)v;
  case DT_UINT16:
    return (uint16_t)v;
  default:
    return v;
  }
}

/* bool: any nonzero input is true; SUM and MAX are or, PROD and MIN and. */
static op_t bool_op(op_t op) {
  return op == OP_SUM || op == OP_MAX ? OP_BOR : op == OP_PROD || op == OP_MIN ? OP_BAND : op;
}

static int64_t reduce_expect(op_t op, dtype_t dt, int n, size_t i) {
  kind_t kind = dtypes[dt].kind;
  int64_t acc = reduce_input(op, kind, 0, n, i);
  int is_bool = kind == KIND_BOOL;

  if (is_bool)
    acc = acc != 0;
  for (int r = 1; r < n; r++) {
    int64_t v = reduce_input(op, kind, r, n, i);
    if (is_bool)
      v = v != 0;
    switch (is_bool ? bool_op(op) : op) {
    case OP_BAND:
      acc &= v;
      break;
    case OP_BOR:
      acc |= v;
      break;
    case OP_BXOR:
      acc ^= v;
      break;
    case OP_PROD:
      acc *= v;
      break;
    case OP_MIN:
      acc = v < acc ? v : acc;
      break;
    case OP_MAX:
      acc = v > acc ? v : acc;
      break;
    default:
      acc += v;
      break;
    }
  }
  if (op == OP_AVG)
    acc = wrap(dt, acc) / n; /* floats: exact, see reduce_input() */
  return acc;
}

/* What rank q contributes at element idx of an allgather or broadcast. */
static int64_t gather_input(kind_t kind, int q, size_t idx) {
  int64_t v = (int64_t)((idx * 3 + (size_t)q * 5) % 97);
  return kind == KIND_UINT ? v : v - 48;
}

static void put_elem(void *buf, size_t i, dtype_t dt, int64_t v) {
  switch (dt) {
  case DT_INT8:
    ((int8_t *)buf)[i] = (int8_t)v;
    break;
  case DT_UINT8:
    ((uint8_t *)buf)[i] = (uint8_t)v;
    break;
  case DT_INT32:
    ((int32_t *)buf)[i] = (int32_t)v;
    break;
  case DT_UINT32:
    ((uint32_t *)buf)[i] = (uint32_t)v;
    break;
  case DT_INT64:
    ((int64_t *)buf)[i] = v;
    break;
  case DT_UINT64:
    ((uint64_t *)buf)[i] = (uint64_t)v;
    break;
  case DT_FLOAT16:
    ((uint16_t *)buf)[i] = float_to_half((float)v);
    break;
  case DT_BFLOAT16:
    ((uint16_t *)buf)[i] = float_to_bf16((float)v);
    break;
  case DT_FLOAT32:
    ((float *)buf)[i] = (float)v;
    break;
  case DT_FLOAT64:
    ((double *)buf)[i] = (double)v;
    break;
  case DT_INT16:
    ((int16_t *)buf)[i] = (int16_t)v;
    break;
  case DT_UINT16:
    ((uint16_t *)buf)[i] = (uint16_t)v;
    break;
  case DT_BOOL: /* the raw byte: inputs other than 0 and 1 count as true */
    ((uint8_t *)buf)[i] = (uint8_t)v;
    break;
  default:
    break;
  }
}

static double get_elem(const void *buf, size_t i, dtype_t dt) {
  switch (dt) {
  case DT_INT8:
    return ((const int8_t *)buf)[i];
  case DT_UINT8:
    return ((const uint8_t *)buf)[i];
  case DT_INT32:
    return ((const int32_t *)buf)[i];
  case DT_UINT32:
    return ((const uint32_t *)buf)[i];
  case DT_INT64:
    return (double)((const int64_t *)buf)[i];
  case DT_UINT64:
    return (double)((const uint64_t *)buf)[i];
  case DT_FLOAT16:
    return half_to_float(((const uint16_t *)buf)[i]);
  case DT_BFLOAT16:
    return bf16_to_float(((const uint16_t *)buf)[i]);
  case DT_FLOAT32:
    return ((const float *)buf)[i];
  case DT_FLOAT64:
    return ((const double *)buf)[i];
  case DT_INT16:
    return ((const int16_t *)buf)[i];
  case DT_UINT16:
    return ((const uint16_t *)buf)[i];
  case DT_BOOL:
    return ((const uint8_t *)buf)[i];
  default:
    return 0;
  }
}

/* ---------------------------------------------------------- the bench */

/* Where each collective's input and output are, out of place and in place.
 * The in-place forms are those of baton.h and of MPI_IN_PLACE: the rank's
 * own part of a parted buffer is where the result would put it, and the
 * root of reduce, gather and scatter alone has a result or an input. */
static layout_t layout(const bench_t *b, int inplace) {
  size_t me = (size_t)b->rank * b->part * b->elsize;
  int is_root = b->rank == b->o.root;
  layout_t L = {b->sendbuf, b->total, b->recvbuf, b->total};

  if (inplace)
    L.send = b->recvbuf;
  switch (b->o.coll) {
  case COLL_REDUCE_SCATTER:
  case COLL_REDUCE_SCATTERV:
    L.recv_count = b->part;
    if (inplace && !bench_prog->reduce_scatter_at_start)
      L.recv = b->recvbuf + me;
    break;
  case COLL_ALLGATHER:
  case COLL_ALLGATHERV:
  case COLL_GATHER:
    L.send_count = b->part;
    if (inplace)
      L.send = b->recvbuf + me;
    if (b->o.coll == COLL_GATHER && !is_root)
      L.recv_count = 0;
    break;
  case COLL_BROADCAST:
    L.send_count = is_root ? b->total : 0;
    break;
  case COLL_REDUCE:
    L.recv_count = is_root ? b->total : 0;
    break;
  case COLL_SCATTER:
    L.send_count = is_root ? b->total : 0;
    L.recv_count = b->part;
    if (inplace)
      L.recv = b->recvbuf + me;
    break;
  default:
    break; /* allreduce, alltoall: whole buffers */
  }
  return L;
}

/* Writes this rank's input for this size into dst (layout send_count).
 * Rank q's part i of a gathered or scattered buffer holds
 * gather_input(q, i); in alltoall, part j of rank q's input goes to rank
 * j. */
static void fill_input(const bench_t *b, char *dst) {
  dtype_t dt = b->o.dtype;
  kind_t kind = dtypes[dt].kind;
  size_t i, base = (size_t)b->rank * b->part;

  switch (b->o.coll) {
  case COLL_ALLGATHER:
  case COLL_ALLGATHERV:
  case COLL_GATHER:
    for (i = 0; i < b->part; i++)
      put_elem(dst, i, dt, gather_input(kind, b->rank, base + i));
    break;
  case COLL_BROADCAST:
  case COLL_SCATTER:
    if (b->rank == b->o.root)
      for (i = 0; i < b->total; i++)
        put_elem(dst, i, dt, gather_input(kind, b->o.root, i));
    break;
  case COLL_ALLTOALL:
  case COLL_ALLTOALLV:
  case COLL_SENDRECV:
    for (i = 0; i < b->total; i++)
      put_elem(dst, i, dt, gather_input(kind, b->rank, i));
    break;
  default: /* the reductions */
    for (i = 0; i < b->total; i++)
      put_elem(dst, i, dt, reduce_input(b->o.op, kind, b->rank, b->nranks, i));
    break;
  }
}

/* Writes what this rank should receive for this size (layout recv_count). */
static void fill_expect(const bench_t *b, char *dst) {
  dtype_t dt = b->o.dtype;
  kind_t kind = dtypes[dt].kind;
  size_t i, base = (size_t)b->rank * b->part;

  switch (b->o.coll) {
  case COLL_ALLREDUCE:
  case COLL_REDUCE:
    for (i = 0; i < layout(b, 0).recv_count; i++)
      put_elem(dst, i, dt, reduce_expect(b->o.op, dt, b->nranks, i));
    break;
  case COLL_REDUCE_SCATTER:
  case COLL_REDUCE_SCATTERV:
    for (i = 0; i < b->part; i++)
      put_elem(dst, i, dt, reduce_expect(b->o.op, dt, b->nranks, base + i));
    break;
  case COLL_ALLGATHER:
  case COLL_ALLGATHERV:
  case COLL_GATHER:
    for (i = 0; i < layout(b, 0).recv_count; i++)
      put_elem(dst, i, dt, gather_input(kind, (int)(i / b->part), i));
    break;
  case COLL_BROADCAST:
    for (i = 0; i < b->total; i++)
      put_elem(dst, i, dt, gather_input(kind, b->o.root, i));
    break;
  case COLL_SCATTER:
    for (i = 0; i < b->part; i++)
      put_elem(dst, i, dt, gather_input(kind, b->o.root, base + i));
    break;
  case COLL_SENDRECV: /* the even rank's input, there and back */
    for (i = 0; i < b->total; i++)
      put_elem(dst, i, dt, gather_input(kind, b->rank & ~1, i));
    break;
  case COLL_ALLTOALL:
  case COLL_ALLTOALLV:
    for (i = 0; i < b->total; i++)
      put_elem(dst, i, dt, gather_input(kind, (int)(i / b->part), base + i % b->part));
    break;
  default:
    break;
  }
}

/* Elements of got that differ from want; prints the first few of the
 * run. */
static long long count_wrong(bench_t *b, const char *what, const char *got, const char *want,
                             size_t n) {
  long long wrong = 0;
  size_t es = b->elsize;

  if (memcmp(got, want, n * es) == 0)
    return 0;
  for (size_t i = 0; i < n; i++) {
    if (memcmp(got + i * es, want + i * es, es) == 0)
      continue;
    wrong++;
    if (b->reported++ < 5)
      fprintf(stderr, "%s [%d]: %s %s count %zu: element %zu is %g, expected %g\n",
              bench_prog->name, b->rank, coll_names[b->o.coll], what, b->total, i,
              get_elem(got, i, b->o.dtype), get_elem(want, i, b->o.dtype));
  }
  return wrong;
}

/* The figures of one group (out-of-place or in-place) at one size. */
typedef struct {
  double sec;      /* MAX over ranks of each rank's average per call */
  double p50, p99; /* of the per-call times, each the MAX over ranks */
  long long wrong; /* summed over ranks and calls; --check only */
} group_t;

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Nearest-rank percentile of sorted[0 .. n). */
static double percentile(const double *sorted, int n, double q) {
  int k = (int)ceil(q * n) - 1;
  return sorted[k < 0 ? 0 : k >= n ? n - 1 : k];
}

/* One group at this size. Every call is timed on its own (a clock read
 * costs tens of nanoseconds); the per-call times and each rank's average
 * are reduced with MAX over the ranks in one call, so call i's time is the
 * slowest rank's, and p50/p99 are taken over those. */
static group_t time_group(bench_t *b, int inplace) {
  const bench_prog_t *p = bench_prog;
  layout_t L = layout(b, inplace);
  size_t es = b->elsize;
  int iters = b->o.iters;
  double t, t1, sum = 0;
  long long mine = 0;
  group_t g;

  fill_input(b, L.send);
  p->barrier(b);
  for (int w = 0; w < b->o.warmup; w++)
    p->run(b, &L, inplace);
  p->barrier(b);
  t = p->now();
  for (int it = 0; it < iters; it++) {
    if (b->o.check) {
      memset(L.recv, 0xa5, L.recv_count * es);
      memcpy(L.send, b->pattern, L.send_count * es);
      p->barrier(b);
      t = p->now();
    }
    p->run(b, &L, inplace);
    t1 = p->now();
    b->iter_s[it] = t1 - t;
    sum += t1 - t;
    t = t1;
    if (b->o.check) {
      mine += count_wrong(b, "result", L.recv, b->expect, L.recv_count);
      if (!inplace)
        mine += count_wrong(b, "sendbuf", L.send, b->pattern, L.send_count);
    }
  }
  b->iter_s[iters] = sum / iters;
  p->max_over_ranks(b, b->iter_s, iters + 1);
  g.sec = b->iter_s[iters];
  qsort(b->iter_s, (size_t)iters, sizeof *b->iter_s, cmp_double);
  g.p50 = percentile(b->iter_s, iters, 0.50);
  g.p99 = percentile(b->iter_s, iters, 0.99);
  if (b->o.coll == COLL_SENDRECV) /* a call is a round trip: one message is half */
    g.sec /= 2, g.p50 /= 2, g.p99 /= 2;
  g.wrong = p->sum_over_ranks(b, mine);
  return g;
}

/* nccl-tests' bus bandwidth factors. */
static double bus_factor(coll_t coll, int n) {
  switch (coll) {
  case COLL_ALLREDUCE:
    return 2.0 * (n - 1) / n;
  case COLL_REDUCE_SCATTER:
  case COLL_ALLGATHER:
  case COLL_ALLTOALL:
  case COLL_GATHER:
  case COLL_SCATTER:
  case COLL_ALLGATHERV:
  case COLL_REDUCE_SCATTERV:
  case COLL_ALLTOALLV:
    return (double)(n - 1) / n;
  default:
    return 1.0; /* broadcast, reduce */
  }
}

/* nccl-tests' widths: fewer decimals as the time grows. */
static void format_time(char *buf, size_t cap, double us) {
  snprintf(buf, cap, us >= 10000 ? "%8.0f" : us >= 100 ? "%8.1f" : "%8.2f", us);
}

static const char *redop_name(const bench_t *b) {
  return coll_has_op(b->o.coll) ? op_names[b->o.op] : "none";
}

static int root_shown(const bench_t *b) { return coll_has_root(b->o.coll) ? b->o.root : -1; }

/* s as a JSON string. */
static void json_str(const char *s) {
  putchar('"');
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      printf("\\%c", c);
    else if (c < 0x20)
      printf("\\u%04x", c);
    else
      putchar(c);
  }
  putchar('"');
}

/* What the header names besides the options: where it ran and with what
 * in the environment, so that a saved output says how it was made. */
typedef struct {
  char host[256], cpu[256], env[1024];
} run_info_t;

static int is_launcher_var(const char *e) {
  static const char *const set_by_launcher[] = {
      "BATON_RANK=", "BATON_SIZE=", "BATON_ADDR=", "BATON_LOCAL_RANK=", "BATON_LOCAL_SIZE="};
  for (size_t i = 0; i < sizeof set_by_launcher / sizeof *set_by_launcher; i++)
    if (strncmp(e, set_by_launcher[i], strlen(set_by_launcher[i])) == 0)
      return 1;
  return 0;
}

static void run_info(run_info_t *ri) {
  char line[512];
  FILE *f;
  extern char **environ;

  snprintf(ri->host, sizeof ri->host, "?");
  snprintf(ri->cpu, sizeof ri->cpu, "?");
  gethostname(ri->host, sizeof ri->host - 1);
  if ((f = fopen("/proc/cpuinfo", "r")) != NULL) {
    while (fgets(line, sizeof line, f))
      if (strncmp(line, "model name", 10) == 0 && strchr(line, ':')) {
        snprintf(ri->cpu, sizeof ri->cpu, "%s", strchr(line, ':') + 2);
        ri->cpu[strcspn(ri->cpu, "\n")] = '\0';
        break;
      }
    fclose(f);
  }
  /* LD_PRELOAD (the peers run with tcmalloc) and the BATON_ knobs a run
   * was given, but not those the launchers set for every rank. */
  ri->env[0] = '\0';
  for (char **e = environ; *e; e++) {
    size_t used = strlen(ri->env);
    if (strncmp(*e, "LD_PRELOAD=", 11) != 0 &&
        (strncmp(*e, "BATON_", 6) != 0 || is_launcher_var(*e)))
      continue;
    snprintf(ri->env + used, sizeof ri->env - used, "%s%s", used ? " " : "", *e);
  }
}

/* The peers' note: which allocator they run with. A page fault costs
 * about 12 us on a small virtual machine and glibc returns every buffer
 * above 32 MiB with munmap, so an MPI that allocates scratch per call is
 * measured unfairly without tcmalloc; the output says which it was. */
__attribute__((unused)) static void bench_note_allocator(bench_t *b) {
  const char *pre = getenv("LD_PRELOAD");

  if (pre && strstr(pre, "tcmalloc"))
    snprintf(b->note, sizeof b->note, "allocator: tcmalloc (LD_PRELOAD=%s)", pre);
  else
    snprintf(b->note, sizeof b->note, "allocator: glibc malloc (no tcmalloc preloaded)");
}

static void print_header_json(const bench_t *b, int argc, char **argv, const char *library,
                              const run_info_t *ri) {
  printf("{\"command\": [");
  for (int i = 0; i < argc; i++) {
    printf(i ? ", " : "");
    json_str(argv[i]);
  }
  printf("],\n \"library\": ");
  json_str(library);
  printf(", \"note\": ");
  json_str(b->note);
  printf(",\n \"collective\": \"%s\", \"nranks\": %d, \"dtype\": \"%s\", "
         "\"op\": \"%s\", \"root\": %d, \"algo\": ",
         coll_names[b->o.coll], b->nranks, dtypes[b->o.dtype].name, redop_name(b), root_shown(b));
  json_str(b->o.algo ? b->o.algo : "");
  printf(",\n \"warmup\": %d, \"iters\": %d, \"check\": %d, \"host\": ", b->o.warmup, b->o.iters,
         b->o.check);
  json_str(ri->host);
  printf(", \"nproc\": %ld, \"cpu\": ", sysconf(_SC_NPROCESSORS_ONLN));
  json_str(ri->cpu);
  printf(", \"env\": ");
  json_str(ri->env);
  printf(",\n \"results\": [");
}

static void print_header(const bench_t *b, int argc, char **argv, const char *library) {
  static const char *const h1[] = {"time", "algbw", "busbw", "#wrong", "p50", "p99"};
  static const char *const h2[] = {"(us)", "(GB/s)", "(GB/s)", "", "(us)", "(us)"};
  run_info_t ri;

  run_info(&ri);
  if (b->o.json) {
    print_header_json(b, argc, argv, library, &ri);
    return;
  }
  printf("# command:");
  for (int i = 0; i < argc; i++)
    printf(" %s", argv[i]);
  printf("\n# library: %s\n", library);
  if (b->note[0])
    printf("# note: %s\n", b->note);
  printf("# collective %s  nranks %d  dtype %s  op %s  root %d  sizes "
         "%zu..%zu %s%zu  warmup %d  iters %d  check %d%s%s\n",
         coll_names[b->o.coll], b->nranks, dtypes[b->o.dtype].name, redop_name(b), root_shown(b),
         b->o.min_bytes, b->o.max_bytes, b->o.factor ? "x" : "+",
         b->o.factor ? b->o.factor : b->o.step, b->o.warmup, b->o.iters, b->o.check,
         b->o.algo ? "  algo " : "", b->o.algo ? b->o.algo : "");
  printf("# host %s  nproc %ld  cpu %s\n", ri.host, sysconf(_SC_NPROCESSORS_ONLN), ri.cpu);
  printf("# env: %s\n", ri.env[0] ? ri.env : "(no LD_PRELOAD, no BATON_*)");
  printf("# time: the slowest rank's average per call; p50/p99: of the "
         "per-call times, each the slowest rank's\n#\n");
  printf("#%49s", "");
  if (!b->o.inplace_only)
    printf("%56s", "out-of-place");
  printf("%56s\n", "in-place");
  for (int row = 0; row < 2; row++) {
    const char *const *h = row ? h2 : h1;
    printf("# %10s  %12s  %8s  %6s  %4s", row ? "(B)" : "size", row ? "(elements)" : "count",
           row ? "" : "type", row ? "" : "redop", row ? "" : "root");
    for (int grp = b->o.inplace_only; grp <= 1; grp++)
      printf("  %8s  %7s  %7s  %6s  %8s  %8s", h[0], h[1], h[2], h[3], h[4], h[5]);
    printf("\n");
  }
  fflush(stdout);
}

static void print_group(const bench_t *b, const group_t *g, double algbw, double busbw, int first) {
  char tbuf[32], p50[32], p99[32], wbuf[32];

  if (b->o.check)
    snprintf(wbuf, sizeof wbuf, "%lld", g->wrong);
  else
    snprintf(wbuf, sizeof wbuf, b->o.json ? "null" : "N/A");
  if (b->o.json) {
    printf("%s\"%s\": {\"time_us\": %.3f, \"algbw\": %.6g, \"busbw\": %.6g, "
           "\"wrong\": %s, \"p50_us\": %.3f, \"p99_us\": %.3f}",
           first ? "" : ", ", first && !b->o.inplace_only ? "out_of_place" : "in_place",
           g->sec * 1e6, algbw, busbw, wbuf, g->p50 * 1e6, g->p99 * 1e6);
    return;
  }
  format_time(tbuf, sizeof tbuf, g->sec * 1e6);
  format_time(p50, sizeof p50, g->p50 * 1e6);
  format_time(p99, sizeof p99, g->p99 * 1e6);
  printf("  %8s  %7.2f  %7.2f  %6s  %8s  %8s", tbuf, algbw, busbw, wbuf, p50, p99);
}

/* One line of output (one element of "results" with --json); returns the
 * sum of its busbw figures and counts them into *nbw, for the average at
 * the end. */
static double run_size(bench_t *b, long long *wrong_total, int *nbw, int first_size) {
  double bw_sum = 0, bytes = (double)(b->total * b->elsize);

  if (b->o.check) {
    fill_input(b, b->pattern);
    fill_expect(b, b->expect);
  }
  if (b->rank == 0 && b->o.json)
    printf("%s\n  {\"size\": %zu, \"count\": %zu, ", first_size ? "" : ",", b->total * b->elsize,
           b->total);
  else if (b->rank == 0)
    printf("%12zu  %12zu  %8s  %6s  %4d", b->total * b->elsize, b->total, dtypes[b->o.dtype].name,
           redop_name(b), root_shown(b));
  for (int inplace = b->o.inplace_only; inplace <= 1; inplace++) {
    group_t g = time_group(b, inplace);
    double algbw = g.sec > 0 ? bytes / g.sec / 1e9 : 0;
    double busbw = algbw * bus_factor(b->o.coll, b->nranks);

    *wrong_total += g.wrong;
    bw_sum += busbw;
    (*nbw)++;
    if (b->rank == 0)
      print_group(b, &g, algbw, busbw, inplace == b->o.inplace_only);
  }
  if (b->rank == 0) {
    printf(b->o.json ? "}" : "\n");
    fflush(stdout);
  }
  return bw_sum;
}

/* Per-rank elements and total elements for a requested size in bytes. */
static void set_size(bench_t *b, size_t bytes) {
  size_t count = bytes / b->elsize;

  if (coll_has_parts(b->o.coll)) {
    b->part = count / (size_t)b->nranks;
    b->total = b->part * (size_t)b->nranks;
  } else {
    b->part = b->total = count;
  }
}

/* The first calls of a run pay for connections, page faults in the
 * library's own buffers and cold caches; nccl-tests runs warm-up calls at
 * the largest and the smallest size before the first timed size, and so
 * does this. */
static void warm_up(bench_t *b) {
  size_t sizes[2] = {b->o.max_bytes, b->o.min_bytes};

  for (int k = 0; k < 2; k++) {
    set_size(b, sizes[k]);
    for (int inplace = b->o.inplace_only; inplace <= 1; inplace++) {
      layout_t L = layout(b, inplace);
      for (int w = 0; w < b->o.warmup; w++)
        bench_prog->run(b, &L, inplace);
    }
  }
  bench_prog->barrier(b);
}

static char *alloc_touched(size_t bytes) {
  void *p = NULL;

  if (posix_memalign(&p, 4096, bytes ? bytes : 1) != 0)
    bench_die("cannot allocate %zu bytes", bytes);
  memset(p, 0, bytes); /* fault every page in before timing */
  return p;
}

/* The size after s, or 0 when s was the last. */
static size_t next_size(const opts_t *o, size_t s) {
  if (o->factor) {
    if (s > o->max_bytes / o->factor)
      return 0;
    return s ? s * o->factor : 1;
  }
  if (o->step > o->max_bytes - s)
    return 0;
  return s + o->step;
}

/* The progress line on stderr, from rank 0, once a sweep has run for two
 * seconds: the size just done and a guess at the time left, which takes
 * each remaining size to cost the last one's time scaled by its bytes (but
 * never less). On a terminal the line rewrites itself; elsewhere a line
 * every ten seconds at most. */
static void progress(const bench_t *b, size_t s, double size_s, double t0, double *last_print) {
  double now = bench_prog->now(), left = 0;
  int tty = isatty(2);

  if (b->rank != 0 || now - t0 < 2.0 || now - *last_print < (tty ? 0.5 : 10))
    return;
  for (size_t r = next_size(&b->o, s); r; r = next_size(&b->o, r))
    left += size_s * (s && r > s ? (double)r / (double)s : 1.0);
  fprintf(stderr, "%s%s: %zu B done, %.0f s so far, about %.0f s left%s", tty ? "\r" : "",
          bench_prog->name, s, now - t0, left, tty ? "\033[K" : "\n");
  *last_print = now;
}

/* Everything between setting up the ranks (b->o, comm, rank and nranks
 * filled in) and tearing them down: the buffers, the header, the warm-up,
 * a line per size and the summary. Returns the mismatches over all ranks
 * and sizes. */
static long long bench_run(bench_t *b, int argc, char **argv, const char *library) {
  long long wrong = 0;
  double bw_sum = 0, t0, t_size, last_print = 0;
  int nbw = 0;
  size_t s, alloc;

  if (coll_has_root(b->o.coll) && b->o.root >= b->nranks)
    bench_die("-r %d: there are only %d ranks", b->o.root, b->nranks);
  if (b->o.coll == COLL_SENDRECV && b->nranks % 2)
    bench_die("-c sendrecv pairs rank 2k with 2k + 1: run an even number of ranks, not %d",
              b->nranks);
  b->elsize = dtypes[b->o.dtype].size;
  alloc = b->o.max_bytes / b->elsize * b->elsize;
  b->sendbuf = bench_prog->alloc ? bench_prog->alloc(b, alloc) : alloc_touched(alloc);
  b->recvbuf = bench_prog->alloc ? bench_prog->alloc(b, alloc) : alloc_touched(alloc);
  b->iter_s = calloc((size_t)b->o.iters + 1, sizeof *b->iter_s);
  if (!b->iter_s)
    bench_die("cannot allocate the per-call times of %d calls", b->o.iters);
  if (b->o.check) {
    b->pattern = alloc_touched(alloc);
    b->expect = alloc_touched(alloc);
  }
  if (b->rank == 0)
    print_header(b, argc, argv, library);
  warm_up(b);

  t0 = bench_prog->now();
  s = b->o.min_bytes;
  do {
    t_size = bench_prog->now();
    set_size(b, s);
    bw_sum += run_size(b, &wrong, &nbw, s == b->o.min_bytes);
    progress(b, s, bench_prog->now() - t_size, t0, &last_print);
  } while ((s = next_size(&b->o, s)) != 0);
  if (b->rank == 0 && last_print > 0 && isatty(2))
    fputc('\n', stderr);

  if (b->rank == 0 && b->o.json) {
    if (b->o.check)
      printf("\n ],\n \"wrong_total\": %lld", wrong);
    else
      printf("\n ],\n \"wrong_total\": null");
    printf(", \"avg_busbw\": %.4f}\n", nbw ? bw_sum / nbw : 0.0);
  } else if (b->rank == 0) {
    if (b->o.check)
      printf("# Wrong values total : %lld %s\n", wrong, wrong ? "FAILED" : "OK");
    printf("# Avg bus bandwidth    : %.3f\n#\n", nbw ? bw_sum / nbw : 0.0);
  }
  if (bench_prog->release) {
    bench_prog->release(b, b->sendbuf);
    bench_prog->release(b, b->recvbuf);
  } else {
    free(b->sendbuf);
    free(b->recvbuf);
  }
  free(b->iter_s);
  free(b->pattern);
  free(b->expect);
  return wrong;
}

#endif /* BENCH_COMMON_H */
