/*
 * test_split.c - communicators made from communicators (baton_comm_split,
 * baton_comm_dup), under baton-run at any size.
 *
 * Every new communicator is checked the same way (check_child): its rank
 * and size, the order of its ranks (an allgather of their ranks in the
 * parent against the order the rules give), an allreduce against the
 * naive reference of ref.h at counts below and above a segment, and a
 * broadcast. The splits: colors by parity, by host (BATON_HOSTID, as
 * tests/run.sh fakes hosts), singletons, one rank BATON_SPLIT_NONE, keys
 * that reverse the order, dup; nested splits; collectives on the parent
 * and its children interleaved; two children driven from two threads at
 * once; a child and a grandchild that live on, and split again, after
 * their parent and the communicator from the environment are destroyed;
 * children and a grandchild of an aborted parent that fail with it, calls
 * in flight and later ones (issue 17).
 * Bad arguments are BATON_EINVAL without communicating.
 *
 * test_split --one-rank-fails: rank 1 cannot prepare its child (run.sh
 * gives it a BATON_TRACE too long for a child's trace name); every rank's
 * split must fail at once, naming rank 1, and the parent go on working.
 *
 * Prints `N passed, M failed` (common.h).
 */
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "ref.h"

static const size_t counts[] = {0, 1, 1000, 70001};
#define NCOUNTS (sizeof counts / sizeof counts[0])

/* The ranks in the parent of the members of `color` in the new order:
 * ascending key, then parent rank. Returns how many. */
static int expected_order(const int *colors, const int *keys, int size, int color, int *out) {
  int n = 0;
  for (int r = 0; r < size; r++)
    if (colors[r] == color)
      out[n++] = r;
  for (int i = 1; i < n; i++) /* insertion sort: stable, by key */
    for (int j = i; j > 0 && keys[out[j - 1]] > keys[out[j]]; j--) {
      int x = out[j];
      out[j] = out[j - 1];
      out[j - 1] = x;
    }
  return n;
}

/* One allreduce on comm against the reference; 1 when right. Quiet: the
 * thread test calls it too, so it reports through *why. */
static int allreduce_ok(baton_comm_t *comm, size_t count, uint64_t seed, char *why, size_t len) {
  int rank = baton_comm_rank(comm), size = baton_comm_size(comm);
  gen_spec_t g = exact_spec(BATON_FLOAT32, BATON_SUM);
  float *in = malloc((count + 1) * sizeof *in), *out = malloc((count + 1) * sizeof *out),
        *ref = malloc((count + 1) * sizeof *ref);
  int ok = in && out && ref;
  if (ok) {
    ref_fill(in, BATON_FLOAT32, &g, seed, rank, 0, count);
    ref_reduce(ref, BATON_FLOAT32, BATON_SUM, &g, seed, size, 0, count);
    int rc = baton_allreduce(in, out, count, BATON_FLOAT32, BATON_SUM, comm);
    if (rc != BATON_OK) {
      snprintf(why, len, "allreduce of %zu: %s: %s", count, baton_err_name(rc),
               baton_comm_last_error(comm));
      ok = 0;
    }
    for (size_t i = 0; ok && i < count; i++)
      if (out[i] != ref[i]) {
        snprintf(why, len, "allreduce of %zu: [%zu] is %g, the reference %g", count, i,
                 (double)out[i], (double)ref[i]);
        ok = 0;
      }
  }
  free(in), free(out), free(ref);
  return ok;
}

/* The checks every new communicator gets; `order` is the expected ranks in
 * the parent, n of them, or n = 0 when child must be NULL. */
static void check_child(tally_t *t, baton_comm_t *child, const int *order, int n, int myprank,
                        const char *label) {
  if (!tally_record(t, (n == 0) == (child == NULL))) {
    tally_say(t, "%s: newcomm is %s", label, child ? "a communicator" : "NULL");
    return;
  }
  if (!child) { /* as many checks as a rank with a child makes */
    for (size_t k = 0; k < 3 + NCOUNTS; k++)
      tally_record(t, 1);
    return;
  }
  int me = 0;
  while (me < n && order[me] != myprank)
    me++;
  if (!tally_record(t, baton_comm_rank(child) == me && baton_comm_size(child) == n))
    tally_say(t, "%s: rank %d of %d, want %d of %d", label, baton_comm_rank(child),
              baton_comm_size(child), me, n);
  int32_t *got = calloc((size_t)n, sizeof *got), mine = myprank;
  int rc = baton_allgather(&mine, got, 1, BATON_INT32, child);
  int same = rc == BATON_OK;
  for (int i = 0; same && i < n; i++)
    same = got[i] == order[i];
  if (!tally_record(t, same))
    tally_say(t, "%s: allgather of parent ranks: %s, [0] %d want %d", label, baton_err_name(rc),
              n ? got[0] : -1, order[0]);
  free(got);
  char why[512] = "";
  for (size_t k = 0; k < NCOUNTS; k++)
    if (!tally_record(t, allreduce_ok(child, counts[k], 77 + k, why, sizeof why)))
      tally_say(t, "%s: %s", label, why);
  int64_t b = me == n - 1 ? 4242 + order[0] : -1;
  rc = baton_broadcast(&b, &b, 1, BATON_INT64, n - 1, child);
  if (!tally_record(t, rc == BATON_OK && b == 4242 + order[0]))
    tally_say(t, "%s: broadcast: %s, %lld", label, baton_err_name(rc), (long long)b);
}

