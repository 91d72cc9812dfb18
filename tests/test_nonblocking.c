/*
 * test_nonblocking.c - the i-forms of baton.h under baton-run.
 *
 *   baton-run -n N test_nonblocking            the sweep
 *   baton-run -n 2 test_nonblocking destroy    destroy with a request in flight
 *   baton-run -n N test_nonblocking kill       the last rank dies, requests in flight
 *   baton-run -n 2 test_nonblocking abort      baton_comm_abort from another thread
 *
 * The sweep issues, round after round, several calls at once (every
 * i-form, mixed sizes from 0 up, a blocking call among them now and
 * then) and waits for them in issue order, in reverse order, with
 * baton_wait_all, by polling baton_test or with baton_wait_for's short
 * deadlines; every result is checked
 * against each collective's definition, computed here from the inputs'
 * formula (int32 sums, so exact). Then 70 small allreduces in flight at
 * once (past the 64 the header promises), baton_wait_for's deadline (a
 * collective and a receive that rank 0 waits 50 ms for while the peer
 * holds back 300 ms), bad arguments (BATON_EINVAL from
 * the i-call itself, no request made), and a blocking call while i-calls
 * are in flight. Prints "N passed, M failed".
 */
#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

enum { AR, RS, AG, BC, RD, A2A, GA, SC, AGV, RSV, BAR, NCOLL };
static const char *const names[NCOLL] = {
    "iallreduce", "ireduce_scatter", "iallgather",  "ibroadcast",       "ireduce", "ialltoall",
    "igather",    "iscatter",        "iallgatherv", "ireduce_scatterv", "ibarrier"};

/* What rank r contributes at index i of its input. */
static int32_t in_of(int r, size_t i, int salt) { return (r + 1) * 7 + (int32_t)(i % 13) + salt; }

typedef struct {
  int coll, root, salt;
  size_t count;
  size_t counts[64], displs[64], total; /* the v-variants: count + r per rank */
  int32_t *in, *out;
  size_t nin, nout;
  baton_request_t *req;
} job_t;

static void sizes(job_t *j, int rank, int n) {
  size_t c = j->count;
  j->total = 0;
  for (int r = 0; r < n; r++) {
    j->counts[r] = c + (size_t)r;
    j->displs[r] = j->total;
    j->total += j->counts[r];
  }
  size_t blocks = (size_t)n * c;
  switch (j->coll) {
  case RS:
    j->nin = blocks, j->nout = c;
    break;
  case AG:
    j->nin = c, j->nout = blocks;
    break;
  case A2A:
    j->nin = j->nout = blocks;
    break;
  case GA:
    j->nin = c, j->nout = rank == j->root ? blocks : 0;
    break;
  case SC:
    j->nin = rank == j->root ? blocks : 0, j->nout = c;
    break;
  case AGV:
    j->nin = j->counts[rank], j->nout = j->total;
    break;
  case RSV:
    j->nin = j->total, j->nout = j->counts[rank];
    break;
  case BAR:
    j->nin = j->nout = 0;
    break;
  default:
    j->nin = j->nout = c;
  }
}

/* The expected element i of job j's output on `rank` of n. */
static int32_t want(const job_t *j, int rank, int n, size_t i) {
  int32_t sum = 0;
  size_t c = j->count;
  switch (j->coll) {
  case AR:
  case RD:
    for (int r = 0; r < n; r++)
      sum += in_of(r, i, j->salt);
    return sum;
  case RS:
    for (int r = 0; r < n; r++)
      sum += in_of(r, (size_t)rank * c + i, j->salt);
    return sum;
  case AG:
  case GA:
    return in_of((int)(i / c), i % c, j->salt);
  case BC:
    return in_of(j->root, i, j->salt);
  case A2A:
    return in_of((int)(i / c), (size_t)rank * c + i % c, j->salt);
  case SC:
    return in_of(j->root, (size_t)rank * c + i, j->salt);
  case AGV: {
    int b = 0;
    while (i >= j->displs[b] + j->counts[b])
      b++;
    return in_of(b, i - j->displs[b], j->salt);
  }
  default: /* RSV */
    for (int r = 0; r < n; r++)
      sum += in_of(r, j->displs[rank] + i, j->salt);
    return sum;
  }
}

