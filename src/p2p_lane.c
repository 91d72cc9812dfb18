/*
 * p2p_lane.c - point-to-point messages on their lanes: the frames, a
 * send's course through them, a message's arrival and its matching with a
 * receive. Everything here runs under the communicator's point-to-point
 * lock, called from a pass (p2p_progress.c) or a call (p2p.c).
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
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "p2p_impl.h"

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

/* ------------------------------------------------------------- messages */

static void unlink_op(p2p_op_t **list, p2p_op_t *op) {
  for (; *list; list = &(*list)->next)
    if (*list == op) {
      *list = op->next;
      return;
    }
}

void baton__p2p_op_finish(baton__p2p_t *p, p2p_op_t *op, int status) {
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

void baton__p2p_op_fail(baton__p2p_t *p, p2p_op_t *op, int rc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(op->why, sizeof op->why, fmt, ap);
  va_end(ap);
  baton__p2p_op_finish(p, op, rc);
}

const char *baton__p2p_label(const p2p_op_t *op) {
  static _Thread_local char buf[96];
  snprintf(buf, sizeof buf, "%s %s rank %d (tag %d)", op->sending ? "baton_send" : "baton_recv",
           op->sending ? "to" : "from", op->peer, op->tag);
  return buf;
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

/* One send's next frames, while the lane takes them (*full once it takes
 * no more). Returns the frames sent, or the lane's failure (negative). */
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

int baton__p2p_push_lane(baton__p2p_t *p, peer_t *q, int deep, double now) {
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
      baton__p2p_op_finish(p, op, BATON_OK);
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

void baton__p2p_msg_free(peer_t *q, msg_t *m) {
  for (msg_t **l = &q->msgs; *l; l = &(*l)->next)
    if (*l == m) {
      *l = m->next;
      break;
    }
  free(m->stash);
  free(m);
}

int baton__p2p_match(baton__p2p_t *p, peer_t *q, p2p_op_t *op, msg_t *m, double now) {
  int same = m->count == op->count && m->dtype == op->dtype;
  frame_t f = {.type = m->eager ? F_ACK : F_CTS,
               .dtype = (uint8_t)op->dtype,
               .tag = same ? 0 : BATON_EMISMATCH,
               .id = m->id,
               .a = op->count};
  op->id = m->id;
  op->last = now;
  if (!same) {
    baton__p2p_op_fail(p, op, BATON_EMISMATCH,
                       "%s: rank %d sent %llu elements of %s, this rank expected %zu "
                       "elements of %s",
                       baton__p2p_label(op), op->peer, (unsigned long long)m->count,
                       baton_dtype_name(m->dtype), op->count, baton_dtype_name(op->dtype));
    m->discard = 1;
    free(m->stash);
    m->stash = NULL;
    if (!m->eager || m->got == m->bytes)
      baton__p2p_msg_free(q, m);
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
    baton__p2p_op_finish(p, op, BATON_OK);
    baton__p2p_msg_free(q, m);
  }
  return ctrl_push(p, q, &f);
}

static int proto(baton__p2p_t *p, int peer, const char *what) {
  baton__p2p_break(p, BATON_EPROTO, "rank %d sent a malformed point-to-point frame: %s", peer,
                   what);
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
      baton__p2p_op_finish(p, m->recv, BATON_OK);
    baton__p2p_msg_free(q, m);
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
      baton__p2p_break(p, BATON_ENOMEM, "out of memory for a message of %llu bytes from rank %d",
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
        return baton__p2p_match(p, q, op, m, now);
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
      baton__p2p_op_fail(
          p, op, BATON_EMISMATCH,
          "%s: rank %d posted a receive of %llu elements of %s for this rank's %zu elements "
          "of %s",
          baton__p2p_label(op), peer, (unsigned long long)f.a,
          baton_dtype_name((baton_dtype_t)f.dtype), op->count, baton_dtype_name(op->dtype));
    } else if (f.type == F_CTS) {
      op->state = S_STREAM;
      if (op->bytes == 0)
        baton__p2p_op_finish(p, op, BATON_OK);
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

int baton__p2p_pull_lane(baton__p2p_t *p, int peer, int deep, double now) {
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