/* Splits t->comm (or parent) with colors[] and keys[] for every rank and
 * checks the result; returns the child (the caller destroys it). */
static baton_comm_t *split_checked(tally_t *t, baton_comm_t *parent, const int *colors,
                                   const int *keys, const char *label) {
  int rank = baton_comm_rank(parent), size = baton_comm_size(parent);
  int *order = calloc((size_t)size, sizeof *order);
  baton_comm_t *child = NULL;
  int rc = baton_comm_split(parent, colors[rank], keys[rank], &child);
  if (tally_rc(t, rc, label)) {
    int n = colors[rank] == BATON_SPLIT_NONE
                ? 0
                : expected_order(colors, keys, size, colors[rank], order);
    check_child(t, child, order, n, rank, label);
  }
  free(order);
  return child;
}

static void destroy_checked(tally_t *t, baton_comm_t *c, const char *label) {
  tally_rc(t, baton_comm_destroy(c), label);
}

/* The host index of BATON_HOSTID=h<k>, 0 without one: what run.sh sets. */
static int my_host(void) {
  const char *h = getenv("BATON_HOSTID");
  return h && h[0] == 'h' ? atoi(h + 1) : 0;
}

static void plain_splits(tally_t *t) {
  int n = t->size, *colors = calloc((size_t)n, sizeof *colors),
      *keys = calloc((size_t)n, sizeof *keys);
  struct {
    const char *label;
    int color, key; /* per rank r, from these rules */
  } cases[] = {{"parity", 0, 0},
               {"reversed keys", 1, 1},
               {"singletons", 2, 0},
               {"last rank NONE", 3, 0},
               {"by host", 4, 2}};
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    for (int r = 0; r < n; r++) {
      int c = cases[k].color;
      colors[r] = c == 0 ? r % 2 : c == 1 ? 0 : c == 2 ? r : c == 3 ? (r == n - 1 ? -1 : 5) : 0;
      keys[r] = cases[k].key == 1 ? -r : cases[k].key == 2 ? 0 : r;
    }
    /* Every rank learns every rank's host the only way a test can. */
    int32_t h = my_host(), *hosts = calloc((size_t)n, sizeof *hosts);
    tally_rc(t, baton_allgather(&h, hosts, 1, BATON_INT32, t->comm), "allgather of hosts");
    if (cases[k].color == 4)
      for (int r = 0; r < n; r++)
        colors[r] = hosts[r];
    free(hosts);
    baton_comm_t *c = split_checked(t, t->comm, colors, keys, cases[k].label);
    destroy_checked(t, c, cases[k].label);
  }
  baton_comm_t *d = NULL;
  int order[64];
  for (int r = 0; r < n && r < 64; r++)
    order[r] = r;
  if (tally_rc(t, baton_comm_dup(t->comm, &d), "dup"))
    check_child(t, d, order, n, t->rank, "dup");
  destroy_checked(t, d, "dup destroy");
  free(colors), free(keys);
}

static void bad_arguments(tally_t *t) {
  baton_comm_t *c = (baton_comm_t *)1;
  int rc = baton_comm_split(t->comm, -2, 0, &c);
  if (!tally_record(t, rc == BATON_EINVAL && c == NULL &&
                           strstr(baton_comm_last_error(t->comm), "color")))
    tally_say(t, "color -2: %s, %s", baton_err_name(rc), baton_comm_last_error(t->comm));
  tally_record(t, baton_comm_split(t->comm, 0, 0, NULL) == BATON_EINVAL);
  c = (baton_comm_t *)1;
  tally_record(t, baton_comm_split(NULL, 0, 0, &c) == BATON_EINVAL && c == NULL);
  tally_record(t, baton_comm_dup(NULL, &c) == BATON_EINVAL);
}

/* Parity groups, then each group split in halves with reversed keys; the
 * collectives of all three levels interleaved. */
