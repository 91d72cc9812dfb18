/*
 * store_server.c - the rendezvous store's server, which rank 0 runs for the
 * life of a communicator and of the communicators made from it (in its
 * process, each holds it once more). The wire format is in store.h.
 *
 * The server is one thread around poll(). A client has one request in flight
 * at a time: while its reply is being written, or while its GET is parked on
 * a key that nobody has set yet, the server reads nothing more from it. A SET
 * answers every GET parked on its key. A client that sends anything
 * malformed is dropped with a WARN, and the other clients never notice.
 *
 * With a secret, a new client must first pass the handshake of auth.h, run
 * by the same loop through the same header-then-body reads, within the
 * store's timeout; until then nothing it sends is taken as a request. A
 * client that fails is told why (a RESULT), dropped and logged once.
 */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "auth.h"
#include "internal.h"
#include "store.h"

#define BATON__STORE_MAX_CONNS 8192
/* Clients still in their handshake. Past this many the oldest is dropped,
 * so that strangers who connect and say nothing cannot use up the file
 * descriptors (or the slots) that the job's ranks need to join. */
#define BATON__STORE_MAX_PENDING 512
#define BATON__STORE_BUCKETS 4096 /* fixed: the store holds a few keys per rank */

/* ------------------------------------------------------------- the table */

typedef struct entry {
  struct entry *next;
  uint32_t klen, vlen;
  uint8_t data[]; /* key, then value */
} entry_t;

typedef struct {
  int fd;
  int dead;
  int parked; /* its GET waits for the key in body */
  int authed; /* passed the handshake, or the store has no secret */
  baton__auth_t auth;
  double auth_deadline;
  char peer[64];
  uint8_t hdr[BATON__STORE_HDR];
  size_t hdr_got;
  baton__store_hdr_t h;
  uint8_t *body; /* key, then value, of the request being read */
  size_t body_len, body_got;
  uint8_t *out; /* the reply being written */
  size_t out_len, out_sent;
} conn_t;

struct baton__store_server {
  _Atomic int holders; /* communicators of this process that use it (baton__store_hold) */
  pthread_t thread;
  int lfd, wakefd;
  char addr[300];
  conn_t *conns;
  size_t nconns, capconns;
  struct pollfd *pfds; /* wakefd, lfd, then one per conn */
  baton__secret_t secret;
  double auth_s; /* how long a new client may take to authenticate */
  entry_t *table[BATON__STORE_BUCKETS];
};

static entry_t **kv_slot(baton__store_server_t *srv, const uint8_t *key, uint32_t klen) {
  uint32_t h = 2166136261u; /* FNV-1a */
  for (uint32_t i = 0; i < klen; i++)
    h = (h ^ key[i]) * 16777619u;
  entry_t **p = &srv->table[h % BATON__STORE_BUCKETS];
  while (*p && ((*p)->klen != klen || memcmp((*p)->data, key, klen) != 0))
    p = &(*p)->next;
  return p; /* the matching entry's link, or the chain's NULL end */
}

static entry_t *kv_put(baton__store_server_t *srv, const uint8_t *key, uint32_t klen,
                       const uint8_t *val, uint32_t vlen) {
  entry_t *e = malloc(sizeof *e + klen + vlen);
  if (!e)
    return NULL;
  e->klen = klen, e->vlen = vlen;
  memcpy(e->data, key, klen);
  memcpy(e->data + klen, val, vlen);
  entry_t **p = kv_slot(srv, key, klen), *old = *p;
  e->next = old ? old->next : NULL;
  *p = e;
  free(old);
  return e;
}

/* ------------------------------------------------------------ the server */

static void conn_drop(baton__store_server_t *srv, conn_t *c, int warn, const char *why) {
  if (warn)
    baton__log_warn(BOOT, "store %s: dropping client %s: %s", srv->addr, c->peer, why);
  else
    baton__log_trace(BOOT, "store %s: client %s left: %s", srv->addr, c->peer, why);
  close(c->fd);
  free(c->body);
  free(c->out);
  c->body = c->out = NULL;
  c->dead = 1;
}

static void conn_write(baton__store_server_t *srv, conn_t *c) {
  while (c->out_sent < c->out_len) {
    ssize_t r = send(c->fd, c->out + c->out_sent, c->out_len - c->out_sent, MSG_NOSIGNAL);
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      return; /* poll() says when to go on */
    if (r < 0) {
      conn_drop(srv, c, 0, strerror(errno));
      return;
    }
    c->out_sent += (size_t)r;
  }
  free(c->out);
  c->out = NULL;
}

