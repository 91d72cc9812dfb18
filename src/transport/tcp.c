/*
 * tcp.c - the TCP transport, for ranks on different hosts.
 *
 * Connections are made once, at init: every rank listens on the chosen
 * interface, publishes "ip port" in the store, connects to the ranks it
 * sends to and accepts the ranks it receives from; then the listening
 * socket is closed, so a running job has no open port. A connection is one
 * direction between two ranks, carried by BATON_NSOCKS sockets; frame k
 * travels on socket k % nsocks.
 *
 * The slot interface of transport.h is kept: each connection owns a ring of
 * `nslots` local slots. The sender fills a slot and commits it; the frame
 * is written to the socket as soon as the socket takes it. The receiver's
 * slots are filled from the socket ahead of time, as far as free slots
 * allow. Progress is made for every connection of the communicator whenever
 * any of them waits, so sending to the next rank and receiving from the
 * previous one go on at the same time (full duplex) and a rank blocked on
 * one side never stalls the other. Waiting is poll(2), bounded by
 * BATON_TIMEOUT.
 *
 * Every frame starts with a 32-byte header (magic, communicator id,
 * collective number, frame number, length) that is checked before a byte
 * of the payload is used: a stray or corrupt frame is an error naming the
 * peer, never data.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "tcp.h"

#define MAX_SOCKS 16
#define HELLO_MAGIC 0x4c4c4548u /* "HELL" */
#define HELLO_BYTES 24

typedef struct tcp_conn tcp_conn_t;

#define STAGE 4096 /* bytes a receiver reads at once when a frame is small */

typedef struct {
  int fd;
  int eof;        /* the peer closed it at a frame boundary */
  uint8_t *stage; /* receiving: bytes read but not yet used */
  uint32_t st_off, st_len;
  uint64_t frame; /* next frame to move on this socket */
  size_t done;    /* bytes of it moved so far, header included */
  uint8_t hdr[BATON__FRAME_HDR];
} sock_t;

struct tcp_conn {
  baton__conn_t conn; /* conn.impl points back here */
  baton__tcp_t *t;
  int sending;
  int nsocks;
  sock_t s[MAX_SOCKS];
  char *slots;
  uint32_t nslots;
  uint32_t *len;
  baton__sig_t *sig;   /* per slot: the call the frame belongs to */
  const char **ref;    /* sending, per slot: the caller's memory to send instead */
  uint64_t user;       /* slots committed (send) or released (recv) by the executor */
  uint64_t wire;       /* frames fully written (send) or fully read (recv) */
  int failed;          /* a socket error: conn.why says what */
  uint8_t *kind;       /* per slot: BATON__FRAME_DATA or _ABORT */
  int abort_rc;        /* the peer sent an abort frame: its code ... */
  uint64_t abort_seq;  /* ... the call it failed in ... */
  char abort_msg[384]; /* ... and what it said */
  int relayed;         /* failed because of an abort frame */
  double abort_seen;   /* when a wait first saw an abort from a later call */
};

struct baton__tcp {
  int rank, size;
  uint64_t comm_id;
  const baton__sig_t *sig;
  const baton__watch_t *watch;
  double timeout_s;
  double spin_s;           /* how long a waiter polls before it sleeps */
  int yield;               /* more ranks than cores: give the core away while polling */
  tcp_conn_t **to, **from; /* by peer rank */
  tcp_conn_t **all;
  int nall;
  struct pollfd *pfd;
  tcp_conn_t **pfd_conn;
  char (*hosts)[64];
  const baton__secret_t *secret;
};

/* ------------------------------------------------------------ wire format */

static void put32(uint8_t *b, uint32_t v) {
  for (int i = 0; i < 4; i++)
    b[i] = (uint8_t)(v >> (8 * i));
}
static void put64(uint8_t *b, uint64_t v) {
  for (int i = 0; i < 8; i++)
    b[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get32(const uint8_t *b) {
  uint32_t v = 0;
  for (int i = 0; i < 4; i++)
    v |= (uint32_t)b[i] << (8 * i);
  return v;
}
static uint64_t get64(const uint8_t *b) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++)
    v |= (uint64_t)b[i] << (8 * i);
  return v;
}

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

/* --------------------------------------------------------------- progress */

