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
typedef struct {
  uint64_t seq;   /* collective number on this communicator */
  uint64_t count; /* the call's count argument */
  int32_t root;   /* -1 without a root */
  uint8_t coll;   /* baton__coll_t */
  uint8_t dtype, op;
  uint8_t algo; /* 1 + the algorithm's row in algo.c's table; 0: none */
} baton__sig_t;

/* 0 when a and b describe the same call; else writes "rank PEER called X
 * while rank ME called Y" into why and returns BATON_EMISMATCH. */
int baton__sig_check(const baton__sig_t *mine, const baton__sig_t *theirs, int me, int peer,
                     char *why, size_t whylen);
/* "allreduce #5 (count 100, float32, sum)" */
void baton__sig_format(const baton__sig_t *s, char *buf, size_t len);

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

#endif /* BATON_TRANSPORT_H */