static void nested_and_interleaved(tally_t *t) {
  int n = t->size, *colors = calloc((size_t)n, sizeof *colors),
      *keys = calloc((size_t)n, sizeof *keys);
  for (int r = 0; r < n; r++)
    colors[r] = r % 2, keys[r] = r;
  baton_comm_t *a = split_checked(t, t->comm, colors, keys, "nested: parity");
  baton_comm_t *b = NULL;
  if (a) {
    int an = baton_comm_size(a), *ac = calloc((size_t)an, sizeof *ac),
        *ak = calloc((size_t)an, sizeof *ak);
    for (int r = 0; r < an; r++)
      ac[r] = r < an / 2 ? 0 : 1, ak[r] = -r;
    b = split_checked(t, a, ac, ak, "nested: halves of parity");
    free(ac), free(ak);
  }
  char why[512] = "";
  for (int round = 0; round < 3; round++) {
    baton_comm_t *seq[3] = {t->comm, a, b};
    for (int k = 0; k < 3; k++)
      if (seq[k] &&
          !tally_record(t, allreduce_ok(seq[k], 1000 + (size_t)round, round, why, sizeof why)))
        tally_say(t, "interleaved round %d level %d: %s", round, k, why);
  }
  destroy_checked(t, b, "nested destroy");
  destroy_checked(t, a, "nested destroy");
  free(colors), free(keys);
}

typedef struct {
  baton_comm_t *comm;
  int failures;
  char why[512];
} worker_t;

static void *worker(void *arg) {
  worker_t *w = arg;
  for (int i = 0; i < 20; i++)
    if (!allreduce_ok(w->comm, i % 2 ? 70001 : 17, 1000 + (uint64_t)i, w->why, sizeof w->why))
      w->failures++;
  return NULL;
}

/* Two children, each driven by its own thread, at the same time. */
static void two_threads(tally_t *t) {
  baton_comm_t *p = NULL, *d = NULL;
  tally_rc(t, baton_comm_split(t->comm, t->rank % 2, t->rank, &p), "threads: split");
  tally_rc(t, baton_comm_dup(t->comm, &d), "threads: dup");
  if (!p || !d) {
    baton_comm_destroy(p), baton_comm_destroy(d);
    return;
  }
  worker_t w[2] = {{p, 0, ""}, {d, 0, ""}};
  pthread_t th[2];
  for (int i = 0; i < 2; i++)
    pthread_create(&th[i], NULL, worker, &w[i]);
  for (int i = 0; i < 2; i++) {
    pthread_join(th[i], NULL);
    if (!tally_record(t, w[i].failures == 0))
      tally_say(t, "thread %d: %d failures, the last: %s", i, w[i].failures, w[i].why);
  }
  destroy_checked(t, p, "threads: destroy");
  destroy_checked(t, d, "threads: destroy");
}

/* A dup of the world outlives the world, and a split of it outlives both
 * and splits again: the store of rank 0's process stays up for them. The
 * dup becomes the tally's communicator. */
static void outlive_parent(tally_t *t) {
  baton_comm_t *d = NULL, *g = NULL, *h = NULL;
  if (!tally_rc(t, baton_comm_dup(t->comm, &d), "outlive: dup"))
    return;
  tally_rc(t, baton_comm_split(d, t->rank % 2, 0, &g), "outlive: split");
  tally_rc(t, baton_comm_destroy(t->comm), "outlive: destroy the world");
  t->comm = d;
  char why[512] = "";
  if (!tally_record(t, allreduce_ok(d, 70001, 5, why, sizeof why)))
    tally_say(t, "outlive: dup after the world: %s", why);
  if (g && !tally_record(t, allreduce_ok(g, 1000, 6, why, sizeof why)))
    tally_say(t, "outlive: split after the world: %s", why);
  if (g && tally_rc(t, baton_comm_dup(g, &h), "outlive: dup of the split") &&
      !tally_record(t, allreduce_ok(h, 1000, 7, why, sizeof why)))
    tally_say(t, "outlive: dup of the split: %s", why);
  destroy_checked(t, h, "outlive: destroy");
  destroy_checked(t, g, "outlive: destroy");
}

static double seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void one_rank_fails(tally_t *t) {
  baton_comm_t *c = (baton_comm_t *)1;
  double t0 = seconds();
  int rc = baton_comm_split(t->comm, 0, t->rank, &c);
  double took = seconds() - t0;
  const char *e = baton_comm_last_error(t->comm);
  if (!tally_record(t, rc == BATON_EUSAGE && c == NULL && took < 5 &&
                           (t->rank == 1 ? strstr(e, "BATON_TRACE") : strstr(e, "rank 1"))))
    tally_say(t, "a split with a rank that cannot prepare: %s in %.1f s, %s: %s",
              baton_err_name(rc), took, c ? "a communicator" : "NULL", e);
  char why[512] = "";
  if (!tally_record(t, allreduce_ok(t->comm, 1000, 3, why, sizeof why)))
    tally_say(t, "the parent after a failed split: %s", why);
}

