/*
 * coll.c - the public collectives: validate the arguments, lay out the
 * chunks, build the schedule and hand it to the executor.
 *
 * Arguments are checked before any byte moves, so a bad call fails on the
 * rank that made it without touching the peers' sequence of collectives.
 */
#include <limits.h>
#include <stdint.h>
#include <string.h>

#include "comm.h"

static const char *const dtype_names[] = {"int8",   "uint8",   "int32",    "uint32",  "int64",
                                          "uint64", "float16", "bfloat16", "float32", "float64"};
static const size_t dtype_sizes[] = {1, 1, 4, 4, 8, 8, 2, 2, 4, 8};
static const char *const op_names[] = {"sum", "prod", "min", "max", "avg"};

size_t baton_dtype_size(baton_dtype_t dtype) {
  return (unsigned)dtype < BATON_DTYPE_COUNT ? dtype_sizes[dtype] : 0;
}

const char *baton_dtype_name(baton_dtype_t dtype) {
  return (unsigned)dtype < BATON_DTYPE_COUNT ? dtype_names[dtype] : "unknown";
}

const char *baton_op_name(baton_op_t op) {
  return (unsigned)op < BATON_OP_COUNT ? op_names[op] : "unknown";
}

/* A call's arguments; op is BATON_OP_COUNT for collectives without one and
 * `blocks` is how many `count`-sized blocks the largest buffer holds. A
 * v-variant's count is the sum of its counts, which the signature carries
 * so that ranks passing different counts show up as a mismatch. */
typedef struct {
  const char *name;
  const void *sendbuf;
  void *recvbuf;
  size_t count, blocks;
  baton_dtype_t dtype;
  baton_op_t op;
  int root;     /* NO_ROOT for collectives without one */
  size_t stage; /* bytes of input to copy to scratch first (in-place alltoall) */
} call_t;
#define NO_ROOT INT_MIN

/* The checks that need no buffer: comm, dtype, op, size and root. */
static int validate_args(baton_comm_t *comm, const call_t *c) {
  if (!comm) {
    baton__log_warn(COLL, "%s: comm is NULL", c->name);
    return BATON_EINVAL;
  }
  if ((unsigned)c->dtype >= BATON_DTYPE_COUNT)
    return baton__fail(comm, BATON_EINVAL, "%s: dtype %d is not a baton_dtype_t", c->name,
                       (int)c->dtype);
  if (c->op != BATON_OP_COUNT && (unsigned)c->op >= BATON_OP_COUNT)
    return baton__fail(comm, BATON_EINVAL, "%s: op %d is not a baton_op_t", c->name, (int)c->op);
  size_t es = dtype_sizes[c->dtype];
  if (c->count > (size_t)PTRDIFF_MAX / es / c->blocks)
    return baton__fail(comm, BATON_EINVAL, "%s: count %zu of %s overflows the address space",
                       c->name, c->count, dtype_names[c->dtype]);
  if (c->root != NO_ROOT && (c->root < 0 || c->root >= comm->size))
    return baton__fail(comm, BATON_EINVAL,
                       "%s: root %d is not a rank of this communicator "
                       "(size %d)",
                       c->name, c->root, comm->size);
  return BATON_OK;
}

/* A buffer this rank reads (or writes) n > 0 elements of must be there. */
static int check_buffers(baton_comm_t *comm, const call_t *c, size_t send_n, size_t recv_n) {
  if (send_n > 0 && !c->sendbuf)
    return baton__fail(comm, BATON_EINVAL, "%s: sendbuf is NULL with count %zu", c->name, send_n);
  if (recv_n > 0 && !c->recvbuf)
    return baton__fail(comm, BATON_EINVAL, "%s: recvbuf is NULL with count %zu", c->name, recv_n);
  return BATON_OK;
}

/* The core collectives: every rank writes recvbuf and reads sendbuf, except
 * that only the root reads it in a rooted one. */
static int validate(baton_comm_t *comm, const call_t *c) {
  int rc = validate_args(comm, c);
  if (rc)
    return rc;
  int reads_send = c->root == NO_ROOT || c->root == comm->rank;
  return check_buffers(comm, c, reads_send ? c->count : 0, c->count);
}

