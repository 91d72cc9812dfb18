/*
 * test_kv.c - communicators that meet through a caller's key-value store
 * (baton_comm_init_kv), under baton-run at any size.
 *
 * The store is a directory that every rank of the job sees: set writes a
 * file (atomically, by rename), get polls until it exists. Rank 0 of the
 * communicator from the environment makes the directory and broadcasts
 * its name; that communicator also carries the harness's tally (common.h).
 *
 * Checked: bad arguments are BATON_EINVAL naming what was wrong; a
 * communicator made through the store has the right rank and size and
 * gets right results from allreduce (below and above a segment),
 * broadcast, point-to-point and a split; without BATON_SECRET rank 0 puts
 * a 32-hex-digit secret in the store and every key baton writes begins
 * with "baton.<n>/"; two communicators made on one store in turn live side
 * by side and key under different prefixes; a store whose set fails is
 * BATON_ESYS naming the key.
 *
 * test_kv --alone: this rank (of a job of one) makes a communicator of 2
 * through the store with kv.timeout_s = 0.5 and nobody comes: the call
 * must return BATON_ETIMEDOUT naming the key it waited for and 0.5 s.
 *
 * Prints `N passed, M failed` (common.h).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "ref.h"

typedef struct {
  char dir[256];
  int fail_sets; /* set returns -1 */
  int sets;      /* how many sets this rank made */
} dirkv_t;

static void key_path(const dirkv_t *d, const char *key, char *path, size_t cap) {
  int n = snprintf(path, cap, "%s/", d->dir);
  for (const char *k = key; *k && (size_t)n + 1 < cap; k++)
    path[n++] = *k == '/' ? '|' : *k; /* one file per key, in one directory */
  path[n] = '\0';
}

static int dir_set(void *ctx, const char *key, const void *value, size_t len) {
  dirkv_t *d = ctx;
  char path[512], tmp[600];
  if (d->fail_sets)
    return -1;
  key_path(d, key, path, sizeof path);
  snprintf(tmp, sizeof tmp, "%s.tmp%d", path, (int)getpid());
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0)
    return -1;
  int ok = write(fd, value, len) == (ssize_t)len;
  close(fd);
  d->sets++;
  return ok && rename(tmp, path) == 0 ? 0 : -1;
}

static int dir_get(void *ctx, const char *key, void *value, size_t cap, size_t *len,
                   double timeout_s) {
  dirkv_t *d = ctx;
  char path[512];
  key_path(d, key, path, sizeof path);
  struct timespec t0, t, nap = {0, 1000000};
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (;;) {
    int fd = open(path, O_RDONLY);
    if (fd >= 0) {
      struct stat st;
      ssize_t got = fstat(fd, &st) == 0 ? read(fd, value, cap) : -1;
      close(fd);
      if (got < 0)
        return -1;
      *len = (size_t)st.st_size;
      return 0;
    }
    clock_gettime(CLOCK_MONOTONIC, &t);
    if ((double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) * 1e-9 > timeout_s)
      return -2;
    nanosleep(&nap, NULL);
  }
}

static baton_kv_t kv_of(dirkv_t *d, double timeout_s) {
  baton_kv_t kv = {d, dir_set, dir_get, timeout_s};
  return kv;
}

static void check_rc(tally_t *t, int got, int want, const char *what, const char *text,
                     const char *needle) {
  int ok = got == want && (!needle || strstr(text, needle));
  if (!tally_record(t, ok))
    tally_say(t, "%s: %s (\"%s\"), want %s%s%s", what, baton_err_name(got), text,
              baton_err_name(want), needle ? " naming " : "", needle ? needle : "");
}

/* In a thread of its own: an init that fails, and the text it leaves. */
typedef struct {
  dirkv_t *d;
  int rc;
  char text[256];
} thread_fail_t;

static void *fail_in_thread(void *arg) {
  thread_fail_t *f = arg;
  baton_comm_t *c;
  baton_kv_t kv = kv_of(f->d, 0);
  f->rc = baton_comm_init_kv(&c, 3, 7, &kv);
  snprintf(f->text, sizeof f->text, "%s", baton_last_init_error());
  return NULL;
}

/* baton_last_init_error is each thread's own: another thread's failure
 * leaves this thread's text as it was, and that thread reads its own. */
