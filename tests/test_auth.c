/*
 * test_auth.c - the handshake of src/auth.h, on socket pairs and against a
 * running store: the same secret passes; a different secret, no secret, a
 * recorded handshake played again, garbage and silence are each turned away
 * with BATON_EAUTH (or EPROTO) on the side that connects, one WARN line on
 * the store, and no effect on the store's other clients. Also: the store
 * listens on its host only.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <sys/time.h>

#include "auth.h"
#include "internal.h"
#include "store.h"
#include "unit.h"

static baton__secret_t secret_of(const char *text) {
  baton__secret_t s;
  char err[BATON__ERRLEN];
  if (baton__secret_set(&s, text, err, sizeof err) != BATON_OK) {
    fprintf(stderr, "%s\n", err);
    exit(2);
  }
  return s;
}

/* ------------------------------------------------------ socket pairs */

typedef struct {
  int fd, rc;
  baton__secret_t s;
  char err[BATON__ERRLEN];
} side_t;

static void *server_side(void *p) {
  side_t *x = p;
  x->rc = baton__auth_server(x->fd, &x->s, "the client", baton__now() + 5, x->err, sizeof x->err);
  return NULL;
}

/* Runs both sides of a handshake over a socket pair. */
static void pair(const char *cs, const char *ss, int want_c, int want_s) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) {
    perror("socketpair");
    exit(2);
  }
  side_t srv = {.fd = sv[1], .s = secret_of(ss)}, cli = {.fd = sv[0], .s = secret_of(cs)};
  pthread_t th;
  pthread_create(&th, NULL, server_side, &srv);
  cli.rc = baton__auth_client(cli.fd, &cli.s, "the server", baton__now() + 5, cli.err, sizeof cli.err);
  pthread_join(th, NULL);
  EXPECT_RC(cli.rc, want_c, cli.err);
  EXPECT_RC(srv.rc, want_s, srv.err);
  printf("  client \"%s\", server \"%s\": %s (%s) / %s (%s)\n", cs, ss, baton_err_name(cli.rc),
         cli.err, baton_err_name(srv.rc), srv.err);
  close(sv[0]);
  close(sv[1]);
}

