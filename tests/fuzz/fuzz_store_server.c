/*
 * fuzz_store_server.c - the store server's reading of client bytes: the
 * handshake (with a secret) or the request headers and bodies (without),
 * across up to three clients, so that parked GETs, SETs that wake them and
 * replies that wait for a slow reader all run.
 *
 * It includes src/store_server.c to drive one connection's reads directly,
 * without the thread and poll loop: each client is a socket pair whose far
 * end the fuzzer writes. Input: byte 0 chooses the secret (bit 0), whether
 * client 0 first passes the handshake for real (bit 1), so that the bytes
 * after it reach the request parser, and the number of clients (the rest);
 * then chunks of [client, length, bytes].
 */
#include "../../src/store_server.c"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  baton__log_level = BATON__LOG_NONE; /* every dropped client would WARN */
  return 0;
}

/* What the client end has been sent: read and forgotten. */
static void drain(int fd) {
  uint8_t buf[4096];
  while (recv(fd, buf, sizeof buf, MSG_DONTWAIT) > 0)
    ;
}

static void service(baton__store_server_t *srv, conn_t *c, int far) {
  for (int i = 0; i < 4 && !c->dead; i++) {
    conn_service(srv, c, POLLIN | POLLOUT);
    drain(far);
  }
}

/* Client 0 authenticates as a rank would, the harness playing the client
 * side of the state machine over the socket pair. */
static void authenticate(baton__store_server_t *srv, conn_t *c, int far) {
  uint8_t out[BATON__AUTH_MSG_MAX], in[BATON__AUTH_MSG_MAX];
  size_t outlen, blen;
  char err[BATON__ERRLEN];
  baton__auth_t a;
  int rc = baton__auth_begin(&a, 0, &srv->secret, out, &outlen, err, sizeof err);
  while (rc == BATON_OK && !baton__auth_done(&a) && !c->dead) {
    if (send(far, out, outlen, MSG_NOSIGNAL) != (ssize_t)outlen)
      abort();
    conn_service(srv, c, POLLIN | POLLOUT);
    if (recv(far, in, BATON__AUTH_HDR, MSG_DONTWAIT) != BATON__AUTH_HDR)
      abort(); /* the store must answer a well-formed message at once */
    rc = baton__auth_header(&a, in, &blen, out, &outlen, err, sizeof err);
    if (rc == BATON_OK && blen && recv(far, in, blen, MSG_DONTWAIT) != (ssize_t)blen)
      abort();
    if (rc == BATON_OK)
      rc = baton__auth_body(&a, in, out, &outlen, err, sizeof err);
  }
  if (rc != BATON_OK || !c->authed)
    abort(); /* the right secret was refused */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  enum { MAX_CLIENTS = 3 };
  int far[MAX_CLIENTS];
  char err[BATON__ERRLEN];
  if (size < 1)
    return 0;
  baton__store_server_t *srv = calloc(1, sizeof *srv);
  if (!srv || !(srv->pfds = malloc(2 * sizeof *srv->pfds)))
    abort();
  snprintf(srv->addr, sizeof srv->addr, "fuzz");
  srv->auth_s = 1;
  baton__secret_set(&srv->secret, data[0] & 1 ? "fuzz-secret" : "", err, sizeof err);
  int n = 1 + (data[0] >> 2) % MAX_CLIENTS;
  for (int i = 0; i < n; i++) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) != 0 || conns_grow(srv) != 0)
      abort();
    conn_t *c = &srv->conns[srv->nconns++];
    memset(c, 0, sizeof *c);
    c->fd = sv[0];
    far[i] = sv[1];
    snprintf(c->peer, sizeof c->peer, "client%d", i);
    conn_start(srv, c);
  }
  if ((data[0] & 3) == 3)
    authenticate(srv, &srv->conns[0], far[0]);
  for (size_t at = 1; at + 2 <= size;) {
    int k = data[at] % n;
    size_t len = data[at + 1];
    at += 2;
    len = len < size - at ? len : size - at;
    ssize_t w = send(far[k], data + at, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)w;
    at += len;
    if (!srv->conns[k].dead)
      service(srv, &srv->conns[k], far[k]);
  }
  for (int i = 0; i < n; i++) { /* every client hangs up */
    close(far[i]);
    if (!srv->conns[i].dead)
      conn_service(srv, &srv->conns[i], POLLIN | POLLRDHUP);
  }
  server_free(srv);
  return 0;
}