static void other_thread_fails(tally_t *t, dirkv_t *d) {
  baton_comm_t *c;
  baton_kv_t kv = kv_of(d, 0);
  check_rc(t, baton_comm_init_kv(&c, 0, 0, &kv), BATON_EINVAL, "size 0, before the thread",
           baton_last_init_error(), "size 0");
  thread_fail_t f = {.d = d};
  pthread_t th;
  if (!tally_record(t, pthread_create(&th, NULL, fail_in_thread, &f) == 0)) {
    tally_say(t, "cannot start a thread");
    return;
  }
  pthread_join(th, NULL);
  check_rc(t, f.rc, BATON_EINVAL, "rank 7 of 3, in another thread", f.text,
           "rank 7 is not below size 3");
  check_rc(t, BATON_EINVAL, BATON_EINVAL, "this thread's text after the other's failure",
           baton_last_init_error(), "size 0");
}

static void bad_arguments(tally_t *t, dirkv_t *d) {
  baton_comm_t *c = (baton_comm_t *)1;
  baton_kv_t kv = kv_of(d, 0), nulls = kv;
  check_rc(t, baton_comm_init_kv(&c, 2, 0, NULL), BATON_EINVAL, "kv NULL", baton_last_init_error(),
           "kv is NULL");
  tally_record(t, c == NULL);
  nulls.get = NULL;
  check_rc(t, baton_comm_init_kv(&c, 2, 0, &nulls), BATON_EINVAL, "get NULL",
           baton_last_init_error(), "get is NULL");
  check_rc(t, baton_comm_init_kv(&c, 0, 0, &kv), BATON_EINVAL, "size 0", baton_last_init_error(),
           "size 0");
  check_rc(t, baton_comm_init_kv(&c, 2, 2, &kv), BATON_EINVAL, "rank 2 of 2",
           baton_last_init_error(), "rank 2 is not below size 2");
  check_rc(t, baton_comm_init_kv(&c, 2, -1, &kv), BATON_EINVAL, "rank -1", baton_last_init_error(),
           "rank -1");
  kv.timeout_s = -1;
  check_rc(t, baton_comm_init_kv(&c, 2, 0, &kv), BATON_EINVAL, "timeout -1",
           baton_last_init_error(), "timeout_s is negative");
  check_rc(t, baton_comm_init_kv(NULL, 2, 0, &kv), BATON_EINVAL, "comm NULL",
           baton_last_init_error(), NULL);
  other_thread_fails(t, d);
}

/* An allreduce at count against ref.h's reference. */
static void allreduce_check(tally_t *t, baton_comm_t *c, size_t count, const char *what) {
  int rank = baton_comm_rank(c), size = baton_comm_size(c);
  gen_spec_t g = exact_spec(BATON_FLOAT32, BATON_SUM);
  float *in = malloc((count + 1) * sizeof *in), *ref = malloc((count + 1) * sizeof *ref);
  ref_fill(in, BATON_FLOAT32, &g, 7, rank, 0, count);
  ref_reduce(ref, BATON_FLOAT32, BATON_SUM, &g, 7, size, 0, count);
  int rc = baton_allreduce(in, in, count, BATON_FLOAT32, BATON_SUM, c);
  int ok = rc == BATON_OK && memcmp(in, ref, count * sizeof *in) == 0;
  if (!tally_record(t, ok))
    tally_say(t, "%s: allreduce of %zu: %s: %s", what, count, baton_err_name(rc),
              baton_comm_last_error(c));
  free(in);
  free(ref);
}