/* Sends head (n bytes) and val, as far as the socket takes them now. */
static void conn_queue(baton__store_server_t *srv, conn_t *c, const uint8_t *head, size_t n,
                       const uint8_t *val, uint32_t vlen) {
  c->out = malloc(n + (size_t)vlen);
  if (!c->out) {
    conn_drop(srv, c, 1, "out of memory for the reply");
    return;
  }
  memcpy(c->out, head, n);
  if (vlen)
    memcpy(c->out + n, val, vlen);
  c->out_len = n + (size_t)vlen;
  c->out_sent = 0;
  conn_write(srv, c);
}

static void conn_reply(baton__store_server_t *srv, conn_t *c, unsigned op, const uint8_t *val,
                       uint32_t vlen) {
  uint8_t hdr[BATON__STORE_HDR];
  baton__store_hdr_pack(hdr, op, 0, vlen);
  conn_queue(srv, c, hdr, BATON__STORE_HDR, val, vlen);
}

/* Tells a client why it is turned away (one try, never waiting) and drops
 * it with one WARN. What it sent and we did not read is read first: closing
 * a socket with unread bytes resets the connection, and the reset could
 * reach the client before our reason does. */
static void conn_refuse(baton__store_server_t *srv, conn_t *c, const uint8_t *msg, size_t n,
                        const char *why) {
  char text[BATON__ERRLEN + 16];
  uint8_t scratch[4096];
  if (n) {
    ssize_t w = send(c->fd, msg, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)w;
  }
  shutdown(c->fd, SHUT_WR);
  for (int i = 0; i < 64 && recv(c->fd, scratch, sizeof scratch, MSG_DONTWAIT) > 0; i++)
    ;
  snprintf(text, sizeof text, "rejected: %s", why);
  conn_drop(srv, c, 1, text);
}

/* Answers every GET parked on e's key. */
static void wake_parked(baton__store_server_t *srv, const entry_t *e) {
  for (size_t i = 0; i < srv->nconns; i++) {
    conn_t *c = &srv->conns[i];
    if (c->dead || !c->parked || c->h.klen != e->klen || memcmp(c->body, e->data, e->klen) != 0)
      continue;
    c->parked = 0;
    free(c->body);
    c->body = NULL;
    conn_reply(srv, c, BATON__OP_GET_VAL, e->data + e->klen, e->vlen);
  }
}

static void handle_request(baton__store_server_t *srv, conn_t *c) {
  const uint8_t *key = c->body;
  entry_t *e;

  if (c->h.op == BATON__OP_GET) {
    e = *kv_slot(srv, key, c->h.klen);
    c->parked = (e == NULL); /* keeps body: wake_parked() needs the key */
    if (e)
      conn_reply(srv, c, BATON__OP_GET_VAL, e->data + e->klen, e->vlen);
  } else if ((e = kv_put(srv, key, c->h.klen, key + c->h.klen, c->h.vlen))) {
    conn_reply(srv, c, BATON__OP_SET_OK, NULL, 0);
    wake_parked(srv, e);
  } else {
    conn_drop(srv, c, 1, "out of memory for the value");
  }
  if (!c->parked) {
    free(c->body);
    c->body = NULL;
  }
}

/* A client may send only well-formed SET and GET headers. */
static int request_hdr_check(baton__store_server_t *srv, conn_t *c) {
  char why[128];
  if (baton__store_hdr_parse(c->hdr, &c->h, why, sizeof why) == 0 &&
      (c->h.op == BATON__OP_SET || c->h.op == BATON__OP_GET)) {
    c->body_len = (size_t)c->h.klen + c->h.vlen;
    return 0;
  }
  if (baton__store_hdr_parse(c->hdr, &c->h, why, sizeof why) == 0) {
    snprintf(why, sizeof why, "a client may not send %s", baton__store_ops[c->h.op].name);
  } else if (srv->secret.len == 0 && memcmp(c->hdr, "BTAU", 4) == 0) {
    uint8_t msg[BATON__AUTH_HDR];
    baton__auth_result_pack(msg, BATON__AUTH_NO_SECRET);
    conn_refuse(srv, c, msg, sizeof msg, "it has a BATON_SECRET and this store has none");
    return -1;
  }
  conn_drop(srv, c, 1, why);
  return -1;
}

