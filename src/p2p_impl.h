/*
 * p2p_impl.h - what the three files of point-to-point messages share: the
 * frame on the wire, a message's state (p2p_op_t, msg_t), a lane's
 * (peer_t) and the communicator's (struct baton__p2p); the calls and the
 * set-up are p2p.c's, the frames and the matching p2p_lane.c's, the
 * passes, the thread and the failures p2p_progress.c's.
 */
#ifndef BATON_P2P_IMPL_H
#define BATON_P2P_IMPL_H

#include <pthread.h>
#include <stdint.h>

#include "p2p.h"

#define FRAME_HDR 32
enum { F_HDR = 1, F_DATA = 2, F_CTS = 3, F_ACK = 4 };

typedef struct {
  uint8_t type, dtype, eager; /* eager: HDR only */
  int32_t tag;                /* HDR: the tag; CTS, ACK: the status */
  uint64_t id, a, b;
} frame_t;

/* ------------------------------------------------------------------ state */

/* A send's course: its HDR, then (rendezvous) the CTS, its data, (eager)
 * the ACK, and last its bytes leaving this rank; a receive's: posted, then
 * matched. */
enum { S_HDR, S_WAIT_CTS, S_STREAM, S_WAIT_ACK, S_DRAIN, R_POSTED, R_MATCHED, OP_DONE };

typedef struct p2p_op p2p_op_t;
struct p2p_op {
  uint32_t kind; /* BATON__REQ_P2P: the request's first field (call.h) */
  baton_comm_t *comm;
  p2p_op_t *next; /* in its peer's sends or receives, in post order */
  int sending, peer, tag, state, status;
  int eager, acked; /* a send: eager, and its ACK has come */
  char *buf;
  size_t count, bytes, moved; /* moved: bytes sent, or landed */
  baton_dtype_t dtype;
  uint64_t id;   /* the message's number on its lane */
  double last;   /* when it last moved: what the timeout counts from */
  char why[320]; /* what failed */
};

/* A message that has arrived, whole or in part: waiting for a receive to
 * match it (unexpected: eager data kept in `stash`), or landing in the
 * receive that did. */
typedef struct msg msg_t;
struct msg {
  msg_t *next;
  uint64_t id, count;
  size_t bytes, got;
  int tag, eager, discard; /* discard: its receive did not match; data dropped */
  baton_dtype_t dtype;
  char *stash;
  p2p_op_t *recv;
};

/* CTS and ACK frames owed to a peer. */
typedef struct {
  frame_t *f;
  int n, cap;
} ctrl_q_t;

typedef struct {
  baton__conn_t *out, *in;
  p2p_op_t *sends, *recvs; /* in post order */
  msg_t *msgs;             /* in arrival order */
  ctrl_q_t ctrl;
  uint64_t next_send, next_recv; /* ids */
  p2p_op_t *raw_op;              /* sending: its bare frame must go next, raw_out bytes */
  msg_t *raw_msg;                /* receiving: the next frame is raw_in bytes of it, bare */
  size_t raw_out, raw_in;
  int dirty; /* the lane has bytes that have not left yet (TCP) */
} peer_t;

struct baton__p2p {
  baton_comm_t *comm;
  baton__net_t net[2];
  int nnet;
  baton__sig_t sig; /* stamped on every frame: the lanes carry no collective */
  peer_t *peers;
  size_t eager;
  double spin_s, timeout_s;
  /* A caller blocked in a wait polls longer than the thread (200 us,
   * yielding the core between polls after BATON_SPIN_US): a futex wake-up
   * costs tens of microseconds on a virtual machine, a ping-pong's reply
   * comes sooner. The thread polls briefly, so as not to take the core of
   * the caller it overlaps. */
  double wait_spin_s;
  int oversubscribed;
  pthread_mutex_t mu;  /* over everything below and every lane */
  pthread_cond_t work; /* the thread sleeps here while it has nothing to drive */
  pthread_t thread;
  int has_thread, stop, waiters;
  int pending; /* messages not complete */
  int dirty;   /* lanes with bytes that have not left, after the last pass */
  int owed;    /* CTS and ACK frames not yet sent */
  int fatal;
  char fatal_msg[BATON__ERRLEN];
  double last_deep;
};

/* ------------------------------------------------- p2p_lane.c: messages */

/* Completes op: off every list (its `next` stays valid for a loop that
 * walks one), so that the caller may free it as soon as the lock is free. */
void baton__p2p_op_finish(baton__p2p_t *p, p2p_op_t *op, int status);
/* The same with status rc and the reason in op->why. */
void baton__p2p_op_fail(baton__p2p_t *p, p2p_op_t *op, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* "baton_send to rank 3 (tag 5)". For messages only. */
const char *baton__p2p_label(const p2p_op_t *op);
/* The receive op takes message m: counts compared, the stash copied, the
 * sender told. Returns 0 or BATON_ENOMEM (the owed frame). */
int baton__p2p_match(baton__p2p_t *p, peer_t *q, p2p_op_t *op, msg_t *m, double now);
/* Takes message m off q's list and frees it. */
void baton__p2p_msg_free(peer_t *q, msg_t *m);
/* What can go out to q now: owed CTS and ACK frames first, then the sends
 * in order; and the sends whose bytes have all left are complete. Returns
 * the frames sent, or a lane failure (negative). */
int baton__p2p_push_lane(baton__p2p_t *p, peer_t *q, int deep, double now);
/* Takes what rank `peer` has sent. Returns the frames taken, or a failure. */
int baton__p2p_pull_lane(baton__p2p_t *p, int peer, int deep, double now);

/* ------------------------------------ p2p_progress.c: driving, failures */

/* Breaks point-to-point on this communicator: every message in flight
 * fails with rc, the peers are told, and later calls fail at once. */
void baton__p2p_break(baton__p2p_t *p, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The communicator's state, seen from here: an abort, a failure the
 * collectives found, or one of its parent's (split.c). */
int baton__p2p_watch(baton__p2p_t *p);
/* One pass over every lane with work, never waiting. Returns the frames
 * moved (0: nothing could move). Under the lock. */
int baton__p2p_pass(baton__p2p_t *p, int deep, double now);
/* Drives passes until op is done or the clock (baton__now) reaches
 * `until`, its sleeps of at most 10 ms overshooting it by up to that (op
 * NULL: until nothing is pending, or a waiter arrives); under the lock. */
void baton__p2p_drive(baton__p2p_t *p, const p2p_op_t *op, double until);
/* The point-to-point thread, started once; 0 or BATON_ESYS. Under the lock. */
int baton__p2p_start_thread(baton__p2p_t *p);

#endif /* BATON_P2P_IMPL_H */