/* Everything a communicator should do, on one made through the store. */
static void exercise(tally_t *t, baton_comm_t *c, const char *what) {
  int rank = baton_comm_rank(c), size = baton_comm_size(c);
  if (!tally_record(t, rank == t->rank && size == t->size))
    tally_say(t, "%s: rank %d of %d, want %d of %d", what, rank, size, t->rank, t->size);
  allreduce_check(t, c, 1, what);
  allreduce_check(t, c, 300001, what);
  long long v = rank == size - 1 ? 4242 : -1;
  int rc = baton_broadcast(&v, &v, 1, BATON_INT64, size - 1, c);
  if (!tally_record(t, rc == BATON_OK && v == 4242))
    tally_say(t, "%s: broadcast: %s, got %lld", what, baton_err_name(rc), v);
  if (size > 1) { /* a ring of messages: send to the next, receive from the previous */
    int next = (rank + 1) % size, prev = (rank + size - 1) % size, got = -1;
    baton_request_t *r;
    rc = baton_irecv(&got, 1, BATON_INT32, prev, 5, c, &r);
    int rs = rc == BATON_OK ? baton_send(&rank, 1, BATON_INT32, next, 5, c) : rc;
    rc = rc == BATON_OK ? baton_wait(r) : rc;
    if (!tally_record(t, rc == BATON_OK && rs == BATON_OK && got == prev))
      tally_say(t, "%s: ring send/recv: %s/%s, got %d want %d", what, baton_err_name(rs),
                baton_err_name(rc), got, prev);
  }
  baton_comm_t *half = NULL;
  rc = baton_comm_split(c, rank % 2, -rank, &half);
  if (tally_record(t, rc == BATON_OK && half)) {
    int want_size = size / 2 + (size % 2 && rank % 2 == 0);
    int hs = baton_comm_size(half);
    long long one = 1;
    rc = baton_allreduce(&one, &one, 1, BATON_INT64, BATON_SUM, half);
    if (!tally_record(t, hs == want_size && rc == BATON_OK && one == want_size))
      tally_say(t, "%s: split: size %d want %d, allreduce %s -> %lld", what, hs, want_size,
                baton_err_name(rc), one);
    tally_record(t, baton_comm_destroy(half) == BATON_OK);
  } else {
    tally_say(t, "%s: split: %s: %s", what, baton_err_name(rc), baton_comm_last_error(c));
  }
}

/* Whether the directory holds a key beginning with prefix; the secret's
 * value when key is "secret". */
static int has_key(const dirkv_t *d, const char *prefix, char *secret, size_t cap) {
  DIR *dir = opendir(d->dir);
  struct dirent *e;
  int found = 0;
  char want[64];
  snprintf(want, sizeof want, "%s", prefix);
  for (char *p = want; *p; p++)
    *p = *p == '/' ? '|' : *p;
  while (dir && (e = readdir(dir)))
    if (strncmp(e->d_name, want, strlen(want)) == 0) {
      found = 1;
      if (secret) {
        char path[600];
        snprintf(path, sizeof path, "%s/%s", d->dir, e->d_name);
        FILE *f = fopen(path, "rb");
        size_t n = f ? fread(secret, 1, cap - 1, f) : 0;
        secret[n] = '\0';
        if (f)
          fclose(f);
      }
    }
  if (dir)
    closedir(dir);
  return found;
}