static int conn_fail(tcp_conn_t *c, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int conn_fail(tcp_conn_t *c, int rc, const char *fmt, ...) {
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

static char *slot_of(tcp_conn_t *c, uint64_t frame) {
  return c->slots + (size_t)(frame % c->nslots) * c->conn.slot_bytes;
}

/* Fails c with the abort that its peer sent. */
static int relay(tcp_conn_t *c, tcp_conn_t *from) {
  snprintf(c->conn.why, sizeof c->conn.why, "rank %d (host %.40s): %.300s", from->conn.peer,
           c->t->hosts[from->conn.peer], from->abort_msg);
  c->failed = from->abort_rc;
  c->relayed = 1;
  return from->abort_rc;
}

/* How long a broken connection waits for a peer's explanation (an abort
 * frame relayed along another connection) before it is reported as is. */
#ifndef EXPLAIN_S /* the fuzz target sets 0 */
#define EXPLAIN_S 0.1
#endif

/* A connection whose peer has sent an abort frame, if any. With `now`
 * set, an abort from a call this rank has not reached yet (the peer went
 * on and failed later, while this rank still finishes an earlier call whose
 * data may be on its way) counts only once it is EXPLAIN_S old. */
static tcp_conn_t *aborted_peer(baton__tcp_t *t, double now) {
  for (int i = 0; i < t->nall; i++) {
    tcp_conn_t *c = t->all[i];
    if (!c->abort_rc)
      continue;
    if (now > 0 && t->sig && c->abort_seq > t->sig->seq) {
      if (c->abort_seen == 0)
        c->abort_seen = now;
      if (now < c->abort_seen + EXPLAIN_S)
        continue;
    }
    return c;
  }
  return NULL;
}

/* Frames below `wire` are done when every socket has moved past them. */
static void advance_wire(tcp_conn_t *c) {
  while (c->s[c->wire % (uint64_t)c->nsocks].frame > c->wire)
    c->wire++;
}

static int io_error(tcp_conn_t *c, const char *what, ssize_t n) {
  if (n == 0)
    return conn_fail(c, BATON_EREMOTE, "closed the connection while %s", what);
  return conn_fail(c, BATON_EREMOTE, "connection broke while %s: %s", what, strerror(errno));
}

/* Writes what socket j can take now. */
static int push(tcp_conn_t *c, sock_t *s) {
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
      iov[n++] = (struct iovec){(char *)(src ? src : slot_of(c, s->frame)) + pdone, len - pdone};
    ssize_t w = writev(s->fd, iov, n);
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

/* Reads what socket j has, into free slots. A close between frames is not
 * an error yet: the peer may have sent all it had to; it becomes one when
 * this rank waits for more (see wait_on). */
static int pull(tcp_conn_t *c, sock_t *s) {
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
      r = fill(s, slot_of(c, s->frame) + pdone, len - pdone, &drained);
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
        return conn_fail(c, BATON_EPROTO, "sent %s", why);
      c->len[s->frame % c->nslots] = f.len;
      c->sig[s->frame % c->nslots] = f.sig;
      baton__log_trace(NET, "frame %llu from rank %d: kind %u, %u bytes, call #%llu",
                       (unsigned long long)s->frame, c->conn.peer, f.kind, f.len,
                       (unsigned long long)f.sig.seq);
      if (f.kind == BATON__FRAME_PING) { /* nothing to keep: the ACK was the point */
        s->done = 0;
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
               (int)c->len[s->frame % c->nslots], slot_of(c, s->frame));
    }
    s->done = 0;
    s->frame += (uint64_t)c->nsocks;
  }
  return 0;
}

/* One pass over every healthy connection, without blocking. Returns the
 * failure of a connection, if any, preferring one that a peer explained
 * (an abort frame) to a bare broken connection. */
static int progress(baton__tcp_t *t, tcp_conn_t **failed) {
  tcp_conn_t *bad = NULL;
  for (int i = 0; i < t->nall; i++) {
    tcp_conn_t *c = t->all[i];
    for (int j = 0; j < c->nsocks && !c->failed; j++)
      c->sending ? push(c, &c->s[j]) : pull(c, &c->s[j]);
    if (c->failed && (!bad || (c->relayed && !bad->relayed)))
      bad = c;
    if (!c->failed)
      advance_wire(c);
  }
  *failed = bad;
  return bad ? bad->failed : 0;
}

static int ready(const tcp_conn_t *c) {
  return c->sending ? c->user - c->wire < c->nslots : c->wire > c->user;
}

static int flushed(const tcp_conn_t *c) { return c->wire == c->user; }

/* A wait this long pings the peers it sends to (see ping_idle). */
#define PING_S 0.2

/* Sends a ping on every sending socket that has nothing in flight: with
 * TCP_USER_TIMEOUT, a ping the far kernel never acknowledges breaks the
 * connection within a second, so a rank that only waits to receive still
 * learns that a silent link is gone (keepalive alone takes 2 s or more). */
static void ping_idle(baton__tcp_t *t) {
  for (int i = 0; i < t->nall; i++) {
    tcp_conn_t *c = t->all[i];
    for (int j = 0; c->sending && !c->failed && j < c->nsocks; j++) {
      sock_t *s = &c->s[j];
      int queued = 1;
      /* Only on an empty send queue: data still unacknowledged is already
       * watched by the user timeout, and an empty queue takes the 48 bytes
       * whole (a partial ping would break the stream). */
      if (s->done != 0 || s->frame < c->user || ioctl(s->fd, SIOCOUTQ, &queued) != 0 || queued != 0)
        continue;
      uint8_t hdr[BATON__FRAME_HDR];
      baton__frame_t f = {.comm_id = t->comm_id,
                          .frame = (uint32_t)s->frame,
                          .kind = BATON__FRAME_PING,
                          .sig = {.root = -1}};
      baton__frame_pack(hdr, &f);
      if (write(s->fd, hdr, sizeof hdr) != (ssize_t)sizeof hdr) {
        /* an error shows at the next poll */
      }
    }
  }
}

/* Drives every connection until cond(c) holds, the deadline passes or a
 * connection fails. */
static int wait_on(tcp_conn_t *c, int (*cond)(const tcp_conn_t *), const char *what) {
  baton__tcp_t *t = c->t;
  double now = baton__now(), deadline = now + t->timeout_s, explain_by = 0;
  double spin_end = now + t->spin_s, ping_at = now + PING_S;
  for (;;) {
    tcp_conn_t *bad = NULL;
    int rc = progress(t, &bad);
    if (rc == 0 && cond(c))
      return 0;
    /* An abort or a failure elsewhere explains more than its symptom here. */
    char why[sizeof c->conn.why];
    int wrc = t->watch ? t->watch->check(t->watch->ctx, why, sizeof why) : 0;
    if (wrc) {
      memcpy(c->conn.why, why, sizeof why);
      return wrc;
    }
    if (rc == 0 && !c->sending && c->s[c->user % (uint64_t)c->nsocks].eof)
      rc = conn_fail(bad = c, BATON_EREMOTE, "closed the connection while this rank waited %s",
                     what);
    /* Nothing to do here but a peer has given up: so does this rank. */
    now = baton__now();
    tcp_conn_t *ab = aborted_peer(t, now);
    if (ab)
      return relay(c, ab);
    if (rc && explain_by == 0)
      explain_by = now + EXPLAIN_S;
    if (rc && (bad->relayed || now >= explain_by || rc != BATON_EREMOTE)) {
      if (bad != c)
        snprintf(c->conn.why, sizeof c->conn.why, "%s", bad->conn.why);
      return rc;
    }
    int n = 0, staged = 0;
    for (int i = 0; i < t->nall; i++) {
      tcp_conn_t *k = t->all[i];
      for (int j = 0; j < k->nsocks && !k->failed; j++) {
        sock_t *s = &k->s[j];
        int want = k->sending ? s->frame < k->user : !s->eof && s->frame < k->user + k->nslots;
        if (!want && s->eof)
          continue;
        /* Polled even with nothing to move: a socket whose data went
         * unacknowledged too long (TCP_USER_TIMEOUT) reports POLLERR. */
        t->pfd[n] = (struct pollfd){s->fd, (short)(!want ? 0 : k->sending ? POLLOUT : POLLIN), 0};
        t->pfd_conn[n++] = k;
        staged |= !k->sending && s->st_off < s->st_len;
      }
    }
    /* A reply often comes within tens of microseconds: poll the sockets
     * for BATON_TCP_SPIN_US before sleeping in the kernel. When ranks
     * outnumber cores each try gives the core away first, so the rank that
     * holds the data runs. Measured on 4 emulated hosts (one rank each, 2
     * cores), 8 B ring allreduce, 1000 calls: 162-226 us with 20 us of
     * polling, 105-121 us with 100, 102-126 us with 300; on 8 hosts, where
     * the cores are full anyway, 100 us changed neither 8 B nor 32 MiB. */
    if (!rc && now < spin_end) {
      if (t->yield)
        sched_yield();
      continue;
    }
    if (!rc && now >= ping_at) {
      ping_idle(t);
      ping_at = now + PING_S;
    }
    double left = (rc ? explain_by : deadline) - now;
    if (!rc && left <= 0) {
      snprintf(c->conn.why, sizeof c->conn.why,
               "rank %d (host %s) %s for %.3g s while this "
               "rank waited %s",
               c->conn.peer, t->hosts[c->conn.peer], c->sending ? "took no data" : "sent nothing",
               t->timeout_s, what);
      return BATON_ETIMEDOUT;
    }
    int ms = staged ? 0 : left > 0.1 ? 100 : left > 0 ? (int)(left * 1000) + 1 : 0;
    int ready_fds = poll(t->pfd, (nfds_t)n, ms);
    if (ready_fds < 0 && errno != EINTR)
      return conn_fail(c, BATON_ESYS, "poll failed: %s", strerror(errno));
    for (int i = 0; i < n && ready_fds > 0; i++) {
      int e = 0;
      socklen_t el = sizeof e;
      if (t->pfd[i].events == 0 && (t->pfd[i].revents & (POLLERR | POLLHUP)) &&
          getsockopt(t->pfd[i].fd, SOL_SOCKET, SO_ERROR, &e, &el) == 0 && e != 0)
        conn_fail(t->pfd_conn[i], BATON_EREMOTE, "connection broke: %s", strerror(e));
    }
  }
}

/* ------------------------------------------------------- the transport */

static int tcp_send_acquire(baton__conn_t *bc, void **slot) {
  tcp_conn_t *c = bc->impl;
  int rc = ready(c) ? 0 : wait_on(c, ready, "for a free slot to send into");
  if (rc)
    return rc;
  *slot = slot_of(c, c->user);
  return 0;
}

/* Queues the next frame (from its slot, or from ref) and starts writing it
 * at once: a small message should not wait for the next wait. */
static void queue(tcp_conn_t *c, size_t bytes, const void *ref) {
  c->len[c->user % c->nslots] = (uint32_t)bytes;
  c->sig[c->user % c->nslots] = *c->t->sig;
  c->ref[c->user % c->nslots] = ref;
  c->user++;
  sock_t *s = &c->s[(c->user - 1) % (uint64_t)c->nsocks];
  if (!c->failed && push(c, s) == 0)
    advance_wire(c);
}

static int tcp_send_commit(baton__conn_t *bc, size_t bytes) {
  queue(bc->impl, bytes, NULL);
  return 0;
}

static int tcp_send_ref(baton__conn_t *bc, const void *data, size_t bytes) {
  tcp_conn_t *c = bc->impl;
  int rc = ready(c) ? 0 : wait_on(c, ready, "for room to send");
  if (rc == 0)
    queue(c, bytes, data);
  return rc;
}

static int tcp_recv_acquire(baton__conn_t *bc, const void **slot, size_t *bytes) {
  tcp_conn_t *c = bc->impl;
  int rc = ready(c) ? 0 : wait_on(c, ready, "for data");
  if (rc)
    return rc;
  if (c->kind[c->user % c->nslots] == BATON__FRAME_ABORT)
    return relay(c, c);
  if ((rc = baton__sig_check(c->t->sig, &c->sig[c->user % c->nslots], c->t->rank, bc->peer, bc->why,
                             sizeof bc->why)) != 0)
    return rc;
  *slot = slot_of(c, c->user);
  *bytes = c->len[c->user % c->nslots];
  return 0;
}

static int tcp_recv_release(baton__conn_t *bc) {
  tcp_conn_t *c = bc->impl;
  c->user++;
  return 0;
}

static int tcp_flush(baton__conn_t *bc) {
  tcp_conn_t *c = bc->impl;
  return flushed(c) ? 0 : wait_on(c, flushed, "to hand its last data to the network");
}

const baton__transport_t baton__tcp_transport = {
    .name = "tcp",
    .send_acquire = tcp_send_acquire,
    .send_commit = tcp_send_commit,
    .recv_acquire = tcp_recv_acquire,
    .recv_release = tcp_recv_release,
    .flush = tcp_flush,
    .send_ref = tcp_send_ref,
};

/* ---------------------------------------------------------------- set-up */

int baton__pick_local_ip(const char *ifname, const char *rendezvous_host, char *ip, size_t iplen,
                         char *err, size_t errlen) {
  if (!ifname || !ifname[0]) {
    /* The interface the kernel would use to reach the rendezvous. */
    struct sockaddr_in dst = {.sin_family = AF_INET, .sin_port = htons(9)};
    if (inet_pton(AF_INET, rendezvous_host, &dst.sin_addr) == 1) {
      int fd = socket(AF_INET, SOCK_DGRAM, 0);
      struct sockaddr_in me;
      socklen_t ml = sizeof me;
      int ok = fd >= 0 && connect(fd, (struct sockaddr *)&dst, sizeof dst) == 0 &&
               getsockname(fd, (struct sockaddr *)&me, &ml) == 0;
      if (fd >= 0)
        close(fd);
      if (ok && inet_ntop(AF_INET, &me.sin_addr, ip, (socklen_t)iplen))
        return 0;
    }
  }
  struct ifaddrs *ifs = NULL;
  if (getifaddrs(&ifs) != 0) {
    snprintf(err, errlen, "getifaddrs failed: %s", strerror(errno));
    return BATON_ESYS;
  }
  char found[256] = "";
  size_t off = 0;
  int rc = BATON_EUSAGE;
  for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP))
      continue;
    char a[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, a, sizeof a);
    if (off < sizeof found)
      off += (size_t)snprintf(found + off, sizeof found - off, "%s%s (%s)", off ? ", " : "",
                              i->ifa_name, a);
    int match = ifname && ifname[0] ? strncmp(i->ifa_name, ifname, strlen(ifname)) == 0
                                    : !(i->ifa_flags & IFF_LOOPBACK);
    if (match && rc != 0) {
      snprintf(ip, iplen, "%s", a);
      rc = 0;
    }
  }
  freeifaddrs(ifs);
  if (rc && ifname && ifname[0])
    snprintf(err, errlen,
             "no IPv4 interface that is up matches BATON_SOCKET_IFNAME=%s; "
             "interfaces found: %s",
             ifname, found[0] ? found : "none");
  else if (rc)
    snprintf(err, errlen, "no IPv4 interface that is up routes to %s; interfaces found: %s",
             rendezvous_host[0] ? rendezvous_host : "the rendezvous", found[0] ? found : "none");
  return rc;
}

