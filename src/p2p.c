/*
 * p2p.c - point-to-point messages: baton_send, baton_recv, baton_isend,
 * baton_irecv.
 *
 * Connections. Every communicator has, beside the collectives', one lane
 * each way between every pair of ranks: a pair channel of a shared-memory
 * segment of its own inside a host, a TCP connection of its own between
 * hosts (the transports' own set-up, under other store keys). So messages
 * never queue behind a collective's, nor a collective behind them, and the
 * two may run in different threads.
 *
 * Frames. Each slot of a lane holds one frame: a 32-byte header and up to a
 * slot's worth of payload. Integers little-endian:
 *   type u8 | dtype u8 | eager u8 | 0 u8 | tag or status i32 | id u64 | a u64 | b u64
 *  - HDR   a message: tag, id (its number on this lane, from 0), a = count,
 *          b = bytes; the first payload when it is eager;
 *  - DATA  payload of message id at byte offset a; or, with b > 0, none:
 *          the next frame on the lane is b bytes of it, bare (where the
 *          transport sends from the caller's memory: TCP's send_ref);
 *  - CTS   the receiver matched rendezvous message id: send the data (status
 *          0), or its counts differ (status BATON_EMISMATCH, a = its count);
 *  - ACK   the same for an eager message, whose data is already under way.
 * A message of at most BATON_P2P_EAGER_BYTES goes out whole at once (the
 * receiver keeps it until a receive matches it); a larger one sends its
 * HDR and waits for the CTS, so that no rank buffers a large message it did
 * not ask for.
 *
 * Matching is MPI's: a receive takes the oldest message from its peer with
 * its tag, a message the oldest receive posted for it. A send completes
 * once the receiver has matched it (its ACK or CTS has come and all of its
 * data has left this rank), so both sides of a mismatch fail with
 * BATON_EMISMATCH, like a mismatched collective, and a send to a rank that
 * never receives it fails after BATON_TIMEOUT rather than never.
 *
 * Progress. The state of every lane is under one lock. Whoever waits drives
 * it: a caller in baton_wait (or a blocking send or recv) runs passes over
 * the lanes itself, so a ping-pong never involves another thread; while
 * messages are in flight and nobody waits (the caller computes, or is in a
 * collective), the communicator's point-to-point thread does, started by
 * the first i-call. A pass never waits (the transports' `ready`); between
 * idle passes the driver spins for BATON_SPIN_US, then sleeps in slices
 * that grow to a millisecond. Every 10 ms of idling the pass also checks
 * that peers live and that nothing was aborted.
 *
 * Failures. A lost or silent peer, a malformed frame, an abort: every
 * message in flight fails with the code, the transports are poisoned so
 * that the peers' messages fail too, and later calls fail at once. A
 * mismatch fails only the two messages.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "call.h"
#include "p2p.h"

#define FRAME_HDR 32
enum { F_HDR = 1, F_DATA = 2, F_CTS = 3, F_ACK = 4 };

typedef struct {
  uint8_t type, dtype, eager; /* eager: HDR only */
  int32_t tag;                /* HDR: the tag; CTS, ACK: the status */
  uint64_t id, a, b;
} frame_t;

static void frame_pack(uint8_t *p, const frame_t *f) {
  memset(p, 0, FRAME_HDR);
  p[0] = f->type;
  p[1] = f->dtype;
  p[2] = f->eager;
  uint32_t tag = (uint32_t)f->tag;
  for (int i = 0; i < 4; i++)
    p[4 + i] = (uint8_t)(tag >> (8 * i));
  for (int i = 0; i < 8; i++) {
    p[8 + i] = (uint8_t)(f->id >> (8 * i));
    p[16 + i] = (uint8_t)(f->a >> (8 * i));
    p[24 + i] = (uint8_t)(f->b >> (8 * i));
  }
}

static void frame_unpack(const uint8_t *p, frame_t *f) {
  uint32_t tag = 0;
  f->type = p[0];
  f->dtype = p[1];
  f->eager = p[2];
  for (int i = 0; i < 4; i++)
    tag |= (uint32_t)p[4 + i] << (8 * i);
  f->tag = (int32_t)tag;
  f->id = f->a = f->b = 0;
  for (int i = 0; i < 8; i++) {
    f->id |= (uint64_t)p[8 + i] << (8 * i);
    f->a |= (uint64_t)p[16 + i] << (8 * i);
    f->b |= (uint64_t)p[24 + i] << (8 * i);
  }
}

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

/* ------------------------------------------------------------- failures */

static void unlink_op(p2p_op_t **list, p2p_op_t *op) {
  for (; *list; list = &(*list)->next)
    if (*list == op) {
      *list = op->next;
      return;
    }
}

/* Completes op: off every list (its `next` stays valid for a loop that
 * walks one), so that the caller may free it as soon as the lock is free. */
static void op_finish(baton__p2p_t *p, p2p_op_t *op, int status) {
  if (op->state == OP_DONE)
    return;
  peer_t *q = &p->peers[op->peer];
  unlink_op(op->sending ? &q->sends : &q->recvs, op);
  for (msg_t *m = q->msgs; !op->sending && m; m = m->next)
    if (m->recv == op)
      m->recv = NULL, m->discard = 1;
  op->state = OP_DONE;
  op->status = status;
  p->pending--;
}

