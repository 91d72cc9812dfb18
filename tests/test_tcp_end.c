/*
 * test_tcp_end.c - how the TCP transport ends its connections
 * (tcp_destroy in src/transport/tcp_setup.c), with real loopback sockets
 * and this process playing each peer.
 *
 *   test_tcp_end
 *
 * A clean end (baton_comm_destroy's barrier passed) ends this rank's
 * outgoing streams first, then reads what the incoming ones still carry
 * (a peer's late ping) until the peer ends them too: the peer sees the
 * end of the stream and never a reset, whether it ends before this rank
 * closes or after. A peer that never ends is closed on after BATON_TIMEOUT;
 * an unclean end, or a failed connection, closes at once.
 */
#include <fcntl.h>
#include <pthread.h>

#include "transport/tcp_impl.h"
#include "unit.h"

/* Two ends of a loopback TCP connection; *mine is non-blocking, as the
 * transport's sockets are. */
static void tcp_pair(int *mine, int *theirs) {
  struct sockaddr_in sa = {.sin_family = AF_INET};
  socklen_t sl = sizeof sa;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int l = socket(AF_INET, SOCK_STREAM, 0);
  if (l < 0 || bind(l, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(l, 1) != 0 ||
      getsockname(l, (struct sockaddr *)&sa, &sl) != 0) {
    perror("tcp_pair");
    exit(2);
  }
  *theirs = socket(AF_INET, SOCK_STREAM, 0);
  if (*theirs < 0 || connect(*theirs, (struct sockaddr *)&sa, sizeof sa) != 0 ||
      (*mine = accept(l, NULL, NULL)) < 0) {
    perror("tcp_pair");
    exit(2);
  }
  close(l);
  fcntl(*mine, F_SETFL, fcntl(*mine, F_GETFL) | O_NONBLOCK);
  struct timeval tv = {20, 0}; /* the peer's reads never wait for ever */
  setsockopt(*theirs, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
}

/* A transport of rank 0 with one connection to rank 1 (sending) and one
 * from it; the peer's ends in peer_in (what rank 0 sends arrives there)
 * and peer_out (what the peer sends rank 0). */
static baton__tcp_t *transport(double timeout_s, int *peer_in, int *peer_out) {
  static char hosts[2][64] = {"here", "there"};
  baton__tcp_t *t = calloc(1, sizeof *t);
  t->rank = 0, t->size = 2, t->timeout_s = timeout_s, t->hosts = hosts;
  t->to = calloc(2, sizeof *t->to), t->from = calloc(2, sizeof *t->from);
  t->all = calloc(2, sizeof *t->all);
  t->pfd = calloc(2, sizeof *t->pfd), t->pfd_conn = calloc(2, sizeof *t->pfd_conn);
  for (int sending = 1; sending >= 0; sending--) {
    tcp_conn_t *c = calloc(1, sizeof *c);
    c->t = t, c->sending = sending, c->nsocks = 1, c->conn.peer = 1;
    tcp_pair(&c->s[0].fd, sending ? peer_in : peer_out);
    t->all[t->nall++] = c;
    (sending ? t->to : t->from)[1] = c;
  }
  return t;
}

/* What a read on the peer's socket shows: 0 the end of the stream, -1 a
 * reset (or any error), 1 bytes. */
static int peer_reads(int fd) {
  char b[64];
  ssize_t r = recv(fd, b, sizeof b, 0);
  return r > 0 ? 1 : r == 0 ? 0 : -1;
}

static const char ping[BATON__FRAME_HDR] = "a ping no one here will read";

/* The peer ends its stream before this rank destroys: its ping and its end
 * are both waiting, and the drain reads them. */
static void peer_ended_first(void) {
  int in, out;
  baton__tcp_t *t = transport(10, &in, &out);
  EXPECT(send(out, ping, sizeof ping, MSG_NOSIGNAL) == (ssize_t)sizeof ping, "send the ping");
  shutdown(out, SHUT_WR);
  nap(0.02); /* on its way, unread */
  double t0 = baton__now();
  baton__tcp_fabric.destroy(t, 1);
  double took = baton__now() - t0;
  EXPECT(took < 5, "destroy took %.3f s of its 10 s timeout with the peer's end waiting", took);
  EXPECT_EQ(peer_reads(in), 0);  /* this rank's outgoing stream: ended */
  EXPECT_EQ(peer_reads(out), 0); /* the peer's: closed without a reset */
  close(in), close(out);
}

/* The peer, still finishing the last call, pings after this rank begins to
 * end and ends only once it has seen this rank's outgoing stream end. */
typedef struct {
  int in, out, saw_end;
} late_t;

static void *late_peer(void *arg) {
  late_t *p = arg;
  nap(0.1);
  ssize_t w = send(p->out, ping, sizeof ping, MSG_NOSIGNAL);
  (void)w;
  p->saw_end = peer_reads(p->in) == 0;
  shutdown(p->out, SHUT_WR);
  return NULL;
}

static void peer_ends_later(void) {
  late_t p = {0};
  baton__tcp_t *t = transport(10, &p.in, &p.out);
  pthread_t th;
  pthread_create(&th, NULL, late_peer, &p);
  double t0 = baton__now();
  baton__tcp_fabric.destroy(t, 1);
  double took = baton__now() - t0;
  pthread_join(th, NULL);
  EXPECT(p.saw_end, "the peer did not see this rank's outgoing stream end before its own end");
  EXPECT(took >= 0.1, "destroy returned after %.3f s, before the peer had ended (0.1 s)", took);
  EXPECT(took < 5, "destroy took %.3f s of its 10 s timeout: it waited for its own end", took);
  EXPECT_EQ(peer_reads(p.out), 0); /* the ping was read: no reset */
  close(p.in), close(p.out);
}

/* A peer that never ends: closed on once BATON_TIMEOUT has passed. */
static void peer_never_ends(void) {
  int in, out;
  baton__tcp_t *t = transport(0.05, &in, &out);
  double t0 = baton__now();
  baton__tcp_fabric.destroy(t, 1);
  double took = baton__now() - t0;
  EXPECT(took >= 0.05, "destroy returned after %.3f s, before its 0.05 s timeout", took);
  EXPECT_EQ(peer_reads(in), 0);
  close(in), close(out);
}

/* No clean end: close at once, whatever the peer does. */
static void unclean(int failed) {
  int in, out;
  baton__tcp_t *t = transport(10, &in, &out);
  if (failed)
    t->all[1]->failed = BATON_EREMOTE;
  double t0 = baton__now();
  baton__tcp_fabric.destroy(t, failed);
  double took = baton__now() - t0;
  EXPECT(took < 5, "destroy (%s) waited %.3f s for a peer", failed ? "failed" : "unclean", took);
  EXPECT_EQ(peer_reads(in), 0);
  close(in), close(out);
}

int main(void) {
  baton__log_level = BATON__LOG_NONE; /* peer_never_ends warns, as it should */
  peer_ended_first();
  peer_ends_later();
  peer_never_ends();
  unclean(0);
  unclean(1);
  return unit_summary();
}
