/*
 * store.c - the rendezvous store's wire format helpers and the client every
 * rank uses; the server is in store_server.c and the format in store.h.
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
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "auth.h"
#include "internal.h"
#include "store.h"

/* ------------------------------------------------------- the wire format */

const baton__store_op_t baton__store_ops[BATON__OP_COUNT] = {
    [BATON__OP_SET] = {"SET", 1, BATON__STORE_KEY_MAX, BATON__STORE_VAL_MAX},
    [BATON__OP_GET] = {"GET", 1, BATON__STORE_KEY_MAX, 0},
    [BATON__OP_SET_OK] = {"SET_OK", 0, 0, 0},
    [BATON__OP_GET_VAL] = {"GET_VAL", 0, 0, BATON__STORE_VAL_MAX},
};

static void put32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8);
  p[2] = (uint8_t)(v >> 16), p[3] = (uint8_t)(v >> 24);
}

static uint32_t get32(const uint8_t *p) {
  return p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

void baton__store_hdr_pack(uint8_t *b, unsigned op, uint32_t klen, uint32_t vlen) {
  put32(b, BATON__STORE_MAGIC);
  b[4] = BATON__STORE_VERSION, b[5] = 0;
  b[6] = (uint8_t)op, b[7] = 0;
  put32(b + 8, klen);
  put32(b + 12, vlen);
}

/* 0 when b is a well-formed header; else -1 with the reason in why. */
int baton__store_hdr_parse(const uint8_t *b, baton__store_hdr_t *h, char *why, size_t whylen) {
  uint32_t magic = get32(b);
  unsigned version = b[4] | (unsigned)b[5] << 8;

  h->op = b[6] | (unsigned)b[7] << 8;
  h->klen = get32(b + 8);
  h->vlen = get32(b + 12);
  if (magic != BATON__STORE_MAGIC)
    snprintf(why, whylen, "bad magic 0x%08x", magic);
  else if (version != BATON__STORE_VERSION)
    snprintf(why, whylen, "unsupported version %u", version);
  else if (h->op == 0 || h->op >= BATON__OP_COUNT)
    snprintf(why, whylen, "unknown op %u", h->op);
  else if (h->klen < baton__store_ops[h->op].key_min || h->klen > baton__store_ops[h->op].key_max)
    snprintf(why, whylen, "%s with key length %u", baton__store_ops[h->op].name, h->klen);
  else if (h->vlen > baton__store_ops[h->op].val_max)
    snprintf(why, whylen, "%s with value length %u", baton__store_ops[h->op].name, h->vlen);
  else
    return 0;
  return -1;
}

void baton__store_format_addr(char *buf, size_t cap, const char *host, int port) {
  snprintf(buf, cap, strchr(host, ':') ? "[%s]:%d" : "%s:%d", host, port);
}

/* ------------------------------------------------------------ the client */

/* A caller's key-value store (baton_comm_init_kv), shared by the client of
 * a communicator and the clients of those split from it. Their calls go
 * through it one at a time: the caller's store need not be thread-safe. */
typedef struct {
  baton_kv_t kv;
  pthread_mutex_t mu;
  _Atomic int refs;
  char base[32]; /* before every key: which baton_comm_init_kv of this kv */
} kv_family_t;

struct baton__store {
  kv_family_t *kv; /* NULL: baton's own store over fd */
  int fd;
  int broken; /* a request failed half-way; the stream is out of step */
  double timeout_s;
  char addr[300];
  /* What it takes to open another client of the same store (a child
   * communicator's): where it is and the secret it wants. */
  char host[256];
  int port;
  baton__secret_t secret;
  char prefix[BATON__STORE_PREFIX_MAX + 1]; /* put before every key */
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
  snprintf(q->err, q->errlen, "store %s \"%s\" at %s: %s%s%s", q->what, q->key, q->st->addr, why,
           errtext ? ": " : "", errtext ? errtext : "");
  if (rc != BATON_EINVAL)
    q->st->broken = 1;
  return rc;
}

int baton__wait_fd(int fd, short events, double deadline) {
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
      int rc = baton__wait_fd(q->st->fd, sending ? POLLOUT : POLLIN, q->deadline);
      if (rc == BATON_ESYS)
        return req_fail(q, rc, "poll", strerror(errno));
      snprintf(why, sizeof why, "%s within %.1f s", sending ? "could not send" : "no reply",
               q->timeout_s);
      if (rc != BATON_OK)
        return req_fail(q, rc, why, NULL);
    } else if (errno != EINTR) {
      int remote = errno == ECONNRESET || errno == EPIPE;
      return req_fail(q, remote ? BATON_EREMOTE : BATON_ESYS, sending ? "send" : "recv",
                      strerror(errno));
    }
  }
  return BATON_OK;
}

