/*
 * mpi_bench.c - the MPI peer of tools/baton-bench.c.
 *
 * Measures MPI_Allreduce, MPI_Reduce_scatter_block, MPI_Allgather and
 * MPI_Bcast with the flags, the timing method and the columns of
 * baton-bench, so that the two outputs compare line by line:
 *
 *   mpirun -n 2 build/bench/mpi_bench -c allreduce -b 8 -e 128M -f 4 -w 5 -n 20
 *
 * Built by `make -f bench/Makefile.peers`. The code deliberately mirrors
 * baton-bench.c (argument parsing, data, columns); keep the two in step.
 *
 * Timing, per size and per group (out-of-place, then in-place): a barrier,
 * `warmup` untimed calls, a barrier, then `iters` calls between two
 * MPI_Wtime() reads. Each rank's average per call is reduced with MAX over
 * the ranks, and that is the time printed, as in nccl-tests.
 *
 * Sizes are those of nccl-tests: the bytes of the whole buffer, so for
 * reduce_scatter and allgather it is nranks * (per-rank count) * elsize,
 * rounded down to a multiple of nranks elements. algbw = size / time;
 * busbw = algbw * 2(n-1)/n for allreduce, * (n-1)/n for reduce_scatter and
 * allgather, * 1 for broadcast.
 *
 * --check refills the input and poisons the output before every timed call
 * and compares the output with a reference afterwards; both happen outside
 * the timed region, but the times then include the wait for the slowest
 * rank's verification and are not the figures to quote. The data are small
 * integers, so any reduction order gives bitwise the same result.
 *
 * MPI has no float16, bfloat16 or average: those are refused. MPI_Bcast
 * has only one buffer, so broadcast prints the in-place group only.
 */
#include <mpi.h>

#include <getopt.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------- tables */

typedef enum {
  COLL_ALLREDUCE,
  COLL_REDUCE_SCATTER,
  COLL_ALLGATHER,
  COLL_BROADCAST,
  COLL_COUNT
} coll_t;

static const char *const coll_names[COLL_COUNT] = {
    "allreduce", "reduce_scatter", "allgather", "broadcast"};

typedef enum { KIND_SINT, KIND_UINT, KIND_FLOAT } kind_t;

/* The dtypes of baton, in the order of baton_dtype_t; MPI lacks two. */
typedef enum {
  DT_INT8, DT_UINT8, DT_INT32, DT_UINT32, DT_INT64, DT_UINT64,
  DT_FLOAT16, DT_BFLOAT16, DT_FLOAT32, DT_FLOAT64, DT_COUNT
} dtype_t;

typedef struct {
  const char *name;
  size_t size;
  kind_t kind;
} dtype_info_t;

static const dtype_info_t dtypes[DT_COUNT] = {
    {"int8", 1, KIND_SINT},     {"uint8", 1, KIND_UINT},
    {"int32", 4, KIND_SINT},    {"uint32", 4, KIND_UINT},
    {"int64", 8, KIND_SINT},    {"uint64", 8, KIND_UINT},
    {"float16", 2, KIND_FLOAT}, {"bfloat16", 2, KIND_FLOAT},
    {"float32", 4, KIND_FLOAT}, {"float64", 8, KIND_FLOAT}};

typedef enum { OP_SUM, OP_PROD, OP_MIN, OP_MAX, OP_AVG, OP_COUNT } op_t;

static const char *const op_names[OP_COUNT] = {"sum", "prod", "min", "max",
                                               "avg"};

/* Open MPI's handles are addresses of globals, so they live in a switch
 * rather than in the tables. */
static MPI_Datatype mpi_dtype(dtype_t dt)
{
  switch (dt) {
  case DT_INT8: return MPI_INT8_T;
  case DT_UINT8: return MPI_UINT8_T;
  case DT_INT32: return MPI_INT32_T;
  case DT_UINT32: return MPI_UINT32_T;
  case DT_INT64: return MPI_INT64_T;
  case DT_UINT64: return MPI_UINT64_T;
  case DT_FLOAT32: return MPI_FLOAT;
  case DT_FLOAT64: return MPI_DOUBLE;
  default: return MPI_DATATYPE_NULL;
  }
}

