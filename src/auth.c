/*
 * auth.c - the handshake of auth.h: HMAC-SHA256 and random nonces from
 * OpenSSL's libcrypto, the state machine over whole messages, and a blocking
 * driver for any connected socket.
 *
 * Nothing here trusts a length from the peer: each message type has one
 * body length, checked in the header before a byte of the body is read.
 * Proofs are compared in constant time (CRYPTO_memcmp).
 */
#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <poll.h>
#include <pthread.h>

#include "auth.h"
#include "internal.h"
#include "store.h"

enum { C_WAIT_CHALLENGE, C_WAIT_RESULT, S_WAIT_HELLO, S_WAIT_PROOF, A_DONE, A_FAILED };

static const uint32_t body_lens[BATON__AUTH_TYPE_COUNT] = {
    [BATON__AUTH_HELLO] = BATON__AUTH_NONCE,
    [BATON__AUTH_CHALLENGE] = BATON__AUTH_NONCE + BATON__AUTH_MAC,
    [BATON__AUTH_PROOF] = BATON__AUTH_MAC,
    [BATON__AUTH_RESULT] = 0,
};

static const char *const type_names[BATON__AUTH_TYPE_COUNT] = {"?", "HELLO", "CHALLENGE", "PROOF",
                                                               "RESULT"};

static const char *const status_texts[BATON__AUTH_STATUS_COUNT] = {
    [BATON__AUTH_ACCEPTED] = "accepted",
    [BATON__AUTH_BAD_PROOF] = "the proof does not match the secret: the secrets differ",
    [BATON__AUTH_NO_SECRET] = "the other side has no BATON_SECRET while this one has",
    [BATON__AUTH_SECRET_REQUIRED] = "a BATON_SECRET is required and this side sent no handshake",
    [BATON__AUTH_MALFORMED] = "the other side could not read our handshake",
};

const char *baton__auth_status_text(unsigned status) {
  return status < BATON__AUTH_STATUS_COUNT ? status_texts[status] : "unknown status";
}

/* libcrypto would free its tables in an atexit handler while a store
 * thread (of a communicator never destroyed, or of a unique id never used)
 * may still be drawing nonces; it keeps them instead. */
static void crypto_init(void) { OPENSSL_init_crypto(OPENSSL_INIT_NO_ATEXIT, NULL); }
static void crypto_ready(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, crypto_init);
}

int baton__secret_set(baton__secret_t *s, const char *text, char *err, size_t errlen) {
  crypto_ready();
  size_t len = text ? strlen(text) : 0;
  memset(s, 0, sizeof *s);
  if (len > BATON__AUTH_SECRET_MAX) {
    snprintf(err, errlen, "BATON_SECRET is %zu bytes long; at most %d are allowed", len,
             BATON__AUTH_SECRET_MAX);
    return BATON_EUSAGE;
  }
  memcpy(s->key, text ? text : "", len);
  s->len = len;
  return BATON_OK;
}

/* ------------------------------------------------------------ messages */