/* The store turned us away with a handshake RESULT instead of a reply. */
static int refused(req_t *q, const uint8_t *b) {
  int status = baton__auth_result_status(b);
  if (status < 0)
    return 0;
  return req_fail(q, BATON_EAUTH, "the store turned this process away",
                  status == BATON__AUTH_SECRET_REQUIRED
                      ? "it requires the job's secret and BATON_SECRET is not set here"
                      : baton__auth_status_text((unsigned)status));
}

/* After a failed send: the store may have said why before it hung up. */
static int send_failed(req_t *q, int rc) {
  uint8_t b[BATON__STORE_HDR];
  if (rc == BATON_EREMOTE && recv(q->st->fd, b, sizeof b, MSG_DONTWAIT) == BATON__STORE_HDR)
    return refused(q, b) ? BATON_EAUTH : rc;
  return rc;
}

/* Sends op with q->key and val, then reads the header of the reply `want`. */
static int request(req_t *q, unsigned op, const void *val, uint32_t vlen, unsigned want,
                   baton__store_hdr_t *rh) {
  uint8_t buf[BATON__STORE_HDR + BATON__STORE_KEY_MAX];
  size_t plen = strlen(q->st->prefix), klen = strlen(q->key);
  char why[128];
  int rc;

  if (q->st->broken)
    return req_fail(q, BATON_EREMOTE, "the connection is unusable after an earlier failure", NULL);
  baton__store_hdr_pack(buf, op, (uint32_t)(plen + klen), vlen);
  memcpy(buf + BATON__STORE_HDR, q->st->prefix, plen);
  memcpy(buf + BATON__STORE_HDR + plen, q->key, klen);
  if ((rc = xfer(q, 1, buf, BATON__STORE_HDR + plen + klen)) != BATON_OK ||
      (vlen && (rc = xfer(q, 1, (void *)val, vlen)) != BATON_OK))
    return send_failed(q, rc);
  if ((rc = xfer(q, 0, buf, BATON__STORE_HDR)) != BATON_OK)
    return rc;
  if (baton__store_hdr_parse(buf, rh, why, sizeof why) != 0)
    return refused(q, buf) ? BATON_EAUTH
                           : req_fail(q, BATON_EPROTO, "bad reply from the server", why);
  if (rh->op != want) {
    snprintf(why, sizeof why, "%s instead of %s", baton__store_ops[rh->op].name,
             baton__store_ops[want].name);
    return req_fail(q, BATON_EPROTO, "bad reply from the server", why);
  }
  return BATON_OK;
}

static int check_key(req_t *q, const void *val, size_t len, size_t max) {
  size_t klen = q->key ? strlen(q->key) : 0;
  if (q->st)
    klen += strlen(q->st->prefix);
  if (!q->st || !q->key || !q->key[0] || klen > BATON__STORE_KEY_MAX || len > max ||
      (len && !val)) {
    snprintf(q->err, q->errlen, "store %s: bad arguments (key length %zu, value length %zu)",
             q->what, klen, len);
    return BATON_EINVAL;
  }
  return BATON_OK;
}

/* The whole key the caller's store sees: family base, prefix, key. */
static int kv_key(req_t *q, char *full, size_t cap) {
  int n = snprintf(full, cap, "%s%s%s", q->st->kv->base, q->st->prefix, q->key);
  if (n < 0 || (size_t)n >= cap) {
    snprintf(q->err, q->errlen, "store %s \"%s\": the key is longer than %zu bytes", q->what,
             q->key, cap - 1);
    return BATON_EINVAL;
  }
  return BATON_OK;
}

