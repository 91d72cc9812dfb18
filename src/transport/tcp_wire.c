/*
 * tcp_wire.c - frames on the wire, for the TCP transport.
 *
 * Every frame starts with a 48-byte header (BATON__FRAME_HDR: magic,
 * communicator id, frame number, length, kind and the sender's call) that
 * is checked before a byte of the payload is used: a stray or corrupt frame
 * is an error naming the peer, never data. This file packs and parses that
 * header and runs the per-socket state machines that move frames: push
 * writes committed slots (header and payload in one sendmsg), pull reads
 * into free slots through a small stage, and the abort frame that tells
 * the peers this communicator failed.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "tcp_impl.h"

/* ------------------------------------------------------------ wire format */

void baton__frame_pack(uint8_t *b, const baton__frame_t *f) {
  put32(b, BATON__FRAME_MAGIC);
  put32(b + 4, f->frame);
  put64(b + 8, f->comm_id);
  put32(b + 16, f->len);
  b[20] = f->kind;
  b[21] = f->sig.coll;
  b[22] = f->sig.dtype;
  b[23] = f->sig.op;
  put64(b + 24, f->sig.seq);
  put64(b + 32, f->sig.count);
  put32(b + 40, (uint32_t)f->sig.root);
  put32(b + 44, f->sig.algo);
}

int baton__frame_parse(const uint8_t *b, uint64_t comm_id, uint32_t frame, uint32_t max_len,
                       baton__frame_t *f, char *why, size_t whylen) {
  memset(f, 0, sizeof *f);
  f->frame = get32(b + 4);
  f->comm_id = get64(b + 8);
  f->len = get32(b + 16);
  f->kind = b[20];
  f->sig.coll = b[21];
  f->sig.dtype = b[22];
  f->sig.op = b[23];
  f->sig.seq = get64(b + 24);
  f->sig.count = get64(b + 32);
  f->sig.root = (int32_t)get32(b + 40);
  f->sig.algo = b[44];
  if (get32(b) != BATON__FRAME_MAGIC)
    snprintf(why, whylen,
             "a frame header with bad magic 0x%08x (not a baton peer, or the "
             "stream lost its place)",
             get32(b));
  else if ((get32(b + 44) >> 8) != 0)
    snprintf(why, whylen, "a frame header with reserved bits 0x%06x set", get32(b + 44) >> 8);
  else if (f->kind > BATON__FRAME_PING)
    snprintf(why, whylen, "a frame of unknown kind %u", f->kind);
  else if (f->kind == BATON__FRAME_PING && f->len != 0)
    snprintf(why, whylen, "a ping with a payload of %u bytes", f->len);
  else if (f->kind == BATON__FRAME_ABORT && (f->sig.root >= 0 || f->sig.root < -100))
    snprintf(why, whylen, "an abort frame with error code %d", (int)f->sig.root);
  else if (f->comm_id != comm_id)
    snprintf(why, whylen, "a frame of communicator %016llx, not this one (%016llx)",
             (unsigned long long)f->comm_id, (unsigned long long)comm_id);
  else if (f->frame != frame)
    snprintf(why, whylen, "frame number %u where %u was due (lost or replayed data)", f->frame,
             frame);
  else if (f->len > max_len)
    snprintf(why, whylen, "a frame of %u bytes, more than the %u a segment may hold", f->len,
             max_len);
  else
    return 0;
  return -1;
}

/* ------------------------------------------------------- the state machines */

