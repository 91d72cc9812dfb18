/*
 * test_store.c - the rendezvous store: round trips from many threads, parked
 * gets, timeouts, empty and 1 MiB values, clients that send garbage (the
 * server must drop them and keep serving the others), a fake server that
 * replies garbage (the client must say EPROTO), and host:port parsing.
 * Everything that talks to a store runs twice: without a secret, and with
 * one, where every client (the raw ones too) first passes the handshake.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "unit.h"

/* The secret of the pass that runs now; len 0 in the first. */
static baton__secret_t secret;

static baton__store_t *must_connect(int port) {
  char err[BATON__ERRLEN] = "";
  baton__store_t *st = NULL;
  int rc = baton__store_connect(LOOP, port, 5.0, &secret, &st, err, sizeof err);
  EXPECT_RC(rc, BATON_OK, err);
  if (!st) {
    fprintf(stderr, "cannot go on without a store connection\n");
    exit(1);
  }
  return st;
}

/* Sets key=val on a fresh connection and reads it back from another. */
static void check_round_trip(int port, const char *key, const char *val) {
  char err[BATON__ERRLEN] = "", buf[64] = "";
  size_t len = 0;
  baton__store_t *a = must_connect(port), *b = must_connect(port);
  EXPECT_RC(baton__store_set(a, key, val, strlen(val), err, sizeof err), BATON_OK, err);
  EXPECT_RC(baton__store_get(b, key, buf, sizeof buf, &len, 5.0, err, sizeof err), BATON_OK, err);
  EXPECT(len == strlen(val) && memcmp(buf, val, len) == 0, "get %s: got \"%.*s\", want \"%s\"", key,
         (int)len, buf, val);
  baton__store_close(a);
  baton__store_close(b);
}

/* --------------------------------------------------------- many threads */

enum { NTHREADS = 8, NKEYS = 40 };
typedef struct {
  int port, id;
} worker_arg_t;

/* Sets its own keys, then gets every other worker's keys: most of those gets
 * are parked on the server until the other thread catches up. */
static void *worker(void *p) {
  worker_arg_t *w = p;
  char err[BATON__ERRLEN] = "", key[32], val[32], buf[32];
  size_t len;
  baton__store_t *st = must_connect(w->port);
  for (int k = 0; k < NKEYS; k++) {
    snprintf(key, sizeof key, "w%d/k%d", w->id, k);
    snprintf(val, sizeof val, "v%d.%d", w->id, k);
    EXPECT_RC(baton__store_set(st, key, val, strlen(val), err, sizeof err), BATON_OK, err);
  }
  for (int t = 0; t < NTHREADS; t++)
    for (int k = NKEYS - 1; k >= 0; k--) {
      snprintf(key, sizeof key, "w%d/k%d", t, k);
      snprintf(val, sizeof val, "v%d.%d", t, k);
      len = 0;
      int rc = baton__store_get(st, key, buf, sizeof buf, &len, 10.0, err, sizeof err);
      EXPECT_RC(rc, BATON_OK, err);
      EXPECT(len == strlen(val) && memcmp(buf, val, len) == 0,
             "worker %d get %s: got \"%.*s\", want \"%s\"", w->id, key, (int)len, buf, val);
    }
  baton__store_close(st);
  return NULL;
}

static void test_threads(int port) {
  pthread_t th[NTHREADS];
  worker_arg_t args[NTHREADS];
  for (int i = 0; i < NTHREADS; i++) {
    args[i] = (worker_arg_t){port, i};
    pthread_create(&th[i], NULL, worker, &args[i]);
  }
  for (int i = 0; i < NTHREADS; i++)
    pthread_join(th[i], NULL);
}

/* Many connections at once, each setting one key and reading its neighbour's. */
static void test_many_clients(int port) {
  enum { N = 300 };
  static baton__store_t *st[N];
  char err[BATON__ERRLEN] = "", key[16], buf[16];
  size_t len;
  for (int i = 0; i < N; i++) {
    st[i] = must_connect(port);
    snprintf(key, sizeof key, "m%d", i);
    EXPECT_RC(baton__store_set(st[i], key, key, strlen(key), err, sizeof err), BATON_OK, err);
  }
  for (int i = 0; i < N; i++) {
    snprintf(key, sizeof key, "m%d", (i + 1) % N);
    len = 0;
    EXPECT_RC(baton__store_get(st[i], key, buf, sizeof buf, &len, 5.0, err, sizeof err), BATON_OK,
              err);
    EXPECT(len == strlen(key) && memcmp(buf, key, len) == 0, "client %d get %s: got \"%.*s\"", i,
           key, (int)len, buf);
  }
  for (int i = 0; i < N; i++)
    baton__store_close(st[i]);
}

