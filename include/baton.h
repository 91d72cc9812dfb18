/*
 * baton.h - the public interface of baton, a collective communication library
 * for CPUs.
 *
 * N processes create a communicator together and then call the same
 * collectives in the same order; every one of them gets the result.
 *
 * Conventions shared by every collective below:
 *  - Buffers hold `count` elements of `dtype`; counts are element counts.
 *  - A count of 0 is legal: the call validates its other arguments, still
 *    takes part in the sequence of collectives, and returns BATON_OK.
 *  - Every rank ends with bitwise identical results.
 *  - The return value is BATON_OK (0) or a negative error code from the list
 *    below; baton_comm_last_error() then says what failed, on which rank and
 *    peer, in which collective and step.
 *  - Threads: different communicators (a parent and its children included) may
 *    be used from different threads at once. Calls on one communicator (blocking ones and i-calls
 * alike) must not be made from two threads at once: the second is BATON_EUSAGE, detected, not
 * undefined. A request may be waited on or tested from any thread, once.
 */
#ifndef BATON_H
#define BATON_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define BATON_VERSION_MAJOR 0
#define BATON_VERSION_MINOR 1
#define BATON_VERSION_PATCH 0

typedef struct baton_comm baton_comm_t;

typedef enum {
  BATON_INT8,
  BATON_UINT8,
  BATON_INT32,
  BATON_UINT32,
  BATON_INT64,
  BATON_UINT64,
  BATON_FLOAT16,  /* IEEE 754 binary16 */
  BATON_BFLOAT16, /* the upper 16 bits of a binary32 */
  BATON_FLOAT32,
  BATON_FLOAT64,
  BATON_INT16,
  BATON_UINT16,
  BATON_BOOL, /* one byte: 0 false, anything else true (see below) */
  BATON_DTYPE_COUNT
} baton_dtype_t;

/*
 * Reductions. Integer SUM and PROD wrap modulo 2^bits; float MIN and MAX
 * give NaN when either operand is NaN and order -0 below +0.
 *
 * The bitwise ops BAND, BOR and BXOR take the integer dtypes and bool; with
 * float16, bfloat16, float32 or float64 they are BATON_EINVAL, and
 * baton_comm_last_error() names the op and the dtype.
 *
 * bool: a byte other than 0 or 1 in an input counts as 1 (true), and a
 * reduction's result is always 0 or 1, on one rank too. SUM, MAX and BOR
 * are logical or; PROD, MIN and BAND logical and; BXOR exclusive or (true
 * when an odd number of ranks pass true). AVG has no bool meaning (a mean
 * of truth values is not one) and is BATON_EINVAL, naming both. The
 * collectives that only move data (allgather, broadcast, ...) move a bool's
 * bytes as they are.
 */
typedef enum {
  BATON_SUM,
  BATON_PROD,
  BATON_MIN,
  BATON_MAX,
  BATON_AVG, /* floats: sum / N; integers: sum / N truncated toward zero */
  BATON_BAND,
  BATON_BOR,
  BATON_BXOR,
  BATON_OP_COUNT
} baton_op_t;

/* Error codes. The list is the single source of baton_strerror() and
 * baton_err_name(): XX(name, value, message). */
#define BATON_ERRNO_MAP(XX)                                                                        \
  XX(EINVAL, -1, "invalid argument")                                                               \
  XX(EUSAGE, -2, "invalid usage or environment")                                                   \
  XX(ESYS, -3, "system call failed")                                                               \
  XX(EREMOTE, -4, "a peer failed or closed the connection")                                        \
  XX(ETIMEDOUT, -5, "timed out waiting for a peer")                                                \
  XX(ENOMEM, -6, "out of memory")                                                                  \
  XX(EINTERNAL, -7, "internal error")                                                              \
  XX(EPROTO, -8, "malformed message from a peer")                                                  \
  XX(EAUTH, -9, "authentication failed: the job's secret differs or is missing")                   \
  XX(EABORTED, -10, "the communicator was aborted")                                                \
  XX(EMISMATCH, -11, "ranks made different calls")

