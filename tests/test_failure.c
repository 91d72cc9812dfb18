/*
 * test_failure.c - lost ranks, aborts and mismatched calls: every rank must
 * fail fast, with the right code and a message that says what happened.
 *
 *   test_failure kill N       rank N-1 is SIGKILLed in the middle of a run of
 *                             4 MiB allreduces (broadcasts from rank 0 with
 *                             TEST_COLL=broadcast; with TEST_KILL_MS=T it
 *                             dies T ms into the third call, or a later
 *                             one, instead of before it); every other rank's call
 *                             must fail within 2 s with BATON_EREMOTE (or
 *                             ETIMEDOUT) naming rank N-1, the collective's
 *                             number and the step, and later calls at once
 *   test_failure abort N      rank 0 is stuck waiting for rank N-1; another
 *                             thread of rank 0 calls baton_comm_abort, which
 *                             must wake it (EABORTED); rank N-1, arriving
 *                             late, must fail fast too
 *   test_failure split N      as kill, with a child made by baton_comm_split
 *                             (one color, keys reversed) beside the parent:
 *                             every survivor's calls on both fail within 2 s
 *                             with BATON_EREMOTE
 *   test_failure family N     rank N-1 is SIGKILLed; the survivors have a child
 *                             of the parent without it, and a grandchild: a
 *                             receive in flight on the child and an
 *                             allreduce on the grandchild (rank 0 only) must
 *                             fail within 2 s of the parent's failure, and
 *                             later calls on both at once, naming the
 *                             parent (issue 17)
 *   test_failure mismatch N   six ways of calling different things on one
 *                             rank (in one, every rank waits to receive);
 *                             every rank must return BATON_EMISMATCH
 *                             naming both calls; then alltoallv where rank
 *                             0's sendcount for rank N-1 differs from rank
 *                             N-1's recvcount for rank 0 (and once where
 *                             one of them is 0): both must return
 *                             BATON_EMISMATCH naming both counts, the
 *                             others EMISMATCH or BATON_OK
 *
 * The test starts its own ranks (fork and exec, the unique id passed on
 * the command line), so that a rank can die without the launcher stopping
 * the others. The environment is inherited: BATON_TRANSPORT=tcp runs it over
 * TCP, TEST_HOSTS=k makes groups of k ranks look like separate hosts
 * (BATON_HOSTID). Prints `N passed, M failed`.
 */
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "baton.h"

#define NCASES 6
#define NIDS (NCASES + 2) /* and the two alltoallv cases */
#define BIG (1 << 20)     /* floats: 4 MiB, the ring */

static int passed, failed, rank, size;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void check(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void check(int ok, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "rank %d: %s ", rank, ok ? "ok  " : "FAIL");
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  ok ? passed++ : failed++;
}

static void hex_of(const baton_unique_id_t *id, char *hex) {
  for (size_t i = 0; i < sizeof *id; i++)
    sprintf(hex + 2 * i, "%02x", (unsigned char)id->internal[i]);
}

static void id_of(const char *hex, baton_unique_id_t *id) {
  for (size_t i = 0; i < sizeof *id; i++) {
    unsigned v = 0;
    sscanf(hex + 2 * i, "%2x", &v);
    id->internal[i] = (char)v;
  }
}

static baton_comm_t *join(const baton_unique_id_t *id) {
  baton_comm_t *comm;
  int rc = baton_comm_init_rank(&comm, size, id, rank);
  if (rc != BATON_OK) {
    fprintf(stderr, "rank %d: init: %s: %s\n", rank, baton_err_name(rc), baton_last_init_error());
    exit(3);
  }
  return comm;
}

/* ------------------------------------------------------------------ kill */

static void *kill_later(void *ms) {
  struct timespec ts = {0, (long)(intptr_t)ms * 1000000L};
  nanosleep(&ts, NULL);
  kill(getpid(), SIGKILL);
  return NULL;
}

