/*
 * call.h - one collective call as an object of its own.
 *
 * Everything that lives as long as one call is here: what was asked, the
 * algorithm, the schedule and chunk layout, the scratch memory, the
 * signature the peers must see, the trace times and the status. The
 * communicator keeps only what lives as long as it does. Call objects come
 * from a pool of the communicator (call.c), each with its steps, layout and
 * scratch sized on first use and kept, so that a run of calls allocates
 * nothing and faults no pages after the first.
 *
 * The blocking collectives are baton__call_issue, baton__exec (exec.c) and
 * baton__call_finish; baton__exec_step runs one step at a time, so that the
 * steps of several calls can be interleaved. Calls in flight use the
 * connections in the order they were issued: a step of a later call that
 * would send on (or receive from) a connection an earlier call still has
 * messages for waits (baton__exec_step says BATON__EXEC_WAITING), so every
 * connection carries the calls' messages in issue order on every rank.
 */
#ifndef BATON_CALL_H
#define BATON_CALL_H

#include <limits.h>

#include "algo.h"
#include "internal.h"
#include "transport/transport.h"

#define BATON__NO_ROOT INT_MIN

/* What a collective was asked to do, as coll.c hands it over after checking
 * the arguments. count is the per-rank count of the public call (for a
 * v-variant, the sum of the counts, which the signature carries). */
typedef struct {
  const char *name;
  baton__coll_t coll;
  const void *sendbuf;
  void *recvbuf;
  size_t count;
  baton_dtype_t dtype;
  baton_op_t op;                           /* BATON_OP_COUNT for collectives without one */
  int root;                                /* BATON__NO_ROOT for collectives without one */
  const size_t *counts, *displs;           /* the v-variants (alltoallv: the receiving side's) */
  const size_t *send_counts, *send_displs; /* alltoallv's sending side */
  size_t stage; /* bytes of input to copy to scratch first (in-place alltoall) */
  int setup;    /* the end-of-init barrier: collective number 0, not counted */
} baton__call_args_t;

typedef struct baton__engine baton__engine_t;

/* A call is what baton.h calls a request. */
typedef struct baton_request baton__call_t;
enum { BATON__CALL_ISSUED, BATON__CALL_RUNNING, BATON__CALL_DONE };
/* A request is a call or a point-to-point message (p2p.c): the first field
 * says which, so that baton_wait can tell. */
enum { BATON__REQ_CALL = 0, BATON__REQ_P2P = 0x70327021 };
struct baton_request {
  uint32_t kind; /* BATON__REQ_CALL */
  baton_comm_t *comm;
  baton__call_t *next_free;             /* in the pool */
  baton__call_t *next_all;              /* every object of the pool, for destroy */
  baton__call_t *prev_live, *next_live; /* issued and not finished, in issue order */
  baton__call_args_t args;
  size_t elsize;
  const baton__algo_t *algo; /* NULL when no step runs (size 1, count 0) */
  baton__sched_t sched;
  baton__layout_t layout;
  /* What sched and layout were last built for: a run of equal calls (the
   * same object serves every blocking call) builds them once. */
  struct {
    const baton__algo_t *algo;
    baton__coll_t coll;
    size_t count;
    int root, valid;
    size_t maxlen;          /* the longest chunk, in elements */
    size_t work_elsize;     /* work_bytes was found for elements of this size */
    size_t work_bytes;      /* scratch the schedule needs (call.c) */
    size_t prepared_elsize; /* x's rounds and segments were found for it (exec.c) */
    int big;                /* large enough for non-temporal stores */
  } planned;
  size_t *layout_mem; /* the layout's six arrays */
  char *work;         /* scratch: WORK without an output, then the staged input */
  size_t work_bytes;
  const char *in; /* INPUT: sendbuf, or its staged copy */
  char *out;
  uint64_t seq;        /* the call's number on the communicator, from 1 */
  baton__sig_t sig;    /* the call as the peers must see it */
  uint32_t rendezvous; /* its number among the host's rendezvous; 0: none */
  uint32_t fan_base;   /* flat's broadcast past a mailbox: its first piece of the stream */
  uint32_t mem_gen;    /* the communicator's mem_gen when it was chosen */
  /* The direct algorithm (exec_direct.c), per rank: where its INPUT and
   * output are mapped here (by CMA: where they lie in that rank, and its
   * pid), and its layout's offsets, [rank * N + chunk]; made at the first
   * direct call. */
  char **peer_in, **peer_out;
  size_t *peer_in_off, *peer_out_off;
  int32_t *peer_pid;
  int direct_cma; /* this direct call copies through the kernel (BATON_CMA) */
  int status;     /* BATON_OK, or how it failed */
  int state;      /* BATON__CALL_*: under the engine's lock once there is one */
  /* Per peer, the index of the last step that sends to it and of the last
   * that receives from it (-1: none), and of the last mailbox step: what a
   * later call in flight waits for before it uses the same channel
   * (exec.c). Filled when a later call first asks. */
  int *last_send, *last_recv;
  /* Per step of a mailbox kind: the first chunk of its run when the run's
   * chunks lie together in INPUT or WORK and in the mailbox (one copy or
   * one reduction does it), else -1; found with the schedule (call.c). */
  int *one_span;
  size_t *span_elems; /* and its elements */
  int last_mailbox;
  int peers_known;
  /* The call ran as planned and may be run again as it is by an equal one
   * (call.c, repeats()). */
  int repeatable;
  /* The executor's place (exec.c). */
  struct baton__exec_place {
    baton__reduce_fn reduce; /* for reduce_dtype and reduce_op */
    baton_dtype_t reduce_dtype;
    baton_op_t reduce_op;
    size_t seg;         /* elements per segment */
    size_t piece;       /* elements per chunk per round */
    size_t round_start; /* elements of every chunk done in earlier rounds */
    size_t maxlen;      /* the longest chunk */
    int stream;         /* write the output with non-temporal stores */
    int next;           /* the next step of the round */
    int done;
    int local; /* size 1: the input still to be copied to the output */
    /* alltoallv: every message is one block whose signature carries the
     * counts of both ends' blocks, and an empty block still goes out as
     * an empty segment in the first round, so that both ends check them
     * (exec.c). */
    int per_block;
    int fan; /* flat's broadcast past a mailbox: through the fan-out stream (exec.c) */
  } x;
  /* BATON_TRACE: per step, the start of its first round and the end of its
   * last (seconds; < 0 when it has not run); NULL when not tracing. */
  double *t0, *t1;
};

