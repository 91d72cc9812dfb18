/*
 * store.h - the rendezvous store's wire format, shared by the client
 * (store.c) and the server (store_server.c) and by nothing else.
 *
 * Wire format, one frame per message, integers little-endian:
 *   u32 magic "BTSR" | u16 version (1) | u16 op | u32 key_len | u32 value_len
 * then key_len key bytes and value_len value bytes. Requests are SET(key,
 * value) and GET(key); the replies are SET_OK() and GET_VAL(value). Keys are
 * 1..255 bytes and values 0..1 MiB; the op table says which lengths each op
 * may carry, and both sides check every header they receive against it.
 */
#ifndef BATON_STORE_H
#define BATON_STORE_H

#include <stddef.h>
#include <stdint.h>

#define BATON__STORE_MAGIC 0x52535442u /* the bytes "BTSR" read as little-endian */
#define BATON__STORE_VERSION 1
#define BATON__STORE_HDR 16
#define BATON__STORE_KEY_MAX 255u
#define BATON__STORE_VAL_MAX (1u << 20)

enum { BATON__OP_SET = 1, BATON__OP_GET, BATON__OP_SET_OK, BATON__OP_GET_VAL, BATON__OP_COUNT };

typedef struct {
  const char *name;
  uint32_t key_min, key_max, val_max;
} baton__store_op_t;

extern const baton__store_op_t baton__store_ops[BATON__OP_COUNT];

typedef struct {
  unsigned op;
  uint32_t klen, vlen;
} baton__store_hdr_t;

/* Writes a BATON__STORE_HDR-byte header into b. */
void baton__store_hdr_pack(uint8_t *b, unsigned op, uint32_t klen, uint32_t vlen);
/* 0 when b is a well-formed header; else -1 with the reason in why. */
int baton__store_hdr_parse(const uint8_t *b, baton__store_hdr_t *h, char *why, size_t whylen);

/* "host:port", or "[host]:port" when host is an IPv6 address. */
void baton__store_format_addr(char *buf, size_t cap, const char *host, int port);

#endif /* BATON_STORE_H */