/* ------------------------------------------------- waiting and timeouts */

typedef struct {
  int port;
  const char *key;
  double timeout_s;
  int rc;
  size_t len;
  char val[64], err[BATON__ERRLEN];
} getter_t;

static void *getter(void *p) {
  getter_t *g = p;
  baton__store_t *st = must_connect(g->port);
  g->rc = baton__store_get(st, g->key, g->val, sizeof g->val, &g->len, g->timeout_s, g->err,
                           sizeof g->err);
  baton__store_close(st);
  return NULL;
}

static void test_wait_and_timeout(int port) {
  char err[BATON__ERRLEN] = "", buf[8];
  size_t len;
  getter_t g = {.port = port, .key = "late", .timeout_s = 5.0};
  pthread_t th;
  baton__store_t *st = must_connect(port);

  double t0 = baton__now();
  pthread_create(&th, NULL, getter, &g);
  nap(0.3);
  EXPECT_RC(baton__store_set(st, "late", "here", 4, err, sizeof err), BATON_OK, err);
  pthread_join(th, NULL);
  double waited = baton__now() - t0;
  EXPECT_RC(g.rc, BATON_OK, g.err);
  EXPECT(g.len == 4 && memcmp(g.val, "here", 4) == 0, "late get: got \"%.*s\", want \"here\"",
         (int)g.len, g.val);
  EXPECT(waited >= 0.25 && waited < 3.0, "late get returned after %.3f s, want about 0.3 s",
         waited);

  t0 = baton__now();
  int rc = baton__store_get(st, "never", buf, sizeof buf, &len, 0.3, err, sizeof err);
  waited = baton__now() - t0;
  EXPECT_RC(rc, BATON_ETIMEDOUT, err);
  EXPECT(waited >= 0.29 && waited < 1.5, "get of a missing key timed out after %.3f s, want 0.3 s",
         waited);
  EXPECT(strstr(err, "never") && strstr(err, LOOP),
         "timeout text names the key and address: \"%s\"", err);
  rc = baton__store_set(st, "after", "x", 1, err, sizeof err);
  EXPECT(rc != BATON_OK, "a handle that timed out mid-request must refuse further requests, got %s",
         baton_err_name(rc));
  baton__store_close(st);
}

/* ------------------------------------------------------ value sizes */

static void test_sizes(int port) {
  char err[BATON__ERRLEN] = "", small[4] = "zzz";
  size_t len = 99, mib = (size_t)1 << 20;
  unsigned char *big = malloc(mib + 1), *back = malloc(mib);
  baton__store_t *st = must_connect(port);

  EXPECT_RC(baton__store_set(st, "empty", NULL, 0, err, sizeof err), BATON_OK, err);
  EXPECT_RC(baton__store_get(st, "empty", small, sizeof small, &len, 1.0, err, sizeof err),
            BATON_OK, err);
  EXPECT_EQ(len, 0);
  for (size_t i = 0; i <= mib; i++)
    big[i] = (unsigned char)(i * 131 + (i >> 11));
  EXPECT_RC(baton__store_set(st, "big", big, mib, err, sizeof err), BATON_OK, err);
  EXPECT_RC(baton__store_get(st, "big", back, mib, &len, 5.0, err, sizeof err), BATON_OK, err);
  EXPECT_EQ(len, mib);
  EXPECT(memcmp(big, back, mib) == 0, "1 MiB value differs after a round trip");
  /* A small buffer gets the prefix and the full length; the stream stays in step. */
  EXPECT_RC(baton__store_get(st, "big", small, sizeof small, &len, 5.0, err, sizeof err), BATON_OK,
            err);
  EXPECT(len == mib && memcmp(small, big, sizeof small) == 0, "truncated get: len %zu, want %zu",
         len, mib);
  EXPECT_RC(baton__store_set(st, "huge", big, mib + 1, err, sizeof err), BATON_EINVAL, err);
  EXPECT_RC(baton__store_set(st, "", "x", 1, err, sizeof err), BATON_EINVAL, err);
  char longkey[300];
  memset(longkey, 'k', sizeof longkey - 1);
  longkey[sizeof longkey - 1] = '\0';
  EXPECT_RC(baton__store_set(st, longkey, "x", 1, err, sizeof err), BATON_EINVAL, err);
  longkey[255] = '\0';
  EXPECT_RC(baton__store_set(st, longkey, "x", 1, err, sizeof err), BATON_OK, err);
  EXPECT_RC(baton__store_set(st, "empty", "now", 3, err, sizeof err), BATON_OK,
            err); /* overwrite */
  EXPECT_RC(baton__store_get(st, "empty", small, sizeof small, &len, 1.0, err, sizeof err),
            BATON_OK, err);
  EXPECT(len == 3 && memcmp(small, "now", 3) == 0, "overwritten value: got \"%.*s\", want \"now\"",
         (int)len, small);
  baton__store_close(st);
  free(big);
  free(back);
}

