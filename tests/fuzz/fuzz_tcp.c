/*
 * fuzz_tcp.c - the receiving side of the TCP transport (src/transport/tcp_*.c,
 * included whole so that the target can build one connection by hand): the
 * input plays the peer's byte stream on a socket pair, and this side takes
 * frames as the executor does (recv_acquire / recv_release) until the
 * stream ends or is refused. Byte 0 picks the slot size and the number of
 * sockets' worth of slots; every frame header is checked before its
 * payload is trusted, so nothing here may crash, hang or read past a slot.
 */
#define EXPLAIN_S 0 /* no peer will explain a closed stream here */
#include "../../src/transport/tcp_wire.c"
#include "../../src/transport/tcp_progress.c"
#include "../../src/transport/tcp_setup.c"

int LLVMFuzzerInitialize(int *argc, char ***argv);
volatile uint8_t sink;
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  baton__log_level = BATON__LOG_NONE;
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1)
    return 0;
  static char hosts[2][64] = {"me", "peer"};
  baton__sig_t sig = {.seq = 1, .count = 8, .root = -1, .coll = 0, .dtype = 8, .op = 0};
  baton__params_t p = {.nsocks = 1,
                       .shm_slots = 4 + (data[0] & 3),
                       .segment_bytes = 64u << (data[0] >> 4 & 7),
                       .timeout_s = 0.02};
  baton__tcp_t t = {.rank = 0,
                    .size = 2,
                    .comm_id = 0x1122334455667788ull,
                    .sig = &sig,
                    .timeout_s = 0.02,
                    .hosts = hosts};
  tcp_conn_t *c = conn_new(&t, 1, 0, &p);
  if (!c)
    return 0;
  tcp_conn_t *all[1] = {c};
  struct pollfd pfd[1];
  tcp_conn_t *pconn[1];
  t.all = all, t.nall = 1, t.pfd = pfd, t.pfd_conn = pconn;
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) != 0)
    abort();
  c->s[0].fd = sv[0];
  ssize_t w = send(sv[1], data + 1, size - 1, MSG_NOSIGNAL);
  (void)w;
  shutdown(sv[1], SHUT_WR);
  for (int i = 0; i < 64; i++) {
    const void *slot;
    size_t bytes;
    if (tcp_recv_acquire(&c->conn, &slot, &bytes) != 0)
      break;
    if (bytes > c->conn.slot_bytes)
      abort(); /* a frame longer than its slot got through */
    for (size_t k = 0; k < bytes; k++)
      sink ^= ((const uint8_t *)slot)[k]; /* ASan sees any read past the slot */
    tcp_recv_release(&c->conn);
  }
  close(sv[0]);
  close(sv[1]);
  c->s[0].fd = -1;
  free(c->s[0].stage), free(c->slots), free(c->len), free(c->sig), free(c->kind), free(c->ref);
  free(c);
  return 0;
}
