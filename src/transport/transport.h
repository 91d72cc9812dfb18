/*
 * transport.h - the interface every data transport fills in.
 *
 * A connection is one direction between two ranks: this rank either sends
 * on it or receives on it. Data moves in slots of at most `slot_bytes`: the
 * sender acquires a free slot, writes into it and commits; the receiver
 * acquires the oldest filled slot, reads it and releases it. Working on the
 * slot in place is what lets the executor reduce straight from the incoming
 * slot into the outgoing one without an extra copy.
 *
 * Every wait is bounded by the communicator's timeout and watches the peer;
 * on failure the function returns a negative baton code and leaves a short
 * reason in conn->why (the caller adds the collective and step).
 */
#ifndef BATON_TRANSPORT_H
#define BATON_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

typedef struct baton__conn baton__conn_t;

/* What a rank believes the current collective is. Senders stamp it on what
 * they send and receivers compare it with their own before using a byte,
 * so calls that differ across ranks fail as BATON_EMISMATCH instead of
 * hanging or mixing data. */
/* Every mailbox of the host's rendezvous holds at least this much, for
 * what registered memory shows (mem.c, exec_direct.c), whatever
 * BATON_FLAT_BYTES; flat's room is mailbox_bytes. */
#define BATON__SHOW_BYTES 512

typedef struct {
  uint64_t seq;   /* collective number on this communicator */
  uint64_t count; /* the call's count argument; alltoallv: a block's count (exec.c) */
  int32_t root;   /* -1 without a root; alltoallv: of the block the other way */
  uint8_t coll;   /* baton__coll_t */
  uint8_t dtype, op;
  /* 1 + the algorithm's row in algo.c's table, as the selection chose it
   * (a direct call that restages keeps direct); 0: none */
  uint8_t algo;
} baton__sig_t;

/* 0 when a and b describe the same call; else writes "rank PEER called X
 * while rank ME called Y" into why and returns BATON_EMISMATCH. */
int baton__sig_check(const baton__sig_t *mine, const baton__sig_t *theirs, int me, int peer,
                     char *why, size_t whylen);
/* The call a message's signature belongs to, as every rank has it: the
 * signature without alltoallv's counts of one block (exec.c). */
baton__sig_t baton__sig_call(const baton__sig_t *s);
/* "allreduce #5 (count 100, float32, sum)" */
void baton__sig_format(const baton__sig_t *s, char *buf, size_t len);

/* What a caller that waits on one connection alone sleeps on (arm). */
typedef struct {
  void *word, *flag; /* transport-defined */
  uint32_t seen;
} baton__sleep_t;

typedef struct {
  const char *name;
  int (*send_acquire)(baton__conn_t *c, void **slot);
  int (*send_commit)(baton__conn_t *c, size_t bytes);
  int (*recv_acquire)(baton__conn_t *c, const void **slot, size_t *bytes);
  int (*recv_release)(baton__conn_t *c);
  /* Waits until everything committed has left this rank; NULL when commit
   * already makes data visible to the peer (shared memory). */
  int (*flush)(baton__conn_t *c);
  /* Optional (NULL: not offered): sends `bytes` straight from the caller's
   * memory, which must stay unchanged until flush returns; takes a slot's
   * place in the queue like acquire + commit. */
  int (*send_ref)(baton__conn_t *c, const void *data, size_t bytes);
  /* Never waits: 1 when the next acquire on c (send_acquire when this rank
   * sends on it, else recv_acquire) would return at once, 0 when it would
   * wait, or a failure (negative, the reason in c->why). It moves bytes
   * where the transport buffers (TCP). With `deep` it also checks what
   * costs a system call or a look at the whole transport: that the peer
   * lives, that no rank has poisoned the transport. For a caller that
   * watches many connections at once (p2p.c). */
  int (*ready)(baton__conn_t *c, int sending, int deep);
  /* Optional (NULL: commit makes data visible, as `flush` says): never
   * waits, moves bytes; 1 when everything committed on this sending
   * connection has left this rank, 0 when not yet, or a failure. */
  int (*drained)(baton__conn_t *c);
  /* Optional (NULL: none): the descriptor a caller may poll(2) to sleep
   * until c can move, with the events to ask for (POLLIN receiving;
   * POLLOUT sending, when bytes wait to leave); -1 when there is none
   * (several sockets). */
  int (*poll_fd)(baton__conn_t *c, short *events);
  /* Optional (shared memory), for a caller with c alone to wait on: `arm`,
   * called like the others, asks the peer to wake this rank when c moves
   * and returns 1 when it already can (do not sleep) or 0; `sleep`, called
   * without the caller's lock, sleeps until then or timeout_s pass. */
  int (*arm)(baton__conn_t *c, int sending, baton__sleep_t *z);
  void (*sleep)(const baton__sleep_t *z, double timeout_s);
  /* The same for n armed connections of this transport at once; -1 when
   * the kernel cannot (then nothing slept). */
  int (*sleep_many)(const baton__sleep_t *z, int n, double timeout_s);
} baton__transport_t;

