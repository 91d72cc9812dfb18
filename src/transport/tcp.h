/* tcp.h - set-up of the TCP transport, for ranks on different hosts (see tcp.c). */
#ifndef BATON_TCP_H
#define BATON_TCP_H

#include "internal.h"
#include "transport.h"

typedef struct baton__tcp baton__tcp_t;

/* What set-up needs to know about the communicator. Every rank listens,
 * publishes its address under "tcp.<rank>" and connects to each rank in
 * `to`; it accepts one connection set from each rank in `from`. */
typedef struct {
  int rank, size;
  uint64_t comm_id;        /* the same on every rank, random per communicator */
  const uint64_t *seq;     /* the communicator's collective counter */
  const int *to, *from;    /* peers this rank sends to / receives from */
  int nto, nfrom;
  const char *local_ip;    /* the address to listen on */
  char (*hosts)[64];       /* host name of every rank, for messages */
} baton__tcp_args_t;

int baton__tcp_setup(baton__store_t *st, const baton__tcp_args_t *a, const baton__params_t *p,
                     baton__tcp_t **out, char *err, size_t errlen);
/* The connection to/from `peer`, or NULL when there is none. */
baton__conn_t *baton__tcp_send_conn(baton__tcp_t *t, int peer);
baton__conn_t *baton__tcp_recv_conn(baton__tcp_t *t, int peer);
void baton__tcp_destroy(baton__tcp_t *t);

/* The frame header every data frame starts with; exposed for the tests and
 * the fuzzers. Integers little-endian. */
#define BATON__FRAME_MAGIC 0x4d415246u /* "FRAM" */
#define BATON__FRAME_HDR 32
typedef struct {
  uint64_t comm_id;
  uint64_t seq;      /* the sender's collective number */
  uint32_t frame;    /* frames sent on this connection before this one */
  uint32_t len;      /* payload bytes that follow */
} baton__frame_t;
void baton__frame_pack(uint8_t *b, const baton__frame_t *f);
/* 0 when b holds a frame header for this communicator, the expected frame
 * number and a payload of at most max_len bytes; else -1 with why. */
int baton__frame_parse(const uint8_t *b, uint64_t comm_id, uint32_t frame, uint32_t max_len,
                       baton__frame_t *f, char *why, size_t whylen);

/* Picks the address to listen on: the interface named (or prefixed) by
 * `ifname` when set, else the one that routes to `rendezvous_host`. On
 * failure, err lists the interfaces found. */
int baton__pick_local_ip(const char *ifname, const char *rendezvous_host, char *ip,
                         size_t iplen, char *err, size_t errlen);

#endif /* BATON_TCP_H */
