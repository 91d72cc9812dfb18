/*
 * auth.h - mutual authentication of a connection with the job's secret
 * (BATON_SECRET): an HMAC-SHA256 challenge-response in both directions,
 * computed by OpenSSL's libcrypto. Used by the rendezvous store and meant
 * for every other connection between ranks too.
 *
 * Wire format: a 16-byte header, integers little-endian,
 *   u32 magic "BTAU" | u16 version (1) | u16 type | u32 status | u32 body_len
 * then body_len bytes. Each type has one fixed body length, so a reader never
 * takes more than BATON__AUTH_BODY_MAX bytes on trust.
 *
 *   client -> server  HELLO      nonce_c (32)
 *   server -> client  CHALLENGE  nonce_s (32), mac_s (32)
 *   client -> server  PROOF      mac_c (32)
 *   server -> client  RESULT     status ACCEPTED
 *
 * mac_s = HMAC(secret, "baton-auth-v1 server" | nonce_c | nonce_s) and
 * mac_c = HMAC(secret, "baton-auth-v1 client" | nonce_s | nonce_c). Each side
 * proves it knows the secret by answering the other's fresh random nonce, so
 * a recorded handshake is worthless on a new connection, and the two labels
 * keep one side's answer from serving as the other's. Either side that finds
 * the other's proof wrong, or gets a message it did not expect, sends a
 * RESULT naming why and closes; a RESULT is also how a store without a
 * secret turns away a client that has one, and the reverse.
 */
#ifndef BATON_AUTH_H
#define BATON_AUTH_H

#include <stddef.h>
#include <stdint.h>

#define BATON__AUTH_MAGIC 0x55415442u /* the bytes "BTAU" read as little-endian */
#define BATON__AUTH_VERSION 1
#define BATON__AUTH_HDR 16
#define BATON__AUTH_NONCE 32
#define BATON__AUTH_MAC 32
#define BATON__AUTH_BODY_MAX (BATON__AUTH_NONCE + BATON__AUTH_MAC)
#define BATON__AUTH_MSG_MAX (BATON__AUTH_HDR + BATON__AUTH_BODY_MAX)
#define BATON__AUTH_SECRET_MAX 255

enum {
  BATON__AUTH_HELLO = 1,
  BATON__AUTH_CHALLENGE,
  BATON__AUTH_PROOF,
  BATON__AUTH_RESULT,
  BATON__AUTH_TYPE_COUNT
};

/* RESULT statuses: why the sender accepted or turned the other side away. */
enum {
  BATON__AUTH_ACCEPTED,
  BATON__AUTH_BAD_PROOF,       /* your proof does not match my secret */
  BATON__AUTH_NO_SECRET,       /* I have no secret, so I cannot authenticate */
  BATON__AUTH_SECRET_REQUIRED, /* you sent something other than a handshake */
  BATON__AUTH_MALFORMED,       /* your message was not what I expected */
  BATON__AUTH_STATUS_COUNT
};

/* The job's secret: the bytes of BATON_SECRET; len 0 when none is set. */
typedef struct {
  size_t len;
  uint8_t key[BATON__AUTH_SECRET_MAX];
} baton__secret_t;

/* s from text (NULL or "" for none); BATON_EUSAGE when it is too long. */
int baton__secret_set(baton__secret_t *s, const char *text, char *err, size_t errlen);

/*
 * The handshake as a state machine over whole messages, with no I/O, so that
 * an event loop (the store server) and the blocking calls below share it.
 * Every call may leave a message in out (*outlen bytes, 0 for none) that
 * must be sent before anything else; after an error that message, when
 * there is one, tells the peer why, and the connection should be closed.
 */
typedef struct {
  int server, state;
  const baton__secret_t *secret;
  uint8_t mine[BATON__AUTH_NONCE], theirs[BATON__AUTH_NONCE];
  uint32_t body_len, type; /* of the message being read */
} baton__auth_t;

/* Starts a handshake; the client's HELLO goes into out. */
int baton__auth_begin(baton__auth_t *a, int server, const baton__secret_t *s, uint8_t *out,
                      size_t *outlen, char *err, size_t errlen);
/* Checks the next BATON__AUTH_HDR bytes from the peer; *body_len gets how many body
 * bytes follow (at most BATON__AUTH_BODY_MAX). */
int baton__auth_header(baton__auth_t *a, const uint8_t *hdr, size_t *body_len, uint8_t *out,
                       size_t *outlen, char *err, size_t errlen);
/* Consumes that body. BATON_OK; baton__auth_done() says when the peer has
 * proved itself (the server's last message, in out, must still go out). */
int baton__auth_body(baton__auth_t *a, const uint8_t *body, uint8_t *out, size_t *outlen, char *err,
                     size_t errlen);
int baton__auth_done(const baton__auth_t *a);

/* A RESULT with this status, BATON__AUTH_HDR bytes. */
void baton__auth_result_pack(uint8_t *out, unsigned status);
/* When the BATON__AUTH_HDR bytes at b are a RESULT, its status; else -1. */
int baton__auth_result_status(const uint8_t *b);
/* What a status means, for error messages. */
const char *baton__auth_status_text(unsigned status);

/*
 * The whole handshake on a connected socket (blocking or not), before
 * `deadline` (baton__now() seconds). BATON_OK once the peer has proved it
 * knows s; BATON_EAUTH when the secrets differ or one side has none;
 * BATON_EPROTO for bytes that are not a handshake; BATON_EREMOTE,
 * BATON_ETIMEDOUT or BATON_ESYS when the connection fails. err names the
 * peer as `who` and says why.
 */
int baton__auth_client(int fd, const baton__secret_t *s, const char *who, double deadline,
                       char *err, size_t errlen);
int baton__auth_server(int fd, const baton__secret_t *s, const char *who, double deadline,
                       char *err, size_t errlen);

#endif /* BATON_AUTH_H */
