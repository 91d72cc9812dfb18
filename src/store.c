/*
 * store.c - the rendezvous store: a small key-value store that rank 0 serves
 * over TCP for the life of a communicator, and the client every rank uses.
 *
 * Wire format, one frame per message, integers little-endian:
 *   u32 magic "BTSR" | u16 version (1) | u16 op | u32 key_len | u32 value_len
 * then key_len key bytes and value_len value bytes. Requests are SET(key,
 * value) and GET(key); the replies are SET_OK() and GET_VAL(value). Keys are
 * 1..255 bytes and values 0..1 MiB; the op table says which lengths each op
 * may carry, and both sides check every header they receive against it.
 *
 * The server is one thread around poll(). A client has one request in flight
 * at a time: while its reply is being written, or while its GET is parked on
 * a key that nobody has set yet, the server reads nothing more from it. A SET
 * answers every GET parked on its key. A client that sends anything
 * malformed is dropped with a WARN, and the other clients never notice.
 *
 * The client is synchronous and bounds every wait by a deadline. A failure in
 * the middle of a request (a timeout included) leaves the stream out of step
 * with the server, so the handle then refuses further requests.
 */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

#define STORE_MAGIC 0x52535442u /* the bytes "BTSR" read as little-endian */
#define STORE_VERSION 1
#define STORE_HDR 16
#define STORE_KEY_MAX 255u
#define STORE_VAL_MAX (1u << 20)
#define STORE_MAX_CONNS 8192
#define STORE_BUCKETS 4096 /* fixed: the store holds a few keys per rank */

enum { OP_SET = 1, OP_GET, OP_SET_OK, OP_GET_VAL, OP_COUNT };

static const struct {
  const char *name;
  uint32_t key_min, key_max, val_max;
} ops[OP_COUNT] = {
    [OP_SET] = {"SET", 1, STORE_KEY_MAX, STORE_VAL_MAX},
    [OP_GET] = {"GET", 1, STORE_KEY_MAX, 0},
    [OP_SET_OK] = {"SET_OK", 0, 0, 0},
    [OP_GET_VAL] = {"GET_VAL", 0, 0, STORE_VAL_MAX},
};

typedef struct {
  unsigned op;
  uint32_t klen, vlen;
} hdr_t;

static void put32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8);
  p[2] = (uint8_t)(v >> 16), p[3] = (uint8_t)(v >> 24);
}

static uint32_t get32(const uint8_t *p) {
  return p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
         (uint32_t)p[3] << 24;
}

static void hdr_pack(uint8_t *b, unsigned op, uint32_t klen, uint32_t vlen) {
  put32(b, STORE_MAGIC);
  b[4] = STORE_VERSION, b[5] = 0;
  b[6] = (uint8_t)op, b[7] = 0;
  put32(b + 8, klen);
  put32(b + 12, vlen);
}

/* 0 when b is a well-formed header; else -1 with the reason in why. */
static int hdr_parse(const uint8_t *b, hdr_t *h, char *why, size_t whylen) {
  uint32_t magic = get32(b);
  unsigned version = b[4] | (unsigned)b[5] << 8;

  h->op = b[6] | (unsigned)b[7] << 8;
  h->klen = get32(b + 8);
  h->vlen = get32(b + 12);
  if (magic != STORE_MAGIC)
    snprintf(why, whylen, "bad magic 0x%08x", magic);
  else if (version != STORE_VERSION)
    snprintf(why, whylen, "unsupported version %u", version);
  else if (h->op == 0 || h->op >= OP_COUNT)
    snprintf(why, whylen, "unknown op %u", h->op);
  else if (h->klen < ops[h->op].key_min || h->klen > ops[h->op].key_max)
    snprintf(why, whylen, "%s with key length %u", ops[h->op].name, h->klen);
  else if (h->vlen > ops[h->op].val_max)
    snprintf(why, whylen, "%s with value length %u", ops[h->op].name, h->vlen);
  else
    return 0;
  return -1;
}

static void format_addr(char *buf, size_t cap, const char *host, int port) {
  snprintf(buf, cap, strchr(host, ':') ? "[%s]:%d" : "%s:%d", host, port);
}

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
  char peer[64];
  uint8_t hdr[STORE_HDR];
  size_t hdr_got;
  hdr_t h;
  uint8_t *body; /* key, then value, of the request being read */
  size_t body_got;
  uint8_t *out; /* the reply being written */
  size_t out_len, out_sent;
} conn_t;