static void test_pairs(void) {
  pair("s3cret", "s3cret", BATON_OK, BATON_OK);
  pair("a-longer-secret-of-the-kind-baton-run-makes-0123456789abcdef",
       "a-longer-secret-of-the-kind-baton-run-makes-0123456789abcdef", BATON_OK, BATON_OK);
  /* The client finds the server's proof wrong first and says so. */
  pair("s3cret", "s3cres", BATON_EAUTH, BATON_EAUTH);
  pair("s3cret", "s3cret ", BATON_EAUTH, BATON_EAUTH);
  pair("", "", BATON_OK, BATON_OK); /* no secret: no handshake at all */
  char big[AUTH_SECRET_MAX + 2], err[BATON__ERRLEN] = "";
  baton__secret_t s;
  memset(big, 'x', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  EXPECT_RC(baton__secret_set(&s, big, err, sizeof err), BATON_EUSAGE, err);
  EXPECT(strstr(err, "BATON_SECRET") != NULL, "too long a secret: the error names the knob: %s", err);
  big[AUTH_SECRET_MAX] = '\0';
  EXPECT_RC(baton__secret_set(&s, big, err, sizeof err), BATON_OK, err);
}

/* ------------------------------------------------------ against a store */

static int raw_connect(const char *ip, int port) {
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  inet_pton(AF_INET, ip, &sa.sin_addr);
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0)
    return -1;
  if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
    close(fd);
    return -1;
  }
  struct timeval tv = {10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

/* Reads until EOF; the bytes go to buf (at most cap); -1 on a timeout. */
static ssize_t read_to_eof(int fd, uint8_t *buf, size_t cap) {
  size_t got = 0;
  uint8_t scratch[256];
  for (;;) {
    ssize_t r = recv(fd, got < cap ? buf + got : scratch, got < cap ? cap - got : sizeof scratch, 0);
    if (r == 0 || (r < 0 && errno == ECONNRESET))
      return (ssize_t)got;
    if (r < 0)
      return -1;
    got += got < cap ? (size_t)r : 0;
  }
}

/* The store is still serving a client with the right secret. */
static void still_serving(int port, const baton__secret_t *s, const char *what) {
  char err[BATON__ERRLEN] = "", buf[16] = "";
  size_t len = 0;
  baton__store_t *st = NULL;
  int rc = baton__store_connect(LOOP, port, 5, s, &st, err, sizeof err);
  EXPECT_RC(rc, BATON_OK, err);
  if (!st)
    return;
  EXPECT_RC(baton__store_set(st, what, "ok", 2, err, sizeof err), BATON_OK, err);
  EXPECT_RC(baton__store_get(st, what, buf, sizeof buf, &len, 5, err, sizeof err), BATON_OK, err);
  EXPECT(len == 2 && memcmp(buf, "ok", 2) == 0, "after %s: got \"%.*s\"", what, (int)len, buf);
  baton__store_close(st);
}

static void expect_connect_rc(int port, const char *text, int want, const char *needle) {
  baton__secret_t s = secret_of(text);
  char err[BATON__ERRLEN] = "";
  baton__store_t *st = NULL;
  int rc = baton__store_connect(LOOP, port, 5, &s, &st, err, sizeof err);
  if (rc == BATON_OK && st) { /* no secret: the refusal comes with the first request */
    char buf[8];
    size_t len;
    rc = baton__store_get(st, "k", buf, sizeof buf, &len, 5, err, sizeof err);
    baton__store_close(st);
  }
  EXPECT_RC(rc, want, err);
  EXPECT(strstr(err, needle) != NULL, "secret \"%s\": the error should say \"%s\": %s", text, needle, err);
  printf("  connect with secret \"%s\": %s: %s\n", text, baton_err_name(rc), err);
}

/* A legitimate handshake done by hand, recording what the client sent. */
static size_t record_handshake(int port, const baton__secret_t *s, uint8_t *sent) {
  uint8_t out[AUTH_MSG_MAX], in[AUTH_MSG_MAX];
  size_t outlen, blen, n = 0;
  char err[BATON__ERRLEN] = "";
  baton__auth_t a;
  int fd = raw_connect(LOOP, port), rc = baton__auth_begin(&a, 0, s, out, &outlen, err, sizeof err);
  while (rc == BATON_OK && fd >= 0 && !baton__auth_done(&a)) {
    memcpy(sent + n, out, outlen);
    n += outlen;
    if (send(fd, out, outlen, MSG_NOSIGNAL) != (ssize_t)outlen ||
        recv(fd, in, AUTH_HDR, MSG_WAITALL) != AUTH_HDR)
      rc = BATON_EREMOTE;
    else if ((rc = baton__auth_header(&a, in, &blen, out, &outlen, err, sizeof err)) == BATON_OK &&
             (blen == 0 || recv(fd, in, blen, MSG_WAITALL) == (ssize_t)blen))
      rc = baton__auth_body(&a, in, out, &outlen, err, sizeof err);
  }
  EXPECT_RC(rc, BATON_OK, err);
  EXPECT(baton__auth_done(&a), "the recorded handshake should pass");
  if (fd >= 0)
    close(fd);
  return n;
}

/* Sends bytes and expects the store to hang up, its last words a RESULT
 * with `status` (any words when status < 0). */
static void expect_refused(int port, const char *what, const void *bytes, size_t n, int status) {
  uint8_t reply[512];
  int fd = raw_connect(LOOP, port);
  EXPECT(fd >= 0, "%s: cannot connect", what);
  if (fd < 0)
    return;
  EXPECT(send(fd, bytes, n, MSG_NOSIGNAL) == (ssize_t)n, "%s: send failed", what);
  ssize_t got = read_to_eof(fd, reply, sizeof reply);
  int last = got >= AUTH_HDR ? baton__auth_result_status(reply + got - AUTH_HDR) : -1;
  EXPECT(got >= 0 && (status < 0 || last == status),
         "%s: want RESULT %d and a hang-up, got %zd bytes (last status %d)", what, status, got, last);
  close(fd);
}

/* Counts the lines of the store's log (fd 2, sent to a file meanwhile)
 * that contain needle. */
static int log_fd = -1, saved_stderr = -1;
static void log_capture(void) {
  char path[] = "/tmp/baton-test-auth.XXXXXX";
  fflush(stderr);
  log_fd = mkstemp(path);
  unlink(path);
  saved_stderr = dup(2);
  dup2(log_fd, 2);
}
static int log_release(const char *needle) {
  char buf[65536];
  fflush(stderr);
  dup2(saved_stderr, 2);
  close(saved_stderr);
  ssize_t n = pread(log_fd, buf, sizeof buf - 1, 0);
  close(log_fd);
  buf[n > 0 ? n : 0] = '\0';
  fputs(buf, stderr); /* the lines still belong in the test's log */
  int count = 0;
  for (char *p = buf; (p = strstr(p, needle)); p++)
    count++;
  return count;
}

static void test_store(void) {
  baton__secret_t s = secret_of("the-job-secret"), none = secret_of("");
  baton__store_server_t *srv = NULL, *open_srv = NULL;
  char err[BATON__ERRLEN] = "";
  int port = free_port(), open_port = free_port();
  EXPECT_RC(baton__store_serve(LOOP, port, &s, 1.0, &srv, err, sizeof err), BATON_OK, err);
  EXPECT_RC(baton__store_serve(LOOP, open_port, &none, 1.0, &open_srv, err, sizeof err), BATON_OK, err);
  if (!srv || !open_srv)
    return;

  /* A client that idles without a handshake all along: the store serves
   * the others meanwhile, and drops the idler after its timeout (1 s). */
  log_capture();
  expect_connect_rc(port, "not-the-job-secret", BATON_EAUTH, "secrets differ");
  expect_connect_rc(port, "", BATON_EAUTH, "BATON_SECRET is not set");
  expect_connect_rc(open_port, "the-job-secret", BATON_EAUTH, "has no BATON_SECRET");
  int rejected = log_release("rejected");
  EXPECT(rejected == 3, "want one WARN \"rejected\" line per refused client, got %d", rejected);
  int idler = raw_connect(LOOP, port);

  uint8_t rec[4 * AUTH_MSG_MAX], junk[64];
  size_t n = record_handshake(port, &s, rec);
  expect_refused(port, "a recorded handshake played again", rec, n, AUTH_BAD_PROOF);
  expect_refused(port, "a HELLO alone, then nothing", rec, AUTH_HDR + AUTH_NONCE, -1);
  expect_refused(port, "half a HELLO header", rec, 7, -1);
  expect_refused(port, "HTTP", "GET / HTTP/1.1\r\n\r\n", 18, AUTH_MALFORMED);
  baton__store_hdr_pack(junk, OP_GET, 3, 0);
  memcpy(junk + STORE_HDR, "key", 3);
  expect_refused(port, "a GET without a handshake", junk, STORE_HDR + 3, AUTH_SECRET_REQUIRED);
  memcpy(junk, rec, AUTH_HDR);
  junk[12] = 0xff, junk[15] = 0x7f; /* a HELLO claiming a 2 GiB body */
  expect_refused(port, "a huge body length", junk, AUTH_HDR, AUTH_MALFORMED);
  memcpy(junk, rec, AUTH_HDR);
  junk[6] = AUTH_PROOF; /* a PROOF before any CHALLENGE */
  expect_refused(port, "a PROOF first", junk, AUTH_HDR, AUTH_MALFORMED);
  still_serving(port, &s, "hostile bytes");
  EXPECT(idler >= 0 && read_to_eof(idler, junk, sizeof junk) == 0,
         "a client that never authenticates is dropped after the store's timeout");
  if (idler >= 0)
    close(idler);
  still_serving(port, &s, "the idler");
  still_serving(open_port, &none, "the open store");

  /* Listening on 127.0.0.1 only: the same port on 127.0.0.2 (also this
   * host's loopback) must refuse, as it would not if it listened on all. */
  int other = raw_connect("127.0.0.2", port);
  EXPECT(other < 0, "the store listens on 127.0.0.1 only, yet 127.0.0.2:%d accepted", port);
  if (other >= 0)
    close(other);
  baton__store_stop(srv);
  baton__store_stop(open_srv);
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  printf("handshakes on socket pairs:\n");
  test_pairs();
  printf("against a store (WARN lines are expected):\n");
  test_store();
  return unit_summary();
}