static MPI_Op mpi_op(op_t op)
{
  switch (op) {
  case OP_SUM: return MPI_SUM;
  case OP_PROD: return MPI_PROD;
  case OP_MIN: return MPI_MIN;
  case OP_MAX: return MPI_MAX;
  default: return MPI_OP_NULL;
  }
}

/* ------------------------------------------------------------ options */

typedef struct {
  coll_t coll;
  size_t min_bytes, max_bytes;
  size_t factor; /* > 1: multiply; 0: add step */
  size_t step;
  int warmup, iters;
  dtype_t dtype;
  op_t op;
  int root;
  int inplace_only;
  int check;
} opts_t;

static int g_rank = 0;

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void die(const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "mpi_bench [%d]: ", g_rank);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  MPI_Abort(MPI_COMM_WORLD, 2);
  exit(2);
}

static void usage(FILE *f)
{
  fprintf(f,
          "usage: mpirun -n N mpi_bench [options]\n"
          "  -c, --collective NAME   allreduce (default), reduce_scatter, "
          "allgather, broadcast\n"
          "  -b, --minbytes SIZE     smallest size, bytes with K/M/G "
          "suffixes (default 8)\n"
          "  -e, --maxbytes SIZE     largest size (default 128M)\n"
          "  -f, --stepfactor F      multiply the size by F (default 2)\n"
          "  -i, --stepbytes STEP    add STEP bytes instead\n"
          "  -w, --warmup_iters W    untimed calls per size and group "
          "(default 5)\n"
          "  -n, --iters N           timed calls per size and group "
          "(default 20)\n"
          "  -d, --datatype DTYPE    int8 uint8 int32 uint32 int64 uint64 "
          "float32 (default) float64\n"
          "  -o, --op OP             sum (default) prod min max\n"
          "  -r, --root R            root of broadcast (default 0)\n"
          "  -z, --inplace           in-place group only\n"
          "      --check             verify every timed call; count "
          "mismatches in #wrong\n"
          "  -h, --help              this text\n");
}

/* "128M" -> 134217728. K, M and G are powers of 1024; a trailing "B" or
 * "iB" is accepted. */