/* The next header of a client that has not authenticated yet. */
static int auth_hdr_check(baton__store_server_t *srv, conn_t *c) {
  uint8_t out[BATON__AUTH_MSG_MAX];
  size_t outlen;
  char why[BATON__ERRLEN];
  if (baton__auth_header(&c->auth, c->hdr, &c->body_len, out, &outlen, why, sizeof why) == 0)
    return 0;
  conn_refuse(srv, c, out, outlen, why);
  return -1;
}

/* A whole handshake message has arrived. */
static void handle_auth(baton__store_server_t *srv, conn_t *c) {
  uint8_t out[BATON__AUTH_MSG_MAX];
  size_t outlen;
  char why[BATON__ERRLEN];
  int rc = baton__auth_body(&c->auth, c->body, out, &outlen, why, sizeof why);
  free(c->body);
  c->body = NULL;
  if (rc != BATON_OK) {
    conn_refuse(srv, c, out, outlen, why);
    return;
  }
  if (baton__auth_done(&c->auth)) {
    c->authed = 1;
    baton__log_trace(BOOT, "store %s: client %s authenticated", srv->addr, c->peer);
  }
  if (outlen)
    conn_queue(srv, c, out, outlen, NULL, 0);
}

/* A header is complete: check it and make room for the body. */
static int conn_header(baton__store_server_t *srv, conn_t *c) {
  if ((c->authed ? request_hdr_check(srv, c) : auth_hdr_check(srv, c)) != 0)
    return -1;
  if (!(c->body = malloc(c->body_len ? c->body_len : 1))) {
    conn_drop(srv, c, 1, "out of memory for the request");
    return -1;
  }
  return 0;
}

/* Reads one message, resuming wherever the last call stopped. */
static void conn_read(baton__store_server_t *srv, conn_t *c) {
  char why[128];
  for (;;) {
    int in_hdr = c->hdr_got < BATON__STORE_HDR;
    size_t total = in_hdr ? BATON__STORE_HDR : c->body_len;
    size_t got = in_hdr ? c->hdr_got : c->body_got;
    if (!in_hdr && got == total) {
      c->hdr_got = c->body_got = 0;
      c->authed ? handle_request(srv, c) : handle_auth(srv, c);
      return;
    }
    ssize_t r = recv(c->fd, in_hdr ? c->hdr + got : c->body + got, total - got, 0);
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      return;
    if (r <= 0) {
      snprintf(why, sizeof why, "%s after %zu of %zu bytes of a %s%s",
               r < 0 ? strerror(errno) : "connection closed", got, total,
               c->authed ? "" : "handshake ", in_hdr ? "header" : "body");
      conn_drop(srv, c, !(r == 0 && in_hdr && got == 0 && c->authed), why);
      return;
    }
    if (!in_hdr)
      c->body_got += (size_t)r;
    else if ((c->hdr_got += (size_t)r) == BATON__STORE_HDR && conn_header(srv, c) != 0)
      return;
  }
}

static int conns_grow(baton__store_server_t *srv) {
  if (srv->nconns < srv->capconns)
    return 0;
  size_t cap = srv->capconns ? 2 * srv->capconns : 16;
  if (cap > BATON__STORE_MAX_CONNS)
    return -1;
  struct pollfd *pfds = realloc(srv->pfds, (cap + 2) * sizeof *pfds);
  if (!pfds)
    return -1;
  srv->pfds = pfds;
  conn_t *conns = realloc(srv->conns, cap * sizeof *conns);
  if (!conns)
    return -1;
  srv->conns = conns;
  srv->capconns = cap;
  return 0;
}

/* A new client: with a secret, the handshake comes first. */
static void conn_start(baton__store_server_t *srv, conn_t *c) {
  uint8_t out[BATON__AUTH_MSG_MAX];
  size_t outlen;
  char why[BATON__ERRLEN];
  c->authed = srv->secret.len == 0;
  c->auth_deadline = baton__now() + srv->auth_s;
  if (!c->authed && baton__auth_begin(&c->auth, 1, &srv->secret, out, &outlen, why, sizeof why))
    conn_drop(srv, c, 1, why);
}

/* When more than `keep` clients are in their handshake, drops the one that
 * has waited longest; 0 when it dropped one. */
static int drop_oldest_pending(baton__store_server_t *srv, size_t keep, const char *why) {
  conn_t *oldest = NULL;
  size_t pending = 0;
  for (size_t i = 0; i < srv->nconns; i++) {
    conn_t *c = &srv->conns[i];
    if (c->dead || c->authed)
      continue;
    pending++;
    if (!oldest || c->auth_deadline < oldest->auth_deadline)
      oldest = c;
  }
  if (pending <= keep)
    return -1;
  conn_drop(srv, oldest, 1, why);
  return 0;
}