/* A set or get through the caller's store (val/cap/len for a get). */
static int kv_request(req_t *q, const void *val, size_t vlen, void *out, size_t cap, size_t *len) {
  char full[BATON__STORE_KEY_MAX + 1];
  kv_family_t *f = q->st->kv;
  int rc = kv_key(q, full, sizeof full), r;
  if (rc != BATON_OK)
    return rc;
  pthread_mutex_lock(&f->mu);
  r = out ? f->kv.get(f->kv.ctx, full, out, cap, len, q->timeout_s)
          : f->kv.set(f->kv.ctx, full, val, vlen);
  pthread_mutex_unlock(&f->mu);
  if (r == 0)
    return BATON_OK;
  if (out)
    snprintf(q->err, q->errlen,
             "store get \"%s\" through the caller's key-value store: no value within %.1f s "
             "(its get returned %d)",
             full, q->timeout_s, r);
  else
    snprintf(q->err, q->errlen,
             "store set \"%s\" through the caller's key-value store: its set returned %d", full, r);
  return out ? BATON_ETIMEDOUT : BATON_ESYS;
}

int baton__store_set(baton__store_t *st, const char *key, const void *val, size_t len, char *err,
                     size_t errlen) {
  req_t q = {st, "set", key, st ? st->timeout_s : 0, 0, err, errlen};
  baton__store_hdr_t rh;
  int rc = check_key(&q, val, len, BATON__STORE_VAL_MAX);
  if (rc != BATON_OK)
    return rc;
  if (st->kv)
    return kv_request(&q, val, len, NULL, 0, NULL);
  q.deadline = baton__now() + q.timeout_s;
  return request(&q, BATON__OP_SET, val, (uint32_t)len, BATON__OP_SET_OK, &rh);
}

