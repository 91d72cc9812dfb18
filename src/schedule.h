/*
 * schedule.h - the schedule of a collective, as data.
 *
 * An algorithm (one file in src/coll/) turns (collective, rank, size) into a
 * list of steps. The executor (exec.c) runs that list, the tracer logs it,
 * and the simulator (sim.c, shared by the tests and baton-viz) checks and
 * draws it, so all of them agree by construction.
 *
 * Vocabulary, used the same way in every algorithm file:
 *  - chunk:   the buffer is cut into N chunks (N = ranks), chunk c being
 *             rank c's part (per collective, see baton__layout_t); sizes
 *             differ by at most one element, or follow the counts of the
 *             v-variants.
 *  - run:     the chunks [chunk, chunk + n), taken modulo N (so a run may
 *             wrap past the last chunk). Every step works on one run.
 *  - step:    one thing a rank does to one run: send it, receive it (and
 *             copy or combine it), pass it on, copy it locally. Its kind
 *             alone says which; a kind means the same in every algorithm.
 *  - round:   (phase, step) numbers the moments of the algorithm: the steps
 *             of all ranks that carry the same pair happen together, as a
 *             diagram draws them. An exchange is a SEND and a RECV_* of one
 *             round.
 *  - segment: the pipelined unit. A chunk moves in segments of at most
 *             BATON_SEGMENT_BYTES, so the reduction of one segment overlaps
 *             the transfer of the next.
 */
#ifndef BATON_SCHEDULE_H
#define BATON_SCHEDULE_H

#include <stddef.h>
#include <stdint.h>

/* Phases, in the order they happen within a schedule (the simulator and the
 * drawings order rounds by (phase, step)). */
typedef enum {
  BATON__PHASE_FOLD, /* non-power-of-two: extra ranks hand their data in */
  BATON__PHASE_REDUCE_SCATTER,
  BATON__PHASE_REDUCE, /* towards a root (tree, chain, naive) */
  BATON__PHASE_GATHER,
  BATON__PHASE_EXCHANGE, /* whole buffers (rd allreduce) or blocks (alltoall) */
  BATON__PHASE_ALLGATHER,
  BATON__PHASE_SCATTER,
  BATON__PHASE_BROADCAST,
  BATON__PHASE_UNFOLD, /* non-power-of-two: extra ranks get the result */
  BATON__PHASE_FLAT,   /* the mailbox rendezvous: every rank reads every other rank */
  BATON__PHASE_DIRECT, /* registered buffers: every rank reads and writes the others' */
  BATON__PHASE_COUNT
} baton__phase_t;

/* Where a run's bytes are, for a SEND, or what a reducing step combines the
 * message with:
 *  - INPUT: the caller's send buffer, at the chunk's input offset;
 *  - WORK:  the chunk's working copy. That is the caller's output where this
 *           rank has the chunk in its output, else scratch memory of the call
 *           (for chunks a rank only passes on: partial sums on a non-root in
 *           a tree, blocks a gather tree forwards). Every step that lands
 *           bytes lands them in WORK; the layout alone decides where that is. */
typedef enum { BATON__FROM_INPUT, BATON__FROM_WORK } baton__from_t;

/* What a step does. R is the received message, S the run named by `src`.
 * The *_SEND kinds take one chunk (n == 1): what arrives goes straight out
 * again, segment by segment, without waiting for the whole chunk (the
 * ring's pipeline). MAILBOX_* are the shared-memory rendezvous of one host
 * (flat): every rank puts its input in its mailbox and reads the others'.
 * DIRECT_* work on buffers every rank of the host maps (baton_mem_alloc,
 * direct.c): recv_peer is the rank whose INPUT a step reads and send_peer
 * the rank whose output it writes, either of them BATON__ALL_RANKS; the
 * bytes go from memory to memory with no message and no staging. */
typedef enum {
  BATON__STEP_SEND,                  /* S to send_peer */
  BATON__STEP_RECV_COPY,             /* WORK = R from recv_peer */
  BATON__STEP_RECV_REDUCE,           /* WORK = R op S */
  BATON__STEP_RECV_REDUCE_SEND,      /* R op S to send_peer; nothing lands */
  BATON__STEP_RECV_REDUCE_COPY_SEND, /* WORK = R op S, and to send_peer */
  BATON__STEP_RECV_COPY_SEND,        /* WORK = R, and to send_peer */
  BATON__STEP_COPY,                  /* WORK = INPUT, locally */
  BATON__STEP_MAILBOX_PUT,           /* INPUT into this rank's mailbox; wait for every rank's */
  BATON__STEP_MAILBOX_COPY,          /* WORK = recv_peer's mailbox */
  BATON__STEP_MAILBOX_REDUCE,        /* WORK = every rank's mailbox, combined in rank order */
  BATON__STEP_DIRECT_ARRIVE,         /* show this rank's buffers; wait for every rank's */
  BATON__STEP_DIRECT_REDUCE,         /* send_peer's output = every INPUT, combined in rank order */
  BATON__STEP_DIRECT_COPY,           /* send_peer's output = recv_peer's INPUT */
  BATON__STEP_DIRECT_DONE,           /* wait until every rank is done with every buffer */
  BATON__STEP_KIND_COUNT
} baton__step_kind_t;