static void run_kill(const baton_unique_id_t *id) {
  baton_comm_t *comm = join(id);
  float *buf = calloc(BIG, sizeof *buf);
  int victim = size - 1;
  const char *coll = getenv("TEST_COLL") ? getenv("TEST_COLL") : "allreduce";
  int bcast = strcmp(coll, "broadcast") == 0;
  /* TEST_KILL_MS: the victim dies that long into the third call, or into
   * a later one if the third is over by then; the others call until one
   * fails. Else it dies just before the third. */
  int later = getenv("TEST_KILL_MS") ? atoi(getenv("TEST_KILL_MS")) : 0;
  later = later > 0 && later < 1000 ? later : 0;
  int failed_at = -1, calls = later ? 1000 : 5;
  for (int i = 0; i < calls && (failed_at < 0 || i <= failed_at + 2); i++) {
    pthread_t t;
    if (i == 2 && rank == victim &&
        (!later || pthread_create(&t, NULL, kill_later, (void *)(intptr_t)later) != 0))
      kill(getpid(), SIGKILL);
    double t0 = now();
    int rc = bcast ? baton_broadcast(buf, buf, BIG, BATON_FLOAT32, 0, comm)
                   : baton_allreduce(buf, buf, BIG, BATON_FLOAT32, BATON_SUM, comm);
    double took = now() - t0;
    if (i < 2 || (later && failed_at < 0 && rc == BATON_OK)) {
      check(rc == BATON_OK || i >= 2, "%s %d before the kill: %s", coll, i, baton_err_name(rc));
      continue;
    }
    int first = failed_at < 0;
    if (first)
      failed_at = i;
    const char *msg = baton_comm_last_error(comm);
    char who[32], num[24];
    snprintf(who, sizeof who, "rank %d", victim);
    snprintf(num, sizeof num, "#%d", failed_at + 1); /* the call the victim died in */
    int named = strstr(msg, who) != NULL && strstr(msg, num) != NULL;
    check((rc == BATON_EREMOTE || rc == BATON_ETIMEDOUT) && took < 2.0 && named,
          "%s %d after the kill: %s in %.3f s: %s", coll, i, baton_err_name(rc), took, msg);
    if (first)
      check(strstr(msg, "step") != NULL || strstr(msg, "failed earlier") != NULL,
            "the first failure names the step");
  }
  check(failed_at >= 0, "%s: a call failed once rank %d was killed (%d calls)", coll, victim,
        calls);
  free(buf);
  baton_comm_destroy(comm);
}

/* ----------------------------------------------------------------- split */

static void run_split_kill(const baton_unique_id_t *id) {
  baton_comm_t *comm = join(id), *child = NULL;
  int rc = baton_comm_split(comm, 0, -rank, &child);
  check(rc == BATON_OK && child, "split: %s", baton_err_name(rc));
  if (!child)
    exit(1);
  float *buf = calloc(BIG, sizeof *buf);
  int victim = size - 1;
  for (int i = 0; i < 4; i++) {
    if (i == 2 && rank == victim)
      kill(getpid(), SIGKILL);
    baton_comm_t *on[2] = {comm, child};
    for (int k = 0; k < 2; k++) {
      double t0 = now();
      rc = baton_allreduce(buf, buf, BIG, BATON_FLOAT32, BATON_SUM, on[k]);
      double took = now() - t0;
      if (i < 2)
        check(rc == BATON_OK, "%s allreduce %d before the kill: %s", k ? "child" : "parent", i,
              baton_err_name(rc));
      else
        check(rc == BATON_EREMOTE && took < 2.0, "%s allreduce %d after the kill: %s in %.3f s: %s",
              k ? "child" : "parent", i, baton_err_name(rc), took, baton_comm_last_error(on[k]));
    }
  }
  baton_comm_t *again = (baton_comm_t *)1;
  rc = baton_comm_split(comm, 0, 0, &again);
  check(rc == BATON_EREMOTE && !again, "a split of the failed parent: %s", baton_err_name(rc));
  free(buf);
  baton_comm_destroy(child);
  baton_comm_destroy(comm);
}

/* ---------------------------------------------------------------- family */

static int names_parent(int rc, baton_comm_t *comm) {
  return rc != BATON_OK && strstr(baton_comm_last_error(comm), "parent communicator") != NULL;
}