int baton__store_get(baton__store_t *st, const char *key, void *val, size_t cap, size_t *len,
                     double timeout_s, char *err, size_t errlen) {
  req_t q = {st, "get", key, timeout_s, baton__now() + timeout_s, err, errlen};
  uint8_t scratch[4096];
  baton__store_hdr_t rh;
  int rc = check_key(&q, val, cap, SIZE_MAX);
  if (rc == BATON_OK && st->kv) {
    size_t got = 0;
    rc = kv_request(&q, NULL, 0, val, cap, &got);
    if (rc == BATON_OK && len)
      *len = got;
    return rc;
  }
  if (rc != BATON_OK ||
      (rc = request(&q, BATON__OP_GET, NULL, 0, BATON__OP_GET_VAL, &rh)) != BATON_OK)
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
static int connect_once(const char *host, int port, double deadline, char *why, size_t whylen) {
  struct addrinfo hints = {
      .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
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
    if ((fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                     ai->ai_protocol)) < 0)
      e = errno;
    else if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
      e = 0;
    else if (errno != EINPROGRESS)
      e = errno;
    else if (baton__wait_fd(fd, POLLOUT, deadline) != BATON_OK)
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
                         const baton__secret_t *secret, baton__store_t **out, char *err,
                         size_t errlen) {
  baton__store_t *st;
  double deadline = baton__now() + timeout_s, backoff = 0.01;
  char why[256] = "no attempt made", who[320];
  int rc;

  *out = NULL;
  if (!(st = calloc(1, sizeof *st))) {
    snprintf(err, errlen, "store: out of memory");
    return BATON_ENOMEM;
  }
  st->timeout_s = timeout_s;
  snprintf(st->host, sizeof st->host, "%s", host);
  st->port = port;
  if (secret)
    st->secret = *secret;
  baton__store_format_addr(st->addr, sizeof st->addr, host, port);
  while ((st->fd = connect_once(host, port, deadline, why, sizeof why)) < 0) {
    double left = deadline - baton__now();
    if (left <= 0)
      goto fail_connect;
    double nap = backoff < left ? backoff : left;
    struct timespec ts = {(time_t)nap, (long)((nap - (time_t)nap) * 1e9)};
    nanosleep(&ts, NULL);
    backoff = backoff * 2 < 0.1 ? backoff * 2 : 0.1;
  }
  baton__log_trace(BOOT, "store: connected to %s", st->addr);
  snprintf(who, sizeof who, "the store at %s", st->addr);
  if ((rc = baton__auth_client(st->fd, secret, who, baton__now() + timeout_s, err, errlen)) !=
      BATON_OK)
    goto fail_auth;
  *out = st;
  return BATON_OK;

fail_connect:
  snprintf(err, errlen, "store: cannot connect to %s within %.1f s: %s", st->addr, timeout_s, why);
  free(st);
  return BATON_ETIMEDOUT;
fail_auth:
  close(st->fd);
  free(st);
  return rc;
}

/* The nth baton_comm_init_kv of one ctx in this process keys its
 * communicator under "baton.n/", so that several may share one store. The
 * table of ctxs grows as needed: numbers must agree across ranks however
 * many stores a process has used. */
static unsigned kv_serial(void *ctx) {
  static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  static struct seen {
    void *ctx;
    unsigned n;
  } * seen;
  static size_t nseen, cap;
  unsigned n = 0;
  size_t i;
  pthread_mutex_lock(&mu);
  for (i = 0; i < nseen && seen[i].ctx != ctx; i++)
    ;
  if (i < nseen) {
    n = ++seen[i].n;
  } else {
    if (nseen == cap) {
      size_t grown = cap ? 2 * cap : 16;
      struct seen *more = realloc(seen, grown * sizeof *seen);
      if (!more) {
        pthread_mutex_unlock(&mu);
        return UINT32_MAX; /* out of memory: the caller says so */
      }
      seen = more, cap = grown;
    }
    seen[nseen].ctx = ctx, seen[nseen++].n = 0;
  }
  pthread_mutex_unlock(&mu);
  return n;
}

int baton__store_connect_kv(const baton_kv_t *kv, const char *host, double timeout_s,
                            baton__store_t **out, char *err, size_t errlen) {
  baton__store_t *st = calloc(1, sizeof *st);
  kv_family_t *f = calloc(1, sizeof *f);
  *out = NULL;
  if (!st || !f) {
    free(st), free(f);
    snprintf(err, errlen, "store: out of memory");
    return BATON_ENOMEM;
  }
  unsigned serial = kv_serial(kv->ctx);
  if (serial == UINT32_MAX) {
    free(st), free(f);
    snprintf(err, errlen, "store: out of memory");
    return BATON_ENOMEM;
  }
  f->kv = *kv;
  pthread_mutex_init(&f->mu, NULL);
  atomic_init(&f->refs, 1);
  snprintf(f->base, sizeof f->base, "baton.%u/", serial);
  st->kv = f;
  st->fd = -1;
  st->timeout_s = timeout_s;
  snprintf(st->host, sizeof st->host, "%s", host);
  snprintf(st->addr, sizeof st->addr, "the caller's key-value store");
  *out = st;
  return BATON_OK;
}

int baton__store_open_child(const baton__store_t *parent, const char *prefix, baton__store_t **out,
                            char *err, size_t errlen) {
  if (strlen(prefix) > BATON__STORE_PREFIX_MAX) {
    *out = NULL;
    snprintf(err, errlen, "store: key prefix \"%s\" is longer than %d bytes", prefix,
             BATON__STORE_PREFIX_MAX);
    return BATON_EINVAL;
  }
  if (parent->kv) {
    baton__store_t *st = calloc(1, sizeof *st);
    *out = st;
    if (!st) {
      snprintf(err, errlen, "store: out of memory");
      return BATON_ENOMEM;
    }
    *st = *parent;
    atomic_fetch_add(&st->kv->refs, 1);
    snprintf(st->prefix, sizeof st->prefix, "%s", prefix);
    return BATON_OK;
  }
  int rc = baton__store_connect(parent->host, parent->port, parent->timeout_s, &parent->secret, out,
                                err, errlen);
  if (rc == BATON_OK)
    snprintf((*out)->prefix, sizeof(*out)->prefix, "%s", prefix);
  return rc;
}

const char *baton__store_host(const baton__store_t *st) { return st->host; }

void baton__store_close(baton__store_t *st) {
  if (!st)
    return;
  if (st->kv && atomic_fetch_sub(&st->kv->refs, 1) == 1) {
    pthread_mutex_destroy(&st->kv->mu);
    free(st->kv);
  }
  if (st->fd >= 0)
    close(st->fd);
  free(st);
}

/* ---------------------------------------------------------- host:port */

static int hostport_fail(char *err, size_t errlen, const char *what, const char *s,
                         const char *why) {
  snprintf(err, errlen, "%s=\"%s\": %s (want host:port or [ipv6]:port)", what, s, why);
  return BATON_EUSAGE;
}

int baton__parse_hostport(const char *s, const char *what, char *host, size_t hostcap, int *port,
                          char *err, size_t errlen) {
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
