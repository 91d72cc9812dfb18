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

typedef struct baton__conn baton__conn_t;

typedef struct {
  const char *name;
  int (*send_acquire)(baton__conn_t *c, void **slot);
  int (*send_commit)(baton__conn_t *c, size_t bytes);
  int (*recv_acquire)(baton__conn_t *c, const void **slot, size_t *bytes);
  int (*recv_release)(baton__conn_t *c);
  /* Waits until everything committed has left this rank; NULL when commit
   * already makes data visible to the peer (shared memory). */
  int (*flush)(baton__conn_t *c);
} baton__transport_t;

struct baton__conn {
  const baton__transport_t *ops;
  int peer;           /* the other rank */
  size_t slot_bytes;  /* most bytes one slot carries */
  double timeout_s;
  char why[256];      /* reason for the last failure */
  void *impl;         /* transport state */
};

extern const baton__transport_t baton__shm_transport;
extern const baton__transport_t baton__tcp_transport;

#endif /* BATON_TRANSPORT_H */