static void run_family_kill(const baton_unique_id_t *id) {
  baton_comm_t *comm = join(id), *child = NULL, *grand = NULL;
  int victim = size - 1;
  int rc = baton_comm_split(comm, rank == victim ? BATON_SPLIT_NONE : 0, rank, &child);
  check(rc == BATON_OK && (child != NULL) == (rank != victim), "split without the victim: %s",
        baton_err_name(rc));
  float *buf = calloc(BIG, sizeof *buf), x[4] = {0}, y[4];
  if (rank == victim) {
    baton_allreduce(buf, buf, BIG, BATON_FLOAT32, BATON_SUM, comm);
    kill(getpid(), SIGKILL);
  }
  if (!child)
    exit(1);
  rc = baton_comm_dup(child, &grand);
  check(rc == BATON_OK, "the grandchild: %s", baton_err_name(rc));
  int n = baton_comm_size(child), me = baton_comm_rank(child);
  baton_request_t *r[2] = {NULL, NULL};
  if (n > 1)
    baton_irecv(x, 4, BATON_FLOAT32, (me + 1) % n, 7, child, &r[0]);
  if (n > 1 && me == 0)
    baton_iallreduce(x, y, 4, BATON_FLOAT32, BATON_SUM, grand, &r[1]);
  rc = baton_allreduce(buf, buf, BIG, BATON_FLOAT32, BATON_SUM, comm);
  check(rc == BATON_OK, "the parent's allreduce before the kill: %s", baton_err_name(rc));
  double t0 = now();
  rc = baton_allreduce(buf, buf, BIG, BATON_FLOAT32, BATON_SUM, comm);
  double took = now() - t0;
  check((rc == BATON_EREMOTE || rc == BATON_ETIMEDOUT) && took < 2.0,
        "the parent's allreduce after the kill: %s in %.3f s", baton_err_name(rc), took);
  baton_comm_t *on[2] = {child, grand};
  t0 = now();
  for (int k = 0; k < 2; k++)
    if (r[k]) {
      rc = baton_wait(r[k]);
      took = now() - t0;
      check(names_parent(rc, on[k]) && took < 2.0, "the %s's call in flight: %s in %.3f s: %s",
            k ? "grandchild" : "child", baton_err_name(rc), took, baton_comm_last_error(on[k]));
    }
  for (int k = 0; k < 2; k++) {
    t0 = now();
    rc = baton_barrier(on[k]);
    took = now() - t0;
    check(names_parent(rc, on[k]) && took < 0.5, "a barrier on the %s after: %s in %.3f s: %s",
          k ? "grandchild" : "child", baton_err_name(rc), took, baton_comm_last_error(on[k]));
  }
  free(buf);
  baton_comm_destroy(grand);
  baton_comm_destroy(child);
  baton_comm_destroy(comm);
}

/* ----------------------------------------------------------------- abort */

static void *abort_later(void *comm) {
  usleep(300 * 1000);
  baton_comm_abort(comm);
  return NULL;
}

static void run_abort(const baton_unique_id_t *id) {
  baton_comm_t *comm = join(id);
  float *buf = calloc(BIG, sizeof *buf);
  int late = size - 1;
  int rc = baton_allreduce(buf, buf, BIG, BATON_FLOAT32, BATON_SUM, comm);
  check(rc == BATON_OK, "allreduce before the abort: %s", baton_err_name(rc));
  pthread_t th;
  if (rank == 0)
    pthread_create(&th, NULL, abort_later, comm);
  if (rank == late)
    sleep(2); /* rank 0's call cannot finish without this rank */
  double t0 = now();
  rc = baton_allreduce(buf, buf, BIG, BATON_FLOAT32, BATON_SUM, comm);
  double took = now() - t0;
  const char *msg = baton_comm_last_error(comm);
  if (rank == 0) {
    pthread_join(th, NULL);
    check(rc == BATON_EABORTED && took < 1.5 && strstr(msg, "baton_comm_abort"),
          "the aborting rank's waiter woke: %s in %.3f s: %s", baton_err_name(rc), took, msg);
    t0 = now();
    rc = baton_barrier(comm);
    check(rc == BATON_EABORTED && now() - t0 < 0.1, "a call after the abort: %s",
          baton_err_name(rc));
  } else {
    check((rc == BATON_EABORTED || rc == BATON_EREMOTE) && took < 2.0,
          "a peer of the aborted rank failed fast: %s in %.3f s: %s", baton_err_name(rc), took,
          msg);
  }
  check(baton_comm_abort(NULL) == BATON_EINVAL, "baton_comm_abort(NULL) is EINVAL");
  free(buf);
  baton_comm_destroy(comm);
}

