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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "tcp.h"

#define MAX_SOCKS 16
#define HELLO_MAGIC 0x4c4c4548u /* "HELL" */
#define HELLO_BYTES 24

typedef struct tcp_conn tcp_conn_t;

typedef struct {
  int fd;
  int eof;        /* the peer closed it at a frame boundary */
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
  uint64_t *seq;  /* per slot: collective the frame belongs to */
  uint64_t user;  /* slots committed (send) or released (recv) by the executor */
  uint64_t wire;  /* frames fully written (send) or fully read (recv) */
  int failed;     /* a socket error: conn.why says what */
};

struct baton__tcp {
  int rank, size;
  uint64_t comm_id;
  const uint64_t *seq;
  double timeout_s;
  tcp_conn_t **to, **from; /* by peer rank */
  tcp_conn_t **all;
  int nall;
  struct pollfd *pfd;
  tcp_conn_t **pfd_conn;
  char (*hosts)[64];
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

/* magic u32 | frame u32 | comm_id u64 | seq u64 | len u32 | reserved u32 */
void baton__frame_pack(uint8_t *b, const baton__frame_t *f) {
  put32(b, BATON__FRAME_MAGIC);
  put32(b + 4, f->frame);
  put64(b + 8, f->comm_id);
  put64(b + 16, f->seq);
  put32(b + 24, f->len);
  put32(b + 28, 0);
}

int baton__frame_parse(const uint8_t *b, uint64_t comm_id, uint32_t frame, uint32_t max_len,
                       baton__frame_t *f, char *why, size_t whylen) {
  f->frame = get32(b + 4);
  f->comm_id = get64(b + 8);
  f->seq = get64(b + 16);
  f->len = get32(b + 24);
  if (get32(b) != BATON__FRAME_MAGIC)
    snprintf(why, whylen, "a frame header with bad magic 0x%08x (not a baton peer, or the "
             "stream lost its place)", get32(b));
  else if (get32(b + 28) != 0)
    snprintf(why, whylen, "a frame header with reserved bits 0x%08x set", get32(b + 28));
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
      baton__frame_t f = {c->t->comm_id, c->seq[s->frame % c->nslots], (uint32_t)s->frame, len};
      baton__frame_pack(s->hdr, &f);
    }
    struct iovec iov[2];
    int n = 0;
    if (s->done < BATON__FRAME_HDR)
      iov[n++] = (struct iovec){s->hdr + s->done, BATON__FRAME_HDR - s->done};
    size_t pdone = s->done > BATON__FRAME_HDR ? s->done - BATON__FRAME_HDR : 0;
    if (len > pdone)
      iov[n++] = (struct iovec){slot_of(c, s->frame) + pdone, len - pdone};
    ssize_t w = writev(s->fd, iov, n);
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      return 0;
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return io_error(c, "sending", w);
    s->done += (size_t)w;
    if (s->done == BATON__FRAME_HDR + len) {
      s->done = 0;
      s->frame += (uint64_t)c->nsocks;
    }
  }
  return 0;
}

/* Reads what socket j has, into free slots. A close between frames is not
 * an error yet: the peer may have sent all it had to; it becomes one when
 * this rank waits for more (see wait_on). */
static int pull(tcp_conn_t *c, sock_t *s) {
  while (!s->eof && s->frame < c->user + c->nslots) {
    char why[160];
    ssize_t r;
    if (s->done < BATON__FRAME_HDR) {
      r = read(s->fd, s->hdr + s->done, BATON__FRAME_HDR - s->done);
    } else {
      uint32_t len = c->len[s->frame % c->nslots];
      size_t pdone = s->done - BATON__FRAME_HDR;
      r = len > pdone ? read(s->fd, slot_of(c, s->frame) + pdone, len - pdone) : 0;
      if (len == pdone)
        goto complete;
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
      c->seq[s->frame % c->nslots] = f.seq;
      if (f.len > 0)
        continue;
    } else if (s->done < BATON__FRAME_HDR + c->len[s->frame % c->nslots]) {
      continue;
    }
  complete:
    s->done = 0;
    s->frame += (uint64_t)c->nsocks;
  }
  return 0;
}

