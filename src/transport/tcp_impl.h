/*
 * tcp_impl.h - what the three files of the TCP transport share: the state
 * of a socket, a connection and the communicator's TCP side, and the
 * functions that move frames (tcp_wire.c) for the waits (tcp_progress.c).
 * Nothing outside src/transport/tcp_*.c includes it (but the fuzz target).
 */
#ifndef BATON_TCP_IMPL_H
#define BATON_TCP_IMPL_H

#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "tcp.h"

#define MAX_SOCKS 16

typedef struct tcp_conn tcp_conn_t;

#define STAGE 4096 /* bytes a receiver reads at once when a frame is small */

typedef struct {
  int fd;
  int eof;        /* the peer closed it at a frame boundary */
  uint8_t *stage; /* receiving: bytes read but not yet used */
  uint32_t st_off, st_len;
  uint64_t frame; /* next frame to move on this socket */
  size_t done;    /* bytes of it moved so far, header included */
  uint8_t hdr[BATON__FRAME_HDR];
} sock_t;

struct tcp_conn {
  baton__conn_t conn; /* conn.impl points back here */
  baton__tcp_t *t;
  int sending;
  int nsocks;
  sock_t s[MAX_SOCKS];
  char *slots;
  uint32_t nslots;
  uint32_t *len;
  baton__sig_t *sig;   /* per slot: the call the frame belongs to */
  const char **ref;    /* sending, per slot: the caller's memory to send instead */
  uint64_t user;       /* slots committed (send) or released (recv) by the executor */
  uint64_t wire;       /* frames fully written (send) or fully read (recv) */
  int failed;          /* a socket error: conn.why says what */
  uint8_t *kind;       /* per slot: BATON__FRAME_DATA or _ABORT */
  int abort_rc;        /* the peer sent an abort frame: its code ... */
  uint64_t abort_seq;  /* ... the call it failed in ... */
  char abort_msg[384]; /* ... and what it said */
  int relayed;         /* failed because of an abort frame */
  double abort_seen;   /* when a wait first saw an abort from a later call */
};

struct baton__tcp {
  int rank, size;
  uint64_t comm_id;
  const baton__sig_t *sig;
  const baton__watch_t *watch;
  double timeout_s;
  double link_timeout_s;   /* BATON_TCP_LINK_TIMEOUT */
  double spin_s;           /* how long a waiter polls before it sleeps */
  int yield;               /* more ranks than cores: give the core away while polling */
  tcp_conn_t **to, **from; /* by peer rank */
  tcp_conn_t **all;
  int nall;
  struct pollfd *pfd;
  tcp_conn_t **pfd_conn;
  char (*hosts)[64];
  const baton__secret_t *secret;
};

/* Integers on the wire are little-endian. */
static inline void put32(uint8_t *b, uint32_t v) {
  for (int i = 0; i < 4; i++)
    b[i] = (uint8_t)(v >> (8 * i));
}
static inline void put64(uint8_t *b, uint64_t v) {
  for (int i = 0; i < 8; i++)
    b[i] = (uint8_t)(v >> (8 * i));
}
static inline uint32_t get32(const uint8_t *b) {
  uint32_t v = 0;
  for (int i = 0; i < 4; i++)
    v |= (uint32_t)b[i] << (8 * i);
  return v;
}
static inline uint64_t get64(const uint8_t *b) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++)
    v |= (uint64_t)b[i] << (8 * i);
  return v;
}

/* writev for a socket, but a peer that has gone (or a socket that
 * baton_comm_abort shut) is EPIPE, never SIGPIPE: the default action of
 * SIGPIPE would kill the user's process instead of failing the call. */
static inline ssize_t baton__tcp_sendv(int fd, struct iovec *iov, int n) {
  struct msghdr m = {.msg_iov = iov, .msg_iovlen = (size_t)n};
  return sendmsg(fd, &m, MSG_NOSIGNAL);
}

static inline char *baton__tcp_slot_of(tcp_conn_t *c, uint64_t frame) {
  return c->slots + (size_t)(frame % c->nslots) * c->conn.slot_bytes;
}

/* Frames below `wire` are done when every socket has moved past them. */
static inline void baton__tcp_advance_wire(tcp_conn_t *c) {
  while (c->s[c->wire % (uint64_t)c->nsocks].frame > c->wire)
    c->wire++;
}

/* tcp_wire.c: the frame state machines. A failure is recorded in the
 * connection (failed, conn.why) and returned. */
int baton__tcp_conn_fail(tcp_conn_t *c, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Fails c with the abort that the peer of `from` sent. */
int baton__tcp_relay(tcp_conn_t *c, tcp_conn_t *from);
/* Writes what socket s can take now / reads what it has into free slots. */
int baton__tcp_push(tcp_conn_t *c, sock_t *s);
int baton__tcp_pull(tcp_conn_t *c, sock_t *s);
/* Queues the next frame (from its slot, or from ref) and starts writing it. */
void baton__tcp_queue(tcp_conn_t *c, size_t bytes, const void *ref);

/* Parts of baton__tcp_fabric (the table is in tcp_setup.c). tcp_wire.c:
 * tells every peer this rank sends to that the communicator failed (an
 * abort frame where the stream allows one), then closes the sending side
 * of every socket; never blocks, but not async-signal-safe. */
void baton__tcp_poison(void *t, int rc, const char *msg);
/* tcp_progress.c: moves whatever the sockets allow without blocking and
 * returns the failure of a connection, if any; for waits on another
 * transport, so that TCP keeps flowing and its failures are seen. */
int baton__tcp_check(void *t, char *why, size_t whylen);
void baton__tcp_watch(void *t, const baton__watch_t *watch);

#endif /* BATON_TCP_IMPL_H */