int baton__tcp_conn_fail(tcp_conn_t *c, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int baton__tcp_conn_fail(tcp_conn_t *c, int rc, const char *fmt, ...) {
  char what[160];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  if (!c->failed)
    snprintf(c->conn.why, sizeof c->conn.why, "rank %d (host %s): %s", c->conn.peer,
             c->t->hosts[c->conn.peer], what);
  c->failed = rc;
  return rc;
}

int baton__tcp_relay(tcp_conn_t *c, tcp_conn_t *from) {
  snprintf(c->conn.why, sizeof c->conn.why, "rank %d (host %.40s): %.300s", from->conn.peer,
           c->t->hosts[from->conn.peer], from->abort_msg);
  c->failed = from->abort_rc;
  c->relayed = 1;
  return from->abort_rc;
}

static int io_error(tcp_conn_t *c, const char *what, ssize_t n) {
  if (n == 0)
    return baton__tcp_conn_fail(c, BATON_EREMOTE, "closed the connection while %s", what);
  return baton__tcp_conn_fail(c, BATON_EREMOTE, "connection broke while %s: %s", what,
                              strerror(errno));
}

/* Writes what socket j can take now. */
int baton__tcp_push(tcp_conn_t *c, sock_t *s) {
  while (s->frame < c->user) {
    uint32_t len = c->len[s->frame % c->nslots];
    if (s->done == 0) {
      baton__frame_t f = {.comm_id = c->t->comm_id,
                          .frame = (uint32_t)s->frame,
                          .len = len,
                          .kind = BATON__FRAME_DATA,
                          .sig = c->sig[s->frame % c->nslots]};
      baton__frame_pack(s->hdr, &f);
    }
    struct iovec iov[2];
    int n = 0;
    if (s->done < BATON__FRAME_HDR)
      iov[n++] = (struct iovec){s->hdr + s->done, BATON__FRAME_HDR - s->done};
    size_t pdone = s->done > BATON__FRAME_HDR ? s->done - BATON__FRAME_HDR : 0;
    const char *src = c->ref[s->frame % c->nslots];
    if (len > pdone)
      iov[n++] = (struct iovec){(char *)(src ? src : baton__tcp_slot_of(c, s->frame)) + pdone,
                                len - pdone};
    ssize_t w = baton__tcp_sendv(s->fd, iov, n);
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      return 0;
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return io_error(c, "sending", w);
    s->done += (size_t)w;
    if (s->done == BATON__FRAME_HDR + len) {
      baton__log_trace(NET, "sent frame %llu (%u bytes) to rank %d", (unsigned long long)s->frame,
                       len, c->conn.peer);
      s->done = 0;
      s->frame += (uint64_t)c->nsocks;
    }
  }
  return 0;
}

/* Up to n bytes for dst, from what was staged or else from the socket:
 * small reads go through the stage, so a small frame's header and payload
 * (and the frames after it) cost one system call. *drained is set once a
 * read comes back short: the socket is empty and another read would only
 * say EAGAIN. Returns the bytes given, 0 at end of stream, -1 with errno. */
static ssize_t fill(sock_t *s, void *dst, size_t n, int *drained) {
  if (s->st_off == s->st_len) {
    if (*drained) {
      errno = EAGAIN;
      return -1;
    }
    if (n >= STAGE) {
      ssize_t r = read(s->fd, dst, n);
      *drained = r >= 0 && (size_t)r < n;
      return r;
    }
    ssize_t r = read(s->fd, s->stage, STAGE);
    if (r <= 0)
      return r;
    *drained = r < STAGE;
    s->st_off = 0;
    s->st_len = (uint32_t)r;
  }
  size_t k = s->st_len - s->st_off < n ? s->st_len - s->st_off : n;
  memcpy(dst, s->stage + s->st_off, k);
  s->st_off += (uint32_t)k;
  return (ssize_t)k;
}

/* A ping from a peer that waits in another call under this call's number
 * (tcp_progress.c): both may be waiting to receive, so no data would ever
 * show it. Pings between calls, or from an older peer, carry another
 * number or none. */
static int ping_mismatch(tcp_conn_t *c, const baton__sig_t *theirs) {
  const baton__sig_t *sig = c->t->sig;
  if (!sig || !theirs->seq || theirs->seq != sig->seq || c->failed)
    return 0;
  baton__sig_t mine = baton__sig_call(sig);
  if (baton__sig_check(&mine, theirs, c->t->rank, c->conn.peer, c->conn.why, sizeof c->conn.why) ==
      0)
    return 0;
  c->failed = BATON_EMISMATCH;
  return 1;
}

/* Reads what socket j has, into free slots. A close between frames is not
 * an error yet: the peer may have sent all it had to; it becomes one when
 * this rank waits for more (see wait_on). */
int baton__tcp_pull(tcp_conn_t *c, sock_t *s) {
  int drained = 0;
  while (!s->eof && s->frame < c->user + c->nslots) {
    char why[160];
    ssize_t r;
    if (s->done < BATON__FRAME_HDR) {
      r = fill(s, s->hdr + s->done, BATON__FRAME_HDR - s->done, &drained);
    } else {
      uint32_t len = c->len[s->frame % c->nslots];
      size_t pdone = s->done - BATON__FRAME_HDR;
      if (len == pdone)
        goto complete;
      r = fill(s, baton__tcp_slot_of(c, s->frame) + pdone, len - pdone, &drained);
    }
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      return 0;
    if (r < 0 && errno == EINTR)
      continue;
    if (r == 0 && s->done == 0) {
      s->eof = 1;
      return 0;
    }
    if (r <= 0)
      return io_error(c, "receiving", r);
    s->done += (size_t)r;
    if (s->done == BATON__FRAME_HDR) {
      baton__frame_t f;
      if (baton__frame_parse(s->hdr, c->t->comm_id, (uint32_t)s->frame,
                             (uint32_t)c->conn.slot_bytes, &f, why, sizeof why) != 0)
        return baton__tcp_conn_fail(c, BATON_EPROTO, "sent %s", why);
      c->len[s->frame % c->nslots] = f.len;
      c->sig[s->frame % c->nslots] = f.sig;
      baton__log_trace(NET, "frame %llu from rank %d: kind %u, %u bytes, call #%llu",
                       (unsigned long long)s->frame, c->conn.peer, f.kind, f.len,
                       (unsigned long long)f.sig.seq);
      if (f.kind == BATON__FRAME_PING) { /* nothing to keep but what it says of its call */
        s->done = 0;
        if (ping_mismatch(c, &f.sig))
          return c->failed;
        continue;
      }
      c->kind[s->frame % c->nslots] = f.kind;
      if (f.len > 0)
        continue;
    } else if (s->done < BATON__FRAME_HDR + c->len[s->frame % c->nslots]) {
      continue;
    }
  complete:
    if (c->kind[s->frame % c->nslots] == BATON__FRAME_ABORT && !c->abort_rc) {
      /* Queued behind the data before it; failing waits until this rank
       * reaches it, or finds nothing else to wait for (wait_on). */
      c->abort_rc = (int)c->sig[s->frame % c->nslots].root;
      c->abort_seq = c->sig[s->frame % c->nslots].seq;
      snprintf(c->abort_msg, sizeof c->abort_msg, "reported a failure: %.*s",
               (int)c->len[s->frame % c->nslots], baton__tcp_slot_of(c, s->frame));
    }
    s->done = 0;
    s->frame += (uint64_t)c->nsocks;
  }
  return 0;
}

/* Queues the next frame (from its slot, or from ref) and starts writing it
 * at once: a small message should not wait for the next wait. */
void baton__tcp_queue(tcp_conn_t *c, size_t bytes, const void *ref) {
  c->len[c->user % c->nslots] = (uint32_t)bytes;
  c->sig[c->user % c->nslots] = *c->t->sig;
  c->ref[c->user % c->nslots] = ref;
  c->user++;
  sock_t *s = &c->s[(c->user - 1) % (uint64_t)c->nsocks];
  if (!c->failed && baton__tcp_push(c, s) == 0)
    baton__tcp_advance_wire(c);
}

void baton__tcp_poison(void *impl, int rc, const char *msg) {
  baton__tcp_t *t = impl;
  uint32_t n = (uint32_t)strnlen(msg, 300);
  for (int i = 0; i < t->nall; i++) {
    tcp_conn_t *c = t->all[i];
    for (int j = 0; j < c->nsocks; j++) {
      sock_t *s = &c->s[j];
      if (s->fd < 0)
        continue;
      if (c->sending && s->done == 0 && !c->failed) {
        /* Best effort: the frame goes out only if the socket takes it whole. */
        uint8_t hdr[BATON__FRAME_HDR];
        baton__frame_t f = {.comm_id = t->comm_id,
                            .frame = (uint32_t)s->frame,
                            .len = n,
                            .kind = BATON__FRAME_ABORT,
                            .sig = {.root = rc, .seq = t->sig ? t->sig->seq : 0}};
        baton__frame_pack(hdr, &f);
        struct iovec iov[2] = {{hdr, sizeof hdr}, {(void *)msg, n}};
        if (baton__tcp_sendv(s->fd, iov, 2) < 0) {
          /* nothing more to do: the shutdown below still tells the peer */
        }
      }
      shutdown(s->fd, SHUT_WR);
    }
    if (!c->failed)
      snprintf(c->conn.why, sizeof c->conn.why, "%s", msg);
    c->failed = c->failed ? c->failed : rc;
  }
}