/* -------------------------------------------------------------- mismatch */

/* Case k: what the odd rank (the last) does differently. */
static int mismatched_call(int k, baton_comm_t *comm, float *buf) {
  int odd = rank == size - 1;
  switch (k) {
  case 0: /* one more element, both on the ring */
    return baton_allreduce(buf, buf, BIG - (odd ? 1 : 0), BATON_FLOAT32, BATON_SUM, comm);
  case 1: /* a small count (flat on shared memory) against a large one */
    return baton_allreduce(buf, buf, odd ? 4 : BIG, BATON_FLOAT32, BATON_SUM, comm);
  case 2: /* another collective */
    return odd ? baton_broadcast(buf, buf, BIG, BATON_FLOAT32, 0, comm)
               : baton_allreduce(buf, buf, BIG, BATON_FLOAT32, BATON_SUM, comm);
  case 3: /* another dtype, small */
    return baton_allreduce(buf, buf, 8, odd ? BATON_INT32 : BATON_FLOAT32, BATON_SUM, comm);
  case 5: /* every rank waits to receive: a broadcast from the odd rank against its reduce */
    return odd ? baton_reduce(buf, buf, BIG, BATON_FLOAT32, BATON_SUM, size - 1, comm)
               : baton_broadcast(buf, buf, BIG, BATON_FLOAT32, size - 1, comm);
  default: /* the same call through another algorithm (BATON_ALGO set at join) */
    return baton_allreduce(buf, buf, BIG, BATON_FLOAT32, BATON_SUM, comm);
  }
}

/* alltoallv case k: rank 0 sends rank N-1 (k ? 0 : 3) elements where rank
 * N-1 expects 7 from it (k ? 7 : 9); every other block is 4. */
static void run_alltoallv_mismatch(int k, baton_unique_id_t *id) {
  baton_comm_t *comm = join(id);
  size_t counts[2][16], displs[2][16];
  int last = size - 1;
  for (int q = 0; q < size; q++) {
    counts[0][q] = counts[1][q] = 4;
    displs[0][q] = displs[1][q] = (size_t)q * 16;
  }
  size_t send = k ? 0 : 3, recv = k ? 7 : 9;
  if (rank == 0)
    counts[0][last] = send;
  if (rank == last)
    counts[1][0] = recv;
  int32_t in[16 * 16] = {0}, out[16 * 16];
  double t0 = now();
  int rc = baton_alltoallv(in, counts[0], displs[0], out, counts[1], displs[1], BATON_INT32, comm);
  double took = now() - t0;
  const char *msg = baton_comm_last_error(comm);
  char a[32], b[32];
  snprintf(a, sizeof a, "sends %zu elements", send);
  snprintf(b, sizeof b, "expects %zu", recv);
  if (rank == 0 || rank == last)
    check(rc == BATON_EMISMATCH && strstr(msg, a) && strstr(msg, b) && took < 2.0,
          "alltoallv mismatch %zu against %zu: %s in %.3f s: %s", send, recv, baton_err_name(rc),
          took, msg);
  else
    check((rc == BATON_EMISMATCH || rc == BATON_OK) && took < 2.0,
          "alltoallv mismatch %zu against %zu between others: %s in %.3f s", send, recv,
          baton_err_name(rc), took);
  baton_comm_destroy(comm);
}

