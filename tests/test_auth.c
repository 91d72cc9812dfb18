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
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>

#include "auth.h"
#include "hostile.h"
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
  cli.rc =
      baton__auth_client(cli.fd, &cli.s, "the server", baton__now() + 5, cli.err, sizeof cli.err);
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
  char big[BATON__AUTH_SECRET_MAX + 2], err[BATON__ERRLEN] = "";
  baton__secret_t s;
  memset(big, 'x', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  EXPECT_RC(baton__secret_set(&s, big, err, sizeof err), BATON_EUSAGE, err);
  EXPECT(strstr(err, "BATON_SECRET") != NULL, "too long a secret: the error names the knob: %s",
         err);
  big[BATON__AUTH_SECRET_MAX] = '\0';
  EXPECT_RC(baton__secret_set(&s, big, err, sizeof err), BATON_OK, err);
}

/* ------------------------------------------------------ against a store */

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
  EXPECT(strstr(err, needle) != NULL, "secret \"%s\": the error should say \"%s\": %s", text,
         needle, err);
  printf("  connect with secret \"%s\": %s: %s\n", text, baton_err_name(rc), err);
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
static int log_count(const char *needle, char *buf, size_t cap) {
  ssize_t n = pread(log_fd, buf, cap - 1, 0);
  buf[n > 0 ? n : 0] = '\0';
  int count = 0;
  for (char *p = buf; (p = strstr(p, needle)); p++)
    count++;
  return count;
}
/* The store's thread logs after its client has gone, so this waits (up to
 * 10 s, against a hang) for `want` lines before it counts. */
static int log_release(const char *needle, int want) {
  static char buf[65536];
  for (int i = 0; i < 1000 && log_count(needle, buf, sizeof buf) < want; i++)
    nap(0.01);
  nap(0.05); /* time for a line too many to show up */
  int count = log_count(needle, buf, sizeof buf);
  fflush(stderr);
  dup2(saved_stderr, 2);
  close(saved_stderr);
  close(log_fd);
  fputs(buf, stderr); /* the lines still belong in the test's log */
  return count;
}

