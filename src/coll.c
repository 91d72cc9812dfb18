/*
 * coll.c - the public collectives: validate the arguments and describe the
 * call (call.h), which call.c numbers, plans and hands to the executor.
 *
 * Arguments are checked before any byte moves, so a bad call fails on the
 * rank that made it without touching the peers' sequence of collectives.
 */
#include <limits.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "call.h"
#include "comm.h"

static const char *const dtype_names[BATON_DTYPE_COUNT] = {
    "int8",     "uint8",   "int32",   "uint32", "int64",  "uint64", "float16",
    "bfloat16", "float32", "float64", "int16",  "uint16", "bool"};
static const size_t dtype_sizes[BATON_DTYPE_COUNT] = {1, 1, 4, 4, 8, 8, 2, 2, 4, 8, 2, 2, 1};
static const char *const op_names[BATON_OP_COUNT] = {"sum", "prod", "min", "max",
                                                     "avg", "band", "bor", "bxor"};

size_t baton_dtype_size(baton_dtype_t dtype) {
  return (unsigned)dtype < BATON_DTYPE_COUNT ? dtype_sizes[dtype] : 0;
}

const char *baton_dtype_name(baton_dtype_t dtype) {
  return (unsigned)dtype < BATON_DTYPE_COUNT ? dtype_names[dtype] : "unknown";
}

const char *baton_op_name(baton_op_t op) {
  return (unsigned)op < BATON_OP_COUNT ? op_names[op] : "unknown";
}

/* The checks that need no buffer: comm, dtype, op, size and root. `blocks`
 * is how many `count`-sized blocks the largest buffer holds. */
static int validate_args(baton_comm_t *comm, const baton__call_args_t *c, size_t blocks) {
  if (!comm) {
    baton__log_warn(COLL, "%s: comm is NULL", c->name);
    return BATON_EINVAL;
  }
  if ((unsigned)c->dtype >= BATON_DTYPE_COUNT)
    return baton__fail(comm, BATON_EINVAL, "%s: dtype %d is not a baton_dtype_t", c->name,
                       (int)c->dtype);
  if (c->op != BATON_OP_COUNT && (unsigned)c->op >= BATON_OP_COUNT)
    return baton__fail(comm, BATON_EINVAL, "%s: op %d is not a baton_op_t", c->name, (int)c->op);
  if (c->op != BATON_OP_COUNT && !baton__reduce_ok(c->dtype, c->op))
    return baton__fail(comm, BATON_EINVAL, "%s: op %s does not apply to dtype %s (%s)", c->name,
                       op_names[c->op], dtype_names[c->dtype],
                       c->op == BATON_AVG ? "bool has no average"
                                          : "the bitwise ops take integers and bool");
  size_t es = dtype_sizes[c->dtype];
  if (c->count > (size_t)PTRDIFF_MAX / es / blocks)
    return baton__fail(comm, BATON_EINVAL, "%s: count %zu of %s overflows the address space",
                       c->name, c->count, dtype_names[c->dtype]);
  if (c->root != BATON__NO_ROOT && (c->root < 0 || c->root >= comm->size))
    return baton__fail(comm, BATON_EINVAL,
                       "%s: root %d is not a rank of this communicator "
                       "(size %d)",
                       c->name, c->root, comm->size);
  return BATON_OK;
}

/* A buffer this rank reads (or writes) n > 0 elements of must be there. */
static int check_buffers(baton_comm_t *comm, const baton__call_args_t *c, size_t send_n,
                         size_t recv_n) {
  if (send_n > 0 && !c->sendbuf)
    return baton__fail(comm, BATON_EINVAL, "%s: sendbuf is NULL with count %zu", c->name, send_n);
  if (recv_n > 0 && !c->recvbuf)
    return baton__fail(comm, BATON_EINVAL, "%s: recvbuf is NULL with count %zu", c->name, recv_n);
  return BATON_OK;
}

/* The core collectives: every rank writes recvbuf and reads sendbuf, except
 * that only the root reads it in a rooted one. */