static int issue(tally_t *T, job_t *j, int blocking) {
  sizes(j, T->rank, T->size);
  j->in = calloc(j->nin + 1, sizeof *j->in);
  j->out = calloc(j->nout + 1, sizeof *j->out);
  for (size_t i = 0; i < j->nin; i++)
    j->in[i] = in_of(T->rank, i, j->salt);
  if (j->coll == BC && T->rank == j->root)
    memcpy(j->out, j->in, j->nin * sizeof *j->in); /* broadcast is in place at the root */
  baton_comm_t *m = T->comm;
  baton_request_t **q = blocking ? NULL : &j->req;
  const baton_dtype_t I = BATON_INT32;
  const size_t c = j->count;
  int rc;
#define EITHER(blk, nb) (blocking ? (blk) : (nb))
  switch (j->coll) {
  case AR:
    rc = EITHER(baton_allreduce(j->in, j->out, c, I, BATON_SUM, m),
                baton_iallreduce(j->in, j->out, c, I, BATON_SUM, m, q));
    break;
  case RS:
    rc = EITHER(baton_reduce_scatter(j->in, j->out, c, I, BATON_SUM, m),
                baton_ireduce_scatter(j->in, j->out, c, I, BATON_SUM, m, q));
    break;
  case AG:
    rc = EITHER(baton_allgather(j->in, j->out, c, I, m),
                baton_iallgather(j->in, j->out, c, I, m, q));
    break;
  case BC:
    rc = EITHER(baton_broadcast(j->out, j->out, c, I, j->root, m),
                baton_ibroadcast(j->out, j->out, c, I, j->root, m, q));
    break;
  case RD:
    rc = EITHER(baton_reduce(j->in, j->out, c, I, BATON_SUM, j->root, m),
                baton_ireduce(j->in, j->out, c, I, BATON_SUM, j->root, m, q));
    break;
  case A2A:
    rc = EITHER(baton_alltoall(j->in, j->out, c, I, m), baton_ialltoall(j->in, j->out, c, I, m, q));
    break;
  case GA:
    rc = EITHER(baton_gather(j->in, j->out, c, I, j->root, m),
                baton_igather(j->in, j->out, c, I, j->root, m, q));
    break;
  case SC:
    rc = EITHER(baton_scatter(j->in, j->out, c, I, j->root, m),
                baton_iscatter(j->in, j->out, c, I, j->root, m, q));
    break;
  case AGV:
    rc =
        EITHER(baton_allgatherv(j->in, j->counts[T->rank], j->out, j->counts, j->displs, I, m),
               baton_iallgatherv(j->in, j->counts[T->rank], j->out, j->counts, j->displs, I, m, q));
    break;
  case RSV:
    rc = EITHER(baton_reduce_scatterv(j->in, j->out, j->counts, I, BATON_SUM, m),
                baton_ireduce_scatterv(j->in, j->out, j->counts, I, BATON_SUM, m, q));
    break;
  default:
    rc = EITHER(baton_barrier(m), baton_ibarrier(m, q));
  }
#undef EITHER
  return tally_rc(T, rc, names[j->coll]);
}

static void check(tally_t *T, job_t *j, int rc, const char *how) {
  size_t bad = 0, first = 0;
  int reduce_nonroot = j->coll == RD && T->rank != j->root;
  for (size_t i = 0; rc == BATON_OK && !reduce_nonroot && i < j->nout; i++)
    if (j->out[i] != want(j, T->rank, T->size, i) && bad++ == 0)
      first = i;
  if (!tally_record(T, rc == BATON_OK && bad == 0)) {
    if (rc)
      tally_rc(T, rc, names[j->coll]);
    else
      tally_say(T, "%s (count %zu, root %d, %s): %zu of %zu wrong, first [%zu] = %d, want %d",
                names[j->coll], j->count, j->root, how, bad, j->nout, first, j->out[first],
                want(j, T->rank, T->size, first));
  }
  free(j->in), free(j->out);
  j->in = j->out = NULL;
}