typedef enum {
  BATON_OK = 0,
#define BATON__ERR_ENUM(name, value, msg) BATON_##name = (value),
  BATON_ERRNO_MAP(BATON__ERR_ENUM)
#undef BATON__ERR_ENUM
} baton_status_t;

/* A static, human-readable text for a return code; never NULL. */
const char *baton_strerror(int rc);
/* The code's name, e.g. "BATON_EINVAL"; never NULL. */
const char *baton_err_name(int rc);

/* Size in bytes of one element of dtype, or 0 for an unknown dtype. */
size_t baton_dtype_size(baton_dtype_t dtype);
/* "float32", "bool", "sum", "band", ...; "unknown" for a value outside the
 * enum. */
const char *baton_dtype_name(baton_dtype_t dtype);
const char *baton_op_name(baton_op_t op);

/*
 * Creates a communicator from the environment: BATON_RANK, BATON_SIZE and
 * BATON_ADDR (host:port of the rendezvous store that rank 0 serves), as
 * baton-run sets them. Blocks until all BATON_SIZE ranks have joined or
 * BATON_TIMEOUT seconds have passed. On failure *comm is set to NULL and the
 * reason is logged at WARN; call baton_last_init_error() for the text.
 * Every rank must have the job's BATON_SECRET (baton-run makes one per job):
 * a process whose secret differs, or that has none while the job has one,
 * gets BATON_EAUTH and the job goes on without it.
 */
int baton_comm_init(baton_comm_t **comm);

/*
 * For programs that start their processes themselves and can pass bytes
 * around (as with NCCL's unique id): one process calls baton_get_unique_id,
 * which starts the rendezvous store in that process, and sends the id to
 * every rank; each rank then calls baton_comm_init_rank with it. The store
 * listens on BATON_ADDR when that is set, else on the interface named by
 * BATON_SOCKET_IFNAME, else on the first non-loopback IPv4 interface that is
 * up (127.0.0.1 when there is none), on a free port. Other knobs still come
 * from the environment. The process that made the id must take part.
 * Unless BATON_SECRET is set (then on every rank), the id's random nonce is
 * the secret of the job: only processes that were given the id can join.
 *
 * A process may make ids while it has communicators (under baton-run, say):
 * when BATON_ADDR's port cannot be had (under baton-run the job's rank 0
 * holds it) the store takes a free port on BATON_ADDR's host, and when that
 * host is not this machine's (a rank on another host), a free port on the
 * interface chosen as above. When none of these can be bound the error
 * (BATON_ESYS, and baton_last_init_error) names every address tried.
 */
#define BATON_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[BATON_UNIQUE_ID_BYTES];
} baton_unique_id_t;
int baton_get_unique_id(baton_unique_id_t *id);
int baton_comm_init_rank(baton_comm_t **comm, int size, const baton_unique_id_t *id, int rank);
/*
 * For programs that already have a key-value store that every rank reaches
 * (a framework's rendezvous store, as PyTorch hands its process groups):
 * the communicator of size ranks meets through kv instead of a store of its
 * own, so it needs no address or port besides its data connections.
 *
 * set stores len bytes under key (overwriting is allowed) and returns 0, or
 * nonzero on failure. get waits up to timeout_s seconds until key exists,
 * copies at most cap bytes of its value to value, sets *len to the stored
 * length and returns 0; nonzero when the key did not appear in time or the
 * store failed. Both may be called from a thread of baton's while the
 * communicator lives (failure causes are relayed through the store), so kv
 * and ctx must stay valid until baton_comm_destroy of this communicator
 * and of every communicator split from it has returned. baton makes one
 * call at a time through one kv (a communicator and those split from it),
 * so the store need not be thread-safe. Keys are at most 255 bytes and
 * values at most 1 MiB. Every key begins with "baton.<n>/", n counting the
 * communicators made on this ctx (the pointer) in this process, so several
 * communicators may share one store as long as every rank makes them in
 * the same order; a ctx pointer must not be reused for another store.
 *
 * timeout_s bounds every wait of the communicator (set-up, collectives,
 * point-to-point) as BATON_TIMEOUT does; 0 means BATON_TIMEOUT's value.
 *
 * The secret of the data connections is BATON_SECRET when it is set (then
 * on every rank), else a random one that rank 0 puts in the store: then
 * whoever can read the store can join, and a process that cannot read it
 * cannot connect to the ranks' sockets or inject bytes into them. Nothing
 * on the connections is encrypted.
 *
 * Errors: a NULL comm or kv, a NULL set or get, size < 1, rank outside
 * [0, size), or timeout_s < 0 is BATON_EINVAL; a store that fails or keeps
 * a key from appearing is BATON_ETIMEDOUT or BATON_ESYS, with the key in
 * baton_last_init_error().
 */