/* "the parent communicator" in comm's last error, and rc a failure. */
static int names_parent(int rc, baton_comm_t *comm) {
  return rc != BATON_OK && strstr(baton_comm_last_error(comm), "parent communicator") != NULL;
}

/* Issue 17: a child of a failed parent fails. A dup p of the world, its
 * child c (keys reversed) and grandchild g; e, another child of p,
 * destroyed first (it must have unlinked itself). In flight when every
 * rank aborts p: a receive on c that no rank sends, and on rank 0 an
 * allreduce on g that no other rank joins. Both must end with an error
 * that names the parent within 2 s, and the next calls on c and g at once.
 * Then p is destroyed before its children: i, a child of p that made no
 * call meanwhile, must still fail with p's failure. */
static void parent_fails(tally_t *t) {
  baton_comm_t *p = NULL, *c = NULL, *g = NULL, *e = NULL, *i = NULL;
  if (!tally_rc(t, baton_comm_dup(t->comm, &p), "parent fails: dup") ||
      !tally_rc(t, baton_comm_split(p, 0, -t->rank, &c), "parent fails: split") ||
      !tally_rc(t, baton_comm_dup(c, &g), "parent fails: grandchild") ||
      !tally_rc(t, baton_comm_dup(p, &e), "parent fails: another child") ||
      !tally_rc(t, baton_comm_dup(p, &i), "parent fails: an idle child")) {
    baton_comm_destroy(i), baton_comm_destroy(e), baton_comm_destroy(g), baton_comm_destroy(c);
    baton_comm_destroy(p);
    return;
  }
  destroy_checked(t, e, "parent fails: the other child destroyed first");
  int n = baton_comm_size(c), me = baton_comm_rank(c);
  float x[4] = {0}, y[4];
  baton_request_t *r[2] = {NULL, NULL};
  /* Every rank records as many checks, in flight or not. */
  tally_rc(t, n > 1 ? baton_irecv(x, 4, BATON_FLOAT32, (me + 1) % n, 99, c, &r[0]) : BATON_OK,
           "parent fails: irecv");
  tally_rc(t,
           n > 1 && me == 0 ? baton_iallreduce(x, y, 4, BATON_FLOAT32, BATON_SUM, g, &r[1])
                            : BATON_OK,
           "parent fails: iallreduce");
  usleep(50 * 1000); /* both are under way */
  baton_comm_abort(p);
  double t0 = seconds();
  baton_comm_t *on[2] = {c, g};
  for (int k = 0; k < 2; k++) {
    int rc = r[k] ? baton_wait(r[k]) : BATON_OK;
    double took = seconds() - t0;
    if (!tally_record(t, !r[k] || (names_parent(rc, on[k]) && took < 2.0)))
      tally_say(t, "parent fails: the %s in flight: %s in %.3f s: %s", k ? "iallreduce" : "irecv",
                baton_err_name(rc), took, baton_comm_last_error(on[k]));
  }
  for (int k = 0; k < 2; k++) {
    t0 = seconds();
    int rc = baton_barrier(on[k]);
    double took = seconds() - t0;
    if (!tally_record(t, names_parent(rc, on[k]) && took < 0.5))
      tally_say(t, "parent fails: a barrier on the %s after: %s in %.3f s: %s",
                k ? "grandchild" : "child", baton_err_name(rc), took, baton_comm_last_error(on[k]));
  }
  baton_comm_destroy(p);
  int rc = baton_barrier(i);
  if (!tally_record(t, names_parent(rc, i)))
    tally_say(t, "parent fails: the idle child after the parent's destroy: %s: %s",
              baton_err_name(rc), baton_comm_last_error(i));
  baton_comm_destroy(i);
  baton_comm_destroy(g);
  baton_comm_destroy(c);
}

int main(int argc, char **argv) {
  tally_t t;
  tally_init(&t);
  if (argc > 1 && strcmp(argv[1], "--one-rank-fails") == 0) {
    one_rank_fails(&t);
    return tally_finish(&t);
  }
  bad_arguments(&t);
  if (!t.broken)
    plain_splits(&t);
  if (!t.broken)
    nested_and_interleaved(&t);
  if (!t.broken)
    two_threads(&t);
  if (!t.broken)
    parent_fails(&t);
  if (!t.broken)
    outlive_parent(&t);
  return tally_finish(&t);
}