static int set_nonblock(int fd) {
  int fl = fcntl(fd, F_GETFL);
  return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

/* Waits for fd to become readable/writable until `deadline`. */
static int poll_until(int fd, short ev, double deadline) {
  for (;;) {
    double left = deadline - baton__now();
    if (left <= 0)
      return BATON_ETIMEDOUT;
    struct pollfd p = {fd, ev, 0};
    int n = poll(&p, 1, left > 1 ? 1000 : (int)(left * 1000) + 1);
    if (n > 0)
      return 0;
    if (n < 0 && errno != EINTR)
      return BATON_ESYS;
  }
}

static int io_all(int fd, void *buf, size_t n, int writing, double deadline) {
  char *b = buf;
  while (n > 0) {
    ssize_t k = writing ? write(fd, b, n) : read(fd, b, n);
    if (k > 0) {
      b += k, n -= (size_t)k;
      continue;
    }
    if (k == 0)
      return BATON_EREMOTE;
    if (errno == EINTR)
      continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK)
      return BATON_EREMOTE;
    int rc = poll_until(fd, writing ? POLLOUT : POLLIN, deadline);
    if (rc)
      return rc;
  }
  return 0;
}

/* No Nagle delay; and a link that breaks without a word (no FIN, no RST)
 * is noticed by the kernel within about 2 s: keepalive probes after 1 s of
 * silence, and sent data unacknowledged for 1 s ends the connection
 * (a rank that only waits to receive pings its peers after 0.2 s so that
 * the timeout applies to it too; a cut link is reported 1.5-1.7 s after
 * the cut: tests/test_linkbreak.sh).
 * The peer's kernel answers probes even while its process computes. */