static int validate(baton_comm_t *comm, const baton__call_args_t *c, size_t blocks) {
  int rc = validate_args(comm, c, blocks);
  if (rc)
    return rc;
  int reads_send = c->root == BATON__NO_ROOT || c->root == comm->rank;
  return check_buffers(comm, c, reads_send ? c->count : 0, c->count);
}

/* Issues the call. An i-call (req) hands it to the progress engine and
 * returns; the blocking form (req NULL) is the same call and a wait, which
 * runs it in this thread while there is no engine. Two threads at once in
 * calls on one communicator are refused, not left undefined. */
static int post(baton_comm_t *comm, const baton__call_args_t *a, baton_request_t **req) {
  int idle = 0;
  if (!atomic_compare_exchange_strong(&comm->busy, &idle, 1))
    return baton__fail(comm, BATON_EUSAGE,
                       "%s: another thread is in a call on this communicator; calls on one "
                       "communicator must come from one thread at a time",
                       a->name);
  baton__call_t *call;
  int rc = baton__call_issue(comm, a, &call);
  if (rc == 0 && req && (rc = baton__progress_post(call)) == 0)
    *req = call;
  else if (call)
    rc = rc ? (baton_wait(call), rc) : baton_wait(call);
  atomic_store(&comm->busy, 0);
  return rc;
}

#define ARGS(name_, coll_, send_, recv_, count_, dtype_, op_, root_)                               \
  (baton__call_args_t) {                                                                           \
    .name = name_, .coll = BATON__COLL_##coll_, .sendbuf = send_, .recvbuf = recv_,                \
    .count = count_, .dtype = dtype_, .op = op_, .root = root_                                     \
  }

static int do_allreduce(const void *sendbuf, void *recvbuf, size_t count, baton_dtype_t dtype,
                        baton_op_t op, baton_comm_t *comm, baton_request_t **req) {
  baton__call_args_t c =
      ARGS("allreduce", ALLREDUCE, sendbuf, recvbuf, count, dtype, op, BATON__NO_ROOT);
  int rc = validate(comm, &c, 1);
  return rc ? rc : post(comm, &c, req);
}

static int do_reduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                             baton_dtype_t dtype, baton_op_t op, baton_comm_t *comm,
                             baton_request_t **req) {
  baton__call_args_t c = ARGS("reduce_scatter", REDUCE_SCATTER, sendbuf, recvbuf, recvcount, dtype,
                              op, BATON__NO_ROOT);
  int rc = validate(comm, &c, comm ? (size_t)comm->size : 1);
  return rc ? rc : post(comm, &c, req);
}

static int do_allgather(const void *sendbuf, void *recvbuf, size_t sendcount, baton_dtype_t dtype,
                        baton_comm_t *comm, baton_request_t **req) {
  baton__call_args_t c = ARGS("allgather", ALLGATHER, sendbuf, recvbuf, sendcount, dtype,
                              BATON_OP_COUNT, BATON__NO_ROOT);
  int rc = validate(comm, &c, comm ? (size_t)comm->size : 1);
  return rc ? rc : post(comm, &c, req);
}

static int do_broadcast(const void *sendbuf, void *recvbuf, size_t count, baton_dtype_t dtype,
                        int root, baton_comm_t *comm, baton_request_t **req) {
  baton__call_args_t c =
      ARGS("broadcast", BROADCAST, sendbuf, recvbuf, count, dtype, BATON_OP_COUNT, root);
  int rc = validate(comm, &c, 1);
  if (rc)
    return rc;
  if (comm->rank != root)
    c.sendbuf = c.recvbuf; /* only the root's input is read */
  return post(comm, &c, req);
}

/* One chunk, `root`, holds the whole buffer (schedule.h). A non-root has
 * no output: what it passes on towards the root lives in scratch. */
static int do_reduce(const void *sendbuf, void *recvbuf, size_t count, baton_dtype_t dtype,
                     baton_op_t op, int root, baton_comm_t *comm, baton_request_t **req) {
  baton__call_args_t c = ARGS("reduce", REDUCE, sendbuf, recvbuf, count, dtype, op, root);
  int rc = validate_args(comm, &c, 1);
  if (rc || (rc = check_buffers(comm, &c, count, comm->rank == root ? count : 0)))
    return rc;
  return post(comm, &c, req);
}