static int alone(void) {
  dirkv_t d = {.fail_sets = 0};
  snprintf(d.dir, sizeof d.dir, "/tmp/baton-kv-alone-XXXXXX");
  if (!mkdtemp(d.dir))
    return perror("mkdtemp"), 1;
  baton_kv_t kv = kv_of(&d, 0.5);
  baton_comm_t *c = (baton_comm_t *)1;
  int rc = baton_comm_init_kv(&c, 2, 0, &kv);
  const char *e = baton_last_init_error();
  int ok = rc == BATON_ETIMEDOUT && c == NULL && strstr(e, "host.1") && strstr(e, "0.5 s");
  printf("init of 2 with nobody else: %s: %s\n", baton_err_name(rc), e);
  printf("%d passed, %d failed\n", ok, !ok);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", d.dir);
  if (system(cmd) != 0)
    fprintf(stderr, "could not remove %s\n", d.dir);
  return ok ? 0 : 1;
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--alone") == 0)
    return alone();
  tally_t t;
  tally_init(&t);
  dirkv_t d = {.fail_sets = 0};
  if (t.rank == 0) {
    snprintf(d.dir, sizeof d.dir, "/tmp/baton-kv-XXXXXX");
    if (!mkdtemp(d.dir))
      d.dir[0] = '\0';
  }
  tally_rc(&t, baton_broadcast(d.dir, d.dir, sizeof d.dir, BATON_UINT8, 0, t.comm), "broadcast");
  if (!tally_record(&t, d.dir[0] != '\0'))
    tally_say(&t, "rank 0 could not make the store's directory");
  else {
    bad_arguments(&t, &d);
    unsetenv("BATON_SECRET"); /* the store's secret, then */
    baton_kv_t kv = kv_of(&d, 0);
    baton_comm_t *a = NULL, *b = NULL;
    int rc = baton_comm_init_kv(&a, t.size, t.rank, &kv);
    check_rc(&t, rc, BATON_OK, "init_kv", baton_last_init_error(), NULL);
    if (rc == BATON_OK) {
      exercise(&t, a, "first");
      /* A second communicator on the same store, while the first lives. */
      rc = baton_comm_init_kv(&b, t.size, t.rank, &kv);
      check_rc(&t, rc, BATON_OK, "second init_kv", baton_last_init_error(), NULL);
      if (rc == BATON_OK) {
        exercise(&t, b, "second");
        allreduce_check(&t, a, 1000, "first after the second");
      }
      tally_rc(&t, baton_barrier(t.comm), "barrier");
      char secret[64] = "";
      int n = has_key(&d, "baton.0/secret", secret, sizeof secret), hex = 1;
      for (int i = 0; i < 32; i++)
        hex &= (secret[i] >= '0' && secret[i] <= '9') || (secret[i] >= 'a' && secret[i] <= 'f');
      if (!tally_record(&t, t.size == 1 || (n && hex && strlen(secret) == 32)))
        tally_say(&t, "no 32-hex-digit secret under baton.0/ (found %d, \"%s\")", n, secret);
      if (!tally_record(&t, b == NULL || has_key(&d, "baton.1/host.0", NULL, 0)))
        tally_say(&t, "the second communicator's keys are not under baton.1/");
      if (!tally_record(&t, !has_key(&d, "host.", NULL, 0) && d.sets > 0))
        tally_say(&t, "a key without baton's prefix, or no set at all (%d)", d.sets);
      tally_record(&t, baton_comm_destroy(b) == BATON_OK);
      tally_record(&t, baton_comm_destroy(a) == BATON_OK);
    }
    /* Many stores seen by some ranks only (as torch's groups of a few
     * ranks): the even ranks each make STORES communicators of one, each
     * on a store of its own; then every rank makes three in turn on one
     * store. The numbering of a ctx's communicators must agree across
     * ranks however many stores each has seen before. */
    enum { STORES = 70 };
    static dirkv_t many[STORES + 1];
    int made = 0, want = 3 + (t.rank % 2 ? 0 : STORES);
    for (int i = 0; i <= STORES; i++) { /* many[STORES]: the one they share */
      many[i] = d;
      if (i < STORES)
        snprintf(many[i].dir, sizeof many[i].dir, "%.200s/r%ds%d", d.dir, t.rank, i);
      else
        snprintf(many[i].dir, sizeof many[i].dir, "%.200s/all", d.dir);
      if (mkdir(many[i].dir, 0700) != 0 && errno != EEXIST)
        tally_say(&t, "mkdir %s: %s", many[i].dir, strerror(errno));
    }
    for (int i = 0; i < STORES + 3; i++) {
      int alone = i < STORES;
      if (alone && t.rank % 2)
        continue;
      baton_kv_t mkv = kv_of(&many[alone ? i : STORES], 10);
      baton_comm_t *c = NULL;
      if (baton_comm_init_kv(&c, alone ? 1 : t.size, alone ? 0 : t.rank, &mkv) == BATON_OK &&
          baton_barrier(c) == BATON_OK)
        made++;
      else
        tally_say(&t, "communicator %d of the many: %s", i, baton_last_init_error());
      baton_comm_destroy(c);
    }
    if (!tally_record(&t, made == want))
      tally_say(&t, "made %d of the %d communicators on many stores", made, want);
    /* A store that refuses every set: rank 0 fails on its first key. */
    dirkv_t broken = d;
    broken.fail_sets = 1;
    baton_kv_t bkv = kv_of(&broken, 0.3);
    if (t.rank == 0) {
      baton_comm_t *c = (baton_comm_t *)1;
      rc = baton_comm_init_kv(&c, t.size, 0, &bkv);
      check_rc(&t, rc, BATON_ESYS, "set fails", baton_last_init_error(), "its set returned -1");
      tally_record(&t, c == NULL);
    } else {
      tally_record(&t, 1), tally_record(&t, 1);
    }
    tally_rc(&t, baton_barrier(t.comm), "barrier");
    if (t.rank == 0) {
      char cmd[300];
      snprintf(cmd, sizeof cmd, "rm -rf '%s'", d.dir);
      if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", d.dir);
    }
  }
  return tally_finish(&t);
}