/* What each kind does, as flags: the executor, the simulator and the tracer
 * read these instead of listing kinds. */
enum {
  BATON__DOES_SEND = 1u << 0,    /* talks to send_peer */
  BATON__DOES_RECV = 1u << 1,    /* takes a message from recv_peer */
  BATON__DOES_REDUCE = 1u << 2,  /* combines (with S, or over the mailboxes) */
  BATON__DOES_LAND = 1u << 3,    /* writes WORK */
  BATON__DOES_MAILBOX = 1u << 4, /* the host's rendezvous, not a channel */
  BATON__DOES_DIRECT = 1u << 5,  /* into another rank's output: the peers' buffers mapped */
};
/* A DIRECT_* step's recv_peer or send_peer: every rank, itself included. */
#define BATON__ALL_RANKS (-2)
typedef struct {
  const char *name; /* "send", "recv_reduce_send", ...: trace lines, diagrams */
  unsigned does;    /* BATON__DOES_* */
} baton__kind_info_t;
extern const baton__kind_info_t baton__kinds[BATON__STEP_KIND_COUNT];

static inline unsigned baton__step_does(int kind) {
  return (unsigned)kind < BATON__STEP_KIND_COUNT ? baton__kinds[kind].does : 0;
}

/* One step of one rank. The executor runs a rank's steps in order; a SEND
 * returns once its bytes are in the channel (a message fits in half a
 * channel, exec.c), so a pair of ranks that both SEND and then RECV never
 * wait on each other.
 *
 * An algorithm may overwrite, in WORK, bytes it sent earlier only after it
 * has received something that depends on that send having arrived, or in
 * the RECV that directly follows the SEND (the executor then waits for the
 * send to leave first): TCP may still be sending from the memory itself. */
typedef struct {
  uint8_t kind;   /* baton__step_kind_t */
  uint8_t phase;  /* baton__phase_t */
  uint16_t step;  /* the round within the phase */
  uint8_t src;    /* baton__from_t: a SEND's bytes, a reducing RECV's S */
  uint8_t finish; /* the result is the complete reduction: AVG divides here */
  uint16_t n;     /* chunks in the run (1 for the *_SEND kinds) */
  uint8_t slice;  /* DIRECT_*: only this rank's N-th of each chunk (direct.c's reduce) */
  int chunk;      /* the run's first chunk */
  int send_peer;  /* -1 when the kind does not send */
  int recv_peer;  /* -1 when it does not receive */
} baton__step_t;

typedef enum {
  BATON__COLL_ALLREDUCE,
  BATON__COLL_REDUCE_SCATTER,
  BATON__COLL_ALLGATHER,
  BATON__COLL_BROADCAST,
  BATON__COLL_REDUCE,
  BATON__COLL_ALLTOALL,
  BATON__COLL_GATHER,
  BATON__COLL_SCATTER,
  BATON__COLL_ALLGATHERV,      /* allgather with a count per rank */
  BATON__COLL_REDUCE_SCATTERV, /* reduce_scatter with a count per rank */
  BATON__COLL_BARRIER,         /* a one-byte ring allgather, or the host's rendezvous */
  BATON__COLL_ALLTOALLV,       /* alltoall with a count and a place per block */
  BATON__COLL_COUNT
} baton__coll_t;

struct baton__algo;

/* The steps of one rank for one call. Builders add steps only through
 * baton__step_push, which never writes past `cap`. */
typedef struct {
  baton__coll_t coll;
  const struct baton__algo *algo;
  int nsteps, cap;
  int overflow; /* a builder wanted more than cap steps: the schedule is void */
  baton__step_t *steps;
} baton__sched_t;

/* A new step of `kind` at the end of s, with no peers and an empty run; a
 * spare one (and s->overflow set) when s is full. */
static inline baton__step_t *baton__step_push(baton__sched_t *s, baton__step_kind_t kind,
                                              baton__phase_t phase, int step) {
  static _Thread_local baton__step_t spare;
  baton__step_t *st = &spare;
  if (s->nsteps < s->cap)
    st = &s->steps[s->nsteps++];
  else
    s->overflow = 1;
  *st = (baton__step_t){.kind = (uint8_t)kind,
                        .phase = (uint8_t)phase,
                        .step = (uint16_t)step,
                        .src = BATON__FROM_INPUT,
                        .chunk = 0,
                        .n = 0,
                        .send_peer = -1,
                        .recv_peer = -1};
  return st;
}

