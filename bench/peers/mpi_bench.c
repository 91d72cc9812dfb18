/*
 * mpi_bench.c - the MPI peer of tools/baton-bench.c.
 *
 * Measures MPI_Allreduce, MPI_Reduce_scatter_block, MPI_Allgather,
 * MPI_Bcast, MPI_Reduce, MPI_Alltoall, MPI_Gather and MPI_Scatter with the
 * flags, the timing method and the columns of baton-bench, so that the
 * outputs compare line by line:
 *
 *   mpirun.openmpi -n 2 build/bench/mpi_bench -c allreduce -b 8 -e 128M -f 4
 *   mpiexec.mpich -n 2 build/bench/mpi_bench.mpich -c allreduce ...
 *
 * Built twice by `make -f bench/Makefile.peers`, with mpicc.openmpi and
 * with mpicc.mpich. The benchmark itself (flags, data and their check,
 * timing, columns) is tools/bench_common.h, shared with baton-bench, which
 * says how it times; this file holds what is MPI's: the calls and the
 * library version.
 *
 * MPI has no float16, bfloat16 or average, and its C bool only the logical
 * reductions: those are refused. MPI_Bcast has only one buffer, so
 * broadcast prints the in-place group only. In place means MPI_IN_PLACE,
 * at the root only for the rooted collectives.
 */
#include <mpi.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"

/* Open MPI's handles are addresses of globals, so they live in a switch
 * rather than in a table. */
static MPI_Datatype mpi_dtype(dtype_t dt) {
  switch (dt) {
  case DT_INT8:
    return MPI_INT8_T;
  case DT_UINT8:
    return MPI_UINT8_T;
  case DT_INT32:
    return MPI_INT32_T;
  case DT_UINT32:
    return MPI_UINT32_T;
  case DT_INT64:
    return MPI_INT64_T;
  case DT_UINT64:
    return MPI_UINT64_T;
  case DT_FLOAT32:
    return MPI_FLOAT;
  case DT_FLOAT64:
    return MPI_DOUBLE;
  case DT_INT16:
    return MPI_INT16_T;
  case DT_UINT16:
    return MPI_UINT16_T;
  default:
    return MPI_DATATYPE_NULL;
  }
}

static MPI_Op mpi_op(op_t op) {
  switch (op) {
  case OP_SUM:
    return MPI_SUM;
  case OP_PROD:
    return MPI_PROD;
  case OP_MIN:
    return MPI_MIN;
  case OP_MAX:
    return MPI_MAX;
  case OP_BAND:
    return MPI_BAND;
  case OP_BOR:
    return MPI_BOR;
  case OP_BXOR:
    return MPI_BXOR;
  default:
    return MPI_OP_NULL;
  }
}

static int has_dtype(dtype_t dt) { return mpi_dtype(dt) != MPI_DATATYPE_NULL; }

static int has_op(op_t op) { return mpi_op(op) != MPI_OP_NULL; }

static void usage(FILE *f) {
  fprintf(f, "usage: mpirun -n N mpi_bench [options]\n"
             "  -c, --collective NAME   allreduce (default), reduce_scatter, "
             "allgather,\n"
             "                          broadcast, reduce, alltoall, gather, "
             "scatter,\n"
             "                          allgatherv, reduce_scatterv, alltoallv (even "
             "counts),\n"
             "                          sendrecv (MPI_Send/MPI_Recv ping-pong; "
             "time: one way)\n" BENCH_USAGE_SIZES
             "  -d, --datatype DTYPE    int8 uint8 int32 uint32 int64 uint64 "
             "float32 (default) float64\n"
             "                          int16 uint16\n"
             "  -o, --op OP             sum (default) prod min max band\n"
             "                          bor bxor\n" BENCH_USAGE_CHECK
             "  -h, --help              this text\n");
}

/* The rooted collectives; MPI_IN_PLACE is the root's alone. */
static int run_rooted(const bench_t *b, const layout_t *L, int inplace) {
  MPI_Datatype dt = mpi_dtype(b->o.dtype);
  int count = (int)b->part, root = b->o.root;
  int in_place = inplace && b->rank == root;
  const void *send = in_place ? MPI_IN_PLACE : L->send;

  switch (b->o.coll) {
  case COLL_BROADCAST:
    return MPI_Bcast(L->recv, count, dt, root, MPI_COMM_WORLD);
  case COLL_REDUCE:
    return MPI_Reduce(send, L->recv, count, dt, mpi_op(b->o.op), root, MPI_COMM_WORLD);
  case COLL_GATHER:
    return MPI_Gather(send, count, dt, L->recv, count, dt, root, MPI_COMM_WORLD);
  case COLL_SCATTER:
    return MPI_Scatter(L->send, count, dt, in_place ? MPI_IN_PLACE : L->recv, count, dt, root,
                       MPI_COMM_WORLD);
  default:
    return MPI_SUCCESS;
  }
}

/* MPI_Allgatherv, MPI_Reduce_scatter and MPI_Alltoallv with every rank's
 * count equal, as baton-bench runs the v-variants. The arrays are made
 * once per size. */