static void accept_all(baton__store_server_t *srv) {
  for (;;) {
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    char host[NI_MAXHOST] = "?", serv[NI_MAXSERV] = "?";
    int fd = accept4(srv->lfd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0 && (errno == EINTR || errno == ECONNABORTED))
      continue;
    if (fd < 0 && (errno == EMFILE || errno == ENFILE) &&
        drop_oldest_pending(srv, 0,
                            "rejected: out of file descriptors while it had not "
                            "finished its handshake") == 0)
      continue;
    if (fd < 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK)
        baton__log_warn(BOOT, "store %s: accept: %s", srv->addr, strerror(errno));
      return;
    }
    if (conns_grow(srv) != 0) {
      baton__log_warn(BOOT, "store %s: refusing a client: too many clients or out of memory",
                      srv->addr);
      close(fd);
      continue;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    getnameinfo((struct sockaddr *)&ss, sl, host, sizeof host, serv, sizeof serv,
                NI_NUMERICHOST | NI_NUMERICSERV);
    conn_t *c = &srv->conns[srv->nconns++];
    memset(c, 0, sizeof *c);
    c->fd = fd;
    baton__store_format_addr(c->peer, sizeof c->peer, host, atoi(serv));
    conn_start(srv, c);
    drop_oldest_pending(srv, BATON__STORE_MAX_PENDING,
                        "rejected: too many clients waiting for a "
                        "handshake; this one waited longest");
  }
}

static short conn_events(const conn_t *c) {
  if (c->parked)
    return POLLRDHUP; /* only to notice a client that gives up */
  return c->out ? POLLOUT : POLLIN;
}

static void conn_service(baton__store_server_t *srv, conn_t *c, short rev) {
  if (c->dead)
    return;
  if (c->parked && (rev & (POLLRDHUP | POLLHUP | POLLERR)))
    conn_drop(srv, c, 0, "hung up while waiting for a key");
  else if (!c->parked && c->out)
    conn_write(srv, c);
  else if (!c->parked)
    conn_read(srv, c);
}

/* Drops the clients whose handshake is overdue; returns the poll timeout
 * (ms) until the next one is due, -1 when none is pending. */
static int expire_handshakes(baton__store_server_t *srv) {
  double t = baton__now(), next = -1;
  char why[96];
  for (size_t i = 0; i < srv->nconns; i++) {
    conn_t *c = &srv->conns[i];
    if (c->dead || c->authed)
      continue;
    if (c->auth_deadline <= t) {
      snprintf(why, sizeof why, "rejected: no handshake within %.3g s", srv->auth_s);
      conn_drop(srv, c, 1, why);
    } else if (next < 0 || c->auth_deadline < next) {
      next = c->auth_deadline;
    }
  }
  return next < 0 ? -1 : next - t > 3600 ? 3600000 : (int)((next - t) * 1000) + 1;
}

static void *serve_loop(void *arg) {
  baton__store_server_t *srv = arg;
  pthread_setname_np(pthread_self(), "baton-store");
  for (;;) {
    int timeout_ms = expire_handshakes(srv);
    for (size_t i = 0; i < srv->nconns;) /* forget the dropped ones */
      if (srv->conns[i].dead)
        srv->conns[i] = srv->conns[--srv->nconns];
      else
        i++;
    srv->pfds[0] = (struct pollfd){.fd = srv->wakefd, .events = POLLIN};
    srv->pfds[1] = (struct pollfd){.fd = srv->lfd, .events = POLLIN};
    for (size_t i = 0; i < srv->nconns; i++)
      srv->pfds[2 + i] =
          (struct pollfd){.fd = srv->conns[i].fd, .events = conn_events(&srv->conns[i])};
    if (poll(srv->pfds, 2 + srv->nconns, timeout_ms) < 0) {
      if (errno == EINTR)
        continue;
      baton__log_warn(BOOT, "store %s: poll: %s; the store stops serving", srv->addr,
                      strerror(errno));
      return NULL;
    }
    if (srv->pfds[0].revents)
      return NULL;
    for (size_t i = 0; i < srv->nconns; i++)
      if (srv->pfds[2 + i].revents)
        conn_service(srv, &srv->conns[i], srv->pfds[2 + i].revents);
    if (srv->pfds[1].revents)
      accept_all(srv);
  }
}