static void run_mismatch(baton_unique_id_t *ids) {
  float *buf = calloc(BIG, sizeof *buf);
  const char *only = getenv("TEST_CASE");
  for (int k = 0; k < NCASES; k++) {
    /* Case 4: the odd rank was started with another BATON_ALGO. */
    if (k == 4)
      setenv("BATON_ALGO", rank == size - 1 ? "allreduce:tree" : "allreduce:ring", 1);
    baton_comm_t *comm = join(&ids[k]);
    unsetenv("BATON_ALGO");
    if (only && atoi(only) != k) {
      baton_comm_destroy(comm);
      continue;
    }
    double t0 = now();
    int rc = mismatched_call(k, comm, buf);
    double took = now() - t0;
    const char *msg = baton_comm_last_error(comm);
    check(rc == BATON_EMISMATCH && strstr(msg, "called") && strstr(msg, "while rank") && took < 2.0,
          "mismatch case %d: %s in %.3f s: %s", k, baton_err_name(rc), took, msg);
    baton_comm_destroy(comm);
  }
  free(buf);
  for (int k = 0; k < 2; k++)
    if (!only || atoi(only) == NCASES + k)
      run_alltoallv_mismatch(k, &ids[NCASES + k]);
}

/* ------------------------------------------------------------------ main */

static void run(const char *mode, baton_unique_id_t *ids) {
  if (strcmp(mode, "kill") == 0)
    run_kill(&ids[0]);
  else if (strcmp(mode, "split") == 0)
    run_split_kill(&ids[0]);
  else if (strcmp(mode, "family") == 0)
    run_family_kill(&ids[0]);
  else if (strcmp(mode, "abort") == 0)
    run_abort(&ids[0]);
  else
    run_mismatch(ids);
}

static void set_host(void) {
  const char *k = getenv("TEST_HOSTS");
  if (k && atoi(k) > 0) {
    char h[32];
    snprintf(h, sizeof h, "host%d", rank / atoi(k));
    setenv("BATON_HOSTID", h, 1);
  }
}

int main(int argc, char **argv) {
  if (argc >= 5 && strcmp(argv[1], "--child") == 0) {
    size = atoi(argv[3]);
    rank = atoi(argv[4]);
    baton_unique_id_t ids[NIDS];
    for (int k = 0; k < NIDS && 5 + k < argc; k++)
      id_of(argv[5 + k], &ids[k]);
    set_host();
    run(argv[2], ids);
    return failed ? 1 : 0;
  }
  if (argc != 3 ||
      (strcmp(argv[1], "kill") && strcmp(argv[1], "split") && strcmp(argv[1], "family") &&
       strcmp(argv[1], "abort") && strcmp(argv[1], "mismatch"))) {
    fprintf(stderr, "usage: test_failure kill|split|family|abort|mismatch N\n");
    return 2;
  }
  size = atoi(argv[2]);
  if (size < 2 || size > 16) {
    fprintf(stderr, "test_failure: N must be 2..16\n");
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  baton_unique_id_t ids[NIDS];
  char hex[NIDS][2 * sizeof(baton_unique_id_t) + 1], sz[16], rk[16];
  for (int k = 0; k < NIDS; k++) {
    if (baton_get_unique_id(&ids[k]) != BATON_OK) {
      fprintf(stderr, "baton_get_unique_id: %s\n", baton_last_init_error());
      return 1;
    }
    hex_of(&ids[k], hex[k]);
  }
  snprintf(sz, sizeof sz, "%d", size);
  pid_t kids[16];
  for (int r = 1; r < size; r++) {
    snprintf(rk, sizeof rk, "%d", r);
    if ((kids[r] = fork()) == 0) {
      _Static_assert(NIDS == 8, "one id argument per case");
      execl("/proc/self/exe", argv[0], "--child", argv[1], sz, rk, hex[0], hex[1], hex[2], hex[3],
            hex[4], hex[5], hex[6], hex[7], (char *)NULL);
      _exit(127);
    }
  }
  rank = 0;
  set_host();
  run(argv[1], ids);
  int kids_failed = 0;
  for (int r = 1; r < size; r++) {
    int st = 0;
    waitpid(kids[r], &st, 0);
    int killed =
        (!strcmp(argv[1], "kill") || !strcmp(argv[1], "split") || !strcmp(argv[1], "family")) &&
        r == size - 1;
    int ok =
        killed ? WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL : WIFEXITED(st) && WEXITSTATUS(st) == 0;
    if (!ok) {
      fprintf(stderr, "rank %d: FAIL: exit status 0x%x\n", r, st);
      kids_failed++;
    }
  }
  printf("%d passed, %d failed\n", passed + (size - 1 - kids_failed), failed + kids_failed);
  return failed || kids_failed;
}
