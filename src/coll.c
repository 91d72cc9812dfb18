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

static const char *const dtype_names[] = {"int8",    "uint8",    "int32",   "uint32",
                                          "int64",   "uint64",   "float16", "bfloat16",
                                          "float32", "float64"};
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
 * `blocks` is how many `count`-sized blocks the largest buffer holds. */
typedef struct {
  const char *name;
  const void *sendbuf;
  void *recvbuf;
  size_t count, blocks;
  baton_dtype_t dtype;
  baton_op_t op;
  int root; /* NO_ROOT for collectives without one */
} call_t;
#define NO_ROOT INT_MIN

static int validate(baton_comm_t *comm, const call_t *c) {
  if (!comm) {
    BATON_WARN(COLL, "%s: comm is NULL", c->name);
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
    return baton__fail(comm, BATON_EINVAL, "%s: root %d is not a rank of this communicator "
                       "(size %d)", c->name, c->root, comm->size);
  int reads_send = c->root == NO_ROOT || c->root == comm->rank;
  if (c->count > 0 && !c->sendbuf && reads_send)
    return baton__fail(comm, BATON_EINVAL, "%s: sendbuf is NULL with count %zu", c->name,
                       c->count);
  if (c->count > 0 && !c->recvbuf)
    return baton__fail(comm, BATON_EINVAL, "%s: recvbuf is NULL with count %zu", c->name,
                       c->count);
  return BATON_OK;
}

/* BATON_TRACE: the finished collective's lines (trace.c). */
static void trace_end(baton_comm_t *comm, const call_t *c, baton__coll_t coll, int flat,
                      int rc) {
  size_t es = dtype_sizes[c->dtype];
  baton__trace_call_t t = {.seq = comm->seq, .coll = coll, .dtype = dtype_names[c->dtype],
                           .count = c->count, .root = c->root == NO_ROOT ? -1 : c->root,
                           .elsize = es,
                           .sched = flat ? NULL : &comm->sched, .len = comm->len,
                           .flat_bytes = c->count * es *
                                         (coll == BATON__COLL_REDUCE_SCATTER ? c->blocks : 1),
                           .rc = rc};
  baton__trace_end(comm->trace, &t);
}

static const baton__algo_t *ring_algo(void) {
  static const baton__algo_t *ring;
  if (!ring)
    ring = baton__algo_find("ring");
  return ring;
}

static int run(baton_comm_t *comm, const call_t *c, baton__coll_t coll) {
  size_t es = dtype_sizes[c->dtype];
  int rc;
  const baton__algo_t *algo = baton__select(comm, coll, c->count, es);
  int flat = strcmp(algo->name, "flat") == 0;
  comm->seq++;
  comm->sig = (baton__sig_t){.seq = comm->seq, .count = c->count,
                             .root = c->root == NO_ROOT ? -1 : c->root, .coll = (uint8_t)coll,
                             .dtype = (uint8_t)c->dtype,
                             .op = c->op == BATON_OP_COUNT ? 0 : (uint8_t)c->op};
  rc = baton__comm_begin(comm, c->name);
  if (rc)
    return rc;
  BATON_INFO(COLL, "%s #%llu: count %zu %s %s, algo %s", c->name,
             (unsigned long long)comm->seq, c->count, dtype_names[c->dtype],
             c->op == BATON_OP_COUNT ? "-" : op_names[c->op],
             comm->size == 1 ? "local" : algo->name);
  if (c->count == 0)
    return BATON_OK;
  if (comm->size == 1) {
    if (c->recvbuf != c->sendbuf)
      memcpy(c->recvbuf, c->sendbuf, c->count * es);
    return BATON_OK;
  }
  baton__exec_args_t a = {.in = c->sendbuf, .out = c->recvbuf, .elsize = es,
                          .dtype = c->dtype, .op = c->op == BATON_OP_COUNT ? BATON_SUM : c->op,
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
    baton__schedule_on(&comm->sched, coll, algo, comm->rank, comm->size, c->count,
                       c->root == NO_ROOT ? 0 : c->root, comm->order);
    size_t work = baton__sched_work_bytes(comm, es);
    if (work && baton__work_reserve(comm, work) != 0)
      rc = baton__fail(comm, BATON_ENOMEM, "%s: %s needs %zu bytes of scratch memory, more "
                       "than BATON_SCRATCH_BYTES allows or the system gives", c->name,
                       comm->sched.algo, work);
    else
      rc = baton__exec(comm, &a);
  }
  if (comm->trace)
    trace_end(comm, c, coll, flat, rc);
  return rc;
}

int baton_allreduce(const void *sendbuf, void *recvbuf, size_t count, baton_dtype_t dtype,
                    baton_op_t op, baton_comm_t *comm) {
  call_t c = {"allreduce", sendbuf, recvbuf, count, 1, dtype, op, NO_ROOT};
  int rc = validate(comm, &c);
  if (rc)
    return rc;
  for (int r = 0; r < comm->size; r++) {
    comm->in_off[r] = comm->out_off[r] = comm->work_off[r] =
        baton__chunk_off(count, comm->size, r);
    comm->len[r] = baton__chunk_len(count, comm->size, r);
  }
  return run(comm, &c, BATON__COLL_ALLREDUCE);
}

int baton_reduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                         baton_dtype_t dtype, baton_op_t op, baton_comm_t *comm) {
  call_t c = {"reduce_scatter", sendbuf, recvbuf, recvcount, comm ? (size_t)comm->size : 1,
              dtype, op, NO_ROOT};
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
  call_t c = {"allgather", sendbuf, recvbuf, sendcount, comm ? (size_t)comm->size : 1,
              dtype, BATON_OP_COUNT, NO_ROOT};
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

int baton_broadcast(const void *sendbuf, void *recvbuf, size_t count, baton_dtype_t dtype,
                    int root, baton_comm_t *comm) {
  call_t c = {"broadcast", sendbuf, recvbuf, count, 1, dtype, BATON_OP_COUNT, root};
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
                          .out = (char *)comm->scratch, .elsize = 1,
                          .dtype = BATON_UINT8, .op = BATON_SUM};
  baton__schedule_on(&comm->sched, BATON__COLL_ALLGATHER, ring_algo(), comm->rank, comm->size, 1,
                     0, comm->order);
  comm->sched.algo = "ring";
  return baton__exec(comm, &a);
}

int baton_barrier(baton_comm_t *comm) {
  if (!comm) {
    BATON_WARN(COLL, "barrier: comm is NULL");
    return BATON_EINVAL;
  }
  comm->seq++;
  comm->sig = (baton__sig_t){.seq = comm->seq, .root = -1, .coll = BATON__COLL_BARRIER};
  int rc = baton__comm_begin(comm, "barrier");
  if (rc || comm->size == 1)
    return rc;
  if (!comm->one_host || !comm->shm)
    return baton__ring_barrier(comm);
  char why[BATON__ERRLEN] = "";
  rc = baton__shm_arrive(comm->shm, ++comm->shm_calls, &comm->sig, comm->params.timeout_s, why,
                         sizeof why);
  if (rc)
    return baton__fail(comm, rc, "barrier #%llu: %s", (unsigned long long)comm->seq, why);
  return BATON_OK;
}