/* Checked by every transport's slow wait path (each sleep slice): a
 * nonzero return ends the wait with that code, the reason in why. It is how
 * an abort or a failure elsewhere in the communicator reaches a rank that
 * waits on a healthy peer. */
typedef struct {
  int (*check)(void *ctx, char *why, size_t whylen);
  void *ctx;
} baton__watch_t;

struct baton__conn {
  const baton__transport_t *ops;
  int peer;          /* the other rank */
  int self;          /* this rank */
  size_t slot_bytes; /* most bytes one slot carries */
  double timeout_s;
  const baton__sig_t *sig; /* the communicator's current call */
  char why[384];           /* reason for the last failure */
  void *impl;              /* transport state */
};

extern const baton__transport_t baton__shm_transport;
extern const baton__transport_t baton__tcp_transport;

/* The communicator-wide side of a transport (one instance per communicator):
 * its connections, its failure handling and, for shared memory, the host's
 * rendezvous. Entries a transport lacks are NULL. Creation is not here: each
 * transport's set-up function (shm.h, tcp.h) makes the instance. */
typedef struct {
  const char *name;
  baton__conn_t *(*conn_to)(void *t, int peer); /* NULL when peer is not reached by it */
  baton__conn_t *(*conn_from)(void *t, int peer);
  void (*watch)(void *t, const baton__watch_t *watch);
  /* 0, or a failure it has seen (moving bytes where it buffers: TCP). */
  int (*check)(void *t, char *why, size_t whylen);
  /* Tells the peers the communicator failed; never blocks. */
  void (*poison)(void *t, int rc, const char *msg);
  /* Async-signal-safe (baton_comm_abort): only atomic stores and system
   * calls. Tells the peers what can be told that way (shared memory: the
   * poison, with msg; TCP: every socket shut, so peers see EOF) and wakes
   * this rank's waiters. */
  void (*shutdown)(void *t, int rc, const char *msg);
  /* clean: every rank ends the communicator together (baton_comm_destroy's
   * barrier passed), so TCP may wait for its peers to end their streams. */
  void (*destroy)(void *t, int clean);
  /* The rendezvous of every rank on this transport (shared memory; NULL
   * for TCP): see shm.h. */
  int (*arrive)(void *t, uint32_t call, const baton__sig_t *sig, double timeout_s, char *why,
                size_t whylen);
  int (*peek)(void *t, uint32_t call, const baton__sig_t *sig, char *why, size_t whylen);
  void (*publish)(void *t, const baton__sig_t *sig);
  void *(*mailbox)(void *t, int rank, uint32_t call);
  size_t (*mailbox_bytes)(const void *t); /* flat's room; every mailbox has BATON__SHOW_BYTES */
  /* The host's fan-out stream (shared memory; NULL for TCP): one writer at
   * a time puts numbered pieces, every other rank of the host copies each
   * out (flat's broadcast past a mailbox, exec.c). fan_put waits until
   * piece g's place is free, fan_get until `writer` has put piece g;
   * fan_done says this rank has put or copied piece g. A piece holds
   * fan_bytes. Failures as arrive's. */
  size_t (*fan_bytes)(const void *t);
  int (*fan_put)(void *t, uint32_t g, void **piece, double timeout_s, char *why, size_t whylen);
  int (*fan_get)(void *t, int writer, uint32_t g, const void **piece, double timeout_s, char *why,
                 size_t whylen);
  void (*fan_done)(void *t, uint32_t g);
} baton__fabric_t;

/* One transport of a communicator: its table and its instance. */
typedef struct {
  const baton__fabric_t *ops;
  void *impl;
} baton__net_t;

extern const baton__fabric_t baton__shm_fabric, baton__tcp_fabric;

#endif /* BATON_TRANSPORT_H */