typedef struct {
  void *ctx;
  int (*set)(void *ctx, const char *key, const void *value, size_t len);
  int (*get)(void *ctx, const char *key, void *value, size_t cap, size_t *len, double timeout_s);
  double timeout_s;
} baton_kv_t;
int baton_comm_init_kv(baton_comm_t **comm, int size, int rank, const baton_kv_t *kv);
/* The text of the calling thread's last failed baton_comm_init*(),
 * baton_get_unique_id() or local-memory call (as errno: each thread its own). */
const char *baton_last_init_error(void);

/*
 * Gives up on the communicator at once, from any thread (or a signal
 * handler): never blocks, wakes this rank's waiters in it, and tells the
 * peers, whose calls then fail fast too. Every later call on it returns
 * BATON_EABORTED; baton_comm_destroy still frees it. NULL is BATON_EINVAL.
 */
int baton_comm_abort(baton_comm_t *comm);

/* Frees the communicator. Collective: every rank should call it. NULL is a
 * no-op. */
int baton_comm_destroy(baton_comm_t *comm);

/*
 * Communicators made from a communicator. Collective over comm: every rank
 * of comm calls it, in the same order as comm's collectives.
 *
 * The ranks that pass the same color (>= 0) form a new communicator,
 * ranked by key (ascending) and, for equal keys, by their rank in comm. A
 * rank that passes BATON_SPLIT_NONE takes part in the exchange and gets
 * *newcomm = NULL. The new communicator has its own ranks, ring and
 * connections, made only between the ranks of its group (shared memory
 * between those that share a host in comm, TCP otherwise). It needs no
 * address or port of its own: the exchange rides on comm, and the set-up
 * on the rendezvous store of the communicator comm was made from (at the
 * root, the one from baton_comm_init or a unique id). Communicators made
 * from a new one (nested splits) work the same way.
 *
 * Lifetime: either of comm and the new communicator may be destroyed first
 * (baton_comm_destroy is collective over the one destroyed), and each may
 * be used from its own thread while the other is used from another. A
 * child outlives its parent's destroy and goes on working. The store keeps serving while the
 * process that serves it (the root's rank 0) holds any communicator made from the root. It is
 * needed only to set communicators up and to relay the causes of failures,
 * so a communicator keeps working after that process has destroyed all of
 * its own; a split made after that fails (BATON_ETIMEDOUT, after
 * BATON_TIMEOUT).
 *
 * Errors: a NULL comm or newcomm, or a color that is neither >= 0 nor
 * BATON_SPLIT_NONE, is BATON_EINVAL on the calling rank, before anything is
 * sent (the other ranks then wait for it as for any collective). On a
 * failed communicator it returns comm's error (a child of a failed parent
 * cannot be made), and a failure of comm during the split is returned as a
 * collective returns it. When a rank cannot set up its new communicator,
 * every rank returns an error with *newcomm = NULL: that rank its own, the
 * others that rank's code, with baton_comm_last_error(comm) naming it; comm
 * stays usable.
 *
 * A child of a failed parent fails: once comm has failed on this rank (a
 * call on it found a lost peer, a timeout, a mismatch or a malformed
 * message, or baton_comm_abort(comm) was called) while the child lives and
 * comm has not been destroyed, the child's calls in flight end with
 * comm's code at their next check (tens of milliseconds, as after an
 * abort), its later calls fail at once with it, and
 * baton_comm_last_error(child) says "the parent communicator <id> failed
 * (<why>)"; the child's peers fail too, as after any failure, and so do
 * the child's own children. A parent destroyed after failing leaves its
 * failure with its children; one destroyed normally leaves them working.
 * A parent that is not in use notices nothing, and its point-to-point
 * failures (a message's timeout) fail only its messages. A lost rank
 * also breaks every communicator that has it on its own.
 *
 * baton_comm_dup is baton_comm_split with one color and key = rank: a
 * communicator of the same ranks in the same order.
 */
