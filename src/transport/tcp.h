/* tcp.h - set-up of the TCP transport, for ranks on different hosts (tcp_*.c). */
#ifndef BATON_TCP_H
#define BATON_TCP_H

#include "auth.h"
#include "internal.h"
#include "transport.h"

typedef struct baton__tcp baton__tcp_t;

/* What set-up needs to know about the communicator. Every rank listens,
 * publishes its address under "tcp.<rank>" (a->key's prefix) and connects to each rank in
 * `to`; it accepts one connection set from each rank in `from`. */
typedef struct {
  int rank, size;
  uint64_t comm_id;        /* the same on every rank, random per communicator */
  const baton__sig_t *sig; /* the communicator's current call */
  const int *to, *from;    /* peers this rank sends to / receives from */
  int nto, nfrom;
  const char *local_ip;          /* the address to listen on */
  const baton__secret_t *secret; /* every connection proves it (auth.h) */
  char (*hosts)[64];             /* host name of every rank, for messages */
  const char *key;               /* the store keys' prefix: "<key>.<rank>"; NULL: "tcp" */
} baton__tcp_args_t;

int baton__tcp_setup(baton__store_t *st, const baton__tcp_args_t *a, const baton__params_t *p,
                     baton__tcp_t **out, char *err, size_t errlen);
/* The rest of the instance is reached through baton__tcp_fabric
 * (transport.h): connections, watch, check, poison, shutdown, destroy. */

/* The frame header every frame starts with; exposed for the tests and the
 * fuzzers. Integers little-endian:
 *   magic u32 | frame u32 | comm_id u64 | len u32 | kind u8 | coll u8 |
 *   dtype u8 | op u8 | seq u64 | count u64 | root i32 | algo u8 | reserved u24
 * A data frame carries the sender's call signature; an abort frame (kind 1)
 * carries the error code in `root` and a message of `len` bytes; a ping
 * (kind 2, no payload, not counted as a frame) only makes the peer's kernel
 * acknowledge, so that a dead link shows within TCP_USER_TIMEOUT. */
#define BATON__FRAME_MAGIC 0x4d415246u /* "FRAM" */
#define BATON__FRAME_HDR 48
enum { BATON__FRAME_DATA = 0, BATON__FRAME_ABORT = 1, BATON__FRAME_PING = 2 };
typedef struct {
  uint64_t comm_id;
  uint32_t frame; /* frames sent on this socket's connection before this one */
  uint32_t len;   /* payload bytes that follow */
  uint8_t kind;
  baton__sig_t sig;
} baton__frame_t;
void baton__frame_pack(uint8_t *b, const baton__frame_t *f);
/* 0 when b holds a frame header for this communicator, the expected frame
 * number and a payload of at most max_len bytes; else -1 with why. */
int baton__frame_parse(const uint8_t *b, uint64_t comm_id, uint32_t frame, uint32_t max_len,
                       baton__frame_t *f, char *why, size_t whylen);

/* Picks the address to listen on: the interface named (or prefixed) by
 * `ifname` when set, else the one that routes to `rendezvous_host`. On
 * failure, err lists the interfaces found. */
int baton__pick_local_ip(const char *ifname, const char *rendezvous_host, char *ip, size_t iplen,
                         char *err, size_t errlen);

#endif /* BATON_TCP_H */