/* Round k: K calls in flight, waited for in one of five ways. */
static void round_of(tally_t *T, int k) {
  static const size_t counts[] = {0, 1, 7, 1000, 65537, 3};
  enum { K = 6 };
  static const char *const ways[] = {"in order", "in reverse", "wait_all", "test", "wait_for"};
  job_t jobs[K];
  int way = k % 5;
  for (int i = 0; i < K; i++) {
    jobs[i] = (job_t){.coll = (k * K + i) % NCOLL,
                      .count = counts[(k + i) % 6],
                      .root = (k + i) % T->size,
                      .salt = k * 31 + i};
    /* Now and then a blocking call among them: it waits for the earlier. */
    int blocking = (k + i) % 7 == 3;
    if (!issue(T, &jobs[i], blocking))
      return;
    if (blocking)
      check(T, &jobs[i], BATON_OK, "blocking among i-calls");
  }
  baton_request_t *reqs[K];
  int rcs[K];
  for (int i = 0; i < K; i++)
    reqs[i] = jobs[i].req;
  if (way == 0 || way == 1) {
    for (int n = 0; n < K; n++) {
      int i = way == 0 ? n : K - 1 - n;
      rcs[i] = jobs[i].req ? baton_wait(jobs[i].req) : BATON_OK;
    }
  } else if (way == 2) {
    int rc = baton_wait_all(K, reqs);
    for (int i = 0; i < K; i++)
      rcs[i] = rc;
  } else {
    for (int i = 0; i < K; i++) {
      int done = !jobs[i].req;
      rcs[i] = BATON_OK;
      while (!done &&
             (rcs[i] = way == 3 ? baton_test(jobs[i].req, &done)
                                : baton_wait_for(jobs[i].req, 1e-4, &done)) == BATON_OK &&
             !done)
        if (way == 3)
          usleep(50);
    }
  }
  for (int i = 0; i < K; i++)
    if (jobs[i].in) /* the blocking ones are checked */
      check(T, &jobs[i], rcs[i], ways[way]);
}

/* More in flight than the 64 promised: the 65th i-call waits for the
 * oldest, none fails. */
static void many(tally_t *T) {
  enum { M = 70 };
  static int32_t in[M], out[M];
  baton_request_t *reqs[M];
  int ok = 1;
  for (int i = 0; i < M; i++) {
    in[i] = in_of(T->rank, (size_t)i, 5);
    ok &=
        tally_rc(T, baton_iallreduce(&in[i], &out[i], 1, BATON_INT32, BATON_SUM, T->comm, &reqs[i]),
                 "iallreduce, 70 in flight");
  }
  ok = ok && tally_rc(T, baton_wait_all(M, reqs), "wait_all of 70");
  size_t bad = 0;
  for (int i = 0; ok && i < M; i++) {
    int32_t sum = 0;
    for (int r = 0; r < T->size; r++)
      sum += in_of(r, (size_t)i, 5);
    bad += out[i] != sum;
  }
  if (!tally_record(T, ok && bad == 0))
    tally_say(T, "70 allreduces in flight: %zu wrong", bad);
}

static double now(void);

/* One request that rank 0 waits for with baton_wait_for while the others
 * hold back 300 ms: not done after 50 ms (BATON_OK, back within 50-250
 * ms, the request still valid), then done with the right value. */
static void wait_for_one(tally_t *T, const char *what, baton_request_t *req, const int32_t *got,
                         int32_t want) {
  int done = 0, rc = BATON_OK, ok = 1; /* a check is every rank's: the others have none here */
  double took = 0;
  if (T->rank == 0 && T->size > 1) {
    double t0 = now();
    rc = baton_wait_for(req, 0.05, &done);
    took = now() - t0;
    ok = rc == BATON_OK && !done && took >= 0.05 && took < 0.25;
  }
  if (!tally_record(T, ok))
    tally_say(T, "%s: wait_for(50 ms) with the peers 300 ms late: %s, done %d, %.3f s", what,
              baton_err_name(rc), done, took);
  while (!done && (rc = baton_wait_for(req, 1.0, &done)) == BATON_OK && !done)
    ;
  if (!tally_record(T, rc == BATON_OK && done && *got == want))
    tally_say(T, "%s: wait_for to the end: %s, done %d, got %d, want %d", what, baton_err_name(rc),
              done, *got, want);
}

/* The receive's check is ranks 0's and 1's; the others record theirs as
 * passed, so every rank has the same checks. */