/* --------------------------------------------------------- bad clients */

static int raw_connect(int port) {
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
    perror("raw_connect");
    exit(2);
  }
  struct timeval tv = {3, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char err[BATON__ERRLEN] = "";
  EXPECT_RC(baton__auth_client(fd, &secret, "the test's store", baton__now() + 5, err, sizeof err),
            BATON_OK, err);
  return fd;
}

static void le32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++)
    p[i] = (unsigned char)(v >> (8 * i));
}

static void frame(unsigned char *h, uint32_t magic, unsigned ver, unsigned op, uint32_t klen,
                  uint32_t vlen) {
  le32(h, magic);
  h[4] = (unsigned char)ver, h[5] = 0, h[6] = (unsigned char)op, h[7] = 0;
  le32(h + 8, klen);
  le32(h + 12, vlen);
}

#define MAGIC 0x52535442u

/* Sends bytes and expects the server to hang up on us (EOF or a reset). */
static void expect_dropped(int port, const char *what, const void *bytes, size_t n) {
  char buf[64];
  int fd = raw_connect(port);
  EXPECT(send(fd, bytes, n, MSG_NOSIGNAL) == (ssize_t)n, "%s: send failed", what);
  ssize_t r = recv(fd, buf, sizeof buf, 0);
  EXPECT(r == 0 || (r < 0 && errno == ECONNRESET),
         "%s: want the server to drop us, recv gave %zd (%s)", what, r,
         r < 0 ? strerror(errno) : "data");
  close(fd);
}

