/*
 * tcp_progress.c - progress and waiting, for the TCP transport.
 *
 * The slot interface of transport.h is kept: each connection owns a ring of
 * `nslots` local slots. The sender fills a slot and commits it; the frame
 * is written to the socket as soon as the socket takes it. The receiver's
 * slots are filled from the socket ahead of time, as far as free slots
 * allow. Progress is made for every connection of the communicator whenever
 * any of them waits, so sending to the next rank and receiving from the
 * previous one go on at the same time (full duplex) and a rank blocked on
 * one side never stalls the other. Waiting polls the sockets for
 * BATON_TCP_SPIN_US, then sleeps in poll(2), bounded by BATON_TIMEOUT;
 * a long wait pings idle peers so that a silent dead link shows.
 */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tcp_impl.h"

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

/* One pass over every healthy connection, without blocking. Returns the
 * failure of a connection, if any, preferring one that a peer explained
 * (an abort frame) to a bare broken connection. */
static int progress(baton__tcp_t *t, tcp_conn_t **failed) {
  tcp_conn_t *bad = NULL;
  for (int i = 0; i < t->nall; i++) {
    tcp_conn_t *c = t->all[i];
    for (int j = 0; j < c->nsocks && !c->failed; j++)
      c->sending ? baton__tcp_push(c, &c->s[j]) : baton__tcp_pull(c, &c->s[j]);
    if (c->failed && (!bad || (c->relayed && !bad->relayed)))
      bad = c;
    if (!c->failed)
      baton__tcp_advance_wire(c);
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
 * connection within the link timeout, so a rank that only waits to receive
 * still learns that a silent link is gone (keepalive alone takes 2 s or
 * more). The ping names the call this rank waits in, so that two ranks
 * that each wait to receive in different calls (a broadcast from rank 1
 * against a reduce to it) learn of it from the pings (tcp_wire.c). */
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
                          .sig = t->sig ? baton__sig_call(t->sig) : (baton__sig_t){.root = -1}};
      baton__frame_pack(hdr, &f);
      if (send(s->fd, hdr, sizeof hdr, MSG_NOSIGNAL) != (ssize_t)sizeof hdr) {
        /* an error shows at the next poll */
      }
    }
  }
}

/* A frame of this call that waits, unread, on another connection and was
 * sent by another call: the peer this rank waits for may never send, being
 * itself in its own call waiting for this rank, and only the frames that
 * did come say why. Frames of another call number are left alone (a peer
 * ahead sends its next call's); alltoallv blocks are compared as calls,
 * since each block's count is its own. */
static int stray_mismatch(tcp_conn_t *c) {
  baton__tcp_t *t = c->t;
  if (!t->sig)
    return 0;
  baton__sig_t mine = baton__sig_call(t->sig);
  for (int i = 0; i < t->nall; i++) {
    const tcp_conn_t *k = t->all[i];
    if (k == c || k->sending || k->failed || k->wire <= k->user)
      continue;
    size_t at = k->user % k->nslots;
    if (k->kind[at] != BATON__FRAME_DATA || k->sig[at].seq != mine.seq)
      continue;
    baton__sig_t theirs = baton__sig_call(&k->sig[at]);
    int rc =
        baton__sig_check(&mine, &theirs, t->rank, k->conn.peer, c->conn.why, sizeof c->conn.why);
    if (rc)
      return rc;
  }
  return 0;
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
    if (rc == 0 && (wrc = stray_mismatch(c)) != 0)
      return wrc;
    if (rc == 0 && !c->sending && c->s[c->user % (uint64_t)c->nsocks].eof)
      rc = baton__tcp_conn_fail(bad = c, BATON_EREMOTE,
                                "closed the connection while this rank waited %s", what);
    /* Nothing to do here but a peer has given up: so does this rank. */
    now = baton__now();
    tcp_conn_t *ab = aborted_peer(t, now);
    if (ab)
      return baton__tcp_relay(c, ab);
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
      return baton__tcp_conn_fail(c, BATON_ESYS, "poll failed: %s", strerror(errno));
    for (int i = 0; i < n && ready_fds > 0; i++) {
      int e = 0;
      socklen_t el = sizeof e;
      if (t->pfd[i].events == 0 && (t->pfd[i].revents & (POLLERR | POLLHUP)) &&
          getsockopt(t->pfd[i].fd, SOL_SOCKET, SO_ERROR, &e, &el) == 0 && e != 0)
        baton__tcp_conn_fail(t->pfd_conn[i], BATON_EREMOTE, "connection broke: %s", strerror(e));
    }
  }
}