static void wait_for_deadline(tally_t *T) {
  int n = T->size;
  int32_t x = T->rank + 1, sum = -1, msg = -1, sent = 4242;
  baton_request_t *req = NULL;
  if (!tally_rc(T, baton_barrier(T->comm), "barrier before wait_for"))
    return;
  if (T->rank != 0)
    usleep(300000);
  if (tally_rc(T, baton_iallreduce(&x, &sum, 1, BATON_INT32, BATON_SUM, T->comm, &req),
               "iallreduce for wait_for"))
    wait_for_one(T, "iallreduce", req, &sum, n * (n + 1) / 2);
  if (n < 2 || !tally_rc(T, baton_barrier(T->comm), "barrier before wait_for's receive"))
    return;
  if (T->rank == 0 &&
      tally_rc(T, baton_irecv(&msg, 1, BATON_INT32, 1, 7, T->comm, &req), "irecv for wait_for")) {
    wait_for_one(T, "irecv", req, &msg, sent);
    return;
  }
  if (T->rank == 1) {
    usleep(300000);
    tally_rc(T, baton_send(&sent, 1, BATON_INT32, 0, 7, T->comm), "send for wait_for");
  }
  tally_record(T, 1); /* wait_for_one's two */
  tally_record(T, 1);
}

static void bad_args(tally_t *T) {
  baton_request_t *req = (baton_request_t *)&req; /* must come back NULL */
  int32_t x = 0;
  int rc = baton_iallreduce(&x, &x, 1, (baton_dtype_t)99, BATON_SUM, T->comm, &req);
  if (!tally_record(T, rc == BATON_EINVAL && req == NULL))
    tally_say(T, "iallreduce with a bad dtype: %s, request %s", baton_err_name(rc),
              req ? "made" : "NULL");
  rc = baton_ibroadcast(&x, &x, 1, BATON_INT32, T->size, T->comm, &req);
  if (!tally_record(T, rc == BATON_EINVAL && req == NULL))
    tally_say(T, "ibroadcast with root %d: %s", T->size, baton_err_name(rc));
  rc = baton_iallreduce(&x, &x, 1, BATON_INT32, BATON_SUM, T->comm, NULL);
  if (!tally_record(T, rc == BATON_EINVAL))
    tally_say(T, "iallreduce with req NULL: %s", baton_err_name(rc));
  if (!tally_record(T, baton_wait(NULL) == BATON_EINVAL && baton_test(NULL, &rc) == BATON_EINVAL &&
                           baton_wait_for(NULL, 1, &rc) == BATON_EINVAL))
    tally_say(T, "baton_wait/test/wait_for(NULL) is not BATON_EINVAL");
  if (tally_rc(T, baton_iallreduce(&x, &x, 1, BATON_INT32, BATON_SUM, T->comm, &req),
               "iallreduce for wait_for's bad arguments")) {
    int done = 0;
    if (!tally_record(T, baton_wait_for(req, -1, &done) == BATON_EINVAL &&
                             baton_wait_for(req, NAN, &done) == BATON_EINVAL &&
                             baton_wait_for(req, 1, NULL) == BATON_EINVAL))
      tally_say(T, "baton_wait_for with a timeout of -1 or NaN, or done NULL, is not BATON_EINVAL");
    tally_rc(T, baton_wait(req), "wait after wait_for's bad arguments");
  }
}

/* Rank 0 destroys its communicator with a request in flight that rank 1
 * has not joined: BATON_EUSAGE naming one request. Rank 1, arriving
 * later, gets an error, not a hang. */