static void test_bad_clients(int port) {
  unsigned char h[16 + 8];
  getter_t g = {.port = port, .key = "after-garbage", .timeout_s = 10.0};
  pthread_t th;
  pthread_create(&th, NULL, getter, &g); /* parked through all of this */

  expect_dropped(port, "garbage", "GET / HTTP/1.1\r\nHost: x\r\n\r\n", 27);
  frame(h, MAGIC, 1, 1, 100000, 1);
  expect_dropped(port, "huge key length", h, 16);
  frame(h, MAGIC, 1, 1, 3, 0xffffffffu);
  expect_dropped(port, "huge value length", h, 16);
  frame(h, MAGIC, 1, 9, 3, 0);
  expect_dropped(port, "unknown op", h, 16);
  frame(h, MAGIC, 1, 4, 0, 0);
  expect_dropped(port, "reply op from a client", h, 16);
  frame(h, MAGIC, 2, 2, 3, 0);
  expect_dropped(port, "bad version", h, 16);
  frame(h, MAGIC, 1, 2, 0, 0);
  expect_dropped(port, "empty key", h, 16);
  frame(h, MAGIC, 1, 2, 3, 5);
  expect_dropped(port, "GET with a value", h, 16);

  int fd = raw_connect(port); /* truncated: half a body, then gone */
  frame(h, MAGIC, 1, 1, 3, 100);
  memcpy(h + 16, "abc", 3);
  EXPECT(send(fd, h, 19, MSG_NOSIGNAL) == 19, "truncated frame: send failed");
  close(fd);
  fd = raw_connect(port); /* truncated header */
  EXPECT(send(fd, h, 7, MSG_NOSIGNAL) == 7, "truncated header: send failed");
  close(fd);

  /* Random headers with the right magic, a few random body bytes, then gone:
   * the server drops each client or waits for the rest of its frame. */
  unsigned seed = 12345;
  for (int i = 0; i < 200; i++) {
    unsigned char junk[16 + 64];
    for (size_t j = 0; j < sizeof junk; j++)
      junk[j] = (unsigned char)(rand_r(&seed) >> 7);
    frame(junk, MAGIC, 1 + (junk[4] % 2 == 0), junk[5] % 6,
          junk[6] % 2 ? junk[7] : (uint32_t)rand_r(&seed),
          junk[8] % 2 ? junk[9] : (uint32_t)rand_r(&seed));
    fd = raw_connect(port);
    size_t n = 16 + (size_t)(rand_r(&seed) % 65);
    ssize_t w = send(fd, junk, n, MSG_NOSIGNAL);
    (void)w;
    close(fd);
  }
  check_round_trip(port, "after", "fuzz");

  /* A well-formed GET dribbled one byte at a time is served normally. */
  char err[BATON__ERRLEN] = "";
  baton__store_t *st = must_connect(port);
  EXPECT_RC(baton__store_set(st, "abc", "slow", 4, err, sizeof err), BATON_OK, err);
  fd = raw_connect(port);
  frame(h, MAGIC, 1, 2, 3, 0);
  memcpy(h + 16, "abc", 3);
  for (int i = 0; i < 19; i++) {
    EXPECT(send(fd, h + i, 1, MSG_NOSIGNAL) == 1, "dribble: send failed at byte %d", i);
    nap(0.005);
  }
  unsigned char reply[20];
  size_t got = 0;
  for (ssize_t r = 1; got < sizeof reply && r > 0; got += r > 0 ? (size_t)r : 0)
    r = recv(fd, reply + got, sizeof reply - got, 0);
  frame(h, MAGIC, 1, 4, 0, 4);
  EXPECT(got == 20 && memcmp(reply, h, 16) == 0 && memcmp(reply + 16, "slow", 4) == 0,
         "dribbled GET: got %zu reply bytes, want a GET_VAL header and \"slow\"", got);
  close(fd);

  EXPECT_RC(baton__store_set(st, "after-garbage", "fine", 4, err, sizeof err), BATON_OK, err);
  pthread_join(th, NULL);
  EXPECT_RC(g.rc, BATON_OK, g.err);
  EXPECT(g.len == 4 && memcmp(g.val, "fine", 4) == 0,
         "parked get across garbage: got \"%.*s\", want \"fine\"", (int)g.len, g.val);
  baton__store_close(st);
  check_round_trip(port, "still", "serving");
}

/* ----------------------------------------------- a server that misbehaves */

typedef struct {
  int lfd;
  const void *reply;
  size_t n;
} fake_t;

/* Accepts one client, reads its request, writes `reply`, and hangs up. */
static void *fake_server(void *p) {
  fake_t *f = p;
  char buf[512];
  int fd = accept(f->lfd, NULL, NULL);
  if (fd < 0)
    return NULL;
  if (baton__auth_server(fd, &secret, "the test client", baton__now() + 5, buf, sizeof buf)) {
    close(fd);
    return NULL;
  }
  ssize_t r = recv(fd, buf, sizeof buf, 0);
  if (r > 0 && f->n)
    r = send(fd, f->reply, f->n, MSG_NOSIGNAL);
  close(fd);
  return NULL;
}

static void expect_client_rc(const char *what, const void *reply, size_t n, int want) {
  struct sockaddr_in sa = {.sin_family = AF_INET};
  socklen_t sl = sizeof sa;
  char err[BATON__ERRLEN] = "", buf[8];
  size_t len;
  fake_t f = {socket(AF_INET, SOCK_STREAM, 0), reply, n};
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(f.lfd, (struct sockaddr *)&sa, sizeof sa) || listen(f.lfd, 4) ||
      getsockname(f.lfd, (struct sockaddr *)&sa, &sl)) {
    perror("fake server");
    exit(2);
  }
  pthread_t th;
  pthread_create(&th, NULL, fake_server, &f);
  baton__store_t *st = must_connect(ntohs(sa.sin_port));
  int rc = baton__store_get(st, "key", buf, sizeof buf, &len, 3.0, err, sizeof err);
  EXPECT_RC(rc, want, err);
  EXPECT(err[0] != '\0', "%s: want an error text", what);
  printf("  %s -> %s: %s\n", what, baton_err_name(rc), err);
  baton__store_close(st);
  pthread_join(th, NULL);
  close(f.lfd);
}

