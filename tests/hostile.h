/*
 * hostile.h - a stranger's moves against a store, shared by test_auth (a
 * store in the test process) and test_hostile (the store of a running job):
 * raw connections, a handshake done by hand and recorded for replay, and
 * sending bytes to see the store hang up. Checks count through unit.h.
 */
#ifndef BATON_TEST_HOSTILE_H
#define BATON_TEST_HOSTILE_H

#include <errno.h>
#include <string.h>
#include <sys/time.h>

#include "auth.h"
#include "internal.h"
#include "unit.h"

static inline int raw_connect(const char *ip, int port) {
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
static inline ssize_t read_to_eof(int fd, uint8_t *buf, size_t cap) {
  size_t got = 0;
  uint8_t scratch[256];
  for (;;) {
    ssize_t r =
        recv(fd, got < cap ? buf + got : scratch, got < cap ? cap - got : sizeof scratch, 0);
    if (r == 0 || (r < 0 && errno == ECONNRESET))
      return (ssize_t)got;
    if (r < 0)
      return -1;
    got += got < cap ? (size_t)r : 0;
  }
}

/* A legitimate handshake done by hand, recording what the client sent. */
static inline size_t record_handshake(int port, const baton__secret_t *s, uint8_t *sent) {
  uint8_t out[BATON__AUTH_MSG_MAX], in[BATON__AUTH_MSG_MAX];
  size_t outlen, blen, n = 0;
  char err[BATON__ERRLEN] = "";
  baton__auth_t a;
  int fd = raw_connect(LOOP, port), rc = baton__auth_begin(&a, 0, s, out, &outlen, err, sizeof err);
  while (rc == BATON_OK && fd >= 0 && !baton__auth_done(&a)) {
    memcpy(sent + n, out, outlen);
    n += outlen;
    if (send(fd, out, outlen, MSG_NOSIGNAL) != (ssize_t)outlen ||
        recv(fd, in, BATON__AUTH_HDR, MSG_WAITALL) != BATON__AUTH_HDR)
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
static inline void expect_refused(int port, const char *what, const void *bytes, size_t n,
                                  int status) {
  uint8_t reply[512];
  int fd = raw_connect(LOOP, port);
  EXPECT(fd >= 0, "%s: cannot connect", what);
  if (fd < 0)
    return;
  EXPECT(send(fd, bytes, n, MSG_NOSIGNAL) == (ssize_t)n, "%s: send failed", what);
  ssize_t got = read_to_eof(fd, reply, sizeof reply);
  int last = got >= BATON__AUTH_HDR ? baton__auth_result_status(reply + got - BATON__AUTH_HDR) : -1;
  EXPECT(got >= 0 && (status < 0 || last == status),
         "%s: want RESULT %d and a hang-up, got %zd bytes (last status %d)", what, status, got,
         last);
  close(fd);
}

#endif /* BATON_TEST_HOSTILE_H */