static int parse_size(const char *s, size_t *out)
{
  char *end;
  unsigned long long v = strtoull(s, &end, 10);
  unsigned long long mult = 1;
  if (end == s || *s == '-')
    return -1;
  switch (*end) {
  case 'k': case 'K': mult = 1ull << 10; end++; break;
  case 'm': case 'M': mult = 1ull << 20; end++; break;
  case 'g': case 'G': mult = 1ull << 30; end++; break;
  default: break;
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

static int parse_int(const char *s, int lo, int hi, int *out)
{
  char *end;
  long v = strtol(s, &end, 10);
  if (end == s || *end != '\0' || v < lo || v > hi)
    return -1;
  *out = (int)v;
  return 0;
}

static int lookup(const char *s, const char *const *names, int n)
{
  for (int i = 0; i < n; i++)
    if (strcmp(s, names[i]) == 0)
      return i;
  return -1;
}

static void parse_args(int argc, char **argv, opts_t *o)
{
  static const struct option longopts[] = {
      {"collective", required_argument, NULL, 'c'},
      {"minbytes", required_argument, NULL, 'b'},
      {"maxbytes", required_argument, NULL, 'e'},
      {"stepfactor", required_argument, NULL, 'f'},
      {"stepbytes", required_argument, NULL, 'i'},
      {"warmup_iters", required_argument, NULL, 'w'},
      {"iters", required_argument, NULL, 'n'},
      {"datatype", required_argument, NULL, 'd'},
      {"op", required_argument, NULL, 'o'},
      {"root", required_argument, NULL, 'r'},
      {"inplace", no_argument, NULL, 'z'},
      {"check", no_argument, NULL, 'C'},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  const char *dtype_names[DT_COUNT];
  int c, v, factor;

  for (int i = 0; i < DT_COUNT; i++)
    dtype_names[i] = dtypes[i].name;
  *o = (opts_t){COLL_ALLREDUCE, 8, 128u << 20, 2, 0, 5, 20, DT_FLOAT32,
                OP_SUM, 0, 0, 0};
  while ((c = getopt_long(argc, argv, "c:b:e:f:i:w:n:d:o:r:zh", longopts,
                          NULL)) != -1) {
    switch (c) {
    case 'c':
      if (strcmp(optarg, "bcast") == 0)
        optarg = "broadcast";
      if ((v = lookup(optarg, coll_names, COLL_COUNT)) < 0)
        die("-c %s: expected allreduce, reduce_scatter, allgather or "
            "broadcast", optarg);
      o->coll = (coll_t)v;
      break;
    case 'b':
      if (parse_size(optarg, &o->min_bytes) != 0)
        die("-b %s: expected a size such as 8, 64K, 128M", optarg);
      break;
    case 'e':
      if (parse_size(optarg, &o->max_bytes) != 0)
        die("-e %s: expected a size such as 8, 64K, 128M", optarg);
      break;
    case 'f':
      if (parse_int(optarg, 2, 1 << 20, &factor) != 0)
        die("-f %s: expected an integer factor >= 2", optarg);
      o->factor = (size_t)factor;
      break;
    case 'i':
      if (parse_size(optarg, &o->step) != 0 || o->step == 0)
        die("-i %s: expected a step of at least 1 byte", optarg);
      o->factor = 0;
      break;
    case 'w':
      if (parse_int(optarg, 0, 1 << 30, &o->warmup) != 0)
        die("-w %s: expected an integer >= 0", optarg);
      break;
    case 'n':
      if (parse_int(optarg, 1, 1 << 30, &o->iters) != 0)
        die("-n %s: expected an integer >= 1", optarg);
      break;
    case 'd':
      if ((v = lookup(optarg, dtype_names, DT_COUNT)) < 0)
        die("-d %s: unknown dtype", optarg);
      if (mpi_dtype((dtype_t)v) == MPI_DATATYPE_NULL)
        die("-d %s: MPI has no such datatype", optarg);
      o->dtype = (dtype_t)v;
      break;
    case 'o':
      if ((v = lookup(optarg, op_names, OP_COUNT)) < 0)
        die("-o %s: expected sum, prod, min or max", optarg);
      if (mpi_op((op_t)v) == MPI_OP_NULL)
        die("-o %s: MPI has no such reduction", optarg);
      o->op = (op_t)v;
      break;
    case 'r':
      if (parse_int(optarg, 0, 1 << 30, &o->root) != 0)
        die("-r %s: expected a rank", optarg);
      break;
    case 'z': o->inplace_only = 1; break;
    case 'C': o->check = 1; break;
    case 'h':
      if (g_rank == 0)
        usage(stdout);
      MPI_Finalize();
      exit(0);
    default:
      if (g_rank == 0)
        usage(stderr);
      die("bad arguments");
    }
  }
  if (optind < argc)
    die("unexpected argument '%s'", argv[optind]);
  if (o->min_bytes > o->max_bytes)
    die("-b %zu is larger than -e %zu", o->min_bytes, o->max_bytes);
  if (o->coll == COLL_BROADCAST)
    o->inplace_only = 1;
}

/* --------------------------------------------------------------- data */

/* The value rank r contributes to element i of a reduction over n ranks.
 * Small integers, so every dtype holds them and every partial result,
 * whatever the order of the reduction. For the additive ops the two
 * rank-dependent terms cancel, so the sum is n * base and the average is
 * exact too. */
static int64_t reduce_input(op_t op, kind_t kind, int r, int n, size_t i)
{
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
static int64_t wrap(dtype_t dt, int64_t v)
{
  switch (dt) {
  case DT_INT8: return (int8_t)v;
  case DT_UINT8: return (uint8_t)v;
  case DT_INT32: return (int32_t)v;
  case DT_UINT32: return (uint32_t)v;
  default: return v;
  }
}

static int64_t reduce_expect(op_t op, dtype_t dt, int n, size_t i)
{
  kind_t kind = dtypes[dt].kind;
  int64_t acc = reduce_input(op, kind, 0, n, i);

  for (int r = 1; r < n; r++) {
    int64_t v = reduce_input(op, kind, r, n, i);
    switch (op) {
    case OP_PROD: acc *= v; break;
    case OP_MIN: acc = v < acc ? v : acc; break;
    case OP_MAX: acc = v > acc ? v : acc; break;
    default: acc += v; break;
    }
  }
  if (op == OP_AVG)
    acc = wrap(dt, acc) / n;
  return acc;
}

/* What rank q contributes at element idx of an allgather or broadcast. */
static int64_t gather_input(kind_t kind, int q, size_t idx)
{
  int64_t v = (int64_t)((idx * 3 + (size_t)q * 5) % 97);
  return kind == KIND_UINT ? v : v - 48;
}

static void put_elem(void *buf, size_t i, dtype_t dt, int64_t v)
{
  switch (dt) {
  case DT_INT8: ((int8_t *)buf)[i] = (int8_t)v; break;
  case DT_UINT8: ((uint8_t *)buf)[i] = (uint8_t)v; break;
  case DT_INT32: ((int32_t *)buf)[i] = (int32_t)v; break;
  case DT_UINT32: ((uint32_t *)buf)[i] = (uint32_t)v; break;
  case DT_INT64: ((int64_t *)buf)[i] = v; break;
  case DT_UINT64: ((uint64_t *)buf)[i] = (uint64_t)v; break;
  case DT_FLOAT32: ((float *)buf)[i] = (float)v; break;
  case DT_FLOAT64: ((double *)buf)[i] = (double)v; break;
  default: break;
  }
}

static double get_elem(const void *buf, size_t i, dtype_t dt)
{
  switch (dt) {
  case DT_INT8: return ((const int8_t *)buf)[i];
  case DT_UINT8: return ((const uint8_t *)buf)[i];
  case DT_INT32: return ((const int32_t *)buf)[i];
  case DT_UINT32: return ((const uint32_t *)buf)[i];
  case DT_INT64: return (double)((const int64_t *)buf)[i];
  case DT_UINT64: return (double)((const uint64_t *)buf)[i];
  case DT_FLOAT32: return ((const float *)buf)[i];
  case DT_FLOAT64: return ((const double *)buf)[i];
  default: return 0;
  }
}

/* ---------------------------------------------------------- the bench */

typedef struct {
  opts_t o;
  int rank, nranks;
  size_t elsize;
  char *sendbuf, *recvbuf;  /* max_bytes each, touched before timing */
  char *pattern, *expect;   /* --check only: this size's input and output */
  long long reported;       /* mismatches printed so far */
  /* this size */
  size_t total;             /* elements of the whole buffer */
  size_t part;              /* per-rank elements for reduce_scatter and
                               allgather, total otherwise */
} bench_t;

/* Where one group's input and output live. In place they overlap. */
typedef struct {
  char *send;
  size_t send_count;
  char *recv;
  size_t recv_count;
} layout_t;

static layout_t layout(const bench_t *b, int inplace)
{
  size_t me = (size_t)b->rank * b->part * b->elsize;
  layout_t L = {b->sendbuf, b->total, b->recvbuf, b->total};

  switch (b->o.coll) {
  case COLL_ALLREDUCE:
    if (inplace)
      L.send = b->recvbuf;
    break;
  case COLL_REDUCE_SCATTER: /* MPI_IN_PLACE: result at the start */
    L.recv_count = b->part;
    if (inplace)
      L.send = b->recvbuf;
    break;
  case COLL_ALLGATHER:
    L.send_count = b->part;
    if (inplace)
      L.send = b->recvbuf + me;
    break;
  case COLL_BROADCAST:
    L.send = b->recvbuf;
    L.send_count = b->rank == b->o.root ? b->total : 0;
    break;
  default: break;
  }
  return L;
}

/* Writes this rank's input for this size into dst (layout send_count). */
static void fill_input(const bench_t *b, char *dst)
{
  dtype_t dt = b->o.dtype;
  kind_t kind = dtypes[dt].kind;
  size_t i, base = (size_t)b->rank * b->part;

  switch (b->o.coll) {
  case COLL_ALLGATHER:
    for (i = 0; i < b->part; i++)
      put_elem(dst, i, dt, gather_input(kind, b->rank, base + i));
    break;
  case COLL_BROADCAST:
    if (b->rank == b->o.root)
      for (i = 0; i < b->total; i++)
        put_elem(dst, i, dt, gather_input(kind, b->o.root, i));
    break;
  default:
    for (i = 0; i < b->total; i++)
      put_elem(dst, i, dt, reduce_input(b->o.op, kind, b->rank, b->nranks, i));
    break;
  }
}

/* Writes what this rank should receive for this size (layout recv_count). */
static void fill_expect(const bench_t *b, char *dst)
{
  dtype_t dt = b->o.dtype;
  kind_t kind = dtypes[dt].kind;
  size_t i;

  switch (b->o.coll) {
  case COLL_ALLREDUCE:
    for (i = 0; i < b->total; i++)
      put_elem(dst, i, dt, reduce_expect(b->o.op, dt, b->nranks, i));
    break;
  case COLL_REDUCE_SCATTER:
    for (i = 0; i < b->part; i++)
      put_elem(dst, i, dt,
               reduce_expect(b->o.op, dt, b->nranks,
                             (size_t)b->rank * b->part + i));
    break;
  case COLL_ALLGATHER:
    for (i = 0; i < b->total; i++)
      put_elem(dst, i, dt, gather_input(kind, (int)(i / b->part), i));
    break;
  case COLL_BROADCAST:
    for (i = 0; i < b->total; i++)
      put_elem(dst, i, dt, gather_input(kind, b->o.root, i));
    break;
  default: break;
  }
}

/* Elements of got that differ from want; prints the first few of the
 * run. */
static long long count_wrong(bench_t *b, const char *what,
                             const char *got, const char *want, size_t n)
{
  long long wrong = 0;
  size_t es = b->elsize;

  if (memcmp(got, want, n * es) == 0)
    return 0;
  for (size_t i = 0; i < n; i++) {
    if (memcmp(got + i * es, want + i * es, es) == 0)
      continue;
    wrong++;
    if (b->reported++ < 5)
      fprintf(stderr,
              "mpi_bench [%d]: %s %s count %zu: element %zu is %g, "
              "expected %g\n",
              b->rank, coll_names[b->o.coll], what, b->total, i,
              get_elem(got, i, b->o.dtype), get_elem(want, i, b->o.dtype));
  }
  return wrong;
}

static void run_coll(const bench_t *b, const layout_t *L, int inplace)
{
  MPI_Datatype dt = mpi_dtype(b->o.dtype);
  MPI_Op op = mpi_op(b->o.op);
  const void *send = inplace ? MPI_IN_PLACE : L->send;
  int count = (int)b->part, rc = MPI_SUCCESS, len;
  char msg[MPI_MAX_ERROR_STRING];

  switch (b->o.coll) {
  case COLL_ALLREDUCE:
    rc = MPI_Allreduce(send, L->recv, count, dt, op, MPI_COMM_WORLD);
    break;
  case COLL_REDUCE_SCATTER:
    rc = MPI_Reduce_scatter_block(send, L->recv, count, dt, op,
                                  MPI_COMM_WORLD);
    break;
  case COLL_ALLGATHER:
    rc = MPI_Allgather(send, count, dt, L->recv, count, dt, MPI_COMM_WORLD);
    break;
  case COLL_BROADCAST:
    rc = MPI_Bcast(L->recv, count, dt, b->o.root, MPI_COMM_WORLD);
    break;
  default: break;
  }
  if (rc != MPI_SUCCESS) {
    MPI_Error_string(rc, msg, &len);
    die("%s of %d elements failed: %s", coll_names[b->o.coll], count, msg);
  }
}

/* One group at this size: the MAX over ranks of the per-call average, in
 * seconds; *wrong gets the mismatches summed over ranks and calls. */
static double time_group(bench_t *b, int inplace, long long *wrong)
{
  layout_t L = layout(b, inplace);
  size_t es = b->elsize;
  double t, sum = 0, avg, max;
  long long mine = 0;

  fill_input(b, L.send);
  MPI_Barrier(MPI_COMM_WORLD);
  for (int w = 0; w < b->o.warmup; w++)
    run_coll(b, &L, inplace);
  MPI_Barrier(MPI_COMM_WORLD);
  if (!b->o.check) {
    t = MPI_Wtime();
    for (int it = 0; it < b->o.iters; it++)
      run_coll(b, &L, inplace);
    sum = MPI_Wtime() - t;
  } else {
    for (int it = 0; it < b->o.iters; it++) {
      memset(L.recv, 0xa5, L.recv_count * es);
      memcpy(L.send, b->pattern, L.send_count * es);
      MPI_Barrier(MPI_COMM_WORLD);
      t = MPI_Wtime();
      run_coll(b, &L, inplace);
      sum += MPI_Wtime() - t;
      mine += count_wrong(b, "result", L.recv, b->expect, L.recv_count);
      if (!inplace)
        mine += count_wrong(b, "sendbuf", L.send, b->pattern, L.send_count);
    }
  }
  avg = sum / b->o.iters;
  MPI_Allreduce(&avg, &max, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(&mine, wrong, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  return max;
}

static double bus_factor(coll_t coll, int n)
{
  switch (coll) {
  case COLL_ALLREDUCE: return 2.0 * (n - 1) / n;
  case COLL_REDUCE_SCATTER:
  case COLL_ALLGATHER: return (double)(n - 1) / n;
  default: return 1.0;
  }
}

/* nccl-tests' widths: fewer decimals as the time grows. */
static void format_time(char *buf, size_t cap, double us)
{
  snprintf(buf, cap, us >= 10000 ? "%8.0f" : us >= 100 ? "%8.1f" : "%8.2f",
           us);
}

static void print_header(const bench_t *b, int argc, char **argv)
{
  char host[256] = "?", lib[MPI_MAX_LIBRARY_VERSION_STRING] = "";
  char cpu[256] = "?", line[512];
  int len;
  FILE *f;

  gethostname(host, sizeof host - 1);
  MPI_Get_library_version(lib, &len);
  lib[strcspn(lib, ",\n")] = '\0';
  if ((f = fopen("/proc/cpuinfo", "r")) != NULL) {
    while (fgets(line, sizeof line, f))
      if (strncmp(line, "model name", 10) == 0) {
        snprintf(cpu, sizeof cpu, "%s", strchr(line, ':') + 2);
        cpu[strcspn(cpu, "\n")] = '\0';
        break;
      }
    fclose(f);
  }
  printf("# command:");
  for (int i = 0; i < argc; i++)
    printf(" %s", argv[i]);
  printf("\n# library: %s\n", lib);
  printf("# collective %s  nranks %d  dtype %s  op %s  sizes %zu..%zu %s%zu"
         "  warmup %d  iters %d  check %d\n",
         coll_names[b->o.coll], b->nranks, dtypes[b->o.dtype].name,
         b->o.coll <= COLL_REDUCE_SCATTER ? op_names[b->o.op] : "none",
         b->o.min_bytes, b->o.max_bytes, b->o.factor ? "x" : "+",
         b->o.factor ? b->o.factor : b->o.step, b->o.warmup, b->o.iters,
         b->o.check);
  printf("# host %s  nproc %ld  cpu %s\n#\n", host,
         sysconf(_SC_NPROCESSORS_ONLN), cpu);
  if (b->o.inplace_only) {
    printf("#%43s%36s\n", "", "in-place");
    printf("# %10s  %12s  %8s  %6s  %8s  %7s  %7s  %6s\n", "size", "count",
           "type", "redop", "time", "algbw", "busbw", "#wrong");
    printf("# %10s  %12s  %8s  %6s  %8s  %7s  %7s  %6s\n", "(B)",
           "(elements)", "", "", "(us)", "(GB/s)", "(GB/s)", "");
  } else {
    printf("#%43s%36s%36s\n", "", "out-of-place", "in-place");
    printf("# %10s  %12s  %8s  %6s  %8s  %7s  %7s  %6s  %8s  %7s  %7s  %6s\n",
           "size", "count", "type", "redop", "time", "algbw", "busbw",
           "#wrong", "time", "algbw", "busbw", "#wrong");
    printf("# %10s  %12s  %8s  %6s  %8s  %7s  %7s  %6s  %8s  %7s  %7s  %6s\n",
           "(B)", "(elements)", "", "", "(us)", "(GB/s)", "(GB/s)", "",
           "(us)", "(GB/s)", "(GB/s)", "");
  }
  fflush(stdout);
}

/* One line of output; returns the sum of its busbw figures and counts them
 * into *nbw, for the average at the end. */
static double run_size(bench_t *b, long long *wrong_total, int *nbw)
{
  double bw_sum = 0, bytes = (double)(b->total * b->elsize);
  char tbuf[32], wbuf[32];

  if (b->o.check) {
    fill_input(b, b->pattern);
    fill_expect(b, b->expect);
  }
  if (b->rank == 0)
    printf("%12zu  %12zu  %8s  %6s", b->total * b->elsize, b->total,
           dtypes[b->o.dtype].name,
           b->o.coll <= COLL_REDUCE_SCATTER ? op_names[b->o.op] : "none");
  for (int inplace = b->o.inplace_only; inplace <= 1; inplace++) {
    long long wrong = 0;
    double sec = time_group(b, inplace, &wrong);
    double algbw = sec > 0 ? bytes / sec / 1e9 : 0;
    double busbw = algbw * bus_factor(b->o.coll, b->nranks);

    *wrong_total += wrong;
    bw_sum += busbw;
    (*nbw)++;
    if (b->rank != 0)
      continue;
    format_time(tbuf, sizeof tbuf, sec * 1e6);
    if (b->o.check)
      snprintf(wbuf, sizeof wbuf, "%lld", wrong);
    else
      snprintf(wbuf, sizeof wbuf, "N/A");
    printf("  %8s  %7.2f  %7.2f  %6s", tbuf, algbw, busbw, wbuf);
  }
  if (b->rank == 0) {
    printf("\n");
    fflush(stdout);
  }
  return bw_sum;
}

static void set_size(bench_t *b, size_t bytes);

/* The first calls of a run pay for connections, page faults in the
 * library's own buffers and cold caches; nccl-tests runs warm-up calls at
 * the largest and the smallest size before the first timed size, and so
 * does this. */
static void warm_up(bench_t *b)
{
  size_t sizes[2] = {b->o.max_bytes, b->o.min_bytes};

  for (int k = 0; k < 2; k++) {
    set_size(b, sizes[k]);
    for (int inplace = b->o.inplace_only; inplace <= 1; inplace++) {
      layout_t L = layout(b, inplace);
      for (int w = 0; w < b->o.warmup; w++)
        run_coll(b, &L, inplace);
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

/* Per-rank elements and total elements for a requested size in bytes. */
static void set_size(bench_t *b, size_t bytes)
{
  size_t count = bytes / b->elsize;

  if (b->o.coll == COLL_REDUCE_SCATTER || b->o.coll == COLL_ALLGATHER) {
    b->part = count / (size_t)b->nranks;
    b->total = b->part * (size_t)b->nranks;
  } else {
    b->part = b->total = count;
  }
}

static char *alloc_touched(size_t bytes)
{
  void *p = NULL;

  if (posix_memalign(&p, 4096, bytes ? bytes : 1) != 0)
    die("cannot allocate %zu bytes", bytes);
  memset(p, 0, bytes); /* fault every page in before timing */
  return p;
}

int main(int argc, char **argv)
{
  bench_t b;
  long long wrong = 0;
  double bw_sum = 0;
  int nbw = 0;
  size_t s, alloc;

  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  memset(&b, 0, sizeof b);
  parse_args(argc, argv, &b.o);
  b.rank = g_rank;
  MPI_Comm_size(MPI_COMM_WORLD, &b.nranks);
  if (b.o.root >= b.nranks)
    die("-r %d: only %d ranks", b.o.root, b.nranks);
  b.elsize = dtypes[b.o.dtype].size;
  if (b.o.max_bytes / b.elsize > (size_t)INT32_MAX)
    die("-e %zu: MPI counts are int", b.o.max_bytes);

  alloc = b.o.max_bytes / b.elsize * b.elsize;
  b.sendbuf = alloc_touched(alloc);
  b.recvbuf = alloc_touched(alloc);
  if (b.o.check) {
    b.pattern = alloc_touched(alloc);
    b.expect = alloc_touched(alloc);
  }
  if (b.rank == 0)
    print_header(&b, argc, argv);
  warm_up(&b);

  for (s = b.o.min_bytes; s <= b.o.max_bytes;) {
    set_size(&b, s);
    bw_sum += run_size(&b, &wrong, &nbw);
    if (b.o.factor) {
      if (s > b.o.max_bytes / b.o.factor)
        break;
      s = s ? s * b.o.factor : 1;
    } else {
      if (s > b.o.max_bytes - b.o.step)
        break;
      s += b.o.step;
    }
  }

  if (b.rank == 0) {
    if (b.o.check)
      printf("# Wrong values total : %lld %s\n", wrong, wrong ? "FAILED" : "OK");
    printf("# Avg bus bandwidth    : %.3f\n#\n", nbw ? bw_sum / nbw : 0.0);
  }
  free(b.sendbuf);
  free(b.recvbuf);
  free(b.pattern);
  free(b.expect);
  MPI_Finalize();
  return wrong ? 1 : 0;
}