static void tune(int fd) {
  int one = 1, idle = 1, intvl = 1, cnt = 1;
  unsigned user_timeout_ms = 1000;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
  setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout_ms, sizeof user_timeout_ms);
  set_nonblock(fd);
}

/* hello: magic u32 | from rank u32 | socket index u32 | nsocks u32 | comm_id u64 */
static int connect_one(baton__tcp_t *t, tcp_conn_t *c, int j, const char *ip, int port,
                       double deadline, char *err, size_t errlen) {
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  inet_pton(AF_INET, ip, &sa.sin_addr);
  int peer = c->conn.peer;
  for (;;) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      snprintf(err, errlen, "socket() failed: %s", strerror(errno));
      return BATON_ESYS;
    }
    tune(fd);
    int rc = connect(fd, (struct sockaddr *)&sa, sizeof sa);
    if (rc != 0 && errno == EINPROGRESS && poll_until(fd, POLLOUT, deadline) == 0) {
      int e = 0;
      socklen_t el = sizeof e;
      getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el);
      rc = e ? -1 : 0;
      errno = e;
    }
    if (rc == 0) {
      /* Prove the job's secret both ways before a byte of the hello. */
      char who[96];
      snprintf(who, sizeof who, "rank %d (host %.40s)", peer, t->hosts[peer]);
      int arc = baton__auth_client(fd, t->secret, who, deadline, err, errlen);
      if (arc == BATON_EAUTH || arc == BATON_EPROTO) {
        close(fd);
        return arc;
      }
      if (arc != 0)
        goto retry;
      uint8_t h[HELLO_BYTES];
      put32(h, HELLO_MAGIC);
      put32(h + 4, (uint32_t)t->rank);
      put32(h + 8, (uint32_t)j);
      put32(h + 12, (uint32_t)c->nsocks);
      put64(h + 16, t->comm_id);
      if (io_all(fd, h, sizeof h, 1, deadline) == 0) {
        c->s[j].fd = fd;
        return 0;
      }
    }
  retry:;
    int e = errno;
    close(fd);
    if (baton__now() >= deadline) {
      snprintf(err, errlen, "connecting to rank %d (host %s) at %s:%d failed for %.3g s: %s", peer,
               t->hosts[peer], ip, port, t->timeout_s, strerror(e));
      return BATON_ETIMEDOUT;
    }
    usleep(10000);
  }
}