#define BATON_SPLIT_NONE (-1)
int baton_comm_split(baton_comm_t *comm, int color, int key, baton_comm_t **newcomm);
int baton_comm_dup(baton_comm_t *comm, baton_comm_t **newcomm);

/* Rank in [0, size) and size; -1 for a NULL comm. */
int baton_comm_rank(const baton_comm_t *comm);
int baton_comm_size(const baton_comm_t *comm);

/* What the last failed call on this communicator did wrong, in one line;
 * "" when nothing has failed. The text stays valid until the next call.
 * Another thread may read it while a call fails (a call in flight, run by
 * the progress thread): it gets the message before or the new one, whole. */
const char *baton_comm_last_error(const baton_comm_t *comm);

/*
 * Registered memory: `bytes` that every rank of the host maps, so that a
 * collective whose buffers all lie in such memory, on every rank, reads
 * the peers' inputs and writes their outputs directly (the "direct"
 * algorithm) instead of staging every byte through shared memory.
 *  - baton_mem_alloc is collective: every rank calls it, in the same order
 *    relative to its collectives, with no request in flight; sizes may
 *    differ between ranks. The memory is zeroed, page-aligned and already
 *    faulted in. On a communicator that spans hosts (or of one rank) it is
 *    plain memory, and calls on it take the usual path.
 *  - Mixing is allowed per call: where some rank's buffers are not
 *    registered, every rank of the call takes the staged path (the ranks
 *    learn it from each other at the call's start).
 *  - baton_mem_free is local; ptr must be what baton_mem_alloc returned on
 *    this communicator, and no request may be in flight. NULL is a no-op.
 *    The peers' mappings are released once every rank has freed its own,
 *    or with the communicator. Memory not freed before baton_comm_destroy
 *    stays this rank's, as plain memory, until the process exits (so
 *    arrays over it stay valid); free it first to give it back.
 * Errors: BATON_EINVAL (bytes 0, a pointer that is not registered),
 * BATON_EUSAGE (requests in flight), BATON_ENOMEM (the system gave no
 * memory: /dev/shm full), and a peer's failure as for a collective; every
 * rank then fails, with the first failing rank's reason.
 */
int baton_mem_alloc(baton_comm_t *comm, size_t bytes, void **ptr);
int baton_mem_free(baton_comm_t *comm, void *ptr);

/*
 * Local memory: `bytes` one process allocates alone, with no communicator
 * and no collective, which the peers on its host map the first time one of
 * their calls uses it (through pidfd_getfd, Linux 5.6, with the permission
 * that BATON_CMA's probe checks). With BATON_MEM_LOCAL=1, the same on
 * every rank, a collective on one host whose buffers lie in local or
 * registered memory on every rank runs direct, as on registered memory;
 * where some rank's do not, every rank takes the usual path. It is what a
 * framework's allocator can hand out (the torch backend's, baton/torch).
 *  - Thread-safe. Page-aligned and faulted in; not zeroed when it is
 *    reused. baton_mem_free_local gives it back to this process's pool,
 *    which keeps blocks for the next allocation of a like size (the
 *    peers' mappings of a block stay valid while it is kept) and returns
 *    them to the system past an eighth of the machine's memory.
 *  - The first call that uses a block maps it on every peer and writes
 *    each of its pages once there (about 5 us a page on some virtual
 *    machines), so it is for buffers that are used again.
 *  - After fork() the child maps the parent's blocks privately: its writes
 *    stay its own, as with any memory, but it sees the parent's later
 *    writes to pages it has not written itself; its pool starts empty.
 * Errors: BATON_EINVAL (bytes 0, ptr NULL; a pointer that is not a local
 * block, for the free), BATON_ENOMEM (the system gave no memory, or the
 * pool holds a quarter of the process's file descriptors already: one a
 * block). A free of NULL is a no-op. baton_last_init_error() says why.
 */