/* What a builder is told about the call. */
typedef struct {
  baton__coll_t coll;
  int rank, size;
  size_t count;     /* the count of the public call */
  int root;         /* of a rooted collective; 0 for the others */
  const int *order; /* the ring: ranks in ring order, following the topology */
  const int *host;  /* per rank, its host's index along the ring; NULL: each its own */
} baton__build_t;

/* ---- Where each chunk is (one table in layout.c, for every collective).
 *
 * There are always N chunks (N = size), chunk c being rank c's part:
 *  - allreduce, reduce_scatter(v): chunk c is the part of the buffer that
 *    rank c owns once reduce-scattered; every rank has all N in INPUT
 *    (allreduce with `halves`: chunks 0 and 1 hold the first ceil(count/2)
 *    elements and the rest, the others are empty);
 *  - allgather(v), gather: chunk c is rank c's block; a rank has only its
 *    own in INPUT;
 *  - alltoall: chunk c is the block this rank sends to rank c (INPUT) and
 *    the block it receives from rank c (output): a block moves from INPUT
 *    chunk `to` on one rank to output chunk `from` on the other, so a SEND
 *    names the sender's index and a RECV the receiver's;
 *  - alltoallv: as alltoall, chunk c at sdispls[c] in INPUT and at
 *    rdispls[c] in the output; a block's input length (sendcounts[c]) is
 *    in_len[c] and its output length (recvcounts[c]) len[c];
 *  - scatter: chunk c is rank c's block, all in the root's INPUT;
 *  - broadcast, reduce: one chunk holds the whole buffer, chunk `root`;
 *    the others are empty. With `halves` (the double tree's two trees)
 *    chunk `root` holds the first ceil(count/2) elements and chunk
 *    (root + 1) mod N the rest.
 * Offsets and lengths are in elements. len[c] is the same on every rank, so
 * both ends of a message agree on its pieces; in_len[c], chunk c's length
 * in INPUT, is len[c] but for alltoallv, where a send of INPUT chunk `to`
 * is in_len[to] long on the sender and its receive into output chunk
 * `from` len[from] on the receiver: the two agree when the counts the
 * ranks passed do, and the message's signature checks that they do
 * (exec.c). So are work_off[c], a chunk's
 * place in the call's scratch, and box_off[c], its place in the INPUT of
 * the ranks that have it, which is also its place in their mailbox (a
 * MAILBOX_PUT copies INPUT as it lies). */
#define BATON__NO_OUT ((size_t)-1)
typedef struct {
  size_t *in_off;   /* BATON__NO_OUT: not in this rank's INPUT */
  size_t *out_off;  /* BATON__NO_OUT: not in this rank's output (WORK is scratch) */
  size_t *work_off; /* in scratch */
  size_t *box_off;  /* in a mailbox */
  size_t *len;      /* in the output and WORK */
  size_t *in_len;   /* in INPUT */
} baton__layout_t;

/* The arguments the layout depends on; counts and displs only for the
 * v-variants (displs may be NULL for reduce_scatterv); send_counts and
 * send_displs only for alltoallv, whose counts and displs are then the
 * receiving side's (NULL, both sides: `count` per block, as alltoall). */
typedef struct {
  baton__coll_t coll;
  int rank, size, root;
  size_t count; /* per-rank count as the public call takes it */
  const size_t *counts, *displs;
  const size_t *send_counts, *send_displs;
  int halves; /* broadcast, reduce, allreduce: in two chunks (BATON__ALGO_HALVES) */
} baton__layout_args_t;

/* Fills l (arrays of size entries) for the call a describes. */
void baton__layout_fill(baton__layout_t *l, const baton__layout_args_t *a);

/* Chunk i of the run that starts at chunk `first` on n chunks (first and
 * i below n): the run wraps past the last chunk, with no division. */
static inline int baton__run_chunk(int first, int i, int n) {
  return first + i < n ? first + i : first + i - n;
}

/* Chunk c of `count` elements cut into n chunks: the first count % n chunks
 * hold one element more. */
static inline size_t baton__chunk_off(size_t count, int n, int c) {
  size_t q = count / (size_t)n, r = count % (size_t)n;
  return (size_t)c * q + ((size_t)c < r ? (size_t)c : r);
}
static inline size_t baton__chunk_len(size_t count, int n, int c) {
  return count / (size_t)n + ((size_t)c < count % (size_t)n ? 1 : 0);
}

const char *baton__coll_name(baton__coll_t coll);
const char *baton__phase_name(baton__phase_t phase);
/* Collective by name, or BATON__COLL_COUNT. */
baton__coll_t baton__coll_find(const char *name);

#endif /* BATON_SCHEDULE_H */