static void test_bad_server(void) {
  unsigned char h[16];
  expect_client_rc("server hangs up", NULL, 0, BATON_EREMOTE);
  frame(h, 0xdeadbeefu, 1, 4, 0, 0);
  expect_client_rc("bad magic", h, 16, BATON_EPROTO);
  frame(h, MAGIC, 1, 3, 0, 0);
  expect_client_rc("wrong reply op", h, 16, BATON_EPROTO);
  frame(h, MAGIC, 1, 4, 0, 1u << 30);
  expect_client_rc("huge value length", h, 16, BATON_EPROTO);
  frame(h, MAGIC, 1, 4, 0, 10);
  expect_client_rc("truncated value", h, 16, BATON_EREMOTE);
}

/* ------------------------------------------------ connecting and stopping */

typedef struct {
  int port, rc;
  char err[BATON__ERRLEN];
} connector_t;

static void *connector(void *p) {
  connector_t *c = p;
  baton__store_t *st = NULL;
  c->rc = baton__store_connect(LOOP, c->port, 5.0, &secret, &st, c->err, sizeof c->err);
  if (st) {
    c->rc = baton__store_set(st, "early", "bird", 4, c->err, sizeof c->err);
    baton__store_close(st);
  }
  return NULL;
}

static void test_connect_and_stop(void) {
  char err[BATON__ERRLEN] = "", buf[8];
  size_t len;
  baton__store_server_t *srv = NULL;
  baton__store_t *st = NULL;
  connector_t c = {.port = free_port()};
  pthread_t th;

  pthread_create(&th, NULL, connector, &c); /* before anyone listens */
  nap(0.3);
  EXPECT_RC(baton__store_serve(LOOP, c.port, &secret, 5.0, &srv, err, sizeof err), BATON_OK, err);
  pthread_join(th, NULL);
  EXPECT_RC(c.rc, BATON_OK, c.err);

  /* Stopping with a parked get and an idle client must not hang. */
  getter_t g = {.port = c.port, .key = "never", .timeout_s = 5.0};
  pthread_create(&th, NULL, getter, &g);
  st = must_connect(c.port);
  nap(0.1);
  double t0 = baton__now();
  baton__store_stop(srv);
  pthread_join(th, NULL);
  EXPECT(baton__now() - t0 < 2.0, "stop took %.3f s", baton__now() - t0);
  EXPECT_RC(g.rc, BATON_EREMOTE, g.err);
  EXPECT_RC(baton__store_get(st, "early", buf, sizeof buf, &len, 1.0, err, sizeof err),
            BATON_EREMOTE, err);
  baton__store_close(st);

  t0 = baton__now(); /* nobody listens now */
  int rc = baton__store_connect(LOOP, c.port, 0.3, &secret, &st, err, sizeof err);
  double waited = baton__now() - t0;
  EXPECT_RC(rc, BATON_ETIMEDOUT, err);
  EXPECT(st == NULL, "a failed connect leaves *out NULL");
  EXPECT(waited >= 0.29 && waited < 1.5, "connect gave up after %.3f s, want 0.3 s", waited);
  EXPECT(strstr(err, "refused") != NULL, "connect error names the cause: \"%s\"", err);

  EXPECT_RC(baton__store_serve(LOOP, 70000, &secret, 5.0, &srv, err, sizeof err), BATON_EINVAL,
            err);
  EXPECT_RC(baton__store_serve(LOOP, c.port, NULL, 5.0, &srv, err, sizeof err), BATON_EINVAL, err);
  EXPECT_RC(baton__store_serve(LOOP, c.port, &secret, 0, &srv, err, sizeof err), BATON_EINVAL, err);
  EXPECT_RC(baton__store_serve("no.such.host.invalid", c.port, &secret, 5.0, &srv, err, sizeof err),
            BATON_EUSAGE, err);
}