/* One pass over every connection, without blocking. Returns the first
 * error of any connection (the failed connection keeps its reason). */
static int progress(baton__tcp_t *t, tcp_conn_t **failed) {
  for (int i = 0; i < t->nall; i++) {
    tcp_conn_t *c = t->all[i];
    for (int j = 0; j < c->nsocks && !c->failed; j++)
      c->sending ? push(c, &c->s[j]) : pull(c, &c->s[j]);
    if (c->failed) {
      *failed = c;
      return c->failed;
    }
    advance_wire(c);
  }
  return 0;
}

static int ready(const tcp_conn_t *c) {
  return c->sending ? c->user - c->wire < c->nslots : c->wire > c->user;
}

static int flushed(const tcp_conn_t *c) { return c->wire == c->user; }

/* Drives every connection until cond(c) holds, the deadline passes or a
 * connection fails. */
static int wait_on(tcp_conn_t *c, int (*cond)(const tcp_conn_t *), const char *what) {
  baton__tcp_t *t = c->t;
  double deadline = baton__now() + t->timeout_s;
  for (;;) {
    tcp_conn_t *bad = NULL;
    int rc = progress(t, &bad);
    if (rc) {
      if (bad != c)
        snprintf(c->conn.why, sizeof c->conn.why, "%s", bad->conn.why);
      return rc;
    }
    if (cond(c))
      return 0;
    if (!c->sending && c->s[c->user % (uint64_t)c->nsocks].eof)
      return conn_fail(c, BATON_EREMOTE, "closed the connection while this rank waited %s",
                       what);
    int n = 0;
    for (int i = 0; i < t->nall; i++) {
      tcp_conn_t *k = t->all[i];
      for (int j = 0; j < k->nsocks; j++) {
        sock_t *s = &k->s[j];
        int want = k->sending ? s->frame < k->user : !s->eof && s->frame < k->user + k->nslots;
        if (!want)
          continue;
        t->pfd[n] = (struct pollfd){s->fd, (short)(k->sending ? POLLOUT : POLLIN), 0};
        t->pfd_conn[n++] = k;
      }
    }
    double left = deadline - baton__now();
    if (left <= 0) {
      snprintf(c->conn.why, sizeof c->conn.why, "rank %d (host %s) %s for %.3g s while this "
               "rank waited %s", c->conn.peer, t->hosts[c->conn.peer],
               c->sending ? "took no data" : "sent nothing", t->timeout_s, what);
      return BATON_ETIMEDOUT;
    }
    int ms = left > 0.1 ? 100 : (int)(left * 1000) + 1;
    if (poll(t->pfd, (nfds_t)n, ms) < 0 && errno != EINTR)
      return conn_fail(c, BATON_ESYS, "poll failed: %s", strerror(errno));
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

static int tcp_send_commit(baton__conn_t *bc, size_t bytes) {
  tcp_conn_t *c = bc->impl;
  c->len[c->user % c->nslots] = (uint32_t)bytes;
  c->seq[c->user % c->nslots] = *c->t->seq;
  c->user++;
  /* Start the write now: a small message should not wait for the next wait. */
  sock_t *s = &c->s[(c->user - 1) % (uint64_t)c->nsocks];
  if (!c->failed && push(c, s) == 0)
    advance_wire(c);
  return 0;
}

static int tcp_recv_acquire(baton__conn_t *bc, const void **slot, size_t *bytes) {
  tcp_conn_t *c = bc->impl;
  int rc = ready(c) ? 0 : wait_on(c, ready, "for data");
  if (rc)
    return rc;
  uint64_t seq = c->seq[c->user % c->nslots];
  if (seq != *c->t->seq)
    return conn_fail(c, BATON_EPROTO, "sent data of its collective #%llu while this rank is in "
                     "#%llu: do all ranks make the same sequence of calls?",
                     (unsigned long long)seq, (unsigned long long)*c->t->seq);
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
};

/* ---------------------------------------------------------------- set-up */

int baton__pick_local_ip(const char *ifname, const char *rendezvous_host, char *ip,
                         size_t iplen, char *err, size_t errlen) {
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
  if (rc)
    snprintf(err, errlen, "no IPv4 interface %s%s%s is up; interfaces found: %s",
             ifname && ifname[0] ? "matches BATON_SOCKET_IFNAME=" : "routes to ",
             ifname && ifname[0] ? ifname : rendezvous_host, "", found[0] ? found : "none");
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

static void tune(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
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
    int e = errno;
    close(fd);
    if (baton__now() >= deadline) {
      snprintf(err, errlen, "connecting to rank %d (host %s) at %s:%d failed for %.3g s: %s",
               peer, t->hosts[peer], ip, port, t->timeout_s, strerror(e));
      return BATON_ETIMEDOUT;
    }
    usleep(10000);
  }
}

/* Accepts until every expected incoming socket has arrived. A connection
 * that does not say a valid hello for this communicator is dropped. */
static int accept_all(baton__tcp_t *t, int lfd, int expected, double deadline, char *err,
                      size_t errlen) {
  while (expected > 0) {
    if (poll_until(lfd, POLLIN, deadline) != 0) {
      size_t off = (size_t)snprintf(err, errlen, "timed out after %.3g s waiting for "
                                    "connections from", t->timeout_s);
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
    if (io_all(fd, h, sizeof h, 0, hello_deadline) == 0 && get32(h) == HELLO_MAGIC &&
        get64(h + 16) == t->comm_id) {
      from = get32(h + 4);
      j = get32(h + 8);
      c = from < (uint32_t)t->size ? t->from[from] : NULL;
    }
    if (!c || j >= (uint32_t)c->nsocks || get32(h + 12) != (uint32_t)c->nsocks ||
        c->s[j].fd >= 0) {
      BATON_WARN(NET, "dropped a connection that is not an expected peer of this "
                 "communicator (bad or repeated hello)");
      close(fd);
      continue;
    }
    c->s[j].fd = fd;
    expected--;
  }
  return 0;
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
  c->conn.slot_bytes = p->segment_bytes / 64 * 64;
  c->conn.timeout_s = p->timeout_s;
  c->conn.impl = c;
  c->slots = malloc((size_t)c->nslots * c->conn.slot_bytes);
  c->len = calloc(c->nslots, sizeof *c->len);
  c->seq = calloc(c->nslots, sizeof *c->seq);
  for (int j = 0; j < MAX_SOCKS; j++) {
    c->s[j].fd = -1;
    c->s[j].frame = (uint64_t)j;
  }
  if (!c->slots || !c->len || !c->seq) {
    free(c->slots), free(c->len), free(c->seq), free(c);
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
  t->seq = a->seq;
  t->timeout_s = p->timeout_s;
  t->hosts = a->hosts;
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
  double deadline = baton__now() + p->timeout_s;
  /* Connecting first cannot deadlock: the kernel completes a connection
   * into the listen backlog before anyone calls accept. */
  if ((rc = connect_peers(t, st, a, deadline, err, errlen)) != 0 ||
      (rc = accept_all(t, lfd, a->nfrom * p->nsocks, deadline, err, errlen)) != 0)
    goto fail;
  close(lfd);
  BATON_INFO(NET, "tcp on %s: %d connections out, %d in, %d socket%s each, %u slots x %zu bytes",
             a->local_ip, a->nto, a->nfrom, p->nsocks, p->nsocks > 1 ? "s" : "",
             (unsigned)p->shm_slots, p->segment_bytes / 64 * 64);
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

void baton__tcp_destroy(baton__tcp_t *t) {
  if (!t)
    return;
  for (int i = 0; i < t->nall; i++) {
    tcp_conn_t *c = t->all[i];
    for (int j = 0; j < c->nsocks; j++)
      if (c->s[j].fd >= 0)
        close(c->s[j].fd);
    free(c->slots), free(c->len), free(c->seq), free(c);
  }
  free(t->to), free(t->from), free(t->all), free(t->pfd), free(t->pfd_conn), free(t);
}