/* The pool: made with the communicator, emptied with it. */
int baton__calls_init(baton_comm_t *comm);
void baton__calls_free(baton_comm_t *comm);

/* Takes a call object for args (checked by the caller), numbers the call,
 * picks its algorithm, builds its schedule and layout, reserves its
 * scratch and announces it to the host. On success *out is ready for the
 * executor (or already done: size 1, count 0); on failure it is NULL and
 * the code is returned (the communicator's last error says why). */
int baton__call_issue(baton_comm_t *comm, const baton__call_args_t *args, baton__call_t **out);
/* Writes the call's trace lines, returns its status and gives the object
 * back to the pool; with an engine, under its lock. */
int baton__call_finish(baton__call_t *call);

/* progress.c: the communicator's progress engine, made by the first
 * i-call. Hands an issued call to it (starting it when there is none). */
int baton__progress_post(baton__call_t *call);
/* Stops it: calls not yet run complete with BATON_EABORTED, the one
 * running is aborted; returns how many were in flight. */
int baton__progress_stop(baton_comm_t *comm);
/* The engine's lock, around everything that touches the pool and the
 * calls in flight; nothing while there is no engine (one thread). */
void baton__progress_lock(baton_comm_t *comm);
void baton__progress_unlock(baton_comm_t *comm);

/* baton__exec_step's answers besides 0 (done) and a negative code. */
enum { BATON__EXEC_MORE = 1, BATON__EXEC_WAITING = 2 };

/* exec.c: runs the call's schedule over the transports. baton__exec_prepare
 * (done by baton__call_issue) sets the rounds and segments; baton__exec_step
 * runs the next step: BATON__EXEC_MORE while steps remain,
 * BATON__EXEC_WAITING when the next step must wait for an earlier call in
 * flight (nothing ran), 0 once the call is complete (its last bytes
 * flushed), or a negative code (also in call->status). baton__exec runs
 * the call to its end; every earlier call must have run to its end. */
void baton__exec_prepare(baton__call_t *call);
int baton__exec_step(baton__call_t *call);
int baton__exec(baton__call_t *call);

/* exec_direct.c: the elements of a chunk a direct round works on, and the
 * step that hands a call whose buffers are not all registered to the
 * staged algorithm (call.c: plans and places it as a new call). */
size_t baton__direct_piece(const baton_comm_t *comm, size_t elsize);
int baton__call_restage(baton__call_t *call, const baton__algo_t *algo);

#endif /* BATON_CALL_H */