static void test_ipv6(void) {
  char err[BATON__ERRLEN] = "";
  baton__store_server_t *srv = NULL;
  int port = free_port();
  if (baton__store_serve("::1", port, &secret, 5.0, &srv, err, sizeof err) != BATON_OK) {
    printf("SKIP: ipv6: %s\n", err);
    return;
  }
  baton__store_t *st = NULL;
  char buf[8];
  size_t len = 0;
  EXPECT_RC(baton__store_connect("::1", port, 2.0, &secret, &st, err, sizeof err), BATON_OK, err);
  if (st) {
    EXPECT_RC(baton__store_set(st, "six", "v6", 2, err, sizeof err), BATON_OK, err);
    EXPECT_RC(baton__store_get(st, "six", buf, sizeof buf, &len, 1.0, err, sizeof err), BATON_OK,
              err);
    EXPECT(len == 2 && memcmp(buf, "v6", 2) == 0, "ipv6 get: got \"%.*s\"", (int)len, buf);
    baton__store_close(st);
  }
  baton__store_stop(srv);
}

/* ------------------------------------------------------------ host:port */

static void expect_hostport(const char *s, int want_rc, const char *want_host, int want_port) {
  char host[32] = "", err[BATON__ERRLEN] = "";
  int port = -1;
  int rc = baton__parse_hostport(s, "BATON_ADDR", host, sizeof host, &port, err, sizeof err);
  EXPECT_RC(rc, want_rc, err);
  if (want_rc == BATON_OK)
    EXPECT(strcmp(host, want_host) == 0 && port == want_port,
           "parse \"%s\": got %s port %d, want %s port %d", s, host, port, want_host, want_port);
  else
    EXPECT(strstr(err, "BATON_ADDR") && strstr(err, s),
           "parse \"%s\": error text must name the variable and the value: \"%s\"", s, err);
}

static void test_hostport(void) {
  expect_hostport("127.0.0.1:29500", BATON_OK, "127.0.0.1", 29500);
  expect_hostport("node-7.cluster:1", BATON_OK, "node-7.cluster", 1);
  expect_hostport("[::1]:65535", BATON_OK, "::1", 65535);
  expect_hostport("[fe80::1%eth0]:80", BATON_OK, "fe80::1%eth0", 80);
  const char *bad[] = {"",
                       "host",
                       "host:",
                       ":80",
                       "host:0",
                       "host:65536",
                       "host:99999999999",
                       "host:-1",
                       "host:12a",
                       "host: 80",
                       "::1:80",
                       "[::1]80",
                       "[::1:80",
                       "[]:80",
                       "a-host-name-longer-than-32-bytes.example:80"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    expect_hostport(bad[i], BATON_EUSAGE, NULL, 0);
  char err[BATON__ERRLEN] = "", host[8];
  int port;
  EXPECT_RC(baton__parse_hostport(NULL, "BATON_ADDR", host, sizeof host, &port, err, sizeof err),
            BATON_EUSAGE, err);
  EXPECT(strstr(err, "BATON_ADDR") != NULL, "unset: \"%s\"", err);
}

/* Every test that talks to a store, with the secret of this pass. */
static int store_pass(void) {
  char err[BATON__ERRLEN] = "";
  baton__store_server_t *srv = NULL;
  int port = free_port();

  printf("pass with %s:\n", secret.len ? "a secret" : "no secret");
  int rc = baton__store_serve(LOOP, port, &secret, 5.0, &srv, err, sizeof err);
  EXPECT_RC(rc, BATON_OK, err);
  if (rc != BATON_OK)
    return 1;
  check_round_trip(port, "hello", "world");
  test_threads(port);
  test_many_clients(port);
  test_wait_and_timeout(port);
  test_sizes(port);
  printf("bad clients (the WARN lines below are expected):\n");
  fflush(stdout);
  test_bad_clients(port);
  baton__store_stop(srv);
  printf("bad servers:\n");
  test_bad_server();
  test_connect_and_stop();
  test_ipv6();
  return 0;
}

int main(void) {
  char err[BATON__ERRLEN] = "";
  test_hostport();
  if (store_pass() != 0)
    return 1;
  EXPECT_RC(baton__secret_set(&secret, "0123456789abcdef-test-secret", err, sizeof err), BATON_OK,
            err);
  if (store_pass() != 0)
    return 1;
  return unit_summary();
}