static int listen_on(baton__store_server_t *srv, const char *host, int port, char *err,
                     size_t errlen) {
  struct addrinfo hints = {
      .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
  struct addrinfo *res, *ai;
  char portstr[16];
  int one = 1, saved = 0;

  snprintf(portstr, sizeof portstr, "%d", port);
  int rc = getaddrinfo(*host ? host : NULL, portstr, &hints, &res);
  if (rc != 0) {
    snprintf(err, errlen, "store: cannot resolve the listen address %s: %s", srv->addr,
             gai_strerror(rc));
    return BATON_EUSAGE;
  }
  for (ai = res; ai; ai = ai->ai_next) {
    srv->lfd =
        socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (srv->lfd >= 0 && setsockopt(srv->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0 &&
        bind(srv->lfd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(srv->lfd, 1024) == 0)
      break;
    saved = errno;
    if (srv->lfd >= 0)
      close(srv->lfd);
    srv->lfd = -1;
  }
  freeaddrinfo(res);
  if (srv->lfd < 0) {
    snprintf(err, errlen, "store: cannot listen on %s%s: %s", srv->addr,
             port ? "" : " (any free port)", strerror(saved));
    return BATON_ESYS;
  }
  return BATON_OK;
}

static void server_free(baton__store_server_t *srv) {
  for (size_t i = 0; i < srv->nconns; i++)
    if (!srv->conns[i].dead)
      conn_drop(srv, &srv->conns[i], 0, "the store stops");
  for (size_t b = 0; b < BATON__STORE_BUCKETS; b++)
    for (entry_t *e = srv->table[b], *next; e; e = next)
      next = e->next, free(e);
  free(srv->conns);
  free(srv->pfds);
  free(srv);
}

int baton__store_serve(const char *host, int port, const baton__secret_t *secret, double timeout_s,
                       baton__store_server_t **out, char *err, size_t errlen) {
  baton__store_server_t *srv;
  int rc;

  *out = NULL;
  if (!host || port < 0 || port > 65535 || !secret || !(timeout_s > 0)) {
    snprintf(err, errlen, "store: bad arguments (host %s, port %d, %s, timeout %g s)",
             host ? host : "NULL", port, secret ? "a secret" : "no secret struct", timeout_s);
    return BATON_EINVAL;
  }
  if (!(srv = calloc(1, sizeof *srv)) || !(srv->pfds = malloc(2 * sizeof *srv->pfds))) {
    rc = BATON_ENOMEM;
    snprintf(err, errlen, "store: out of memory");
    goto fail_alloc;
  }
  baton__store_format_addr(srv->addr, sizeof srv->addr, *host ? host : "*", port);
  srv->secret = *secret;
  srv->auth_s = timeout_s;
  if ((srv->wakefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0) {
    rc = BATON_ESYS;
    snprintf(err, errlen, "store %s: eventfd: %s", srv->addr, strerror(errno));
    goto fail_alloc;
  }
  if ((rc = listen_on(srv, host, port, err, errlen)) != BATON_OK)
    goto fail_listen;
  if ((rc = pthread_create(&srv->thread, NULL, serve_loop, srv)) != 0) {
    snprintf(err, errlen, "store %s: pthread_create: %s", srv->addr, strerror(rc));
    rc = BATON_ESYS;
    goto fail_thread;
  }
  baton__log_info(BOOT, "store: serving on %s", srv->addr);
  atomic_init(&srv->holders, 1);
  *out = srv;
  return BATON_OK;

fail_thread:
  close(srv->lfd);
fail_listen:
  close(srv->wakefd);
fail_alloc:
  if (srv)
    server_free(srv);
  return rc;
}

baton__store_server_t *baton__store_hold(baton__store_server_t *srv) {
  if (srv)
    atomic_fetch_add(&srv->holders, 1);
  return srv;
}

void baton__store_stop(baton__store_server_t *srv) {
  uint64_t one = 1;

  if (!srv || atomic_fetch_sub(&srv->holders, 1) > 1)
    return;
  if (write(srv->wakefd, &one, sizeof one) != sizeof one)
    baton__log_warn(BOOT, "store %s: cannot wake the server thread: %s", srv->addr,
                    strerror(errno));
  pthread_join(srv->thread, NULL);
  close(srv->lfd);
  close(srv->wakefd);
  server_free(srv);
}

int baton__store_port(const baton__store_server_t *srv) {
  struct sockaddr_storage ss;
  socklen_t len = sizeof ss;
  if (getsockname(srv->lfd, (struct sockaddr *)&ss, &len) != 0)
    return -1;
  return ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                        : ((struct sockaddr_in *)&ss)->sin_port);
}