int baton_mem_alloc_local(size_t bytes, void **ptr);
int baton_mem_free_local(void *ptr);
/* 1 when ptr is where a block that baton_mem_alloc_local handed out
 * starts and it is not yet freed, else 0; it sets no error, so that an
 * allocator that mixes kinds of memory can ask before it frees. In a
 * child made by fork() the blocks the parent held at the fork count too,
 * though the child's baton_mem_free_local refuses them (BATON_EINVAL). */
int baton_mem_is_local(const void *ptr);

/*
 * recvbuf[i] = op over all ranks of sendbuf[i], for i < count.
 * In place when sendbuf == recvbuf.
 */
int baton_allreduce(const void *sendbuf, void *recvbuf, size_t count, baton_dtype_t dtype,
                    baton_op_t op, baton_comm_t *comm);

/*
 * sendbuf holds size * recvcount elements; rank r receives in recvbuf the
 * reduction over all ranks of elements [r * recvcount, (r + 1) * recvcount).
 * In place when recvbuf == sendbuf + rank * recvcount elements.
 */
int baton_reduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount, baton_dtype_t dtype,
                         baton_op_t op, baton_comm_t *comm);

/*
 * recvbuf holds size * sendcount elements; rank r's sendbuf lands at
 * recvbuf + r * sendcount elements on every rank.
 * In place when sendbuf == recvbuf + rank * sendcount elements.
 */
int baton_allgather(const void *sendbuf, void *recvbuf, size_t sendcount, baton_dtype_t dtype,
                    baton_comm_t *comm);

/*
 * root's sendbuf (count elements) lands in every rank's recvbuf. Only the
 * root reads sendbuf (others may pass NULL). In place on the root when
 * sendbuf == recvbuf. root outside [0, size) is BATON_EINVAL.
 */
int baton_broadcast(const void *sendbuf, void *recvbuf, size_t count, baton_dtype_t dtype, int root,
                    baton_comm_t *comm);

/*
 * The reduction over all ranks of sendbuf (count elements) lands in root's
 * recvbuf. Every rank reads its sendbuf; only the root writes recvbuf, so
 * the others may pass NULL. In place on the root when sendbuf == recvbuf.
 * root outside [0, size) is BATON_EINVAL.
 */
int baton_reduce(const void *sendbuf, void *recvbuf, size_t count, baton_dtype_t dtype,
                 baton_op_t op, int root, baton_comm_t *comm);

/*
 * Every rank sends `count` elements to every rank: sendbuf and recvbuf hold
 * size * count elements, block q of rank r's sendbuf lands in block r of
 * rank q's recvbuf (block q: elements [q * count, (q + 1) * count)).
 * In place when sendbuf == recvbuf: baton then first copies the input into
 * its scratch memory, so that costs one more pass over the buffer and
 * size * count elements of scratch, which BATON_SCRATCH_BYTES bounds
 * (BATON_ENOMEM past it). Buffers that overlap otherwise are undefined.
 */
int baton_alltoall(const void *sendbuf, void *recvbuf, size_t count, baton_dtype_t dtype,
                   baton_comm_t *comm);

