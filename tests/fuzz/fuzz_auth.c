/*
 * fuzz_auth.c - the handshake of src/auth.c, from either side: the input
 * plays the peer. Byte 0 picks the role (bit 0: we are the server) and
 * whether this side has the secret (bit 1); the rest is written to the far
 * end of a socket pair, which then hangs up, and the blocking driver runs
 * on the near end until it succeeds or fails. Forging a proof is beyond a
 * fuzzer, so success is only possible when neither side has a secret.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "auth.h"
#include "internal.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  baton__log_level = BATON__LOG_NONE;
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char err[BATON__ERRLEN];
  baton__secret_t s;
  int sv[2];
  if (size < 1)
    return 0;
  if (size > BATON__AUTH_HDR)
    baton__auth_result_status(data + 1);
  baton__secret_set(&s, data[0] & 2 ? "" : "fuzz-secret", err, sizeof err);
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) != 0)
    abort();
  ssize_t w = send(sv[1], data + 1, size - 1, MSG_NOSIGNAL);
  (void)w;
  shutdown(sv[1], SHUT_WR);
  int rc = data[0] & 1 ? baton__auth_server(sv[0], &s, "fuzz", baton__now() + 1, err, sizeof err)
                       : baton__auth_client(sv[0], &s, "fuzz", baton__now() + 1, err, sizeof err);
  if (rc == BATON_OK && s.len > 0)
    abort(); /* a proof was forged, or a check is missing */
  close(sv[0]);
  close(sv[1]);
  return 0;
}