/* Accepts until every expected incoming socket has arrived. A connection
 * that does not say a valid hello for this communicator is dropped. */
static int accept_all(baton__tcp_t *t, int lfd, int expected, double deadline, _Atomic int *stop,
                      char *err, size_t errlen) {
  while (expected > 0) {
    double slice = baton__now() + 0.05;
    int prc = poll_until(lfd, POLLIN, slice < deadline ? slice : deadline);
    if (atomic_load(stop)) {
      snprintf(err, errlen, "stopped: connecting to the other ranks failed");
      return BATON_EREMOTE;
    }
    if (prc != 0 && baton__now() < deadline)
      continue;
    if (prc != 0) {
      size_t off = (size_t)snprintf(err, errlen,
                                    "timed out after %.3g s waiting for "
                                    "connections from",
                                    t->timeout_s);
      for (int r = 0; r < t->size; r++) {
        tcp_conn_t *c = t->from[r];
        for (int j = 0; c && j < c->nsocks && off < errlen; j++)
          if (c->s[j].fd < 0) {
            off += (size_t)snprintf(err + off, errlen - off, " rank %d (host %s)", r, t->hosts[r]);
            break;
          }
      }
      return BATON_ETIMEDOUT;
    }
    int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0)
      continue;
    tune(fd);
    uint8_t h[HELLO_BYTES];
    double hello_deadline = baton__now() + 2.0 < deadline ? baton__now() + 2.0 : deadline;
    uint32_t from = 0, j = 0;
    tcp_conn_t *c = NULL;
    char why[256];
    if (baton__auth_server(fd, t->secret, "a connecting process", hello_deadline, why,
                           sizeof why) != 0) {
      baton__log_warn(NET, "turned away a connection to the data port: %s", why);
      close(fd);
      continue;
    }
    if (io_all(fd, h, sizeof h, 0, hello_deadline) == 0 && get32(h) == HELLO_MAGIC &&
        get64(h + 16) == t->comm_id) {
      from = get32(h + 4);
      j = get32(h + 8);
      c = from < (uint32_t)t->size ? t->from[from] : NULL;
    }
    if (!c || j >= (uint32_t)c->nsocks || get32(h + 12) != (uint32_t)c->nsocks || c->s[j].fd >= 0) {
      baton__log_warn(NET, "dropped a connection that is not an expected peer of this "
                           "communicator (bad or repeated hello)");
      close(fd);
      continue;
    }
    c->s[j].fd = fd;
    expected--;
  }
  return 0;
}

