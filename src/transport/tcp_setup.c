/*
 * tcp_setup.c - making and ending the TCP transport's connections.
 *
 * Connections are made once, at init: every rank listens on the chosen
 * interface, publishes "ip port" in the store, connects to the ranks it
 * sends to and accepts the ranks it receives from, each socket proving the
 * job's secret (auth.h) and then saying a hello; then the listening socket
 * is closed, so a running job has no open port. A connection is one
 * direction between two ranks, carried by BATON_NSOCKS sockets; frame k
 * travels on socket k % nsocks. Also here: the communicator-wide table
 * (baton__tcp_fabric), shutdown and destroy.
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tcp_impl.h"

#define HELLO_MAGIC 0x4c4c4548u /* "HELL" */
#define HELLO_BYTES 24

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
    ssize_t k = writing ? send(fd, b, n, MSG_NOSIGNAL) : read(fd, b, n);
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
 * is noticed by the kernel about BATON_TCP_LINK_TIMEOUT after it goes
 * quiet: keepalive probes from 1 s of silence, and sent data or a probe
 * unanswered that long ends the connection (a rank that only waits to
 * receive pings its peers after 0.2 s so that the timeout applies to it
 * too: tests/test_linkbreak.sh). The peer's kernel answers probes even
 * while its process computes. The default, 3 s, is not 1: on a loaded
 * virtual machine a stall of a second let the kernel end a healthy link
 * (tests/test_cluster.sh failed so in two CI runs). */
static void tune(const baton__tcp_t *t, int fd) {
  int one = 1, idle = 1, intvl = 1, cnt = 1;
  unsigned user_timeout_ms = (unsigned)(t->link_timeout_s * 1000 + 0.5);
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
    tune(t, fd);
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
    tune(t, fd);
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
  pthread_setname_np(pthread_self(), "baton-accept");
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
  /* BATON_SHM_SLOTS sets TCP's slots too (there is no knob of TCP's own):
   * each connection has that many local slots of BATON_TCP_SEGMENT_BYTES,
   * so that many segments can be in flight (sending) or read ahead
   * (receiving) per connection. */
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
    snprintf(key, sizeof key, "%.20s.%d", a->key ? a->key : "tcp", a->to[i]);
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

static void tcp_destroy(void *impl, int clean);

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
  t->link_timeout_s = p->tcp_link_timeout_s;
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
  snprintf(key, sizeof key, "%.20s.%d", a->key ? a->key : "tcp", a->rank);
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
  tcp_destroy(t, 0);
  return rc;
}

static baton__conn_t *tcp_conn_to(void *impl, int peer) {
  baton__tcp_t *t = impl;
  return t->to[peer] ? &t->to[peer]->conn : NULL;
}

static baton__conn_t *tcp_conn_from(void *impl, int peer) {
  baton__tcp_t *t = impl;
  return t->from[peer] ? &t->from[peer]->conn : NULL;
}

/* From any thread or a signal handler (only shutdown(2)): peers see the
 * end of the stream, and this rank's waiters wake to find their sockets
 * closed. There is no abort frame: the handler may have interrupted this
 * rank in the middle of writing a frame. */
static void tcp_shutdown(void *impl, int rc, const char *msg) {
  baton__tcp_t *t = impl;
  (void)rc, (void)msg;
  for (int i = 0; i < t->nall; i++)
    for (int j = 0; j < t->all[i]->nsocks; j++)
      if (t->all[i]->s[j].fd >= 0)
        shutdown(t->all[i]->s[j].fd, SHUT_RDWR);
}

/* The end of a communicator that every rank ends together. A socket
 * closed with bytes still unread makes the kernel reset the connection,
 * and a peer still finishing the last barrier takes the reset for a broken
 * link. What such a peer sends after this rank's last read is a ping (a
 * wait of 0.2 s pings every peer it sends to), so: first this rank ends
 * its outgoing streams, then it reads and drops what its incoming ones
 * carry until each peer ends them too. Every rank reaches this after the
 * barrier, so the wait is the slowest peer's way here; it is bounded by
 * BATON_TIMEOUT all the same, and a peer late past that is warned of and
 * closed on, as an unclean end would be. */
static void end_streams(baton__tcp_t *t) {
  for (int i = 0; i < t->nall; i++)
    if (t->all[i]->failed || (t->all[i]->sending && t->all[i]->wire != t->all[i]->user))
      return; /* no clean end: close at once */
  for (int i = 0; i < t->nall; i++)
    for (int j = 0; t->all[i]->sending && j < t->all[i]->nsocks; j++)
      shutdown(t->all[i]->s[j].fd, SHUT_WR);
  double deadline = baton__now() + t->timeout_s;
  for (;;) {
    int n = 0;
    for (int i = 0; i < t->nall; i++) {
      tcp_conn_t *c = t->all[i];
      for (int j = 0; !c->sending && j < c->nsocks; j++) {
        sock_t *s = &c->s[j];
        char drop[512];
        ssize_t r = 1;
        while (!s->eof && (r = recv(s->fd, drop, sizeof drop, 0)) > 0) {
        }
        if (s->eof || r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
          s->eof = 1;
          continue;
        }
        t->pfd[n] = (struct pollfd){s->fd, POLLIN, 0};
        t->pfd_conn[n++] = c;
      }
    }
    double left = deadline - baton__now();
    if (n == 0)
      return;
    if (left <= 0) {
      tcp_conn_t *c = t->pfd_conn[0];
      baton__log_warn(NET,
                      "baton_comm_destroy: rank %d (host %s) did not end its connection within "
                      "%.3g s (BATON_TIMEOUT) of this rank's end; closed anyway",
                      c->conn.peer, t->hosts[c->conn.peer], t->timeout_s);
      return;
    }
    poll(t->pfd, (nfds_t)n, left > 0.1 ? 100 : (int)(left * 1000) + 1);
  }
}

static void tcp_destroy(void *impl, int clean) {
  baton__tcp_t *t = impl;
  if (!t)
    return;
  if (clean)
    end_streams(t);
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

const baton__fabric_t baton__tcp_fabric = {
    .name = "tcp",
    .conn_to = tcp_conn_to,
    .conn_from = tcp_conn_from,
    .watch = baton__tcp_watch,
    .check = baton__tcp_check,
    .poison = baton__tcp_poison,
    .shutdown = tcp_shutdown,
    .destroy = tcp_destroy,
};