/* BATON_TRACE: the finished collective's lines (trace.c). */
static void trace_end(baton_comm_t *comm, const call_t *c, baton__coll_t coll, int flat, int rc) {
  size_t es = dtype_sizes[c->dtype];
  baton__trace_call_t t = {.seq = comm->seq,
                           .coll = coll,
                           .dtype = dtype_names[c->dtype],
                           .count = c->count,
                           .root = c->root == NO_ROOT ? -1 : c->root,
                           .elsize = es,
                           .sched = flat ? NULL : &comm->sched,
                           .len = comm->len,
                           .flat_bytes =
                               c->count * es * (coll == BATON__COLL_REDUCE_SCATTER ? c->blocks : 1),
                           .rc = rc};
  baton__trace_end(comm->trace, &t);
}

static const baton__algo_t *ring_algo(void) {
  static const baton__algo_t *ring;
  if (!ring)
    ring = baton__algo_find("ring");
  return ring;
}

/* The algorithm as the call's signature carries it: ranks that chose
 * differently (different BATON_ALGO, say) fail with BATON_EMISMATCH. */
static uint8_t algo_id(const baton__algo_t *algo) {
  int n;
  const baton__algo_t *all = baton__algos(&n);
  return algo ? (uint8_t)(algo - all + 1) : 0;
}

/* Size 1: each chunk from the input to the output, where they differ. */
static void run_local(const baton_comm_t *comm, const call_t *c, size_t es) {
  for (int r = 0; r < comm->size; r++)
    if (comm->len[r] && comm->in_off[r] != BATON__NO_OUT && comm->out_off[r] != BATON__NO_OUT &&
        (const char *)c->sendbuf + comm->in_off[r] * es !=
            (char *)c->recvbuf + comm->out_off[r] * es)
      memmove((char *)c->recvbuf + comm->out_off[r] * es,
              (const char *)c->sendbuf + comm->in_off[r] * es, comm->len[r] * es);
}

/* Builds the schedule, reserves its scratch (WORK, then the staged input
 * past it) and runs it. */
static int run_sched(baton_comm_t *comm, const call_t *c, baton__coll_t coll,
                     const baton__algo_t *algo, baton__exec_args_t *a) {
  size_t es = dtype_sizes[c->dtype];
  baton__schedule_on(&comm->sched, coll, algo, comm->rank, comm->size, c->count,
                     c->root == NO_ROOT ? 0 : c->root, comm->order);
  size_t work = baton__sched_work_bytes(comm, es);
  size_t stage_at = (work + 63) & ~(size_t)63;
  if ((work || c->stage) && baton__work_reserve(comm, stage_at + c->stage) != 0)
    return baton__fail(comm, BATON_ENOMEM,
                       "%s: %s needs %zu bytes of scratch memory%s, more "
                       "than BATON_SCRATCH_BYTES allows or the system gives",
                       c->name, comm->sched.algo, stage_at + c->stage,
                       c->stage ? " (in place: a copy of the input)" : "");
  if (c->stage) {
    memcpy(comm->work + stage_at, c->sendbuf, c->stage);
    a->in = comm->work + stage_at;
  }
  return baton__exec(comm, a);
}

static int run(baton_comm_t *comm, const call_t *c, baton__coll_t coll) {
  size_t es = dtype_sizes[c->dtype];
  int rc;
  /* baton__select only returns an algorithm that serves the collective
   * (NULL when none of this build does). */
  const baton__algo_t *algo = baton__select(comm, coll, c->count, es);
  if (!algo && comm->size > 1 && c->count > 0) /* before the sequence number moves */
    return baton__fail(comm, BATON_EUSAGE, "%s: no algorithm of this build serves %s", c->name,
                       c->name);
  int flat = algo && (algo->traits & BATON__ALGO_MAILBOX);
  comm->seq++;
  comm->sig = (baton__sig_t){.seq = comm->seq,
                             .count = c->count,
                             .root = c->root == NO_ROOT ? -1 : c->root,
                             .coll = (uint8_t)coll,
                             .dtype = (uint8_t)c->dtype,
                             .op = c->op == BATON_OP_COUNT ? 0 : (uint8_t)c->op,
                             .algo = algo_id(algo)};
  if (comm->host_net)
    baton__shm_publish(comm->host_net->impl, &comm->sig);
  rc = baton__comm_begin(comm, c->name);
  if (rc)
    return rc;
  baton__log_info(COLL, "%s #%llu: count %zu %s %s, algo %s", c->name,
                  (unsigned long long)comm->seq, c->count, dtype_names[c->dtype],
                  c->op == BATON_OP_COUNT ? "-" : op_names[c->op],
                  comm->size == 1 || !algo ? "local" : algo->name);
  if (c->count == 0)
    return BATON_OK;
  if (comm->size == 1) {
    run_local(comm, c, es);
    return BATON_OK;
  }
  baton__exec_args_t a = {.in = c->sendbuf,
                          .out = c->recvbuf,
                          .elsize = es,
                          .dtype = c->dtype,
                          .op = c->op == BATON_OP_COUNT ? BATON_SUM : c->op,
                          .root = c->root};
  if (comm->trace)
    baton__trace_begin(comm->trace);
  if (flat) {
    if (comm->trace)
      baton__trace_step_begin(comm->trace, 0);
    rc = baton__flat_run(comm, coll, c->count, &a);
    if (comm->trace)
      baton__trace_step_end(comm->trace, 0);
  } else {
    /* The same table of algorithms that baton-viz and the tracer draw. */
    rc = run_sched(comm, c, coll, algo, &a);
  }
  if (comm->trace)
    trace_end(comm, c, coll, flat, rc);
  return rc;
}

