/*
 * unit.h - the checks shared by the single-process unit tests (test_store,
 * test_auth): EXPECT macros that count passes and failures from any thread
 * and print what differed, and small socket helpers.
 */
#ifndef BATON_TEST_UNIT_H
#define BATON_TEST_UNIT_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

static atomic_int n_pass, n_fail;

__attribute__((format(printf, 4, 5))) static inline void report(int ok, const char *file, int line,
                                                                const char *fmt, ...) {
  if (ok) {
    atomic_fetch_add(&n_pass, 1);
    return;
  }
  atomic_fetch_add(&n_fail, 1);
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fprintf(stderr, "FAIL %s:%d: %s\n", file, line, msg);
}

/* rc == want, printing both names and the error text when not. */
#define EXPECT_RC(rc, want, err)                                                                   \
  do {                                                                                             \
    int rc_ = (rc), want_ = (want);                                                                \
    report(rc_ == want_, __FILE__, __LINE__, "%s: got %s, want %s (err: %s)", #rc,                 \
           baton_err_name(rc_), baton_err_name(want_), (err));                                     \
  } while (0)
#define EXPECT_EQ(a, b)                                                                            \
  do {                                                                                             \
    long long a_ = (long long)(a), b_ = (long long)(b);                                            \
    report(a_ == b_, __FILE__, __LINE__, "%s == %s: got %lld, want %lld", #a, #b, a_, b_);         \
  } while (0)
#define EXPECT(cond, ...) report(!!(cond), __FILE__, __LINE__, __VA_ARGS__)

#define LOOP "127.0.0.1"

static inline void nap(double s) {
  struct timespec ts = {(time_t)s, (long)((s - (time_t)s) * 1e9)};
  nanosleep(&ts, NULL);
}

/* A port that was free a moment ago: bind port 0, read it, close. */
static inline int free_port(void) {
  struct sockaddr_in sa = {.sin_family = AF_INET};
  socklen_t sl = sizeof sa;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
      getsockname(fd, (struct sockaddr *)&sa, &sl) != 0) {
    perror("free_port");
    exit(2);
  }
  close(fd);
  return ntohs(sa.sin_port);
}

static inline int unit_summary(void) {
  printf("%d passed, %d failed\n", atomic_load(&n_pass), atomic_load(&n_fail));
  return atomic_load(&n_fail) > 0;
}

#endif /* BATON_TEST_UNIT_H */