/* Chunk c is the block to rank c in the input and the block from rank c in
 * the output (schedule.h), at the same offset in both. */
static int do_alltoall(const void *sendbuf, void *recvbuf, size_t count, baton_dtype_t dtype,
                       baton_comm_t *comm, baton_request_t **req) {
  baton__call_args_t c =
      ARGS("alltoall", ALLTOALL, sendbuf, recvbuf, count, dtype, BATON_OP_COUNT, BATON__NO_ROOT);
  int rc = validate(comm, &c, comm ? (size_t)comm->size : 1);
  if (rc)
    return rc;
  /* In place, a block received could overwrite one not yet sent. */
  if (sendbuf == recvbuf && comm->size > 1)
    c.stage = (size_t)comm->size * count * dtype_sizes[dtype];
  return post(comm, &c, req);
}

/* Chunk c is rank c's block: this rank's own in its input, all of them in
 * the root's output; a non-root keeps in scratch the blocks it forwards. */
static int do_gather(const void *sendbuf, void *recvbuf, size_t sendcount, baton_dtype_t dtype,
                     int root, baton_comm_t *comm, baton_request_t **req) {
  baton__call_args_t c =
      ARGS("gather", GATHER, sendbuf, recvbuf, sendcount, dtype, BATON_OP_COUNT, root);
  int rc = validate_args(comm, &c, comm ? (size_t)comm->size : 1);
  if (rc || (rc = check_buffers(comm, &c, sendcount, comm->rank == root ? sendcount : 0)))
    return rc;
  return post(comm, &c, req);
}

/* Chunk c is rank c's block: all of them in the root's input, this rank's
 * own in its output; the others a rank forwards live in scratch. */
static int do_scatter(const void *sendbuf, void *recvbuf, size_t recvcount, baton_dtype_t dtype,
                      int root, baton_comm_t *comm, baton_request_t **req) {
  baton__call_args_t c =
      ARGS("scatter", SCATTER, sendbuf, recvbuf, recvcount, dtype, BATON_OP_COUNT, root);
  int rc = validate(comm, &c, comm ? (size_t)comm->size : 1);
  if (rc)
    return rc;
  if (comm->rank != root)
    c.sendbuf = c.recvbuf; /* only the root's input is read */
  return post(comm, &c, req);
}

/* The names a v-variant's arrays have in baton.h. */
typedef struct {
  const char *counts, *displs;
} names_t;

/* Checks a v-variant's counts (and displacements, when given): present,
 * and every block inside the address space. *total is the sum of the
 * counts, *extent the elements the blocks span. */
static int check_blocks(baton_comm_t *comm, const baton__call_args_t *c, const size_t *counts,
                        const size_t *displs, names_t nm, int need_displs, size_t *total,
                        size_t *extent) {
  if (!counts)
    return baton__fail(comm, BATON_EINVAL, "%s: %s is NULL", c->name, nm.counts);
  if (need_displs && !displs)
    return baton__fail(comm, BATON_EINVAL, "%s: %s is NULL", c->name, nm.displs);
  size_t most = (size_t)PTRDIFF_MAX / dtype_sizes[c->dtype];
  *total = *extent = 0;
  for (int r = 0; r < comm->size; r++) {
    size_t at = displs ? displs[r] : *total;
    if (counts[r] > most || *total > most - counts[r] || (counts[r] && at > most - counts[r]))
      return baton__fail(
          comm, BATON_EINVAL, "%s: %s[%d] = %zu %s %zu of %s overflows the address space", c->name,
          nm.counts, r, counts[r], displs ? "at" : "after", at, dtype_names[c->dtype]);
    *total += counts[r];
    if (counts[r] && at + counts[r] > *extent)
      *extent = at + counts[r];
  }
  return BATON_OK;
}

static int check_counts(baton_comm_t *comm, const baton__call_args_t *c, int need_displs,
                        size_t *total, size_t *extent) {
  return check_blocks(comm, c, c->counts, c->displs, (names_t){"recvcounts", "displs"}, need_displs,
                      total, extent);
}

/* Chunk c is rank c's block, recvcounts[c] long at displs[c] in every
 * output, as allgather's but with a count per rank. */