static void op_fail(baton__p2p_t *p, p2p_op_t *op, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void op_fail(baton__p2p_t *p, p2p_op_t *op, int rc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(op->why, sizeof op->why, fmt, ap);
  va_end(ap);
  op_finish(p, op, rc);
}

/* "baton_send to rank 3 (tag 5)". For messages only. */
static const char *label(const p2p_op_t *op) {
  static _Thread_local char buf[96];
  snprintf(buf, sizeof buf, "%s %s rank %d (tag %d)", op->sending ? "baton_send" : "baton_recv",
           op->sending ? "to" : "from", op->peer, op->tag);
  return buf;
}

/* Breaks point-to-point on this communicator: every message in flight
 * fails with rc, the peers are told, and later calls fail at once. */
static void p2p_break(baton__p2p_t *p, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void p2p_break(baton__p2p_t *p, int rc, const char *fmt, ...) {
  if (p->fatal)
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(p->fatal_msg, sizeof p->fatal_msg, fmt, ap);
  va_end(ap);
  p->fatal = rc;
  baton__log_warn(COLL, "point-to-point: %s: %s", baton_err_name(rc), p->fatal_msg);
  baton_comm_t *comm = p->comm;
  for (int r = 0; r < comm->size; r++) {
    peer_t *q = &p->peers[r];
    for (p2p_op_t *op = q->sends; op; op = op->next)
      op_fail(p, op, rc, "%s: %s", label(op), p->fatal_msg);
    for (p2p_op_t *op = q->recvs; op; op = op->next)
      op_fail(p, op, rc, "%s: %s", label(op), p->fatal_msg);
    for (msg_t *m = q->msgs; m; m = m->next)
      if (m->recv)
        op_fail(p, m->recv, rc, "%s: %s", label(m->recv), p->fatal_msg);
  }
  char msg[BATON__ERRLEN];
  snprintf(msg, sizeof msg, "rank %d: %.400s", comm->rank, p->fatal_msg);
  for (int i = 0; i < p->nnet; i++)
    p->net[i].ops->poison(p->net[i].impl, rc, msg);
}

/* ---------------------------------------------------------- the lanes */

/* Sends one frame with `len` bytes of payload; the lane is ready (the
 * caller asked). Returns 0 or the lane's failure. */
static int put_frame(baton__p2p_t *p, peer_t *q, const frame_t *f, const void *data, size_t len) {
  void *slot;
  int rc = q->out->ops->send_acquire(q->out, &slot);
  if (rc)
    return rc;
  frame_pack(slot, f);
  if (len)
    memcpy((char *)slot + FRAME_HDR, data, len);
  (void)p;
  return q->out->ops->send_commit(q->out, FRAME_HDR + len);
}

static size_t payload_room(const peer_t *q) { return q->out->slot_bytes - FRAME_HDR; }

/* Whether everything committed on q's lane has left this rank (TCP
 * buffers; shared memory does not): a send is complete only then. Moves
 * the lane's bytes. 1 yes, 0 not yet, or the lane's failure. */
static int drained(peer_t *q) { return q->out->ops->drained ? q->out->ops->drained(q->out) : 1; }

/* One send's next frames, while the lane takes them (*full once it takes
 * no more). Returns the frames sent, or the lane's failure (negative). */
/* The bare frame a DATA header announced, straight from the caller's
 * buffer (send_ref); the lane is ready. */
static int push_raw(peer_t *q, double now) {
  p2p_op_t *op = q->raw_op;
  int rc = q->out->ops->send_ref(q->out, op->buf + op->moved, q->raw_out);
  if (rc)
    return rc;
  op->moved += q->raw_out;
  op->last = now;
  q->raw_op = NULL;
  if (op->moved == op->bytes)
    op->state = S_DRAIN; /* a rendezvous: matched before its data went */
  return 0;
}

static int push_send(baton__p2p_t *p, peer_t *q, p2p_op_t *op, int deep, double now, int *full) {
  int sent = 0, rc;
  while (op->state == S_HDR || op->state == S_STREAM) {
    if ((rc = q->out->ops->ready(q->out, 1, deep)) <= 0) {
      *full = 1;
      return rc < 0 ? rc : sent;
    }
    if (q->raw_op) {
      if ((rc = push_raw(q, now)) != 0)
        return rc;
      sent++;
      continue;
    }
    size_t len = op->bytes - op->moved < payload_room(q) ? op->bytes - op->moved : payload_room(q);
    frame_t f = {.type = F_DATA, .dtype = (uint8_t)op->dtype, .tag = op->tag, .id = op->id};
    /* A rendezvous's data, where the transport can send from the caller's
     * memory: a header, then the bytes bare, one copy fewer. */
    if (op->state == S_STREAM && !op->eager && q->out->ops->send_ref) {
      size_t raw =
          op->bytes - op->moved < q->out->slot_bytes ? op->bytes - op->moved : q->out->slot_bytes;
      f.a = op->moved, f.b = raw;
      if ((rc = put_frame(p, q, &f, NULL, 0)) != 0)
        return rc;
      sent++;
      q->raw_op = op, q->raw_out = raw;
      continue;
    }
    if (op->state == S_HDR) {
      op->eager = op->bytes <= p->eager;
      f.type = F_HDR, f.eager = (uint8_t)op->eager, f.a = op->count, f.b = op->bytes;
      len = op->eager ? len : 0;
      op->state = op->eager ? S_STREAM : S_WAIT_CTS;
    } else {
      f.a = op->moved;
    }
    if ((rc = put_frame(p, q, &f, op->buf + op->moved, len)) != 0)
      return rc;
    sent++;
    op->moved += len;
    op->last = now;
    if (op->state == S_STREAM && op->moved == op->bytes)
      op->state = !op->eager || op->acked ? S_DRAIN : S_WAIT_ACK;
  }
  return sent;
}

/* What can go out to q now: owed CTS and ACK frames first, then the sends
 * in order; and the sends whose bytes have all left are complete. Returns
 * the frames sent, or a lane failure (negative). */
static int push_lane(baton__p2p_t *p, peer_t *q, int deep, double now) {
  int sent = 0, rc, full = 0;
  if (q->raw_op) { /* nothing may come between a DATA header and its bytes */
    if ((rc = q->out->ops->ready(q->out, 1, deep)) < 0)
      return rc;
    if (rc == 0 || (rc = push_raw(q, now)) != 0)
      return rc;
    sent++;
  }
  while (q->ctrl.n > 0 && !full) {
    if ((rc = q->out->ops->ready(q->out, 1, deep)) < 0)
      return rc;
    if (rc == 0) {
      full = 1;
      break;
    }
    if ((rc = put_frame(p, q, &q->ctrl.f[0], NULL, 0)) != 0)
      return rc;
    memmove(q->ctrl.f, q->ctrl.f + 1, (size_t)--q->ctrl.n * sizeof *q->ctrl.f);
    p->owed--;
    sent++;
  }
  for (p2p_op_t *op = q->sends; op && !full; op = op->next) {
    if ((rc = push_send(p, q, op, deep, now, &full)) < 0)
      return rc;
    sent += rc;
  }
  if ((rc = drained(q)) < 0)
    return rc;
  q->dirty = !rc;
  for (p2p_op_t *op = q->sends, *next; op && !q->dirty; op = next) {
    next = op->next;
    if (op->state == S_DRAIN)
      op_finish(p, op, BATON_OK);
  }
  return sent;
}

static int ctrl_push(baton__p2p_t *p, peer_t *q, const frame_t *f) {
  ctrl_q_t *c = &q->ctrl;
  if (c->n == c->cap) {
    int cap = c->cap ? 2 * c->cap : 8;
    frame_t *nf = realloc(c->f, (size_t)cap * sizeof *nf);
    if (!nf)
      return BATON_ENOMEM;
    c->f = nf, c->cap = cap;
  }
  c->f[c->n++] = *f;
  p->owed++;
  return 0;
}

static void msg_free(peer_t *q, msg_t *m) {
  for (msg_t **l = &q->msgs; *l; l = &(*l)->next)
    if (*l == m) {
      *l = m->next;
      break;
    }
  free(m->stash);
  free(m);
}

/* The receive op takes message m: counts compared, the stash copied, the
 * sender told. Returns 0 or BATON_ENOMEM (the owed frame). */
static int match(baton__p2p_t *p, peer_t *q, p2p_op_t *op, msg_t *m, double now) {
  int same = m->count == op->count && m->dtype == op->dtype;
  frame_t f = {.type = m->eager ? F_ACK : F_CTS,
               .dtype = (uint8_t)op->dtype,
               .tag = same ? 0 : BATON_EMISMATCH,
               .id = m->id,
               .a = op->count};
  op->id = m->id;
  op->last = now;
  if (!same) {
    op_fail(p, op, BATON_EMISMATCH,
            "%s: rank %d sent %llu elements of %s, this rank expected %zu "
            "elements of %s",
            label(op), op->peer, (unsigned long long)m->count, baton_dtype_name(m->dtype),
            op->count, baton_dtype_name(op->dtype));
    m->discard = 1;
    free(m->stash);
    m->stash = NULL;
    if (!m->eager || m->got == m->bytes)
      msg_free(q, m);
    return ctrl_push(p, q, &f);
  }
  m->recv = op;
  op->state = R_MATCHED;
  if (m->got)
    memcpy(op->buf, m->stash, m->got);
  free(m->stash);
  m->stash = NULL;
  op->moved = m->got;
  if (m->eager && m->got == m->bytes) {
    op_finish(p, op, BATON_OK);
    msg_free(q, m);
  }
  return ctrl_push(p, q, &f);
}

static int proto(baton__p2p_t *p, int peer, const char *what) {
  p2p_break(p, BATON_EPROTO, "rank %d sent a malformed point-to-point frame: %s", peer, what);
  return BATON_EPROTO;
}

/* n bytes of message m arrive: into its receive, its stash, or nowhere
 * (a receive that did not match). */
static void land(baton__p2p_t *p, peer_t *q, msg_t *m, const char *data, size_t n, double now) {
  if (m->recv)
    memcpy(m->recv->buf + m->got, data, n), m->recv->last = now;
  else if (m->stash)
    memcpy(m->stash + m->got, data, n);
  m->got += n;
  if (m->got == m->bytes && (m->recv || m->discard)) {
    if (m->recv)
      op_finish(p, m->recv, BATON_OK);
    msg_free(q, m);
  }
}

/* One frame from rank `peer`. Returns 0 or a failure (p2p broken). */
static int take_frame(baton__p2p_t *p, int peer, const uint8_t *b, size_t len, double now) {
  peer_t *q = &p->peers[peer];
  char what[320];
  if (q->raw_msg) { /* the bytes a DATA header announced */
    msg_t *m = q->raw_msg;
    q->raw_msg = NULL;
    if (len != q->raw_in) {
      snprintf(what, sizeof what, "%zu bare bytes of message #%llu where its header said %zu", len,
               (unsigned long long)m->id, q->raw_in);
      return proto(p, peer, what);
    }
    land(p, q, m, (const char *)b, len, now);
    return 0;
  }
  if (len < FRAME_HDR || len > q->in->slot_bytes) {
    snprintf(what, sizeof what, "%zu bytes, not a frame", len);
    return proto(p, peer, what);
  }
  frame_t f;
  frame_unpack(b, &f);
  const char *data = (const char *)b + FRAME_HDR;
  size_t n = len - FRAME_HDR;
  if (f.type == F_HDR) {
    size_t elsize = baton_dtype_size((baton_dtype_t)f.dtype);
    int eager = f.eager == 1;
    if (f.id != q->next_recv || f.tag < -1 || elsize == 0 || f.a > SIZE_MAX / elsize ||
        f.b != f.a * elsize || n > f.b || f.eager > 1 || (eager && f.b > p->eager) ||
        (!eager && n > 0)) {
      snprintf(what, sizeof what,
               "message header #%llu (expected #%llu), tag %d, dtype %u, %llu elements, %llu "
               "bytes, %zu here (eager limit %zu: is BATON_P2P_EAGER_BYTES the same everywhere?)",
               (unsigned long long)f.id, (unsigned long long)q->next_recv, f.tag, f.dtype,
               (unsigned long long)f.a, (unsigned long long)f.b, n, p->eager);
      return proto(p, peer, what);
    }
    q->next_recv++;
    msg_t *m = calloc(1, sizeof *m);
    if (!m || (eager && f.b && !(m->stash = malloc(f.b)))) {
      free(m);
      p2p_break(p, BATON_ENOMEM, "out of memory for a message of %llu bytes from rank %d",
                (unsigned long long)f.b, peer);
      return BATON_ENOMEM;
    }
    *m = (msg_t){.id = f.id,
                 .count = f.a,
                 .bytes = f.b,
                 .tag = f.tag,
                 .eager = eager,
                 .dtype = (baton_dtype_t)f.dtype,
                 .stash = m->stash};
    if (n)
      memcpy(m->stash, data, n);
    m->got = n;
    msg_t **tail = &q->msgs;
    while (*tail)
      tail = &(*tail)->next;
    *tail = m;
    for (p2p_op_t *op = q->recvs; op; op = op->next)
      if (op->tag == m->tag) {
        unlink_op(&q->recvs, op);
        return match(p, q, op, m, now);
      }
    return 0;
  }
  if (f.type == F_DATA) {
    msg_t *m = q->msgs;
    while (m && m->id != f.id)
      m = m->next;
    size_t n_all = f.b ? f.b : n;
    if (!m || (!m->eager && !m->recv && !m->discard) || f.a != m->got ||
        n_all > m->bytes - m->got || (f.b && (n || !m->recv))) {
      snprintf(what, sizeof what, "data of message #%llu at byte %llu (%zu bytes) that %s",
               (unsigned long long)f.id, (unsigned long long)f.a, n_all,
               !m ? "is not in flight" : "does not follow what came before");
      return proto(p, peer, what);
    }
    if (f.b)
      q->raw_msg = m, q->raw_in = f.b;
    else
      land(p, q, m, data, n, now);
    return 0;
  }
  if (f.type == F_CTS || f.type == F_ACK) {
    p2p_op_t *op = q->sends;
    while (op && op->id != f.id)
      op = op->next;
    int want = f.type == F_CTS ? S_WAIT_CTS : -1;
    if (!op || (want >= 0 && op->state != want) || (want < 0 && (op->acked || !op->eager)) ||
        (f.tag != 0 && f.tag != BATON_EMISMATCH)) {
      snprintf(what, sizeof what, "%s for message #%llu, status %d, that waits for none",
               f.type == F_CTS ? "a go-ahead" : "an acknowledgement", (unsigned long long)f.id,
               f.tag);
      return proto(p, peer, what);
    }
    op->last = now;
    if (f.tag == BATON_EMISMATCH) {
      op_fail(p, op, BATON_EMISMATCH,
              "%s: rank %d posted a receive of %llu elements of %s for this rank's %zu elements "
              "of %s",
              label(op), peer, (unsigned long long)f.a, baton_dtype_name((baton_dtype_t)f.dtype),
              op->count, baton_dtype_name(op->dtype));
    } else if (f.type == F_CTS) {
      op->state = S_STREAM;
      if (op->bytes == 0)
        op_finish(p, op, BATON_OK);
    } else {
      op->acked = 1;
      if (op->state == S_WAIT_ACK)
        op->state = S_DRAIN;
    }
    return 0;
  }
  snprintf(what, sizeof what, "frame type %u", f.type);
  return proto(p, peer, what);
}

/* Takes what rank `peer` has sent. Returns the frames taken, or a failure. */
static int pull_lane(baton__p2p_t *p, int peer, int deep, double now) {
  peer_t *q = &p->peers[peer];
  int taken = 0, rc;
  while ((rc = q->in->ops->ready(q->in, 0, deep)) == 1) {
    const void *slot;
    size_t len;
    if ((rc = q->in->ops->recv_acquire(q->in, &slot, &len)) != 0)
      return rc;
    rc = take_frame(p, peer, slot, len, now);
    q->in->ops->recv_release(q->in);
    if (rc)
      return rc;
    taken++;
    deep = 0;
  }
  return rc < 0 ? rc : taken;
}

/* Whether this rank waits for anything of q's: then a deep pass checks
 * that q lives. */
static int waits_on(const peer_t *q) {
  if (q->sends || q->recvs)
    return 1;
  for (const msg_t *m = q->msgs; m; m = m->next)
    if (m->recv)
      return 1;
  return 0;
}

/* Whether q's lane has frames this rank wants to send, or bytes still to
 * leave: then a sleeper waits for room on it too. */
static int to_push(const peer_t *q) {
  if (q->ctrl.n || q->dirty || q->raw_op)
    return 1;
  for (const p2p_op_t *op = q->sends; op; op = op->next)
    if (op->state == S_HDR || op->state == S_STREAM)
      return 1;
  return 0;
}

/* The communicator's state, seen from here: an abort, or a failure the
 * collectives found. */
static int watch(baton__p2p_t *p) {
  baton_comm_t *comm = p->comm;
  if (atomic_load_explicit(&comm->abort_requested, memory_order_acquire)) {
    p2p_break(p, BATON_EABORTED, "baton_comm_abort was called on rank %d", comm->rank);
    return BATON_EABORTED;
  }
  int rc = __atomic_load_n(&comm->fatal_rc, __ATOMIC_ACQUIRE);
  if (rc) {
    p2p_break(p, rc, "the communicator failed: %.400s", comm->fatal_msg);
    return rc;
  }
  return 0;
}

/* Gives up on ops that have waited past BATON_TIMEOUT. */
static void timeouts(baton__p2p_t *p, double now) {
  for (int r = 0; r < p->comm->size && !p->fatal; r++) {
    peer_t *q = &p->peers[r];
    p2p_op_t *late = NULL;
    for (p2p_op_t *op = q->sends; op && !late; op = op->next)
      late = op->state != OP_DONE && now - op->last > p->timeout_s ? op : NULL;
    for (p2p_op_t *op = q->recvs; op && !late; op = op->next)
      late = now - op->last > p->timeout_s ? op : NULL;
    for (msg_t *m = q->msgs; m && !late; m = m->next)
      late = m->recv && now - m->recv->last > p->timeout_s ? m->recv : NULL;
    if (late)
      p2p_break(p, BATON_ETIMEDOUT, "%s, %zu elements: rank %d %s for %.3g s", label(late),
                late->count, r,
                late->sending ? (late->moved ? "took no more of it" : "did not receive it")
                              : "sent nothing for it",
                p->timeout_s);
  }
}

/* One pass over every lane with work, never waiting. Returns the frames
 * moved (0: nothing could move). Under the lock. */
static int pass(baton__p2p_t *p, int deep, double now) {
  if (p->fatal)
    return 0;
  if (deep && watch(p))
    return 1;
  int moved = 0, dirty = 0;
  for (int r = 0; r < p->comm->size && !p->fatal; r++) {
    peer_t *q = &p->peers[r];
    if (!q->in)
      continue;
    /* Every incoming lane, asked for or not: a message taken off it (kept
     * until a receive matches it) keeps the lane from filling up. */
    int rc = pull_lane(p, r, deep && waits_on(q), now);
    if (rc < 0) {
      if (!p->fatal)
        p2p_break(p, rc, "%s", q->in->why);
      break;
    }
    moved += rc;
    if (q->sends || q->ctrl.n || q->dirty) {
      if ((rc = push_lane(p, q, deep, now)) < 0) {
        if (!p->fatal)
          p2p_break(p, rc, "%s", q->out->why);
        break;
      }
      moved += rc;
    }
    dirty += q->dirty;
  }
  p->dirty = p->fatal ? 0 : dirty;
  if (deep)
    timeouts(p, now);
  return moved;
}

/* ------------------------------------------------------------ driving */

/* Sleeps without the lock until a lane this rank waits on can move:
 * shared-memory lanes on their futexes (the peers' commits wake them;
 * several at once with futex_waitv, else for `s` seconds); sockets in
 * ppoll, up to the next deep pass; a mix of the two for `s` seconds. */
static void nap(baton__p2p_t *p, double s) {
  int n = 0, shm_busy = 0, nl = 0, armable = 1;
  /* Each sleeper its own: the thread and waiters sleep at once. */
  struct pollfd pfd[2 * p->comm->size];
  baton__conn_t *lane[2 * p->comm->size];
  int sending[2 * p->comm->size];
  for (int r = 0; r < p->comm->size; r++) {
    peer_t *q = &p->peers[r];
    if (q->in && waits_on(q))
      lane[nl] = q->in, sending[nl++] = 0, armable &= q->in->ops->arm != NULL;
    if (q->in && to_push(q))
      lane[nl] = q->out, sending[nl++] = 1, armable &= q->out->ops->arm != NULL;
  }
  /* Shared-memory lanes only: sleep where their peers wake this rank the
   * moment one moves (the futex of each, or all of them at once), not for
   * a fixed time. */
  if (nl > 0 && armable) {
    baton__sleep_t z[nl];
    for (int i = 0; i < nl; i++)
      if (lane[i]->ops->arm(lane[i], sending[i], &z[i]))
        return; /* it moved meanwhile */
    pthread_mutex_unlock(&p->mu);
    if (nl == 1)
      lane[0]->ops->sleep(&z[0], 0.01);
    else if (lane[0]->ops->sleep_many(z, nl, 0.01) != 0) {
      struct timespec ts = {0, (long)(s * 1e9)};
      nanosleep(&ts, NULL);
    }
    pthread_mutex_lock(&p->mu);
    return;
  }
  for (int r = 0; r < p->comm->size; r++) {
    peer_t *q = &p->peers[r];
    if (!q->in)
      continue;
    short ev_in = 0, ev_out = 0;
    int fin = q->in->ops->poll_fd ? q->in->ops->poll_fd(q->in, &ev_in) : -1;
    int fout = q->out->ops->poll_fd ? q->out->ops->poll_fd(q->out, &ev_out) : -1;
    int busy = waits_on(q) || q->ctrl.n || q->dirty;
    if (fin < 0 || fout < 0) {
      shm_busy |= busy;
      continue;
    }
    pfd[n++] = (struct pollfd){fin, ev_in, 0};
    if (q->sends || q->ctrl.n || q->dirty)
      pfd[n++] = (struct pollfd){fout, (short)(ev_out | POLLOUT), 0};
  }
  if (!shm_busy && n > 0)
    s = 0.01;
  struct timespec ts = {0, (long)(s * 1e9)};
  pthread_mutex_unlock(&p->mu);
  if (n > 0)
    ppoll(pfd, (nfds_t)n, &ts, NULL);
  else
    nanosleep(&ts, NULL);
  pthread_mutex_lock(&p->mu);
}

/* Drives passes until op is done (op NULL: until nothing is pending, or a
 * waiter arrives); under the lock. */
static void drive(baton__p2p_t *p, const p2p_op_t *op) {
  double now = baton__now(), idle_since = now, backoff = 10e-6;
  /* A waiter also sends what it owes before it leaves: the ACK of the
   * receive it matched is what its peer's send waits for. The clock is
   * read every 16th pass: at 25 ns a read it was a third of a spinning
   * waiter's time. */
  for (unsigned k = 1; op ? op->state != OP_DONE || (p->owed && !p->fatal)
                          : (p->pending > 0 || p->dirty || p->owed) && !p->waiters && !p->stop;
       k++) {
    if (k % 16 == 0)
      now = baton__now();
    int deep = now - p->last_deep > 0.01;
    if (deep)
      p->last_deep = now;
    int moved = pass(p, deep, now);
    if (moved || p->fatal) {
      idle_since = now, backoff = 10e-6;
      continue;
    }
    if (now - idle_since < (op ? p->wait_spin_s : p->spin_s)) {
      /* Past BATON_SPIN_US a waiter polls between yields: alone on its
       * core it loses nothing, and a peer that shares the core (another
       * process took the other) runs at once instead of after the spin. */
      if (p->oversubscribed || now - idle_since >= p->spin_s) {
        pthread_mutex_unlock(&p->mu);
        sched_yield();
        pthread_mutex_lock(&p->mu);
      }
      continue;
    }
    nap(p, backoff);
    backoff = backoff < 1e-3 ? backoff * 2 : 1e-3;
    now = baton__now();
  }
}

static void *thread_main(void *arg) {
  baton__p2p_t *p = arg;
  baton__log_rank = p->comm->rank;
  pthread_mutex_lock(&p->mu);
  while (!p->stop) {
    if ((p->pending == 0 && !p->dirty && !p->owed) || p->waiters)
      pthread_cond_wait(&p->work, &p->mu);
    else
      drive(p, NULL);
  }
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

static int start_thread(baton__p2p_t *p) {
  if (p->has_thread)
    return 0;
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int rc = pthread_create(&p->thread, NULL, thread_main, p);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc)
    return BATON_ESYS;
  p->has_thread = 1;
  baton__log_info(INIT, "point-to-point thread started for the messages in flight");
  return 0;
}

/* ---------------------------------------------------------------- calls */

static int check_args(baton_comm_t *comm, const char *name, const void *buf, size_t count,
                      baton_dtype_t dtype, int peer, int tag) {
  size_t elsize = baton_dtype_size(dtype);
  if (elsize == 0)
    return baton__fail(comm, BATON_EINVAL, "%s: unknown dtype %d", name, (int)dtype);
  if (peer < 0 || peer >= comm->size)
    return baton__fail(comm, BATON_EINVAL, "%s: peer %d is outside [0, %d)", name, peer,
                       comm->size);
  if (peer == comm->rank)
    return baton__fail(comm, BATON_EINVAL, "%s: peer %d is this rank; a rank cannot message itself",
                       name, peer);
  if (tag < 0)
    return baton__fail(comm, BATON_EINVAL, "%s: tag %d is negative; tags are >= 0", name, tag);
  if (count > SIZE_MAX / elsize)
    return baton__fail(comm, BATON_EINVAL, "%s: count %zu of %s overflows", name, count,
                       baton_dtype_name(dtype));
  if (count && !buf)
    return baton__fail(comm, BATON_EINVAL, "%s: the buffer is NULL for %zu elements", name, count);
  return 0;
}

/* A new message in its lane's queue (a receive matched at once when its
 * message is there); with `async`, the thread is started to move it. NULL
 * when out of memory. The caller holds comm->busy. */
static p2p_op_t *submit(baton__p2p_t *p, int sending, void *buf, size_t count, baton_dtype_t dtype,
                        int peer, int tag, int async) {
  p2p_op_t *op = calloc(1, sizeof *op);
  if (!op)
    return NULL;
  *op = (p2p_op_t){.kind = BATON__REQ_P2P,
                   .comm = p->comm,
                   .sending = sending,
                   .peer = peer,
                   .tag = tag,
                   .state = sending ? S_HDR : R_POSTED,
                   .buf = buf,
                   .count = count,
                   .bytes = count * baton_dtype_size(dtype),
                   .dtype = dtype,
                   .last = baton__now()};
  pthread_mutex_lock(&p->mu);
  p->pending++;
  int rc = p->fatal ? p->fatal : watch(p);
  if (rc) {
    op_fail(p, op, rc, "%s: point-to-point failed earlier: %s", label(op), p->fatal_msg);
  } else {
    peer_t *q = &p->peers[peer];
    if (sending)
      op->id = q->next_send++;
    p2p_op_t **tail = sending ? &q->sends : &q->recvs;
    int matched = 0;
    for (msg_t *m = q->msgs; !sending && m; m = m->next)
      if (!m->recv && !m->discard && m->tag == tag) {
        if (match(p, q, op, m, op->last))
          p2p_break(p, BATON_ENOMEM, "out of memory for a frame to rank %d", peer);
        matched = 1;
        break;
      }
    if (!matched) {
      while (*tail)
        tail = &(*tail)->next;
      *tail = op;
    }
    if (async && p->pending > 0 && (rc = start_thread(p)) == 0)
      pthread_cond_signal(&p->work);
    if (rc)
      p2p_break(p, rc, "%s: cannot start the point-to-point thread", label(op));
  }
  pthread_mutex_unlock(&p->mu);
  return op;
}

/* Posts a message; with req NULL, waits for it too. */
static int post(baton_comm_t *comm, int sending, void *buf, size_t count, baton_dtype_t dtype,
                int peer, int tag, baton_request_t **req) {
  const char *name =
      sending ? (req ? "baton_isend" : "baton_send") : (req ? "baton_irecv" : "baton_recv");
  if (req)
    *req = NULL;
  if (!comm)
    return BATON_EINVAL;
  int rc = check_args(comm, name, buf, count, dtype, peer, tag);
  if (rc)
    return rc;
  baton__p2p_t *p = comm->p2p;
  if (!p)
    return baton__fail(comm, BATON_EUSAGE, "%s: point-to-point is not set up", name);
  int idle = 0;
  if (!atomic_compare_exchange_strong(&comm->busy, &idle, 1))
    return baton__fail(comm, BATON_EUSAGE,
                       "%s: another thread is in a call on this communicator; calls on one "
                       "communicator must come from one thread at a time",
                       name);
  p2p_op_t *op = submit(p, sending, buf, count, dtype, peer, tag, req != NULL);
  if (!op) {
    atomic_store(&comm->busy, 0);
    return baton__fail(comm, BATON_ENOMEM, "%s: out of memory", name);
  }
  if (req) {
    *req = (baton_request_t *)op;
    atomic_store(&comm->busy, 0);
    return BATON_OK;
  }
  rc = baton__p2p_wait((baton_request_t *)op);
  atomic_store(&comm->busy, 0);
  return rc;
}

int baton_send(const void *buf, size_t count, baton_dtype_t dtype, int peer, int tag,
               baton_comm_t *comm) {
  return post(comm, 1, (void *)buf, count, dtype, peer, tag, NULL);
}

int baton_recv(void *buf, size_t count, baton_dtype_t dtype, int peer, int tag,
               baton_comm_t *comm) {
  return post(comm, 0, buf, count, dtype, peer, tag, NULL);
}

int baton_isend(const void *buf, size_t count, baton_dtype_t dtype, int peer, int tag,
                baton_comm_t *comm, baton_request_t **req) {
  if (!req)
    return BATON_EINVAL;
  return post(comm, 1, (void *)buf, count, dtype, peer, tag, req);
}

int baton_irecv(void *buf, size_t count, baton_dtype_t dtype, int peer, int tag, baton_comm_t *comm,
                baton_request_t **req) {
  if (!req)
    return BATON_EINVAL;
  return post(comm, 0, buf, count, dtype, peer, tag, req);
}

/* The op's status, its error in the communicator's last error; frees it. */
static int retire(p2p_op_t *op) {
  int rc = op->status;
  if (rc) {
    snprintf(op->comm->last_error, sizeof op->comm->last_error, "%s", op->why);
    baton__log_warn(COLL, "%s: %s", baton_err_name(rc), op->why);
  }
  free(op);
  return rc;
}

/* After a caller's pass: bytes still to leave (an ACK this rank owes, a
 * blocking call's last ACK behind a full socket) or messages in flight
 * become the thread's, which is woken for them. Messages in flight are the
 * thread's only when it runs already (i-forms start it): a program of
 * blocking calls waits for its messages one after the other in this
 * thread, and a thread started between them would only contend with it.
 * Called with p->mu held. */
static void hand_over(baton__p2p_t *p) {
  if ((p->pending > 0 || p->dirty || p->owed) && start_thread(p) == 0)
    pthread_cond_signal(&p->work);
}

int baton__p2p_wait(baton_request_t *req) {
  p2p_op_t *op = (p2p_op_t *)req;
  baton__p2p_t *p = op->comm->p2p;
  pthread_mutex_lock(&p->mu);
  p->waiters++;
  drive(p, op);
  p->waiters--;
  hand_over(p);
  pthread_mutex_unlock(&p->mu);
  return retire(op);
}

int baton__p2p_test(baton_request_t *req, int *done) {
  p2p_op_t *op = (p2p_op_t *)req;
  baton__p2p_t *p = op->comm->p2p;
  pthread_mutex_lock(&p->mu);
  if (op->state != OP_DONE)
    pass(p, 0, baton__now());
  *done = op->state == OP_DONE;
  /* A pass here may have matched a message whose ACK is still owed: left
   * to nobody, the sender would wait for it forever. */
  hand_over(p);
  pthread_mutex_unlock(&p->mu);
  return *done ? retire(op) : BATON_OK;
}

/* ---------------------------------------------------------------- set-up */

/* The lanes' segment: pair channels only, with no ring channel worth the
 * name and no mailboxes. */
static int connect_shm(baton__p2p_t *p, baton_comm_t *c, baton__params_t *pp, char *err,
                       size_t errlen) {
  int n = c->size, nlocal = 0, rc = 0;
  int tcp_only = strcmp(c->params.transport, "tcp") == 0;
  int *local = calloc((size_t)n, sizeof *local);
  if (!local)
    return BATON_ENOMEM;
  for (int r = 0; r < n; r++)
    if (c->group[r] == c->group[c->rank] && (!tcp_only || r == c->rank))
      local[nlocal++] = r;
  if (nlocal > 1) {
    char key[32];
    snprintf(key, sizeof key, "p2p.shm.%d", c->group[c->rank]);
    baton__shm_t *shm = NULL;
    rc = baton__shm_setup(c->store, key, c->rank, local, nlocal, -1, -1, pp, &shm, err, errlen);
    if (rc == 0) {
      p->net[p->nnet++] = (baton__net_t){&baton__shm_fabric, shm};
      for (int r = 0; r < n; r++)
        if (r != c->rank && !p->peers[r].out) {
          p->peers[r].out = baton__shm_fabric.conn_to(shm, r);
          p->peers[r].in = baton__shm_fabric.conn_from(shm, r);
        }
    }
  }
  free(local);
  return rc;
}

static int connect_tcp(baton__p2p_t *p, baton_comm_t *c, baton__params_t *pp, char *err,
                       size_t errlen) {
  int n = c->size, nremote = 0, rc;
  int *remote = calloc((size_t)n, sizeof *remote);
  if (!remote)
    return BATON_ENOMEM;
  for (int r = 0; r < n; r++)
    if (r != c->rank && !p->peers[r].out)
      remote[nremote++] = r;
  if (nremote == 0) {
    free(remote);
    return 0;
  }
  char ip[64];
  if ((rc = baton__pick_local_ip(c->params.socket_ifname, baton__store_host(c->store), ip,
                                 sizeof ip, err, errlen)) == 0) {
    baton__tcp_args_t a = {.rank = c->rank,
                           .size = n,
                           .comm_id = c->id ^ 0x7032707032707032ull,
                           .sig = &p->sig,
                           .to = remote,
                           .from = remote,
                           .nto = nremote,
                           .nfrom = nremote,
                           .local_ip = ip,
                           .hosts = c->hosts,
                           .secret = &c->secret,
                           .key = "p2p.tcp"};
    baton__tcp_t *tcp = NULL;
    if ((rc = baton__tcp_setup(c->store, &a, pp, &tcp, err, errlen)) == 0) {
      p->net[p->nnet++] = (baton__net_t){&baton__tcp_fabric, tcp};
      for (int i = 0; i < nremote; i++) {
        p->peers[remote[i]].out = baton__tcp_fabric.conn_to(tcp, remote[i]);
        p->peers[remote[i]].in = baton__tcp_fabric.conn_from(tcp, remote[i]);
      }
    }
  }
  free(remote);
  return rc;
}

int baton__p2p_connect(baton_comm_t *c, char *err, size_t errlen) {
  baton__p2p_t *p = calloc(1, sizeof *p);
  if (!p || !(p->peers = calloc((size_t)c->size, sizeof *p->peers))) {
    free(p);
    snprintf(err, errlen, "out of memory for point-to-point");
    return BATON_ENOMEM;
  }
  p->comm = c;
  c->p2p = p;
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->work, NULL);
  p->sig = (baton__sig_t){.root = -1};
  p->eager = c->params.p2p_eager_bytes;
  p->timeout_s = c->params.timeout_s;
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  p->oversubscribed = cpus > 0 && c->size > cpus;
  p->spin_s = (p->oversubscribed ? 2 : c->params.spin_us) * 1e-6;
  if (c->size == 1)
    return 0;
  /* The lanes' slots: the pair channels' size everywhere, one socket. */
  baton__params_t pp = c->params;
  pp.segment_bytes = pp.pair_segment_bytes;
  pp.flat_bytes = 0;
  pp.nsocks = 1;
  pp.shm_wake_all = 1; /* the thread and a caller may sleep on one lane at once */
  int rc = connect_shm(p, c, &pp, err, errlen);
  if (rc == 0)
    rc = connect_tcp(p, c, &pp, err, errlen);
  if (rc)
    return rc;
  /* Over sockets a reply takes tens of microseconds: poll them as long as
   * the collectives' TCP waits do before sleeping. */
  for (int i = 0; i < p->nnet; i++)
    if (p->net[i].ops == &baton__tcp_fabric && !p->oversubscribed &&
        c->params.tcp_spin_us * 1e-6 > p->spin_s)
      p->spin_s = c->params.tcp_spin_us * 1e-6;
  p->wait_spin_s =
      p->oversubscribed || c->params.spin_us == 0 || p->spin_s > 200e-6 ? p->spin_s : 200e-6;
  for (int r = 0; r < c->size; r++) {
    baton__conn_t *k[2] = {p->peers[r].out, p->peers[r].in};
    for (int i = 0; i < 2; i++)
      if (k[i])
        k[i]->sig = &p->sig, k[i]->self = c->rank;
  }
  return 0;
}

int baton__p2p_stop(baton_comm_t *comm) {
  baton__p2p_t *p = comm->p2p;
  if (!p)
    return 0;
  pthread_mutex_lock(&p->mu);
  int left = p->pending;
  p->stop = 1;
  pthread_cond_broadcast(&p->work);
  pthread_mutex_unlock(&p->mu);
  if (p->has_thread)
    pthread_join(p->thread, NULL);
  p->has_thread = 0;
  /* What is still in flight is the caller's no more: freed here. */
  for (int r = 0; r < comm->size; r++) {
    peer_t *q = &p->peers[r];
    for (p2p_op_t *op = q->sends, *next; op; op = next)
      next = op->next, free(op);
    for (p2p_op_t *op = q->recvs, *next; op; op = next)
      next = op->next, free(op);
    for (msg_t *m = q->msgs; m; m = m->next)
      if (m->recv)
        free(m->recv), m->recv = NULL;
    q->sends = q->recvs = NULL;
  }
  return left;
}

void baton__p2p_shutdown(baton_comm_t *comm, int rc, const char *msg) {
  baton__p2p_t *p = comm->p2p;
  for (int i = 0; p && i < p->nnet; i++)
    p->net[i].ops->shutdown(p->net[i].impl, rc, msg);
}

void baton__p2p_free(baton_comm_t *comm) {
  baton__p2p_t *p = comm->p2p;
  if (!p)
    return;
  baton__p2p_stop(comm);
  for (int i = 0; i < p->nnet; i++)
    p->net[i].ops->destroy(p->net[i].impl);
  for (int r = 0; r < comm->size; r++) {
    while (p->peers[r].msgs)
      msg_free(&p->peers[r], p->peers[r].msgs);
    free(p->peers[r].ctrl.f);
  }
  pthread_cond_destroy(&p->work);
  pthread_mutex_destroy(&p->mu);
  free(p->peers);
  free(p);
  comm->p2p = NULL;
}