typedef struct {
  baton__tcp_t *t;
  int lfd, expected, rc;
  _Atomic int stop; /* the connecting side failed: give up */
  double deadline;
  char err[BATON__ERRLEN];
} accept_job_t;

static void *accept_thread(void *arg) {
  accept_job_t *j = arg;
  j->rc = accept_all(j->t, j->lfd, j->expected, j->deadline, &j->stop, j->err, sizeof j->err);
  return NULL;
}

static tcp_conn_t *conn_new(baton__tcp_t *t, int peer, int sending, const baton__params_t *p) {
  tcp_conn_t *c = calloc(1, sizeof *c);
  if (!c)
    return NULL;
  c->t = t;
  c->sending = sending;
  c->nsocks = p->nsocks;
  c->nslots = (uint32_t)p->shm_slots;
  c->conn.ops = &baton__tcp_transport;
  c->conn.peer = peer;
  c->conn.slot_bytes = p->tcp_segment_bytes / 64 * 64;
  c->conn.timeout_s = p->timeout_s;
  c->conn.impl = c;
  c->slots = malloc((size_t)c->nslots * c->conn.slot_bytes);
  c->len = calloc(c->nslots, sizeof *c->len);
  c->sig = calloc(c->nslots, sizeof *c->sig);
  c->kind = calloc(c->nslots, 1);
  c->ref = calloc(c->nslots, sizeof *c->ref);
  for (int j = 0; j < MAX_SOCKS; j++) {
    c->s[j].fd = -1;
    c->s[j].frame = (uint64_t)j;
  }
  int staged = 1;
  for (int j = 0; j < c->nsocks && !sending; j++)
    staged &= (c->s[j].stage = malloc(STAGE)) != NULL;
  if (!c->slots || !c->len || !c->sig || !c->kind || !c->ref || !staged) {
    for (int j = 0; j < c->nsocks; j++)
      free(c->s[j].stage);
    free(c->slots), free(c->len), free(c->sig), free(c->kind), free(c->ref), free(c);
    return NULL;
  }
  /* Touch the slots now: a first touch inside a collective costs a fault. */
  memset(c->slots, 0, (size_t)c->nslots * c->conn.slot_bytes);
  return c;
}