static int do_allgatherv(const void *sendbuf, size_t sendcount, void *recvbuf,
                         const size_t *recvcounts, const size_t *displs, baton_dtype_t dtype,
                         baton_comm_t *comm, baton_request_t **req) {
  baton__call_args_t c = ARGS("allgatherv", ALLGATHERV, sendbuf, recvbuf, sendcount, dtype,
                              BATON_OP_COUNT, BATON__NO_ROOT);
  c.counts = recvcounts, c.displs = displs;
  size_t total = 0, extent = 0;
  int rc = validate_args(comm, &c, 1);
  if (rc || (rc = check_counts(comm, &c, 1, &total, &extent)))
    return rc;
  if (recvcounts[comm->rank] != sendcount)
    return baton__fail(comm, BATON_EINVAL,
                       "allgatherv: recvcounts[%d] = %zu differs from "
                       "this rank's sendcount %zu",
                       comm->rank, recvcounts[comm->rank], sendcount);
  if ((rc = check_buffers(comm, &c, sendcount, extent)))
    return rc;
  c.count = total;
  return post(comm, &c, req);
}

/* Chunk c is block c of the input, recvcounts[c] long, as reduce_scatter's
 * but with a count per rank; this rank's lands in its output. */
static int do_reduce_scatterv(const void *sendbuf, void *recvbuf, const size_t *recvcounts,
                              baton_dtype_t dtype, baton_op_t op, baton_comm_t *comm,
                              baton_request_t **req) {
  baton__call_args_t c =
      ARGS("reduce_scatterv", REDUCE_SCATTERV, sendbuf, recvbuf, 0, dtype, op, BATON__NO_ROOT);
  c.counts = recvcounts;
  size_t total = 0, extent = 0;
  int rc = validate_args(comm, &c, 1);
  if (rc || (rc = check_counts(comm, &c, 0, &total, &extent)) ||
      (rc = check_buffers(comm, &c, total, recvcounts[comm->rank])))
    return rc;
  c.count = total;
  return post(comm, &c, req);
}

/* Chunk c is the block to rank c in the input (sendcounts[c] at
 * sdispls[c]) and the block from rank c in the output (recvcounts[c] at
 * rdispls[c]); every block lands in the output directly, so no scratch but
 * in place, where a block received could overwrite one not yet sent and the
 * input is copied first, as alltoall's. The peers check each block's two
 * counts against each other (exec.c); this rank's own block is checked
 * here, where both are known. */
static int do_alltoallv(const void *sendbuf, const size_t *sendcounts, const size_t *sdispls,
                        void *recvbuf, const size_t *recvcounts, const size_t *rdispls,
                        baton_dtype_t dtype, baton_comm_t *comm, baton_request_t **req) {
  baton__call_args_t c =
      ARGS("alltoallv", ALLTOALLV, sendbuf, recvbuf, 0, dtype, BATON_OP_COUNT, BATON__NO_ROOT);
  c.counts = recvcounts, c.displs = rdispls;
  c.send_counts = sendcounts, c.send_displs = sdispls;
  size_t sent = 0, received = 0, in_extent = 0, out_extent = 0;
  int rc = validate_args(comm, &c, 1);
  if (rc ||
      (rc = check_blocks(comm, &c, sendcounts, sdispls, (names_t){"sendcounts", "sdispls"}, 1,
                         &sent, &in_extent)) ||
      (rc = check_blocks(comm, &c, recvcounts, rdispls, (names_t){"recvcounts", "rdispls"}, 1,
                         &received, &out_extent)) ||
      (rc = check_buffers(comm, &c, in_extent, out_extent)))
    return rc;
  int me = comm->rank;
  if (sendcounts[me] != recvcounts[me])
    return baton__fail(comm, BATON_EINVAL,
                       "alltoallv: this rank sends itself sendcounts[%d] = %zu elements but "
                       "expects recvcounts[%d] = %zu",
                       me, sendcounts[me], me, recvcounts[me]);
  if (sendbuf == recvbuf) /* even alone: its one block may move within the buffer */
    c.stage = in_extent * dtype_sizes[dtype];
  c.count = sent; /* what the log and the trace say; the choice ignores it (call.c) */
  (void)received;
  return post(comm, &c, req);
}