static int run_v(const bench_t *b, const layout_t *L, const void *send) {
  static int *counts, n, part = -1;
  MPI_Datatype dt = mpi_dtype(b->o.dtype);

  if (!counts || n != b->nranks) {
    free(counts);
    n = b->nranks;
    counts = calloc(2 * (size_t)n, sizeof *counts);
    if (!counts)
      bench_die("out of memory for %d counts", n);
    part = -1;
  }
  if (part != (int)b->part) {
    part = (int)b->part;
    for (int r = 0; r < n; r++) {
      counts[r] = part;
      counts[n + r] = r * part;
    }
  }
  if (b->o.coll == COLL_ALLGATHERV)
    return MPI_Allgatherv(send, part, dt, L->recv, counts, counts + n, dt, MPI_COMM_WORLD);
  if (b->o.coll == COLL_ALLTOALLV)
    return MPI_Alltoallv(send, counts, counts + n, dt, L->recv, counts, counts + n, dt,
                         MPI_COMM_WORLD);
  return MPI_Reduce_scatter(send, L->recv, counts, dt, mpi_op(b->o.op), MPI_COMM_WORLD);
}

static void run_coll(const bench_t *b, const layout_t *L, int inplace) {
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
    rc = MPI_Reduce_scatter_block(send, L->recv, count, dt, op, MPI_COMM_WORLD);
    break;
  case COLL_ALLGATHER:
    rc = MPI_Allgather(send, count, dt, L->recv, count, dt, MPI_COMM_WORLD);
    break;
  case COLL_ALLTOALL:
    rc = MPI_Alltoall(send, count, dt, L->recv, count, dt, MPI_COMM_WORLD);
    break;
  case COLL_ALLGATHERV:
  case COLL_REDUCE_SCATTERV:
  case COLL_ALLTOALLV:
    rc = run_v(b, L, send);
    break;
  case COLL_SENDRECV: /* ping-pong: the odd rank sends back what it got */
    if (b->rank % 2 == 0) {
      rc = MPI_Send(L->send, count, dt, b->rank + 1, 0, MPI_COMM_WORLD);
      if (rc == MPI_SUCCESS)
        rc = MPI_Recv(L->recv, count, dt, b->rank + 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
      rc = MPI_Recv(L->recv, count, dt, b->rank - 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      if (rc == MPI_SUCCESS)
        rc = MPI_Send(L->recv, count, dt, b->rank - 1, 0, MPI_COMM_WORLD);
    }
    break;
  default:
    rc = run_rooted(b, L, inplace);
    break;
  }
  if (rc != MPI_SUCCESS) {
    MPI_Error_string(rc, msg, &len);
    bench_die("%s of %d elements failed: %s", coll_names[b->o.coll], count, msg);
  }
}

static double now(void) { return MPI_Wtime(); }

static void barrier(const bench_t *b) {
  (void)b;
  MPI_Barrier(MPI_COMM_WORLD);
}

static void max_over_ranks(const bench_t *b, double *x, int n) {
  (void)b;
  MPI_Allreduce(MPI_IN_PLACE, x, n, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
}

static long long sum_over_ranks(const bench_t *b, long long n) {
  long long sum;
  (void)b;
  MPI_Allreduce(&n, &sum, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  return sum;
}

static void abort_all(int status) { MPI_Abort(MPI_COMM_WORLD, status); }

static const bench_prog_t mpi_bench = {
    .name = "mpi_bench",
    .abort = abort_all,
    .run = run_coll,
    .barrier = barrier,
    .now = now,
    .max_over_ranks = max_over_ranks,
    .sum_over_ranks = sum_over_ranks,
    .reduce_scatter_at_start = 1,
    .bcast_one_buffer = 1,
    .bad_dtype = "unknown dtype",
    .bad_op = "expected sum, prod, min, max, band, bor or bxor",
    .lib = "MPI",
    .has_dtype = has_dtype,
    .has_op = has_op,
};

int main(int argc, char **argv) {
  bench_t b;
  char library[MPI_MAX_LIBRARY_VERSION_STRING] = "";
  long long wrong;
  int len;

  bench_prog = &mpi_bench;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &bench_rank);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  memset(&b, 0, sizeof b);
  switch (bench_parse_args(argc, argv, &b.o)) {
  case BENCH_ARGS_HELP:
    if (bench_rank == 0)
      usage(stdout);
    MPI_Finalize();
    exit(0);
  case BENCH_ARGS_BAD:
    if (bench_rank == 0)
      usage(stderr);
    bench_die("bad arguments");
  default:
    break;
  }
  b.rank = bench_rank;
  MPI_Comm_size(MPI_COMM_WORLD, &b.nranks);
  if (b.o.max_bytes / dtypes[b.o.dtype].size > (size_t)INT32_MAX)
    bench_die("-e %zu: MPI counts are int", b.o.max_bytes);
  MPI_Get_library_version(library, &len);
  library[strcspn(library, ",\n")] = '\0';
  for (char *c = library; *c; c++) /* MPICH: "MPICH Version:\t4.0.2" */
    if (*c == '\t')
      *c = ' ';
  bench_note_allocator(&b);

  wrong = bench_run(&b, argc, argv, library);
  MPI_Finalize();
  return wrong ? 1 : 0;
}