static int listen_on(const char *ip, int backlog, int *port, char *err, size_t errlen) {
  struct sockaddr_in sa = {.sin_family = AF_INET};
  if (inet_pton(AF_INET, ip, &sa.sin_addr) != 1) {
    snprintf(err, errlen, "cannot listen on \"%s\": not an IPv4 address", ip);
    return -1;
  }
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  socklen_t sl = sizeof sa;
  if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(fd, backlog) != 0 ||
      getsockname(fd, (struct sockaddr *)&sa, &sl) != 0) {
    snprintf(err, errlen, "listening on %s failed: %s", ip, strerror(errno));
    if (fd >= 0)
      close(fd);
    return -1;
  }
  set_nonblock(fd);
  *port = ntohs(sa.sin_port);
  return fd;
}

static int connect_peers(baton__tcp_t *t, baton__store_t *st, const baton__tcp_args_t *a,
                         double deadline, char *err, size_t errlen) {
  for (int i = 0; i < a->nto; i++) {
    tcp_conn_t *c = t->to[a->to[i]];
    char key[32], val[96] = "", ip[64];
    size_t len = 0;
    int port = 0, rc;
    snprintf(key, sizeof key, "tcp.%d", a->to[i]);
    rc = baton__store_get(st, key, val, sizeof val - 1, &len, t->timeout_s, err, errlen);
    if (rc)
      return rc;
    val[len < sizeof val ? len : sizeof val - 1] = '\0';
    if (sscanf(val, "%63s %d", ip, &port) != 2 || port <= 0 || port > 65535) {
      snprintf(err, errlen, "rank %d published a malformed address \"%s\"", a->to[i], val);
      return BATON_EPROTO;
    }
    for (int j = 0; j < c->nsocks; j++)
      if ((rc = connect_one(t, c, j, ip, port, deadline, err, errlen)) != 0)
        return rc;
  }
  return 0;
}