/* ------------------------------------------------------- the transport */

static int tcp_send_acquire(baton__conn_t *bc, void **slot) {
  tcp_conn_t *c = bc->impl;
  int rc = ready(c) ? 0 : wait_on(c, ready, "for a free slot to send into");
  if (rc)
    return rc;
  *slot = baton__tcp_slot_of(c, c->user);
  return 0;
}

static int tcp_send_commit(baton__conn_t *bc, size_t bytes) {
  baton__tcp_queue(bc->impl, bytes, NULL);
  return 0;
}

static int tcp_send_ref(baton__conn_t *bc, const void *data, size_t bytes) {
  tcp_conn_t *c = bc->impl;
  int rc = ready(c) ? 0 : wait_on(c, ready, "for room to send");
  if (rc == 0)
    baton__tcp_queue(c, bytes, data);
  return rc;
}

static int tcp_recv_acquire(baton__conn_t *bc, const void **slot, size_t *bytes) {
  tcp_conn_t *c = bc->impl;
  int rc = ready(c) ? 0 : wait_on(c, ready, "for data");
  if (rc)
    return rc;
  if (c->kind[c->user % c->nslots] == BATON__FRAME_ABORT)
    return baton__tcp_relay(c, c);
  if ((rc = baton__sig_check(c->t->sig, &c->sig[c->user % c->nslots], c->t->rank, bc->peer, bc->why,
                             sizeof bc->why)) != 0)
    return rc;
  *slot = baton__tcp_slot_of(c, c->user);
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

/* Moves this connection's bytes only: a caller that watches many
 * connections asks each in turn. */
static int tcp_ready(baton__conn_t *bc, int sending, int deep) {
  tcp_conn_t *c = bc->impl;
  (void)sending;
  for (int j = 0; j < c->nsocks && !c->failed; j++)
    c->sending ? baton__tcp_push(c, &c->s[j]) : baton__tcp_pull(c, &c->s[j]);
  if (!c->failed)
    baton__tcp_advance_wire(c);
  if (c->failed)
    return c->failed;
  if (ready(c))
    return 1;
  if (!c->sending && c->s[c->user % (uint64_t)c->nsocks].eof)
    return baton__tcp_conn_fail(c, BATON_EREMOTE, "closed the connection while this rank waited");
  tcp_conn_t *ab = deep ? aborted_peer(c->t, 0) : NULL;
  return ab ? baton__tcp_relay(c, ab) : 0;
}

static int tcp_drained(baton__conn_t *bc) {
  tcp_conn_t *c = bc->impl;
  int rc = tcp_ready(bc, 1, 0);
  return rc < 0 ? rc : flushed(c);
}

static int tcp_poll_fd(baton__conn_t *bc, short *events) {
  tcp_conn_t *c = bc->impl;
  if (c->nsocks != 1 || c->failed)
    return -1;
  *events = !c->sending ? POLLIN : c->s[0].frame < c->user ? POLLOUT : 0;
  return c->s[0].fd;
}

const baton__transport_t baton__tcp_transport = {
    .name = "tcp",
    .send_acquire = tcp_send_acquire,
    .send_commit = tcp_send_commit,
    .recv_acquire = tcp_recv_acquire,
    .recv_release = tcp_recv_release,
    .flush = tcp_flush,
    .send_ref = tcp_send_ref,
    .ready = tcp_ready,
    .drained = tcp_drained,
    .poll_fd = tcp_poll_fd,
};

/* ------------------------------------------- the communicator's TCP side */

int baton__tcp_check(void *impl, char *why, size_t whylen) {
  baton__tcp_t *t = impl;
  tcp_conn_t *bad = NULL;
  int rc = progress(t, &bad);
  tcp_conn_t *ab = aborted_peer(t, baton__now());
  if (ab) {
    snprintf(why, whylen, "rank %d (host %.40s): %.300s", ab->conn.peer, t->hosts[ab->conn.peer],
             ab->abort_msg);
    return ab->abort_rc;
  }
  if (rc)
    snprintf(why, whylen, "%s", bad->conn.why);
  return rc;
}

void baton__tcp_watch(void *impl, const baton__watch_t *watch) {
  baton__tcp_t *t = impl;
  t->watch = watch;
}