/*
 * Alltoall with a count per pair, as MPI_Alltoallv: rank r's block for
 * rank q is sendcounts[q] elements at sendbuf + sdispls[q] elements, and
 * lands in rank q's recvbuf at rdispls[r], recvcounts[r] elements long.
 * Each array holds size entries; they may differ from rank to rank, but
 * sendcounts[q] on rank r must equal recvcounts[r] on rank q: a pair that
 * differs is BATON_EMISMATCH on both ranks, naming both counts. Counts of
 * 0 are legal (a NULL buffer then too, when all of its counts are 0).
 * Elements of recvbuf outside the blocks are left untouched; blocks that
 * overlap are undefined. In place when sendbuf == recvbuf (the blocks are
 * read as the send arrays say, before any lands): baton then first copies
 * the input, which BATON_SCRATCH_BYTES bounds (BATON_ENOMEM past it). NULL
 * arrays, an unknown dtype and sendcounts[rank] != recvcounts[rank] are
 * BATON_EINVAL.
 *
 * It is a collective like the others, ordered with them: the pairwise
 * exchange of alltoall (rank r sends to r + k and receives from r - k, for
 * k = 1 .. size-1), every block straight from sendbuf into recvbuf, with no
 * scratch memory but in place. Each block's message carries the counts its
 * sender has for that pair, so a mismatched pair is found by the receiver
 * of either block and fails the communicator, as a mismatched collective
 * does; a rank that calls another collective where its peers call
 * alltoallv is BATON_EMISMATCH too.
 */
int baton_alltoallv(const void *sendbuf, const size_t *sendcounts, const size_t *sdispls,
                    void *recvbuf, const size_t *recvcounts, const size_t *rdispls,
                    baton_dtype_t dtype, baton_comm_t *comm);

/*
 * Rank r's sendbuf (sendcount elements) lands at recvbuf + r * sendcount
 * elements on the root, whose recvbuf holds size * sendcount elements.
 * Only the root writes recvbuf; the others may pass NULL. In place on the
 * root when sendbuf == recvbuf + root * sendcount elements (its block is
 * already where it belongs). root outside [0, size) is BATON_EINVAL.
 */
int baton_gather(const void *sendbuf, void *recvbuf, size_t sendcount, baton_dtype_t dtype,
                 int root, baton_comm_t *comm);

/*
 * The root's sendbuf holds size * recvcount elements; block r (elements
 * [r * recvcount, (r + 1) * recvcount)) lands in rank r's recvbuf. Only the
 * root reads sendbuf; the others may pass NULL. In place on the root when
 * recvbuf == sendbuf + root * recvcount elements. root outside [0, size)
 * is BATON_EINVAL.
 */
int baton_scatter(const void *sendbuf, void *recvbuf, size_t recvcount, baton_dtype_t dtype,
                  int root, baton_comm_t *comm);

/*
 * Allgather with a count per rank: rank r's sendbuf (sendcount elements)
 * lands at recvbuf + displs[r] elements on every rank, recvcounts[r]
 * elements long; recvcounts and displs hold size entries, and
 * recvcounts[rank] must equal sendcount. recvcounts must be the same on
 * every rank; displs, as in MPI, are each rank's own layout of its
 * recvbuf and may differ from rank to rank (where they do, registered
 * buffers are copied through the staged path, not directly). Elements of
 * recvbuf outside the blocks are left untouched; blocks that overlap are
 * undefined. Counts of 0 are legal, for one rank or all. In place when
 * sendbuf == recvbuf + displs[rank] elements. NULL recvcounts or displs,
 * or recvcounts[rank] != sendcount, is BATON_EINVAL.
 */
int baton_allgatherv(const void *sendbuf, size_t sendcount, void *recvbuf, const size_t *recvcounts,
                     const size_t *displs, baton_dtype_t dtype, baton_comm_t *comm);

/*
 * Reduce-scatter with a count per rank: sendbuf holds the sum of
 * recvcounts elements, block r starting after the blocks of ranks 0..r-1;
 * rank r receives in recvbuf (recvcounts[r] elements) the reduction over
 * all ranks of block r. recvcounts holds size entries, the same on every
 * rank; counts of 0 are legal (recvbuf may then be NULL). In place when
 * recvbuf == sendbuf + recvcounts[0] + ... + recvcounts[rank - 1]
 * elements. NULL recvcounts is BATON_EINVAL.
 */
int baton_reduce_scatterv(const void *sendbuf, void *recvbuf, const size_t *recvcounts,
                          baton_dtype_t dtype, baton_op_t op, baton_comm_t *comm);

/* Returns once every rank has entered the barrier. */
int baton_barrier(baton_comm_t *comm);