static void put32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p) {
  return p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static size_t pack(uint8_t *out, unsigned type, unsigned status, const uint8_t *a,
                   const uint8_t *b) {
  put32(out, BATON__AUTH_MAGIC);
  out[4] = BATON__AUTH_VERSION, out[5] = 0;
  out[6] = (uint8_t)type, out[7] = 0;
  put32(out + 8, status);
  put32(out + 12, body_lens[type]);
  size_t n = BATON__AUTH_HDR;
  if (a)
    memcpy(out + n, a, 32), n += 32;
  if (b)
    memcpy(out + n, b, 32), n += 32;
  return n;
}

void baton__auth_result_pack(uint8_t *out, unsigned status) {
  pack(out, BATON__AUTH_RESULT, status, NULL, NULL);
}

int baton__auth_result_status(const uint8_t *b) {
  if (get32(b) != BATON__AUTH_MAGIC || b[6] != BATON__AUTH_RESULT || b[7] != 0 ||
      get32(b + 12) != 0 || get32(b + 8) >= BATON__AUTH_STATUS_COUNT)
    return -1;
  return (int)get32(b + 8);
}

/* mac = HMAC-SHA256(secret, label | n1 | n2). */
static int compute_mac(const baton__secret_t *s, int of_server, const uint8_t *n1,
                       const uint8_t *n2, uint8_t *mac) {
  static const char labels[2][21] = {"baton-auth-v1 client", "baton-auth-v1 server"};
  uint8_t msg[20 + 2 * BATON__AUTH_NONCE];
  unsigned len = 0;
  memcpy(msg, labels[of_server], 20);
  memcpy(msg + 20, n1, BATON__AUTH_NONCE);
  memcpy(msg + 20 + BATON__AUTH_NONCE, n2, BATON__AUTH_NONCE);
  if (!HMAC(EVP_sha256(), s->key, (int)s->len, msg, sizeof msg, mac, &len) ||
      len != BATON__AUTH_MAC)
    return -1;
  return 0;
}

/* ------------------------------------------------------- state machine */

static int fail(baton__auth_t *a, int rc, uint8_t *out, size_t *outlen, int status, char *err,
                size_t errlen, const char *why) {
  snprintf(err, errlen, "%s", why);
  a->state = A_FAILED;
  if (status >= 0) {
    baton__auth_result_pack(out, (unsigned)status);
    *outlen = BATON__AUTH_HDR;
  }
  return rc;
}

int baton__auth_begin(baton__auth_t *a, int server, const baton__secret_t *s, uint8_t *out,
                      size_t *outlen, char *err, size_t errlen) {
  crypto_ready();
  memset(a, 0, sizeof *a);
  a->server = server;
  a->secret = s;
  *outlen = 0;
  if (RAND_bytes(a->mine, BATON__AUTH_NONCE) != 1)
    return fail(a, BATON_ESYS, out, outlen, -1, err, errlen, "no random bytes for a nonce");
  a->state = server ? S_WAIT_HELLO : C_WAIT_CHALLENGE;
  if (!server && s->len == 0)
    return fail(a, BATON_EINTERNAL, out, outlen, -1, err, errlen, "a client needs a secret");
  if (!server)
    *outlen = pack(out, BATON__AUTH_HELLO, 0, a->mine, NULL);
  return BATON_OK;
}

/* What the server says to a first message that is not a HELLO. */
static int server_refuses(baton__auth_t *a, const uint8_t *hdr, uint8_t *out, size_t *outlen,
                          char *err, size_t errlen, const char *why) {
  char text[200];
  if (get32(hdr) == BATON__STORE_MAGIC)
    return fail(a, BATON_EAUTH, out, outlen, BATON__AUTH_SECRET_REQUIRED, err, errlen,
                "it sent a store request without a handshake (it has no BATON_SECRET?)");
  snprintf(text, sizeof text, "not a handshake: %s", why);
  return fail(a, BATON_EPROTO, out, outlen, BATON__AUTH_MALFORMED, err, errlen, text);
}

int baton__auth_header(baton__auth_t *a, const uint8_t *hdr, size_t *body_len, uint8_t *out,
                       size_t *outlen, char *err, size_t errlen) {
  uint32_t magic = get32(hdr), status = get32(hdr + 8), blen = get32(hdr + 12);
  unsigned version = hdr[4] | (unsigned)hdr[5] << 8, type = hdr[6] | (unsigned)hdr[7] << 8;
  unsigned want = a->state == C_WAIT_CHALLENGE ? BATON__AUTH_CHALLENGE
                  : a->state == C_WAIT_RESULT  ? BATON__AUTH_RESULT
                  : a->state == S_WAIT_HELLO   ? BATON__AUTH_HELLO
                                               : BATON__AUTH_PROOF;
  char why[160];

  *outlen = *body_len = 0;
  if (a->state == A_DONE || a->state == A_FAILED)
    return fail(a, BATON_EINTERNAL, out, outlen, -1, err, errlen, "the handshake is over");
  if (magic != BATON__AUTH_MAGIC)
    snprintf(why, sizeof why, "bad magic 0x%08x", magic);
  else if (version != BATON__AUTH_VERSION)
    snprintf(why, sizeof why, "unsupported version %u", version);
  else if (type == 0 || type >= BATON__AUTH_TYPE_COUNT)
    snprintf(why, sizeof why, "unknown type %u", type);
  else if (blen != body_lens[type])
    snprintf(why, sizeof why, "%s with a body of %u bytes", type_names[type], blen);
  else if (type == BATON__AUTH_RESULT ? status >= BATON__AUTH_STATUS_COUNT : status != 0)
    snprintf(why, sizeof why, "%s with status %u", type_names[type], status);
  else if (type == BATON__AUTH_RESULT &&
           status != BATON__AUTH_ACCEPTED) /* the peer turns us away */
    return fail(a, BATON_EAUTH, out, outlen, -1, err, errlen, baton__auth_status_text(status));
  else if (type != want)
    snprintf(why, sizeof why, "%s instead of %s", type_names[type], type_names[want]);
  else if (a->state == S_WAIT_HELLO && a->secret->len == 0)
    return fail(a, BATON_EAUTH, out, outlen, BATON__AUTH_NO_SECRET, err, errlen,
                "it sent a handshake but this process has no BATON_SECRET");
  else {
    a->type = type;
    *body_len = a->body_len = blen;
    return BATON_OK;
  }
  if (a->state == S_WAIT_HELLO)
    return server_refuses(a, hdr, out, outlen, err, errlen, why);
  return fail(a, BATON_EPROTO, out, outlen, BATON__AUTH_MALFORMED, err, errlen, why);
}

/* The proof the peer must have sent, or that we send. */
static int proof(baton__auth_t *a, int of_server, uint8_t *mac) {
  const uint8_t *n1 = of_server == a->server ? a->theirs : a->mine;
  const uint8_t *n2 = of_server == a->server ? a->mine : a->theirs;
  return compute_mac(a->secret, of_server, n1, n2, mac);
}

int baton__auth_body(baton__auth_t *a, const uint8_t *body, uint8_t *out, size_t *outlen, char *err,
                     size_t errlen) {
  uint8_t want[BATON__AUTH_MAC], mine[BATON__AUTH_MAC];
  *outlen = 0;
  switch (a->type) {
  case BATON__AUTH_HELLO: /* server: answer the client's nonce, send ours */
    memcpy(a->theirs, body, BATON__AUTH_NONCE);
    if (proof(a, 1, mine) != 0)
      break;
    *outlen = pack(out, BATON__AUTH_CHALLENGE, 0, a->mine, mine);
    a->state = S_WAIT_PROOF;
    return BATON_OK;
  case BATON__AUTH_CHALLENGE: /* client: check the server's proof, send ours */
    memcpy(a->theirs, body, BATON__AUTH_NONCE);
    if (proof(a, 1, want) != 0 || proof(a, 0, mine) != 0)
      break;
    if (CRYPTO_memcmp(want, body + BATON__AUTH_NONCE, BATON__AUTH_MAC) != 0)
      return fail(a, BATON_EAUTH, out, outlen, BATON__AUTH_BAD_PROOF, err, errlen,
                  "the server's proof does not match this process's BATON_SECRET: the "
                  "secrets differ");
    *outlen = pack(out, BATON__AUTH_PROOF, 0, mine, NULL);
    a->state = C_WAIT_RESULT;
    return BATON_OK;
  case BATON__AUTH_PROOF: /* server: check the client's proof */
    if (proof(a, 0, want) != 0)
      break;
    if (CRYPTO_memcmp(want, body, BATON__AUTH_MAC) != 0)
      return fail(a, BATON_EAUTH, out, outlen, BATON__AUTH_BAD_PROOF, err, errlen,
                  "its proof does not match this process's BATON_SECRET: the secrets differ");
    baton__auth_result_pack(out, BATON__AUTH_ACCEPTED);
    *outlen = BATON__AUTH_HDR;
    a->state = A_DONE;
    return BATON_OK;
  case BATON__AUTH_RESULT: /* client: accepted (a refusal failed in the header) */
    a->state = A_DONE;
    return BATON_OK;
  default:
    return fail(a, BATON_EINTERNAL, out, outlen, -1, err, errlen, "no header read");
  }
  return fail(a, BATON_ESYS, out, outlen, -1, err, errlen, "HMAC-SHA256 failed in libcrypto");
}

int baton__auth_done(const baton__auth_t *a) { return a->state == A_DONE; }

/* ------------------------------------------------------ blocking driver */

/* Moves exactly len bytes before the deadline; on failure err says why. */
static int xfer_all(int fd, int sending, uint8_t *buf, size_t len, double deadline, char *err,
                    size_t errlen) {
  for (size_t done = 0; done < len;) {
    ssize_t r = sending ? send(fd, buf + done, len - done, MSG_NOSIGNAL | MSG_DONTWAIT)
                        : recv(fd, buf + done, len - done, MSG_DONTWAIT);
    if (r > 0) {
      done += (size_t)r;
      continue;
    }
    if (r == 0) {
      snprintf(err, errlen, "the connection closed during the handshake");
      return BATON_EREMOTE;
    }
    if (errno == EINTR)
      continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      snprintf(err, errlen, "%s: %s", sending ? "send" : "recv", strerror(errno));
      return errno == ECONNRESET || errno == EPIPE ? BATON_EREMOTE : BATON_ESYS;
    }
    int rc = baton__wait_fd(fd, sending ? POLLOUT : POLLIN, deadline);
    if (rc == BATON_ETIMEDOUT)
      snprintf(err, errlen, "the handshake did not finish in time");
    else if (rc != BATON_OK)
      snprintf(err, errlen, "poll: %s", strerror(errno));
    if (rc != BATON_OK)
      return rc;
  }
  return BATON_OK;
}