int baton_allreduce(const void *sendbuf, void *recvbuf, size_t count, baton_dtype_t dtype,
                    baton_op_t op, baton_comm_t *comm) {
  call_t c = {"allreduce", sendbuf, recvbuf, count, 1, dtype, op, NO_ROOT, 0};
  int rc = validate(comm, &c);
  if (rc)
    return rc;
  for (int r = 0; r < comm->size; r++) {
    comm->in_off[r] = comm->out_off[r] = comm->work_off[r] = baton__chunk_off(count, comm->size, r);
    comm->len[r] = baton__chunk_len(count, comm->size, r);
  }
  return run(comm, &c, BATON__COLL_ALLREDUCE);
}

int baton_reduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount, baton_dtype_t dtype,
                         baton_op_t op, baton_comm_t *comm) {
  call_t c = {
      "reduce_scatter", sendbuf, recvbuf, recvcount, comm ? (size_t)comm->size : 1, dtype, op,
      NO_ROOT,          0};
  int rc = validate(comm, &c);
  if (rc)
    return rc;
  for (int r = 0; r < comm->size; r++) {
    comm->in_off[r] = comm->work_off[r] = (size_t)r * recvcount;
    comm->out_off[r] = r == comm->rank ? 0 : BATON__NO_OUT;
    comm->len[r] = recvcount;
  }
  return run(comm, &c, BATON__COLL_REDUCE_SCATTER);
}

int baton_allgather(const void *sendbuf, void *recvbuf, size_t sendcount, baton_dtype_t dtype,
                    baton_comm_t *comm) {
  call_t c = {"allgather", sendbuf,        recvbuf, sendcount, comm ? (size_t)comm->size : 1,
              dtype,       BATON_OP_COUNT, NO_ROOT, 0};
  int rc = validate(comm, &c);
  if (rc)
    return rc;
  for (int r = 0; r < comm->size; r++) {
    comm->in_off[r] = r == comm->rank ? 0 : BATON__NO_OUT;
    comm->out_off[r] = comm->work_off[r] = (size_t)r * sendcount;
    comm->len[r] = sendcount;
  }
  return run(comm, &c, BATON__COLL_ALLGATHER);
}

int baton_broadcast(const void *sendbuf, void *recvbuf, size_t count, baton_dtype_t dtype, int root,
                    baton_comm_t *comm) {
  call_t c = {"broadcast", sendbuf, recvbuf, count, 1, dtype, BATON_OP_COUNT, root, 0};
  int rc = validate(comm, &c);
  if (rc)
    return rc;
  for (int r = 0; r < comm->size; r++) {
    comm->in_off[r] = comm->out_off[r] = comm->work_off[r] = 0;
    comm->len[r] = r == root ? count : 0;
  }
  if (comm->rank != root)
    c.sendbuf = c.recvbuf; /* only the root's input is read */
  return run(comm, &c, BATON__COLL_BROADCAST);
}

/* One chunk, `root`, holds the whole buffer (schedule.h). A non-root has
 * no output: what it passes on towards the root lives in scratch. */
int baton_reduce(const void *sendbuf, void *recvbuf, size_t count, baton_dtype_t dtype,
                 baton_op_t op, int root, baton_comm_t *comm) {
  call_t c = {"reduce", sendbuf, recvbuf, count, 1, dtype, op, root, 0};
  int rc = validate_args(comm, &c);
  if (rc || (rc = check_buffers(comm, &c, count, comm->rank == root ? count : 0)))
    return rc;
  for (int r = 0; r < comm->size; r++) {
    comm->in_off[r] = comm->out_off[r] = comm->work_off[r] = 0;
    comm->len[r] = r == root ? count : 0;
  }
  if (comm->rank != root)
    comm->out_off[root] = BATON__NO_OUT;
  return run(comm, &c, BATON__COLL_REDUCE);
}