/*
 * Non-blocking collectives. Each i-form takes the blocking form's arguments
 * plus a request, validates them (bad arguments are BATON_EINVAL from the
 * i-call itself, and no request is made: *req is NULL), and returns at once
 * with the call in flight. Semantics as MPI's:
 *  - the buffers belong to baton until the request completes: do not touch
 *    sendbuf's or recvbuf's bytes before baton_wait or baton_test says so;
 *  - calls on one communicator complete in the order they were issued, on
 *    every rank, blocking ones included (a blocking call issued behind
 *    i-calls waits for them first);
 *  - at least 64 may be in flight on a communicator; the 65th i-call first
 *    waits for the oldest to complete, it never fails for that;
 *  - a failure (a peer's death, a timeout, a mismatch, an abort) completes
 *    every request in flight on the communicator with that error.
 * Progress happens while the caller computes: the first i-call on a
 * communicator starts its progress thread (a program that only makes
 * blocking calls never has one), which runs the calls in flight in order
 * and waits on sockets and futexes as the blocking calls do, so it burns no
 * core while nothing arrives; BATON_PROGRESS_CPU pins it to a core. It is
 * named "baton-progress" (top -H, perf, /proc/PID/task/TID/comm), as baton's
 * other threads are: "baton-p2p" (point-to-point), "baton-store" (the
 * rendezvous store rank 0 serves), "baton-accept" (TCP set-up) and, in the
 * torch backend, "baton-complete" (it completes the works DDP waits on). The
 * blocking forms are the i-form followed by baton_wait; with no progress
 * thread the waiting caller runs the call itself.
 */
typedef struct baton_request baton_request_t;
int baton_iallreduce(const void *sendbuf, void *recvbuf, size_t count, baton_dtype_t dtype,
                     baton_op_t op, baton_comm_t *comm, baton_request_t **req);
int baton_ireduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount, baton_dtype_t dtype,
                          baton_op_t op, baton_comm_t *comm, baton_request_t **req);
int baton_iallgather(const void *sendbuf, void *recvbuf, size_t sendcount, baton_dtype_t dtype,
                     baton_comm_t *comm, baton_request_t **req);
int baton_ibroadcast(const void *sendbuf, void *recvbuf, size_t count, baton_dtype_t dtype,
                     int root, baton_comm_t *comm, baton_request_t **req);
int baton_ireduce(const void *sendbuf, void *recvbuf, size_t count, baton_dtype_t dtype,
                  baton_op_t op, int root, baton_comm_t *comm, baton_request_t **req);
int baton_ialltoall(const void *sendbuf, void *recvbuf, size_t count, baton_dtype_t dtype,
                    baton_comm_t *comm, baton_request_t **req);
int baton_igather(const void *sendbuf, void *recvbuf, size_t sendcount, baton_dtype_t dtype,
                  int root, baton_comm_t *comm, baton_request_t **req);
int baton_iscatter(const void *sendbuf, void *recvbuf, size_t recvcount, baton_dtype_t dtype,
                   int root, baton_comm_t *comm, baton_request_t **req);
int baton_iallgatherv(const void *sendbuf, size_t sendcount, void *recvbuf,
                      const size_t *recvcounts, const size_t *displs, baton_dtype_t dtype,
                      baton_comm_t *comm, baton_request_t **req);
int baton_ireduce_scatterv(const void *sendbuf, void *recvbuf, const size_t *recvcounts,
                           baton_dtype_t dtype, baton_op_t op, baton_comm_t *comm,
                           baton_request_t **req);
int baton_ibarrier(baton_comm_t *comm, baton_request_t **req);
int baton_ialltoallv(const void *sendbuf, const size_t *sendcounts, const size_t *sdispls,
                     void *recvbuf, const size_t *recvcounts, const size_t *rdispls,
                     baton_dtype_t dtype, baton_comm_t *comm, baton_request_t **req);

/* Waits until req completes and returns the call's status; frees req. NULL
 * is BATON_EINVAL. */
int baton_wait(baton_request_t *req);
/* *done = 0: still running, BATON_OK returned, req still valid; *done = 1:
 * complete, the call's status returned, req freed. */