static void test_store(void) {
  baton__secret_t s = secret_of("the-job-secret"), none = secret_of("");
  baton__store_server_t *srv = NULL, *open_srv = NULL;
  char err[BATON__ERRLEN] = "";
  int port = free_port(), open_port = free_port();
  EXPECT_RC(baton__store_serve(LOOP, port, &s, 1.0, &srv, err, sizeof err), BATON_OK, err);
  EXPECT_RC(baton__store_serve(LOOP, open_port, &none, 1.0, &open_srv, err, sizeof err), BATON_OK,
            err);
  if (!srv || !open_srv)
    return;

  /* A client that idles without a handshake all along: the store serves
   * the others meanwhile, and drops the idler after its timeout (1 s). */
  log_capture();
  expect_connect_rc(port, "not-the-job-secret", BATON_EAUTH, "secrets differ");
  expect_connect_rc(port, "", BATON_EAUTH, "BATON_SECRET is not set");
  expect_connect_rc(open_port, "the-job-secret", BATON_EAUTH, "has no BATON_SECRET");
  int rejected = log_release("rejected", 3);
  EXPECT(rejected == 3, "want one WARN \"rejected\" line per refused client, got %d", rejected);
  int idler = raw_connect(LOOP, port);

  uint8_t rec[4 * BATON__AUTH_MSG_MAX], junk[64];
  size_t n = record_handshake(port, &s, rec);
  expect_refused(port, "a recorded handshake played again", rec, n, BATON__AUTH_BAD_PROOF);
  expect_refused(port, "a HELLO alone, then nothing", rec, BATON__AUTH_HDR + BATON__AUTH_NONCE, -1);
  expect_refused(port, "half a HELLO header", rec, 7, -1);
  expect_refused(port, "HTTP", "GET / HTTP/1.1\r\n\r\n", 18, BATON__AUTH_MALFORMED);
  baton__store_hdr_pack(junk, BATON__OP_GET, 3, 0);
  memcpy(junk + BATON__STORE_HDR, "key", 3);
  expect_refused(port, "a GET without a handshake", junk, BATON__STORE_HDR + 3,
                 BATON__AUTH_SECRET_REQUIRED);
  memcpy(junk, rec, BATON__AUTH_HDR);
  junk[12] = 0xff, junk[15] = 0x7f; /* a HELLO claiming a 2 GiB body */
  expect_refused(port, "a huge body length", junk, BATON__AUTH_HDR, BATON__AUTH_MALFORMED);
  memcpy(junk, rec, BATON__AUTH_HDR);
  junk[6] = BATON__AUTH_PROOF; /* a PROOF before any CHALLENGE */
  expect_refused(port, "a PROOF first", junk, BATON__AUTH_HDR, BATON__AUTH_MALFORMED);
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

/* Strangers who connect and say nothing, more than the store keeps
 * waiting (512): the oldest are dropped, and a rank can still join. */
static void test_crowd(void) {
  enum { CROWD = 600, KEPT = 512 };
  static int fds[CROWD];
  baton__secret_t s = secret_of("the-job-secret");
  baton__store_server_t *srv = NULL;
  char err[BATON__ERRLEN] = "";
  int port = free_port(), opened = 0;
  struct rlimit lim; /* both ends of every connection live in this process */
  getrlimit(RLIMIT_NOFILE, &lim);
  if (lim.rlim_cur < 2 * CROWD + 64) {
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
  }
  if (lim.rlim_cur < 2 * CROWD + 64) {
    printf("SKIP: the open file limit (%llu) is below %d\n", (unsigned long long)lim.rlim_cur,
           2 * CROWD + 64);
    return;
  }
  EXPECT_RC(baton__store_serve(LOOP, port, &s, 60, &srv, err, sizeof err), BATON_OK, err);
  if (!srv)
    return;
  log_capture();
  for (int i = 0; i < CROWD; i++)
    opened += (fds[i] = raw_connect(LOOP, port)) >= 0;
  still_serving(port, &s, "a crowd of silent strangers");
  int dropped = log_release("waited longest", opened + 1 - KEPT);
  EXPECT(opened == CROWD, "could open only %d of %d connections", opened, CROWD);
  EXPECT(dropped == opened + 1 - KEPT, "%d silent strangers and a rank: want %d dropped, got %d",
         opened, opened + 1 - KEPT, dropped);
  for (int i = 0; i < CROWD; i++)
    if (fds[i] >= 0)
      close(fds[i]);
  baton__store_stop(srv);
}

/* Started from a unique id and without BATON_SECRET, the store's secret is
 * the id's nonce: a process with a damaged copy of the id (here, one digit
 * of the nonce changed) is turned away with BATON_EAUTH. */
static void test_unique_id(void) {
  baton_unique_id_t id, bad;
  unsetenv("BATON_SECRET");
  setenv("BATON_DEBUG", "NONE", 1);
  setenv("BATON_TIMEOUT", "5", 1);
  EXPECT_RC(baton_get_unique_id(&id), BATON_OK, baton_last_init_error());
  bad = id;
  char *nonce = strrchr(bad.internal, ' ');
  EXPECT(nonce && strlen(nonce) == 33, "a unique id ends with a 32-digit nonce: %.128s",
         id.internal);
  if (!nonce || strlen(nonce) != 33)
    return;
  nonce[1] = nonce[1] == '0' ? '1' : '0';
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    baton_comm_t *comm = NULL;
    int rc = baton_comm_init_rank(&comm, 2, &bad, 1);
    if (rc != BATON_EAUTH)
      fprintf(stderr, "damaged id: got %s: %s\n", baton_err_name(rc), baton_last_init_error());
    _exit(rc == BATON_EAUTH ? 0 : 1);
  }
  int status = -1;
  EXPECT(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
             WEXITSTATUS(status) == 0,
         "a damaged unique id must give BATON_EAUTH (wait status %d)", status);
  int rc = baton_comm_init_rank(NULL, 1, &id, 0); /* takes the id's store and stops it */
  EXPECT_RC(rc, BATON_EINVAL, baton_last_init_error());
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  printf("handshakes on socket pairs:\n");
  test_pairs();
  printf("against a store (WARN lines are expected):\n");
  test_store();
  printf("a crowd of silent strangers (WARN lines are expected):\n");
  test_crowd();
  printf("a damaged unique id:\n");
  test_unique_id();
  return unit_summary();
}