/* Chunk c is the block to rank c in the input and the block from rank c in
 * the output (schedule.h), at the same offset in both. */
int baton_alltoall(const void *sendbuf, void *recvbuf, size_t count, baton_dtype_t dtype,
                   baton_comm_t *comm) {
  call_t c = {"alltoall", sendbuf,        recvbuf, count, comm ? (size_t)comm->size : 1,
              dtype,      BATON_OP_COUNT, NO_ROOT, 0};
  int rc = validate(comm, &c);
  if (rc)
    return rc;
  for (int r = 0; r < comm->size; r++) {
    comm->in_off[r] = comm->out_off[r] = comm->work_off[r] = (size_t)r * count;
    comm->len[r] = count;
  }
  /* In place, a block received could overwrite one not yet sent. */
  if (sendbuf == recvbuf && comm->size > 1)
    c.stage = (size_t)comm->size * count * dtype_sizes[dtype];
  return run(comm, &c, BATON__COLL_ALLTOALL);
}

/* Chunk c is rank c's block: this rank's own in its input, all of them in
 * the root's output; a non-root keeps in scratch the blocks it forwards. */
int baton_gather(const void *sendbuf, void *recvbuf, size_t sendcount, baton_dtype_t dtype,
                 int root, baton_comm_t *comm) {
  call_t c = {"gather", sendbuf,        recvbuf, sendcount, comm ? (size_t)comm->size : 1,
              dtype,    BATON_OP_COUNT, root,    0};
  int rc = validate_args(comm, &c);
  if (rc || (rc = check_buffers(comm, &c, sendcount, comm->rank == root ? sendcount : 0)))
    return rc;
  for (int r = 0; r < comm->size; r++) {
    comm->in_off[r] = r == comm->rank ? 0 : BATON__NO_OUT;
    comm->work_off[r] = (size_t)r * sendcount;
    comm->out_off[r] = comm->rank == root ? (size_t)r * sendcount : BATON__NO_OUT;
    comm->len[r] = sendcount;
  }
  return run(comm, &c, BATON__COLL_GATHER);
}

/* Chunk c is rank c's block: all of them in the root's input, this rank's
 * own in its output; the others a rank forwards live in scratch. */
int baton_scatter(const void *sendbuf, void *recvbuf, size_t recvcount, baton_dtype_t dtype,
                  int root, baton_comm_t *comm) {
  call_t c = {"scatter", sendbuf,        recvbuf, recvcount, comm ? (size_t)comm->size : 1,
              dtype,     BATON_OP_COUNT, root,    0};
  int rc = validate(comm, &c);
  if (rc)
    return rc;
  for (int r = 0; r < comm->size; r++) {
    comm->in_off[r] = comm->rank == root ? (size_t)r * recvcount : BATON__NO_OUT;
    comm->work_off[r] = (size_t)r * recvcount;
    comm->out_off[r] = r == comm->rank ? 0 : BATON__NO_OUT;
    comm->len[r] = recvcount;
  }
  if (comm->rank != root)
    c.sendbuf = c.recvbuf; /* only the root's input is read */
  return run(comm, &c, BATON__COLL_SCATTER);
}

/* Checks a v-variant's counts (and displacements, when given): present,
 * and every block inside the address space. *total is the sum of the
 * counts, *extent the elements the blocks span. */
static int check_counts(baton_comm_t *comm, const call_t *c, const size_t *counts,
                        const size_t *displs, int need_displs, size_t *total, size_t *extent) {
  if (!counts)
    return baton__fail(comm, BATON_EINVAL, "%s: recvcounts is NULL", c->name);
  if (need_displs && !displs)
    return baton__fail(comm, BATON_EINVAL, "%s: displs is NULL", c->name);
  size_t most = (size_t)PTRDIFF_MAX / dtype_sizes[c->dtype];
  *total = *extent = 0;
  for (int r = 0; r < comm->size; r++) {
    size_t at = displs ? displs[r] : *total;
    if (counts[r] > most || *total > most - counts[r] || (counts[r] && at > most - counts[r]))
      return baton__fail(comm, BATON_EINVAL,
                         "%s: recvcounts[%d] = %zu%s%zu of %s overflows "
                         "the address space",
                         c->name, r, counts[r], displs ? " at displs = " : " after ", at,
                         dtype_names[c->dtype]);
    *total += counts[r];
    if (counts[r] && at + counts[r] > *extent)
      *extent = at + counts[r];
  }
  return BATON_OK;
}