int baton_test(baton_request_t *req, int *done);
/* Waits up to timeout_s seconds (>= 0) for req. *done = 1: it completed,
 * the call's status is returned and req is freed; *done = 0: the time ran
 * out first, BATON_OK is returned and req is still valid (wait again, or
 * test). It sleeps until the call completes or the time is up, and leaves
 * the running to the progress thread (baton_wait may run a call itself),
 * so it returns by the deadline: within microseconds for a collective, up
 * to 10 ms after it for a point-to-point request. A request of a blocking
 * call has no deadline. A NULL req or done, or a negative or NaN
 * timeout_s, is BATON_EINVAL. The form for a caller that must return by a
 * deadline (a framework's work.wait): a loop of baton_test and sleeps
 * wakes up to a sleep late. */
int baton_wait_for(baton_request_t *req, double timeout_s, int *done);
/* Waits for all n requests (NULL entries are skipped); returns the first
 * failure's status in array order, BATON_OK when none failed; frees all. */
int baton_wait_all(int n, baton_request_t **reqs);

/*
 * Point-to-point messages: `count` elements of `dtype` from this rank to
 * `peer`, or from `peer` into buf, with a tag (>= 0) that the two sides
 * must agree on.
 *  - Matching: a receive takes the oldest message from its peer with its
 *    tag; messages between a pair with the same tag arrive in the order
 *    they were sent. Different tags, different pairs and the collectives
 *    are independent of each other: a rank may post receives from several
 *    peers and a collective, and complete them in any order. Messages have
 *    connections of their own (shared memory between any two ranks of a
 *    host, TCP between hosts), and move while collectives run.
 *  - A send completes once its receiver has matched it and its data has
 *    left this rank (MPI_Ssend's rule): the buffer is free again, and a
 *    receive whose count or dtype differs from the send's fails with
 *    BATON_EMISMATCH on both sides, naming both counts. So two ranks that
 *    both baton_send to each other before receiving wait for each other
 *    until BATON_TIMEOUT: post one side with baton_isend or baton_irecv.
 *  - Messages up to BATON_P2P_EAGER_BYTES travel at once (the receiver
 *    keeps one that arrives before its receive); a larger one waits for the
 *    receiver's go-ahead, so that nobody buffers large messages unasked.
 *  - Errors: peer outside [0, size) or this rank, a negative tag, an
 *    unknown dtype, a NULL buffer with count > 0: BATON_EINVAL, and no
 *    request. A peer that dies or is silent for BATON_TIMEOUT while a
 *    message waits on it, a malformed frame, an abort: every message in
 *    flight on the communicator fails with that code (BATON_EREMOTE,
 *    BATON_ETIMEDOUT, BATON_EPROTO, BATON_EABORTED) and later ones fail at
 *    once; a failure of the communicator's collectives fails them too.
 *  - The i-forms return a request for baton_wait, baton_test and
 *    baton_wait_all, as the collectives' do (the buffer is baton's until it
 *    completes). While i-forms are in flight and nobody waits, the
 *    communicator's point-to-point thread moves them; a blocking call moves
 *    its own message and any others in flight, in the calling thread.
 *  - baton_comm_destroy with messages in flight is BATON_EUSAGE: they
 *    complete with BATON_EABORTED and are freed.
 */
int baton_send(const void *buf, size_t count, baton_dtype_t dtype, int peer, int tag,
               baton_comm_t *comm);
int baton_recv(void *buf, size_t count, baton_dtype_t dtype, int peer, int tag, baton_comm_t *comm);
int baton_isend(const void *buf, size_t count, baton_dtype_t dtype, int peer, int tag,
                baton_comm_t *comm, baton_request_t **req);
int baton_irecv(void *buf, size_t count, baton_dtype_t dtype, int peer, int tag, baton_comm_t *comm,
                baton_request_t **req);

/* The table of knobs (environment variables) with type, default, range and
 * description, as text, one knob per line; the same table the library reads
 * its settings from. */
const char *baton_params_describe(void);

#ifdef __cplusplus
}
#endif

#endif /* BATON_H */