static int destroy_mode(void) {
  tally_t T;
  tally_init(&T);
  int32_t x = 1, y = 0;
  baton_request_t *req = NULL;
  if (T.rank == 1)
    sleep(1);
  int rc = baton_iallreduce(&x, &y, 1, BATON_INT32, BATON_SUM, T.comm, &req);
  if (T.rank == 0) {
    rc = baton_comm_destroy(T.comm);
    int ok = rc == BATON_EUSAGE;
    printf("%d passed, %d failed\n", ok, !ok);
    if (!ok)
      fprintf(stderr, "rank 0: destroy with a request in flight returned %s\n", baton_err_name(rc));
    return !ok;
  }
  if (rc == BATON_OK)
    rc = baton_wait(req);
  int ok = rc == BATON_EREMOTE || rc == BATON_EABORTED || rc == BATON_ETIMEDOUT;
  if (!ok)
    fprintf(stderr, "rank %d: the allreduce that rank 0 left returned %s\n", T.rank,
            baton_err_name(rc));
  baton_comm_destroy(T.comm);
  return !ok;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The last rank issues its share of 4 large allreduces and dies (exit 0,
 * so baton-run leaves the others be); every survivor's 4 requests complete
 * with BATON_EREMOTE within 2 s. */
static int kill_mode(void) {
  tally_t T;
  tally_init(&T);
  enum { R = 4 };
  size_t n = 4 << 20;
  float *buf = calloc(R * n, sizeof *buf);
  baton_request_t *reqs[R];
  for (int i = 0; i < R; i++)
    baton_iallreduce(buf + i * n, buf + i * n, n, BATON_FLOAT32, BATON_SUM, T.comm, &reqs[i]);
  if (T.rank == T.size - 1) {
    usleep(20 * 1000);
    _exit(0);
  }
  double t0 = now();
  int bad = 0;
  for (int i = 0; i < R; i++) {
    int rc = baton_wait(reqs[i]);
    if (rc != BATON_EREMOTE && bad++ == 0)
      fprintf(stderr, "rank %d: request %d returned %s, want BATON_EREMOTE: %s\n", T.rank, i,
              baton_err_name(rc), baton_comm_last_error(T.comm));
  }
  double took = now() - t0;
  int ok = bad == 0 && took < 2.0;
  if (took >= 2.0)
    fprintf(stderr, "rank %d: the requests took %.2f s to fail\n", T.rank, took);
  printf("%d passed, %d failed\n", ok, !ok);
  baton_comm_destroy(T.comm);
  free(buf);
  return !ok;
}

static void *abort_later(void *comm) {
  usleep(200 * 1000);
  baton_comm_abort(comm);
  return NULL;
}

/* Rank 0 waits on an allreduce that rank 1 joins only 3 s later; another
 * thread of rank 0 aborts the communicator after 0.2 s: the wait returns
 * BATON_EABORTED at once. */
static int abort_mode(void) {
  tally_t T;
  tally_init(&T);
  int32_t x = 1, y = 0;
  baton_request_t *req = NULL;
  if (T.rank != 0) {
    sleep(3);
    int rc = baton_allreduce(&x, &y, 1, BATON_INT32, BATON_SUM, T.comm);
    int ok = rc != BATON_OK;
    printf("%d passed, %d failed\n", ok, !ok);
    baton_comm_destroy(T.comm);
    return !ok;
  }
  pthread_t t;
  int rc = baton_iallreduce(&x, &y, 1, BATON_INT32, BATON_SUM, T.comm, &req);
  pthread_create(&t, NULL, abort_later, T.comm);
  double t0 = now();
  if (rc == BATON_OK)
    rc = baton_wait(req);
  double took = now() - t0;
  pthread_join(t, NULL);
  int ok = rc == BATON_EABORTED && took < 2.0;
  if (!ok)
    fprintf(stderr, "rank 0: the wait returned %s after %.2f s, want BATON_EABORTED within 2 s\n",
            baton_err_name(rc), took);
  printf("%d passed, %d failed\n", ok, !ok);
  baton_comm_destroy(T.comm);
  return !ok;
}

/* The progress thread, made by the first i-call, is named as baton.h says. */
static void progress_thread_named(tally_t *T) {
  int found = 0;
  DIR *d = opendir("/proc/self/task");
  for (struct dirent *e; d && !found && (e = readdir(d));) {
    char path[300], name[32] = "";
    snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
    FILE *f = fopen(path, "r");
    if (!f)
      continue;
    found = fgets(name, sizeof name, f) && !strcmp(name, "baton-progress\n");
    fclose(f);
  }
  if (d)
    closedir(d);
  if (!tally_record(T, found))
    tally_say(T, "no thread of this process is named baton-progress after i-calls");
}

int main(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "destroy"))
    return destroy_mode();
  if (argc > 1 && !strcmp(argv[1], "kill"))
    return kill_mode();
  if (argc > 1 && !strcmp(argv[1], "abort"))
    return abort_mode();
  tally_t T;
  tally_init(&T);
  for (int k = 0; k < 24 && !T.broken; k++)
    round_of(&T, k);
  if (!T.broken)
    many(&T);
  if (!T.broken)
    progress_thread_named(&T);
  if (!T.broken)
    wait_for_deadline(&T);
  if (!T.broken)
    bad_args(&T);
  return tally_finish(&T);
}