/* A one-byte allgather on the ring, or the host's rendezvous where every
 * rank shares memory (call.c). */
static int do_barrier(baton_comm_t *comm, baton_request_t **req) {
  if (!comm) {
    baton__log_warn(COLL, "barrier: comm is NULL");
    return BATON_EINVAL;
  }
  baton__call_args_t c =
      ARGS("barrier", BARRIER, NULL, NULL, 1, BATON_UINT8, BATON_OP_COUNT, BATON__NO_ROOT);
  return post(comm, &c, req);
}

int baton__init_barrier(baton_comm_t *comm) {
  baton__call_args_t c =
      ARGS("barrier", BARRIER, NULL, NULL, 1, BATON_UINT8, BATON_OP_COUNT, BATON__NO_ROOT);
  c.setup = 1;
  return post(comm, &c, NULL);
}

/* ---- The public forms: blocking, and the i-forms (baton.h). */

int baton_allreduce(const void *sendbuf, void *recvbuf, size_t count, baton_dtype_t dtype,
                    baton_op_t op, baton_comm_t *comm) {
  return do_allreduce(sendbuf, recvbuf, count, dtype, op, comm, NULL);
}

int baton_iallreduce(const void *sendbuf, void *recvbuf, size_t count, baton_dtype_t dtype,
                     baton_op_t op, baton_comm_t *comm, baton_request_t **req) {
  if (!req)
    return BATON_EINVAL;
  *req = NULL;
  return do_allreduce(sendbuf, recvbuf, count, dtype, op, comm, req);
}

int baton_reduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount, baton_dtype_t dtype,
                         baton_op_t op, baton_comm_t *comm) {
  return do_reduce_scatter(sendbuf, recvbuf, recvcount, dtype, op, comm, NULL);
}

int baton_ireduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount, baton_dtype_t dtype,
                          baton_op_t op, baton_comm_t *comm, baton_request_t **req) {
  if (!req)
    return BATON_EINVAL;
  *req = NULL;
  return do_reduce_scatter(sendbuf, recvbuf, recvcount, dtype, op, comm, req);
}

int baton_allgather(const void *sendbuf, void *recvbuf, size_t sendcount, baton_dtype_t dtype,
                    baton_comm_t *comm) {
  return do_allgather(sendbuf, recvbuf, sendcount, dtype, comm, NULL);
}

int baton_iallgather(const void *sendbuf, void *recvbuf, size_t sendcount, baton_dtype_t dtype,
                     baton_comm_t *comm, baton_request_t **req) {
  if (!req)
    return BATON_EINVAL;
  *req = NULL;
  return do_allgather(sendbuf, recvbuf, sendcount, dtype, comm, req);
}

int baton_broadcast(const void *sendbuf, void *recvbuf, size_t count, baton_dtype_t dtype, int root,
                    baton_comm_t *comm) {
  return do_broadcast(sendbuf, recvbuf, count, dtype, root, comm, NULL);
}

int baton_ibroadcast(const void *sendbuf, void *recvbuf, size_t count, baton_dtype_t dtype,
                     int root, baton_comm_t *comm, baton_request_t **req) {
  if (!req)
    return BATON_EINVAL;
  *req = NULL;
  return do_broadcast(sendbuf, recvbuf, count, dtype, root, comm, req);
}

int baton_reduce(const void *sendbuf, void *recvbuf, size_t count, baton_dtype_t dtype,
                 baton_op_t op, int root, baton_comm_t *comm) {
  return do_reduce(sendbuf, recvbuf, count, dtype, op, root, comm, NULL);
}

int baton_ireduce(const void *sendbuf, void *recvbuf, size_t count, baton_dtype_t dtype,
                  baton_op_t op, int root, baton_comm_t *comm, baton_request_t **req) {
  if (!req)
    return BATON_EINVAL;
  *req = NULL;
  return do_reduce(sendbuf, recvbuf, count, dtype, op, root, comm, req);
}

int baton_alltoall(const void *sendbuf, void *recvbuf, size_t count, baton_dtype_t dtype,
                   baton_comm_t *comm) {
  return do_alltoall(sendbuf, recvbuf, count, dtype, comm, NULL);
}