static int drive(int server, int fd, const baton__secret_t *s, double deadline, char *err,
                 size_t errlen) {
  uint8_t in[BATON__AUTH_MSG_MAX], out[BATON__AUTH_MSG_MAX];
  size_t outlen, body_len;
  baton__auth_t a;
  int rc = baton__auth_begin(&a, server, s, out, &outlen, err, errlen);
  while (rc == BATON_OK) {
    if (outlen && (rc = xfer_all(fd, 1, out, outlen, deadline, err, errlen)) != BATON_OK)
      return rc;
    if (baton__auth_done(&a))
      return BATON_OK;
    if ((rc = xfer_all(fd, 0, in, BATON__AUTH_HDR, deadline, err, errlen)) != BATON_OK ||
        (rc = baton__auth_header(&a, in, &body_len, out, &outlen, err, errlen)) != BATON_OK ||
        (rc = xfer_all(fd, 0, in, body_len, deadline, err, errlen)) != BATON_OK)
      break;
    rc = baton__auth_body(&a, in, out, &outlen, err, errlen);
  }
  if (outlen) { /* tell the peer why, as far as it will listen */
    char ignored[64];
    xfer_all(fd, 1, out, outlen, baton__now(), ignored, sizeof ignored);
  }
  return rc;
}

static int auth_run(int server, int fd, const baton__secret_t *s, const char *who, double deadline,
                    char *err, size_t errlen) {
  char why[BATON__ERRLEN];
  if (s->len == 0)
    return BATON_OK; /* no secret: no handshake, as before */
  int rc = drive(server, fd, s, deadline, why, sizeof why);
  if (rc != BATON_OK)
    snprintf(err, errlen, "authenticating %s%s: %s", server ? "" : "with ", who, why);
  return rc;
}

int baton__auth_client(int fd, const baton__secret_t *s, const char *who, double deadline,
                       char *err, size_t errlen) {
  return auth_run(0, fd, s, who, deadline, err, errlen);
}

int baton__auth_server(int fd, const baton__secret_t *s, const char *who, double deadline,
                       char *err, size_t errlen) {
  return auth_run(1, fd, s, who, deadline, err, errlen);
}