int baton__tcp_setup(baton__store_t *st, const baton__tcp_args_t *a, const baton__params_t *p,
                     baton__tcp_t **out, char *err, size_t errlen) {
  baton__tcp_t *t = calloc(1, sizeof *t);
  int rc = BATON_ENOMEM, lfd = -1;
  if (!t)
    goto fail;
  t->rank = a->rank;
  t->size = a->size;
  t->comm_id = a->comm_id;
  t->sig = a->sig;
  t->timeout_s = p->timeout_s;
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  t->yield = cpus > 0 && a->size > cpus;
  t->spin_s = p->tcp_spin_us * 1e-6;
  t->hosts = a->hosts;
  t->secret = a->secret;
  t->to = calloc((size_t)a->size, sizeof *t->to);
  t->from = calloc((size_t)a->size, sizeof *t->from);
  t->all = calloc((size_t)(a->nto + a->nfrom), sizeof *t->all);
  size_t nfd = (size_t)(a->nto + a->nfrom) * (size_t)p->nsocks;
  t->pfd = calloc(nfd, sizeof *t->pfd);
  t->pfd_conn = calloc(nfd, sizeof *t->pfd_conn);
  if (!t->to || !t->from || !t->all || !t->pfd || !t->pfd_conn)
    goto fail;
  for (int i = 0; i < a->nto + a->nfrom; i++) {
    int sending = i < a->nto, peer = sending ? a->to[i] : a->from[i - a->nto];
    tcp_conn_t *c = conn_new(t, peer, sending, p);
    if (!c)
      goto fail;
    t->all[t->nall++] = c;
    (sending ? t->to : t->from)[peer] = c;
  }
  int port = 0;
  lfd = listen_on(a->local_ip, a->nfrom * p->nsocks + 16, &port, err, errlen);
  if (lfd < 0) {
    rc = BATON_ESYS;
    goto fail;
  }
  char key[32], val[96];
  snprintf(key, sizeof key, "tcp.%d", a->rank);
  snprintf(val, sizeof val, "%s %d", a->local_ip, port);
  if ((rc = baton__store_set(st, key, val, strlen(val) + 1, err, errlen)) != 0)
    goto fail;
  /* Every rank is a client (to the ranks it sends to) and a server (for
   * those it receives from), and the handshake needs both sides to talk:
   * a thread accepts while this one connects, so a ring of ranks that all
   * connect first cannot wait on each other. */
  accept_job_t job = {.t = t,
                      .lfd = lfd,
                      .expected = a->nfrom * p->nsocks,
                      .deadline = baton__now() + p->timeout_s};
  pthread_t th;
  if (pthread_create(&th, NULL, accept_thread, &job) != 0) {
    snprintf(err, errlen, "cannot start the thread that accepts connections");
    rc = BATON_ESYS;
    goto fail;
  }
  rc = connect_peers(t, st, a, job.deadline, err, errlen);
  if (rc)
    atomic_store(&job.stop, 1);
  pthread_join(th, NULL);
  if (rc == 0 && (rc = job.rc) != 0)
    snprintf(err, errlen, "%s", job.err);
  if (rc)
    goto fail;
  close(lfd);
  baton__log_info(NET,
                  "tcp on %s: %d connections out, %d in, %d socket%s each, %u slots x %zu bytes",
                  a->local_ip, a->nto, a->nfrom, p->nsocks, p->nsocks > 1 ? "s" : "",
                  (unsigned)p->shm_slots, p->tcp_segment_bytes / 64 * 64);
  *out = t;
  return 0;
fail:
  if (rc == BATON_ENOMEM)
    snprintf(err, errlen, "out of memory for the TCP connections");
  if (lfd >= 0)
    close(lfd);
  baton__tcp_destroy(t);
  return rc;
}

baton__conn_t *baton__tcp_send_conn(baton__tcp_t *t, int peer) {
  return t && t->to[peer] ? &t->to[peer]->conn : NULL;
}

baton__conn_t *baton__tcp_recv_conn(baton__tcp_t *t, int peer) {
  return t && t->from[peer] ? &t->from[peer]->conn : NULL;
}

void baton__tcp_poison(baton__tcp_t *t, int rc, const char *msg) {
  if (!t)
    return;
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
        if (writev(s->fd, iov, 2) < 0) {
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

void baton__tcp_shutdown(baton__tcp_t *t) {
  for (int i = 0; t && i < t->nall; i++)
    for (int j = 0; j < t->all[i]->nsocks; j++)
      if (t->all[i]->s[j].fd >= 0)
        shutdown(t->all[i]->s[j].fd, SHUT_RDWR);
}

int baton__tcp_check(baton__tcp_t *t, char *why, size_t whylen) {
  tcp_conn_t *bad = NULL;
  int rc = t ? progress(t, &bad) : 0;
  tcp_conn_t *ab = t ? aborted_peer(t, baton__now()) : NULL;
  if (ab) {
    snprintf(why, whylen, "rank %d (host %.40s): %.300s", ab->conn.peer, t->hosts[ab->conn.peer],
             ab->abort_msg);
    return ab->abort_rc;
  }
  if (rc)
    snprintf(why, whylen, "%s", bad->conn.why);
  return rc;
}

void baton__tcp_watch(baton__tcp_t *t, const baton__watch_t *watch) {
  if (t)
    t->watch = watch;
}

void baton__tcp_destroy(baton__tcp_t *t) {
  if (!t)
    return;
  for (int i = 0; i < t->nall; i++) {
    tcp_conn_t *c = t->all[i];
    for (int j = 0; j < c->nsocks; j++) {
      if (c->s[j].fd >= 0)
        close(c->s[j].fd);
      free(c->s[j].stage);
    }
    free(c->slots), free(c->len), free(c->sig), free(c->kind), free(c->ref), free(c);
  }
  free(t->to), free(t->from), free(t->all), free(t->pfd), free(t->pfd_conn), free(t);
}
