/*
 * fuzz_store_client.c - the store client's reading of server bytes: reply
 * headers, values longer or shorter than the caller's buffer, a handshake
 * RESULT in place of a reply, and a connection that ends anywhere.
 *
 * It includes src/store.c to build a client around one end of a socket
 * pair; the input, as the server's side of the conversation, is written to
 * the other end, which then hangs up, so no call ever waits. Byte 0 picks
 * the sequence of requests. The same input also goes through
 * baton__parse_hostport, the parser of BATON_ADDR.
 */
#include "../../src/store.c"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  baton__log_level = BATON__LOG_NONE;
  return 0;
}

static void parse_addr(const uint8_t *data, size_t size) {
  char s[300], host[64], err[BATON__ERRLEN];
  int port;
  size_t n = size < sizeof s - 1 ? size : sizeof s - 1;
  memcpy(s, data, n);
  s[n] = '\0';
  baton__parse_hostport(s, "BATON_ADDR", host, sizeof host, &port, err, sizeof err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char err[BATON__ERRLEN];
  uint8_t small[8], big[2048];
  size_t len;
  int sv[2];
  if (size < 1)
    return 0;
  parse_addr(data, size);
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) != 0)
    abort();
  ssize_t w = send(sv[1], data + 1, size - 1, MSG_NOSIGNAL);
  (void)w;
  shutdown(sv[1], SHUT_WR);
  baton__store_t st = {.fd = sv[0], .timeout_s = 1};
  snprintf(st.addr, sizeof st.addr, "fuzz");
  for (unsigned plan = data[0], i = 0; i < 4 && !st.broken; i++, plan >>= 2) {
    switch (plan & 3) {
    case 0:
      baton__store_set(&st, "key", "value", 5, err, sizeof err);
      break;
    case 1:
      baton__store_get(&st, "key", small, sizeof small, &len, 1, err, sizeof err);
      break;
    case 2:
      baton__store_get(&st, "key", big, sizeof big, &len, 1, err, sizeof err);
      break;
    default:
      baton__store_get(&st, "key", NULL, 0, &len, 1, err, sizeof err);
      break;
    }
  }
  close(sv[0]);
  close(sv[1]);
  return 0;
}