/* Chunk c is rank c's block, recvcounts[c] long at displs[c] in every
 * output, as allgather's but with a count per rank. */
int baton_allgatherv(const void *sendbuf, size_t sendcount, void *recvbuf, const size_t *recvcounts,
                     const size_t *displs, baton_dtype_t dtype, baton_comm_t *comm) {
  call_t c = {"allgatherv", sendbuf, recvbuf, sendcount, 1, dtype, BATON_OP_COUNT, NO_ROOT, 0};
  size_t total = 0, extent = 0;
  int rc = validate_args(comm, &c);
  if (rc || (rc = check_counts(comm, &c, recvcounts, displs, 1, &total, &extent)))
    return rc;
  if (recvcounts[comm->rank] != sendcount)
    return baton__fail(comm, BATON_EINVAL,
                       "allgatherv: recvcounts[%d] = %zu differs from "
                       "this rank's sendcount %zu",
                       comm->rank, recvcounts[comm->rank], sendcount);
  if ((rc = check_buffers(comm, &c, sendcount, extent)))
    return rc;
  for (int r = 0; r < comm->size; r++) {
    comm->in_off[r] = r == comm->rank ? 0 : BATON__NO_OUT;
    comm->out_off[r] = comm->work_off[r] = displs[r];
    comm->len[r] = recvcounts[r];
  }
  c.count = total;
  return run(comm, &c, BATON__COLL_ALLGATHERV);
}

/* Chunk c is block c of the input, recvcounts[c] long, as reduce_scatter's
 * but with a count per rank; this rank's lands in its output. */
int baton_reduce_scatterv(const void *sendbuf, void *recvbuf, const size_t *recvcounts,
                          baton_dtype_t dtype, baton_op_t op, baton_comm_t *comm) {
  call_t c = {"reduce_scatterv", sendbuf, recvbuf, 0, 1, dtype, op, NO_ROOT, 0};
  size_t total = 0, extent = 0;
  int rc = validate_args(comm, &c);
  if (rc || (rc = check_counts(comm, &c, recvcounts, NULL, 0, &total, &extent)) ||
      (rc = check_buffers(comm, &c, total, recvcounts[comm->rank])))
    return rc;
  for (size_t r = 0, at = 0; r < (size_t)comm->size; at += recvcounts[r++]) {
    comm->in_off[r] = comm->work_off[r] = at;
    comm->out_off[r] = (int)r == comm->rank ? 0 : BATON__NO_OUT;
    comm->len[r] = recvcounts[r];
  }
  c.count = total;
  return run(comm, &c, BATON__COLL_REDUCE_SCATTERV);
}

/* Without shared memory between all ranks the barrier is a ring allgather
 * of one byte per rank: after its N-1 steps every rank has heard, through
 * the chain, from every other. */
int baton__ring_barrier(baton_comm_t *comm) {
  for (int r = 0; r < comm->size; r++) {
    comm->in_off[r] = r == comm->rank ? 0 : BATON__NO_OUT;
    comm->out_off[r] = (size_t)r;
    comm->len[r] = 1;
  }
  comm->scratch[comm->rank] = 1;
  baton__exec_args_t a = {.in = (const char *)comm->scratch + comm->rank,
                          .out = (char *)comm->scratch,
                          .elsize = 1,
                          .dtype = BATON_UINT8,
                          .op = BATON_SUM};
  baton__schedule_on(&comm->sched, BATON__COLL_ALLGATHER, ring_algo(), comm->rank, comm->size, 1, 0,
                     comm->order);
  comm->sched.algo = "ring";
  return baton__exec(comm, &a);
}

int baton_barrier(baton_comm_t *comm) {
  if (!comm) {
    baton__log_warn(COLL, "barrier: comm is NULL");
    return BATON_EINVAL;
  }
  comm->seq++;
  comm->sig = (baton__sig_t){.seq = comm->seq, .root = -1, .coll = BATON__COLL_BARRIER};
  int rc = baton__comm_begin(comm, "barrier");
  if (rc || comm->size == 1)
    return rc;
  if (!comm->one_host || !comm->host_net)
    return baton__ring_barrier(comm);
  char why[BATON__ERRLEN] = "";
  rc = baton__shm_arrive(comm->host_net->impl, ++comm->shm_calls, &comm->sig,
                         comm->params.timeout_s, why, sizeof why);
  if (rc)
    return baton__fail(comm, rc, "barrier #%llu: %s", (unsigned long long)comm->seq, why);
  return BATON_OK;
}