int baton_ialltoall(const void *sendbuf, void *recvbuf, size_t count, baton_dtype_t dtype,
                    baton_comm_t *comm, baton_request_t **req) {
  if (!req)
    return BATON_EINVAL;
  *req = NULL;
  return do_alltoall(sendbuf, recvbuf, count, dtype, comm, req);
}

int baton_gather(const void *sendbuf, void *recvbuf, size_t sendcount, baton_dtype_t dtype,
                 int root, baton_comm_t *comm) {
  return do_gather(sendbuf, recvbuf, sendcount, dtype, root, comm, NULL);
}

int baton_igather(const void *sendbuf, void *recvbuf, size_t sendcount, baton_dtype_t dtype,
                  int root, baton_comm_t *comm, baton_request_t **req) {
  if (!req)
    return BATON_EINVAL;
  *req = NULL;
  return do_gather(sendbuf, recvbuf, sendcount, dtype, root, comm, req);
}

int baton_scatter(const void *sendbuf, void *recvbuf, size_t recvcount, baton_dtype_t dtype,
                  int root, baton_comm_t *comm) {
  return do_scatter(sendbuf, recvbuf, recvcount, dtype, root, comm, NULL);
}

int baton_iscatter(const void *sendbuf, void *recvbuf, size_t recvcount, baton_dtype_t dtype,
                   int root, baton_comm_t *comm, baton_request_t **req) {
  if (!req)
    return BATON_EINVAL;
  *req = NULL;
  return do_scatter(sendbuf, recvbuf, recvcount, dtype, root, comm, req);
}

int baton_allgatherv(const void *sendbuf, size_t sendcount, void *recvbuf, const size_t *recvcounts,
                     const size_t *displs, baton_dtype_t dtype, baton_comm_t *comm) {
  return do_allgatherv(sendbuf, sendcount, recvbuf, recvcounts, displs, dtype, comm, NULL);
}

int baton_iallgatherv(const void *sendbuf, size_t sendcount, void *recvbuf,
                      const size_t *recvcounts, const size_t *displs, baton_dtype_t dtype,
                      baton_comm_t *comm, baton_request_t **req) {
  if (!req)
    return BATON_EINVAL;
  *req = NULL;
  return do_allgatherv(sendbuf, sendcount, recvbuf, recvcounts, displs, dtype, comm, req);
}

int baton_reduce_scatterv(const void *sendbuf, void *recvbuf, const size_t *recvcounts,
                          baton_dtype_t dtype, baton_op_t op, baton_comm_t *comm) {
  return do_reduce_scatterv(sendbuf, recvbuf, recvcounts, dtype, op, comm, NULL);
}

int baton_ireduce_scatterv(const void *sendbuf, void *recvbuf, const size_t *recvcounts,
                           baton_dtype_t dtype, baton_op_t op, baton_comm_t *comm,
                           baton_request_t **req) {
  if (!req)
    return BATON_EINVAL;
  *req = NULL;
  return do_reduce_scatterv(sendbuf, recvbuf, recvcounts, dtype, op, comm, req);
}

int baton_alltoallv(const void *sendbuf, const size_t *sendcounts, const size_t *sdispls,
                    void *recvbuf, const size_t *recvcounts, const size_t *rdispls,
                    baton_dtype_t dtype, baton_comm_t *comm) {
  return do_alltoallv(sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls, dtype, comm,
                      NULL);
}

int baton_ialltoallv(const void *sendbuf, const size_t *sendcounts, const size_t *sdispls,
                     void *recvbuf, const size_t *recvcounts, const size_t *rdispls,
                     baton_dtype_t dtype, baton_comm_t *comm, baton_request_t **req) {
  if (!req)
    return BATON_EINVAL;
  *req = NULL;
  return do_alltoallv(sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls, dtype, comm, req);
}

int baton_barrier(baton_comm_t *comm) { return do_barrier(comm, NULL); }

int baton_ibarrier(baton_comm_t *comm, baton_request_t **req) {
  if (!req)
    return BATON_EINVAL;
  *req = NULL;
  return do_barrier(comm, req);
}