struct baton__store_server {
  pthread_t thread;
  int lfd, wakefd;
  char addr[300];
  conn_t *conns;
  size_t nconns, capconns;
  struct pollfd *pfds; /* wakefd, lfd, then one per conn */
  entry_t *table[STORE_BUCKETS];
};

static entry_t **kv_slot(baton__store_server_t *srv, const uint8_t *key,
                         uint32_t klen) {
  uint32_t h = 2166136261u; /* FNV-1a */
  for (uint32_t i = 0; i < klen; i++)
    h = (h ^ key[i]) * 16777619u;
  entry_t **p = &srv->table[h % STORE_BUCKETS];
  while (*p && ((*p)->klen != klen || memcmp((*p)->data, key, klen) != 0))
    p = &(*p)->next;
  return p; /* the matching entry's link, or the chain's NULL end */
}

static entry_t *kv_put(baton__store_server_t *srv, const uint8_t *key,
                       uint32_t klen, const uint8_t *val, uint32_t vlen) {
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

static void conn_drop(baton__store_server_t *srv, conn_t *c, int warn,
                      const char *why) {
  if (warn)
    BATON_WARN(BOOT, "store %s: dropping client %s: %s", srv->addr, c->peer, why);
  else
    BATON_TRACE(BOOT, "store %s: client %s left: %s", srv->addr, c->peer, why);
  close(c->fd);
  free(c->body);
  free(c->out);
  c->body = c->out = NULL;
  c->dead = 1;
}

static void conn_write(baton__store_server_t *srv, conn_t *c) {
  while (c->out_sent < c->out_len) {
    ssize_t r = send(c->fd, c->out + c->out_sent, c->out_len - c->out_sent,
                     MSG_NOSIGNAL);
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

static void conn_reply(baton__store_server_t *srv, conn_t *c, unsigned op,
                       const uint8_t *val, uint32_t vlen) {
  c->out = malloc(STORE_HDR + (size_t)vlen);
  if (!c->out) {
    conn_drop(srv, c, 1, "out of memory for the reply");
    return;
  }
  hdr_pack(c->out, op, 0, vlen);
  if (vlen)
    memcpy(c->out + STORE_HDR, val, vlen);
  c->out_len = STORE_HDR + (size_t)vlen;
  c->out_sent = 0;
  conn_write(srv, c);
}

/* Answers every GET parked on e's key. */
static void wake_parked(baton__store_server_t *srv, const entry_t *e) {
  for (size_t i = 0; i < srv->nconns; i++) {
    conn_t *c = &srv->conns[i];
    if (c->dead || !c->parked || c->h.klen != e->klen ||
        memcmp(c->body, e->data, e->klen) != 0)
      continue;
    c->parked = 0;
    free(c->body);
    c->body = NULL;
    conn_reply(srv, c, OP_GET_VAL, e->data + e->klen, e->vlen);
  }
}

static void handle_request(baton__store_server_t *srv, conn_t *c) {
  const uint8_t *key = c->body;
  entry_t *e;

  c->hdr_got = c->body_got = 0;
  if (c->h.op == OP_GET) {
    e = *kv_slot(srv, key, c->h.klen);
    c->parked = (e == NULL); /* keeps body: wake_parked() needs the key */
    if (e)
      conn_reply(srv, c, OP_GET_VAL, e->data + e->klen, e->vlen);
  } else if ((e = kv_put(srv, key, c->h.klen, key + c->h.klen, c->h.vlen))) {
    conn_reply(srv, c, OP_SET_OK, NULL, 0);
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
static int request_hdr_check(conn_t *c, char *why, size_t whylen) {
  if (hdr_parse(c->hdr, &c->h, why, whylen) != 0)
    return -1;
  if (c->h.op == OP_SET || c->h.op == OP_GET)
    return 0;
  snprintf(why, whylen, "a client may not send %s", ops[c->h.op].name);
  return -1;
}

/* Reads one request, resuming wherever the last call stopped. */
static void conn_read(baton__store_server_t *srv, conn_t *c) {
  char why[128];
  for (;;) {
    int in_hdr = c->hdr_got < STORE_HDR;
    size_t total = in_hdr ? STORE_HDR : (size_t)c->h.klen + c->h.vlen;
    size_t got = in_hdr ? c->hdr_got : c->body_got;
    ssize_t r = recv(c->fd, in_hdr ? c->hdr + got : c->body + got,
                     total - got, 0);
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      return;
    if (r <= 0) {
      snprintf(why, sizeof why, "%s after %zu of %zu bytes of a %s",
               r < 0 ? strerror(errno) : "connection closed", got, total,
               in_hdr ? "header" : "body");
      conn_drop(srv, c, !(r == 0 && in_hdr && got == 0), why);
      return;
    }
    if (!in_hdr) {
      c->body_got += (size_t)r;
    } else if ((c->hdr_got += (size_t)r) == STORE_HDR) {
      if (request_hdr_check(c, why, sizeof why) != 0) {
        conn_drop(srv, c, 1, why);
        return;
      }
      if (!(c->body = malloc((size_t)c->h.klen + c->h.vlen))) {
        conn_drop(srv, c, 1, "out of memory for the request");
        return;
      }
    }
    if (!in_hdr && c->body_got == total) {
      handle_request(srv, c);
      return;
    }
  }
}

static int conns_grow(baton__store_server_t *srv) {
  if (srv->nconns < srv->capconns)
    return 0;
  size_t cap = srv->capconns ? 2 * srv->capconns : 16;
  if (cap > STORE_MAX_CONNS)
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

static void accept_all(baton__store_server_t *srv) {
  for (;;) {
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    char host[NI_MAXHOST] = "?", serv[NI_MAXSERV] = "?";
    int fd = accept4(srv->lfd, (struct sockaddr *)&ss, &sl,
                     SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0 && (errno == EINTR || errno == ECONNABORTED))
      continue;
    if (fd < 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK)
        BATON_WARN(BOOT, "store %s: accept: %s", srv->addr, strerror(errno));
      return;
    }
    if (conns_grow(srv) != 0) {
      BATON_WARN(BOOT, "store %s: refusing a client: too many clients or out of memory", srv->addr);
      close(fd);
      continue;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    getnameinfo((struct sockaddr *)&ss, sl, host, sizeof host, serv,
                sizeof serv, NI_NUMERICHOST | NI_NUMERICSERV);
    conn_t *c = &srv->conns[srv->nconns++];
    memset(c, 0, sizeof *c);
    c->fd = fd;
    format_addr(c->peer, sizeof c->peer, host, atoi(serv));
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

static void *serve_loop(void *arg) {
  baton__store_server_t *srv = arg;
  for (;;) {
    srv->pfds[0] = (struct pollfd){.fd = srv->wakefd, .events = POLLIN};
    srv->pfds[1] = (struct pollfd){.fd = srv->lfd, .events = POLLIN};
    for (size_t i = 0; i < srv->nconns; i++)
      srv->pfds[2 + i] = (struct pollfd){.fd = srv->conns[i].fd,
                                         .events = conn_events(&srv->conns[i])};
    if (poll(srv->pfds, 2 + srv->nconns, -1) < 0) {
      if (errno == EINTR)
        continue;
      BATON_WARN(BOOT, "store %s: poll: %s; the store stops serving", srv->addr, strerror(errno));
      return NULL;
    }
    if (srv->pfds[0].revents)
      return NULL;
    for (size_t i = 0; i < srv->nconns; i++)
      if (srv->pfds[2 + i].revents)
        conn_service(srv, &srv->conns[i], srv->pfds[2 + i].revents);
    for (size_t i = 0; i < srv->nconns;) /* forget the dropped ones */
      if (srv->conns[i].dead)
        srv->conns[i] = srv->conns[--srv->nconns];
      else
        i++;
    if (srv->pfds[1].revents)
      accept_all(srv);
  }
}

static int listen_on(baton__store_server_t *srv, const char *host, int port,
                     char *err, size_t errlen) {
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                           .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
  struct addrinfo *res, *ai;
  char portstr[16];
  int one = 1, saved = 0;

  snprintf(portstr, sizeof portstr, "%d", port);
  int rc = getaddrinfo(*host ? host : NULL, portstr, &hints, &res);
  if (rc != 0) {
    snprintf(err, errlen, "store: cannot resolve the listen address %s: %s", srv->addr, gai_strerror(rc));
    return BATON_EUSAGE;
  }
  for (ai = res; ai; ai = ai->ai_next) {
    srv->lfd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (srv->lfd >= 0 &&
        setsockopt(srv->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0 &&
        bind(srv->lfd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(srv->lfd, 1024) == 0)
      break;
    saved = errno;
    if (srv->lfd >= 0)
      close(srv->lfd);
    srv->lfd = -1;
  }
  freeaddrinfo(res);
  if (srv->lfd < 0) {
    snprintf(err, errlen, "store: cannot listen on %s: %s", srv->addr, strerror(saved));
    return BATON_ESYS;
  }
  return BATON_OK;
}

static void server_free(baton__store_server_t *srv) {
  for (size_t i = 0; i < srv->nconns; i++)
    if (!srv->conns[i].dead)
      conn_drop(srv, &srv->conns[i], 0, "the store stops");
  for (size_t b = 0; b < STORE_BUCKETS; b++)
    for (entry_t *e = srv->table[b], *next; e; e = next)
      next = e->next, free(e);
  free(srv->conns);
  free(srv->pfds);
  free(srv);
}

int baton__store_serve(const char *host, int port,
                       baton__store_server_t **out, char *err, size_t errlen) {
  baton__store_server_t *srv;
  int rc;

  *out = NULL;
  if (!host || port < 0 || port > 65535) {
    snprintf(err, errlen, "store: bad listen address (port %d)", port);
    return BATON_EINVAL;
  }
  if (!(srv = calloc(1, sizeof *srv)) || !(srv->pfds = malloc(2 * sizeof *srv->pfds))) {
    rc = BATON_ENOMEM;
    snprintf(err, errlen, "store: out of memory");
    goto fail_alloc;
  }
  format_addr(srv->addr, sizeof srv->addr, *host ? host : "*", port);
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
  BATON_INFO(BOOT, "store: serving on %s", srv->addr);
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

void baton__store_stop(baton__store_server_t *srv) {
  uint64_t one = 1;

  if (!srv)
    return;
  if (write(srv->wakefd, &one, sizeof one) != sizeof one)
    BATON_WARN(BOOT, "store %s: cannot wake the server thread: %s", srv->addr, strerror(errno));
  pthread_join(srv->thread, NULL);
  close(srv->lfd);
  close(srv->wakefd);
  server_free(srv);
}

/* ------------------------------------------------------------ the client */

struct baton__store {
  int fd;
  int broken; /* a request failed half-way; the stream is out of step */
  double timeout_s;
  char addr[300];
};

/* One request in progress: what every error message names. */
typedef struct {
  baton__store_t *st;
  const char *what, *key;
  double timeout_s, deadline;
  char *err;
  size_t errlen;
} req_t;

static int req_fail(req_t *q, int rc, const char *why, const char *errtext) {
  snprintf(q->err, q->errlen, "store %s \"%s\" at %s: %s%s%s", q->what, q->key,
           q->st->addr, why, errtext ? ": " : "", errtext ? errtext : "");
  if (rc != BATON_EINVAL)
    q->st->broken = 1;
  return rc;
}

/* BATON_OK once fd is ready, BATON_ETIMEDOUT at the deadline, or BATON_ESYS
 * with errno set. */
static int wait_fd(int fd, short events, double deadline) {
  for (;;) { /* polls at least once, even when the deadline has passed */
    double left = deadline - baton__now();
    struct pollfd p = {.fd = fd, .events = events};
    int r = poll(&p, 1, left <= 0 ? 0 : left > 60 ? 60000 : (int)(left * 1000) + 1);
    if (r > 0)
      return BATON_OK;
    if (r < 0 && errno != EINTR)
      return BATON_ESYS;
    if (r == 0 && left <= 0)
      return BATON_ETIMEDOUT;
  }
}

/* Sends or receives exactly len bytes before the request's deadline. */
static int xfer(req_t *q, int sending, void *buf, size_t len) {
  char why[64];
  for (size_t done = 0; done < len;) {
    ssize_t r = sending ? send(q->st->fd, (char *)buf + done, len - done, MSG_NOSIGNAL)
                        : recv(q->st->fd, (char *)buf + done, len - done, 0);
    if (r > 0) {
      done += (size_t)r;
    } else if (r == 0) {
      return req_fail(q, BATON_EREMOTE, "the server closed the connection", NULL);
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      int rc = wait_fd(q->st->fd, sending ? POLLOUT : POLLIN, q->deadline);
      if (rc == BATON_ESYS)
        return req_fail(q, rc, "poll", strerror(errno));
      snprintf(why, sizeof why, "%s within %.1f s", sending ? "could not send" : "no reply", q->timeout_s);
      if (rc != BATON_OK)
        return req_fail(q, rc, why, NULL);
    } else if (errno != EINTR) {
      int remote = errno == ECONNRESET || errno == EPIPE;
      return req_fail(q, remote ? BATON_EREMOTE : BATON_ESYS, sending ? "send" : "recv", strerror(errno));
    }
  }
  return BATON_OK;
}

/* Sends op with q->key and val, then reads the header of the reply `want`. */
static int request(req_t *q, unsigned op, const void *val, uint32_t vlen,
                   unsigned want, hdr_t *rh) {
  uint8_t buf[STORE_HDR + STORE_KEY_MAX];
  size_t klen = strlen(q->key);
  char why[128];
  int rc;

  if (q->st->broken)
    return req_fail(q, BATON_EREMOTE, "the connection is unusable after an earlier failure", NULL);
  hdr_pack(buf, op, (uint32_t)klen, vlen);
  memcpy(buf + STORE_HDR, q->key, klen);
  if ((rc = xfer(q, 1, buf, STORE_HDR + klen)) != BATON_OK ||
      (vlen && (rc = xfer(q, 1, (void *)val, vlen)) != BATON_OK) ||
      (rc = xfer(q, 0, buf, STORE_HDR)) != BATON_OK)
    return rc;
  if (hdr_parse(buf, rh, why, sizeof why) != 0)
    return req_fail(q, BATON_EPROTO, "bad reply from the server", why);
  if (rh->op != want) {
    snprintf(why, sizeof why, "%s instead of %s", ops[rh->op].name, ops[want].name);
    return req_fail(q, BATON_EPROTO, "bad reply from the server", why);
  }
  return BATON_OK;
}

static int check_key(req_t *q, const void *val, size_t len, size_t max) {
  size_t klen = q->key ? strlen(q->key) : 0;
  if (!q->st || !q->key || klen == 0 || klen > STORE_KEY_MAX || len > max ||
      (len && !val)) {
    snprintf(q->err, q->errlen, "store %s: bad arguments (key length %zu, value length %zu)", q->what, klen, len);
    return BATON_EINVAL;
  }
  return BATON_OK;
}

int baton__store_set(baton__store_t *st, const char *key, const void *val,
                     size_t len, char *err, size_t errlen) {
  req_t q = {st, "set", key, st ? st->timeout_s : 0, 0, err, errlen};
  hdr_t rh;
  int rc = check_key(&q, val, len, STORE_VAL_MAX);
  if (rc != BATON_OK)
    return rc;
  q.deadline = baton__now() + q.timeout_s;
  return request(&q, OP_SET, val, (uint32_t)len, OP_SET_OK, &rh);
}

int baton__store_get(baton__store_t *st, const char *key, void *val,
                     size_t cap, size_t *len, double timeout_s, char *err,
                     size_t errlen) {
  req_t q = {st, "get", key, timeout_s, baton__now() + timeout_s, err, errlen};
  uint8_t scratch[4096];
  hdr_t rh;
  int rc = check_key(&q, val, cap, SIZE_MAX);
  if (rc != BATON_OK || (rc = request(&q, OP_GET, NULL, 0, OP_GET_VAL, &rh)) != BATON_OK)
    return rc;
  size_t keep = rh.vlen < cap ? rh.vlen : cap;
  if ((rc = xfer(&q, 0, val, keep)) != BATON_OK)
    return rc;
  for (size_t left = rh.vlen - keep, n; left > 0; left -= n) /* beyond cap */
    if ((rc = xfer(&q, 0, scratch, n = left < sizeof scratch ? left : sizeof scratch)) != BATON_OK)
      return rc;
  if (len)
    *len = rh.vlen;
  return BATON_OK;
}

/* One attempt on every address of host; an fd, or -1 with why filled in. */
static int connect_once(const char *host, int port, double deadline,
                        char *why, size_t whylen) {
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                           .ai_flags = AI_NUMERICSERV};
  struct addrinfo *res, *ai;
  char portstr[16];
  int fd = -1, one = 1, e = 0;
  socklen_t elen = sizeof e;

  snprintf(portstr, sizeof portstr, "%d", port);
  if ((e = getaddrinfo(host, portstr, &hints, &res)) != 0) {
    snprintf(why, whylen, "cannot resolve the host: %s", gai_strerror(e));
    return -1;
  }
  for (ai = res; ai && fd < 0; ai = ai->ai_next) {
    if ((fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol)) < 0)
      e = errno;
    else if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
      e = 0;
    else if (errno != EINPROGRESS)
      e = errno;
    else if (wait_fd(fd, POLLOUT, deadline) != BATON_OK)
      e = ETIMEDOUT;
    else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &elen) != 0)
      e = errno;
    if (e != 0 && fd >= 0)
      close(fd), fd = -1;
  }
  freeaddrinfo(res);
  if (fd < 0)
    snprintf(why, whylen, "%s", strerror(e));
  else
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

int baton__store_connect(const char *host, int port, double timeout_s,
                         baton__store_t **out, char *err, size_t errlen) {
  baton__store_t *st;
  double deadline = baton__now() + timeout_s, backoff = 0.01;
  char why[256] = "no attempt made";

  *out = NULL;
  if (!(st = calloc(1, sizeof *st))) {
    snprintf(err, errlen, "store: out of memory");
    return BATON_ENOMEM;
  }
  st->timeout_s = timeout_s;
  format_addr(st->addr, sizeof st->addr, host, port);
  while ((st->fd = connect_once(host, port, deadline, why, sizeof why)) < 0) {
    double left = deadline - baton__now();
    if (left <= 0)
      goto fail_connect;
    double nap = backoff < left ? backoff : left;
    struct timespec ts = {(time_t)nap, (long)((nap - (time_t)nap) * 1e9)};
    nanosleep(&ts, NULL);
    backoff = backoff * 2 < 0.1 ? backoff * 2 : 0.1;
  }
  BATON_TRACE(BOOT, "store: connected to %s", st->addr);
  *out = st;
  return BATON_OK;

fail_connect:
  snprintf(err, errlen, "store: cannot connect to %s within %.1f s: %s", st->addr, timeout_s, why);
  free(st);
  return BATON_ETIMEDOUT;
}

void baton__store_close(baton__store_t *st) {
  if (!st)
    return;
  close(st->fd);
  free(st);
}

/* ---------------------------------------------------------- host:port */

static int hostport_fail(char *err, size_t errlen, const char *what,
                         const char *s, const char *why) {
  snprintf(err, errlen, "%s=\"%s\": %s (want host:port or [ipv6]:port)", what, s, why);
  return BATON_EUSAGE;
}

int baton__parse_hostport(const char *s, const char *what, char *host,
                          size_t hostcap, int *port, char *err, size_t errlen) {
  const char *h = s, *colon, *p;
  long v = 0;

  if (!s || !*s)
    return hostport_fail(err, errlen, what, s ? s : "", "not set");
  if (s[0] == '[') {
    h = s + 1;
    colon = strchr(h, ']');
    if (!colon || colon[1] != ':')
      return hostport_fail(err, errlen, what, s, "no \"]:port\" after the IPv6 address");
    colon++;
  } else if (!(colon = strrchr(s, ':'))) {
    return hostport_fail(err, errlen, what, s, "no \":port\"");
  } else if (memchr(s, ':', (size_t)(colon - s))) {
    return hostport_fail(err, errlen, what, s, "an IPv6 address needs brackets");
  }
  size_t hlen = (size_t)(colon - h) - (s[0] == '[');
  if (hlen == 0 || hlen >= hostcap)
    return hostport_fail(err, errlen, what, s, hlen ? "host name too long" : "empty host");
  for (p = colon + 1; *p >= '0' && *p <= '9' && v <= 65535; p++)
    v = v * 10 + (*p - '0');
  if (p == colon + 1 || *p || v < 1 || v > 65535)
    return hostport_fail(err, errlen, what, s, "port is not a number in 1..65535");
  memcpy(host, h, hlen);
  host[hlen] = '\0';
  *port = (int)v;
  return BATON_OK;
}
