/*
 * test_hostile.c - strangers attack a running job's store port while the
 * job joins and runs collectives; the job must finish with correct results.
 *
 *   baton-run -n N build/tests/test_hostile [ROUNDS]
 *
 * Before it joins, the last rank forks an attacker that knows the job's
 * address and secret (from the environment baton-run set) and, ROUNDS times
 * (default 20): sends garbage; a header cut short; store and handshake
 * headers with huge lengths; a store request without a handshake; connects
 * with a wrong secret and with none (baton__store_connect must say
 * BATON_EAUTH); runs baton_comm_init itself with a wrong secret and with
 * none (BATON_EAUTH, before it could send a byte of data); and replays a
 * handshake it recorded. Every one must be turned away. Meanwhile the ranks
 * join and run allreduces whose results they check exactly, until the
 * attacker is done; its exit status is one more check.
 */
#include <signal.h>
#include <sys/wait.h>

#include "common.h"
#include "hostile.h"
#include "store.h"

/* One round of attacks on the store at host:port. */
static void attack_round(const char *host, int port, const baton__secret_t *s) {
  baton__secret_t wrong, none;
  char err[BATON__ERRLEN] = "";
  uint8_t b[4 * BATON__AUTH_MSG_MAX];
  baton__store_t *st = NULL;

  expect_refused(port, "garbage", "\x16\x03\x01\x02\x00garbage, not a handshake", 30, -1);
  baton__store_hdr_pack(b, BATON__OP_SET, 3, 0xffffffffu);
  expect_refused(port, "a store header with a 4 GiB value", b, BATON__STORE_HDR, -1);
  int fd = raw_connect(host, port); /* a header cut short, then gone */
  EXPECT(fd >= 0 && send(fd, b, 7, MSG_NOSIGNAL) == 7, "a header cut short: cannot send");
  if (fd >= 0)
    close(fd);
  size_t n = record_handshake(port, s, b);
  expect_refused(port, "a recorded handshake played again", b, n, BATON__AUTH_BAD_PROOF);
  b[12] = b[13] = b[14] = b[15] = 0xff; /* the HELLO now claims a 4 GiB body */
  expect_refused(port, "a handshake header with a 4 GiB body", b, BATON__AUTH_HDR,
                 BATON__AUTH_MALFORMED);

  baton__secret_set(&wrong, "not the job's secret", err, sizeof err);
  baton__secret_set(&none, "", err, sizeof err);
  EXPECT_RC(baton__store_connect(host, port, 5, &wrong, &st, err, sizeof err), BATON_EAUTH, err);
  if (baton__store_connect(host, port, 5, &none, &st, err, sizeof err) == BATON_OK) {
    char v[8];
    size_t len;
    EXPECT_RC(baton__store_get(st, "shm.name", v, sizeof v, &len, 5, err, sizeof err), BATON_EAUTH,
              err);
    baton__store_close(st);
  }
}

/* A whole process that tries to join with a wrong secret, then none. */
static void join_round(const char *secret) {
  baton_comm_t *comm = NULL;
  setenv("BATON_SECRET", "not the job's secret", 1);
  int rc = baton_comm_init(&comm);
  EXPECT_RC(rc, BATON_EAUTH, baton_last_init_error());
  unsetenv("BATON_SECRET");
  rc = baton_comm_init(&comm);
  EXPECT_RC(rc, BATON_EAUTH, baton_last_init_error());
  EXPECT(comm == NULL, "a refused baton_comm_init leaves *comm NULL");
  setenv("BATON_SECRET", secret, 1);
}

static void attacker(int rounds) {
  char host[256], err[BATON__ERRLEN] = "";
  const char *addr = getenv("BATON_ADDR"), *text = getenv("BATON_SECRET");
  baton__secret_t s;
  int port;
  setenv("BATON_DEBUG", "NONE", 1); /* its own refusals would be noise */
  baton__log_level = BATON__LOG_NONE;
  if (!text || !*text || baton__secret_set(&s, text, err, sizeof err) != BATON_OK ||
      baton__parse_hostport(addr, "BATON_ADDR", host, sizeof host, &port, err, sizeof err)) {
    fprintf(stderr, "attacker: run me under baton-run, which sets a secret: %s\n", err);
    _exit(2);
  }
  setenv("BATON_RANK", "1", 1); /* a rank that is not 0 connects, never serves */
  setenv("BATON_SIZE", "2", 1);
  for (int i = 0; i < 100; i++) { /* until the store is up, at most 10 s */
    int fd = raw_connect(host, port);
    if (fd >= 0) {
      close(fd);
      break;
    }
    nap(0.1);
  }
  for (int r = 0; r < rounds; r++) {
    attack_round(host, port, &s);
    join_round(text);
  }
  printf("attacker, %d rounds: ", rounds);
  int rc = unit_summary();
  fflush(stdout);
  _exit(rc);
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 20;
  int size = getenv("BATON_SIZE") ? atoi(getenv("BATON_SIZE")) : 1;
  int rank = getenv("BATON_RANK") ? atoi(getenv("BATON_RANK")) : 0;
  pid_t child = -1;
  if (rank == size - 1 && (child = fork()) == 0)
    attacker(rounds);
  tally_t t;
  tally_init(&t); /* exits when the attacks kept the job from forming */

  /* Allreduces checked exactly, until the attacker is done; the last
   * element carries the attacker's verdict from its parent: 0 while it
   * runs, 1 when it passed, 2 when it did not. */
  enum { N = 4099 };
  int64_t *buf = malloc((N + 1) * sizeof *buf);
  int status = -1, calls = 0, wrong = 0;
  for (buf[N] = 0; buf[N] == 0 && !t.broken; calls++) {
    for (int i = 0; i < N; i++)
      buf[i] = (int64_t)(t.rank + 1) * (i + calls);
    buf[N] = 0;
    if (child > 0 && waitpid(child, &status, WNOHANG) == child)
      buf[N] = WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 1 : 2;
    if (!tally_rc(&t, baton_allreduce(buf, buf, N + 1, BATON_INT64, BATON_SUM, t.comm),
                  "allreduce under attack"))
      break;
    int64_t ranks = (int64_t)t.size * (t.size + 1) / 2;
    for (int i = 0; i < N; i++)
      wrong += buf[i] != ranks * (i + calls);
  }
  if (!tally_record(&t, wrong == 0))
    tally_say(&t, "%d elements wrong over %d allreduces", wrong, calls);
  if (!tally_record(&t, buf[N] == 1))
    tally_say(&t, "the attacker got through, or failed (verdict %lld, wait status %d)",
              (long long)buf[N], status);
  if (t.rank == 0)
    printf("%d allreduces ran while the store was attacked\n", calls);
  free(buf);
  return tally_finish(&t);
}
