/*
 * test_select.c - the choice of an algorithm from fixed costs (select.c),
 * without a communicator: no timing, only the logic.
 *
 *  - the pick is the argmin of the model's times over every algorithm of
 *    the table that serves the collective and fits, worked out here from
 *    baton__model_time directly with the executor's rounds and hier's
 *    fold added; the candidates come sorted;
 *  - latency-bound costs make flat win small messages, bandwidth-bound
 *    ones the ring large ones (with two or more algorithms to choose from);
 *    direct competes only where registered memory may serve;
 *  - BATON_ALGO's algorithm wins where it can serve the call, and where it
 *    cannot (does not serve the collective, flat off one host, scratch
 *    memory too small) the next best is used with a reason;
 *  - the same input gives the same answer, candidates and all;
 *  - the tune file: written, read back, a malformed line named, a missing
 *    file is no error.
 * Prints "N passed, M failed".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "select.h"
#include "unit.h"

static const baton__coll_t colls[] = {
    BATON__COLL_ALLREDUCE, BATON__COLL_REDUCE_SCATTER, BATON__COLL_ALLGATHER, BATON__COLL_BROADCAST,
    BATON__COLL_REDUCE,    BATON__COLL_ALLTOALL,       BATON__COLL_GATHER,    BATON__COLL_SCATTER};

static baton__select_in_t costs(int n, double alpha, double beta, int flat_fits) {
  baton__select_in_t in = {.size = n, .flat_fits = flat_fits, .scratch_bytes = (size_t)1 << 40};
  in.ring = (baton__cost_t){.alpha = alpha, .beta = beta, .gamma = beta / 4, .segment = 256 << 10};
  in.pair = (baton__cost_t){
      .alpha = alpha * 1.5, .beta = beta * 1.5, .gamma = beta / 4, .segment = 64 << 10};
  in.ring_piece = 1 << 20;
  in.pair_piece = (64 << 10) * 4.0 / n;
  return in;
}

/* The model's time for algo, priced as select.c must: the ring, flat and
 * direct with the ring's costs, the others with the pair channels'; a chunk (the
 * buffer for broadcast and reduce, else 1/N of it) of R pieces pays the
 * messages' latency R - 1 more times, except for flat and the chain; a
 * pairwise piece is N pair shares (exec.c, BATON__ALGO_ONE_BLOCK). */
static double priced(const baton__select_in_t *in, const baton__algo_t *a, baton__coll_t coll,
                     double bytes) {
  int flat = strcmp(a->name, "flat") == 0, ring = strcmp(a->name, "ring") == 0;
  int direct = strcmp(a->name, "direct") == 0; /* flat's two rendezvous, no rounds */
  int rooted = coll == BATON__COLL_BROADCAST || coll == BATON__COLL_REDUCE;
  const baton__cost_t *c = flat || direct || ring ? &in->ring : &in->pair;
  double piece = ring || flat ? in->ring_piece : in->pair_piece;
  if (strcmp(a->name, "pairwise") == 0) /* one block a message, one per peer: N times a share */
    piece *= in->size;
  double t = baton__model_time(a, coll, in->size, bytes, c);
  if (t > 0 && strcmp(a->name, "hier") == 0) { /* the fold and unfold inside a host */
    const baton__cost_t *l = in->tcp_inside ? c : &in->local;
    double m = c->hosts >= 1 ? in->size / c->hosts : 1;
    t += 2 * (m - 1) * (l->alpha + bytes * l->beta);
  }
  baton__cost_t one_a = {.alpha = 1, .segment = c->segment};
  double msgs = baton__model_time(a, coll, in->size, bytes, &one_a);
  /* N chunks, or a rooted collective's one; the double tree's two halves
   * (any collective). */
  double chunk = a->traits & BATON__ALGO_HALVES ? bytes / 2
                 : !rooted                      ? bytes / in->size
                                                : bytes,
         rounds = 1;
  while (rounds * piece < chunk)
    rounds++;
  if (!flat && !direct && !(ring && rooted) && t > 0)
    t += (rounds - 1) * msgs * c->alpha;
  return t;
}

static void check_argmin(const baton__select_in_t *in, baton__coll_t coll, double bytes) {
  int na, n;
  const baton__algo_t *all = baton__algos(&na), *want = NULL;
  double want_t = 0;
  int fits = 0;
  for (int i = 0; i < na; i++) {
    if (!(all[i].colls & (1u << coll)) ||
        ((all[i].traits & BATON__ALGO_MAILBOX) && !in->flat_fits) ||
        ((all[i].traits & BATON__ALGO_REGISTERED) && !in->direct_ok) ||
        baton__algo_scratch(&all[i], coll, bytes) > (double)in->scratch_bytes ||
        ((all[i].traits & BATON__ALGO_HOST_LEADERS) && (in->hosts < 2 || in->hostmax < 2)))
      continue;
    fits++;
    double t = priced(in, &all[i], coll, bytes);
    if (!want || t < want_t)
      want = &all[i], want_t = t;
  }
  baton__cand_t c[16];
  char why[256];
  const baton__algo_t *got = baton__select_rank(in, coll, bytes, c, 16, &n, why, sizeof why);
  EXPECT(got == want, "%s %.0f B on %d: picked %s, the model's argmin is %s",
         baton__coll_name(coll), bytes, in->size, got ? got->name : "none",
         want ? want->name : "none");
  EXPECT_EQ(n, fits);
  EXPECT(why[0] == '\0', "no reason without BATON_ALGO, got \"%s\"", why);
  for (int i = 1; i < n; i++)
    EXPECT(c[i - 1].t <= c[i].t, "%s %.0f B: candidates out of order: %s %g before %s %g",
           baton__coll_name(coll), bytes, c[i - 1].algo->name, c[i - 1].t, c[i].algo->name, c[i].t);
  for (int i = 0; i < n; i++)
    EXPECT(c[i].t == priced(in, c[i].algo, coll, bytes), "%s: %s priced %g, the model says %g",
           baton__coll_name(coll), c[i].algo->name, c[i].t, priced(in, c[i].algo, coll, bytes));
}

static void test_argmin(void) {
  const int sizes[] = {2, 3, 4, 5, 8, 16};
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
    for (size_t k = 0; k < sizeof colls / sizeof colls[0]; k++)
      for (double bytes = 8; bytes <= 1 << 28; bytes *= 16)
        for (int flat = 0; flat < 2; flat++) {
          baton__select_in_t shm = costs(sizes[s], 0.5e-6, 0.1e-9, flat);
          baton__select_in_t tcp = costs(sizes[s], 25e-6, 8e-9, 0);
          check_argmin(&shm, colls[k], bytes);
          shm.direct_ok = 1; /* registered memory: direct competes */
          check_argmin(&shm, colls[k], bytes);
          check_argmin(&tcp, colls[k], bytes);
          /* Two hosts of N/2 ranks: hier's fold through shared memory, or
           * through TCP when BATON_TRANSPORT=tcp. */
          tcp.ring.hosts = tcp.pair.hosts = 2;
          tcp.hosts = 2, tcp.hostmax = sizes[s] / 2;
          tcp.local = shm.pair;
          check_argmin(&tcp, colls[k], bytes);
          tcp.tcp_inside = 1;
          check_argmin(&tcp, colls[k], bytes);
        }
}

/* Where both are in the table: one rendezvous beats 2(N-1) hand-offs
 * when latency is all that counts, and the ring's 2(N-1)/N K beats flat's
 * N K when bandwidth is. */
static void test_extremes(void) {
  baton__cand_t c[16];
  int n;
  char why[256];
  baton__select_in_t lat = costs(4, 1e-3, 1e-15, 1), bw = costs(4, 1e-12, 1e-6, 1);
  const baton__algo_t *got =
      baton__select_rank(&lat, BATON__COLL_ALLREDUCE, 64, c, 16, &n, why, sizeof why);
  EXPECT(got && strcmp(got->name, "flat") == 0, "latency-bound 64 B allreduce: got %s, want flat",
         got ? got->name : "none");
  got = baton__select_rank(&bw, BATON__COLL_ALLREDUCE, 1 << 20, c, 16, &n, why, sizeof why);
  EXPECT(got && strcmp(got->name, "flat") != 0,
         "bandwidth-bound 1 MiB allreduce: got %s, anything but flat (N K bytes read)",
         got ? got->name : "none");
}

/* flat's broadcast past a mailbox fans out: N copies of the buffer where
 * the chain makes 2(N-1), so it wins at 4 ranks and loses at 2, where the
 * chain's one hop is the fan-out's and it pays no rendezvous; within a
 * mailbox it is the one rendezvous it always was. */
static void test_fanout(void) {
  const baton__algo_t *flat = baton__algo_find("flat"), *ring = baton__algo_find("ring");
  baton__select_in_t four = costs(4, 1e-6, 0.2e-9, 1), two = costs(2, 0.5e-6, 0.1e-9, 1);
  four.box_bytes = two.box_bytes = 64 << 10;
  double big = 32 << 20;
  double f4 = baton__select_predict(&four, flat, BATON__COLL_BROADCAST, big);
  double r4 = baton__select_predict(&four, ring, BATON__COLL_BROADCAST, big);
  EXPECT(f4 > 0 && f4 < r4, "4 ranks, 32 MiB broadcast: flat %.3g s, the chain %.3g s; want flat",
         f4, r4);
  double f2 = baton__select_predict(&two, flat, BATON__COLL_BROADCAST, big);
  double r2 = baton__select_predict(&two, ring, BATON__COLL_BROADCAST, big);
  EXPECT(f2 > r2, "2 ranks, 32 MiB broadcast: flat %.3g s, the chain %.3g s; want the chain", f2,
         r2);
  /* N/(2(N-1)) of the chain's bytes at 4 ranks: within a segment's share. */
  double s = big / four.ring.segment, chain_b = big * four.ring.beta;
  EXPECT(f4 > chain_b * 4 / 6 && f4 < chain_b * 4 / 6 * (1 + 2 / s) + (1 + s) * four.ring.alpha,
         "4 ranks: flat %.4g s against 2/3 of the chain's bytes, %.4g s", f4, chain_b * 4 / 6);
  double small = 32 << 10; /* within the mailbox: a + 2Kb */
  double f4s = baton__select_predict(&four, flat, BATON__COLL_BROADCAST, small);
  EXPECT(f4s == four.ring.alpha + 2 * small * four.ring.beta,
         "4 ranks, 32 KiB within the mailbox: flat %.4g s, want a + 2Kb", f4s);
}

/* On registered buffers at N=2 a large alltoall goes direct: pairwise
 * copies its own block as well as sending the other (docs/performance.md:
 * 1.5-1.9x faster direct from 512 KiB), and without that block in its price
 * pairwise won every size by the one alpha it saves. */
static void test_alltoall_registered(void) {
  baton__select_in_t two = costs(2, 0.5e-6, 0.1e-9, 1);
  two.pair.alpha = two.ring.alpha, two.pair.beta = two.ring.beta; /* as measured here */
  two.pair_piece = 1 << 30;                                       /* one round */
  two.direct_ok = 1;
  baton__cand_t c[16];
  int n;
  char why[256];
  const baton__algo_t *got =
      baton__select_rank(&two, BATON__COLL_ALLTOALL, 8 << 20, c, 16, &n, why, sizeof why);
  EXPECT(got && strcmp(got->name, "direct") == 0,
         "N=2 8 MiB alltoall on registered buffers: got %s, want direct", got ? got->name : "none");
  two.direct_ok = 0;
  got = baton__select_rank(&two, BATON__COLL_ALLTOALL, 8 << 20, c, 16, &n, why, sizeof why);
  EXPECT(got && strcmp(got->name, "pairwise") == 0,
         "N=2 8 MiB alltoall, unregistered, no CMA: got %s, want pairwise",
         got ? got->name : "none");
}

/* Two hosts of two ranks over a slow network, 2 MiB: the hierarchical
 * allreduce sends 1 buffer over the network instead of the ring's 1.5 and
 * folds through shared memory; with BATON_TRANSPORT=tcp its fold goes over
 * TCP too and it loses. */
static void test_hier(void) {
  const baton__algo_t *hier = baton__algo_find("hier");
  if (!hier) {
    printf("skip: hier's pricing: no hier in this build\n");
    return;
  }
  baton__cand_t c[16];
  int n;
  char why[256];
  baton__select_in_t in = costs(4, 26e-6, 8.4e-9, 0);
  in.pair = in.ring; /* over TCP every algorithm pays TCP's costs */
  in.pair.segment = 64 << 10;
  in.ring.hosts = in.pair.hosts = 2;
  in.hosts = in.hostmax = 2;
  in.local = costs(4, 0.5e-6, 0.1e-9, 0).pair;
  const baton__algo_t *got =
      baton__select_rank(&in, BATON__COLL_ALLREDUCE, 2 << 20, c, 16, &n, why, sizeof why);
  EXPECT(got == hier, "2 hosts x 2 ranks, 2 MiB: got %s, want hier", got ? got->name : "none");
  in.tcp_inside = 1;
  got = baton__select_rank(&in, BATON__COLL_ALLREDUCE, 2 << 20, c, 16, &n, why, sizeof why);
  EXPECT(got && got != hier, "the same over TCP inside the hosts: got %s, anything but hier",
         got ? got->name : "none");
}

static void test_forced(void) {
  baton__cand_t c[16];
  int n;
  char why[256];
  const baton__algo_t *ring = baton__algo_find("ring"), *flat = baton__algo_find("flat");
  /* Forced where the model would pick something else. */
  baton__select_in_t in = costs(4, 1e-3, 1e-15, 1);
  in.forced = ring;
  const baton__algo_t *got =
      baton__select_rank(&in, BATON__COLL_ALLREDUCE, 64, c, 16, &n, why, sizeof why);
  EXPECT(got == ring, "BATON_ALGO=ring: got %s", got ? got->name : "none");
  EXPECT(why[0] == '\0', "a forced algorithm that serves says nothing, got \"%s\"", why);
  /* Flat off one host: the next best, with the reason. */
  in = costs(4, 25e-6, 8e-9, 0);
  in.forced = flat;
  got = baton__select_rank(&in, BATON__COLL_ALLREDUCE, 64, c, 16, &n, why, sizeof why);
  EXPECT(got && got != flat, "BATON_ALGO=flat over TCP: got %s", got ? got->name : "none");
  EXPECT(strstr(why, "BATON_ALGO asks for flat") && strstr(why, "BATON_FLAT_BYTES"),
         "reason for flat: \"%s\"", why);
  EXPECT(got == c[0].algo, "the next best is the best candidate: %s vs %s",
         got ? got->name : "none", c[0].algo->name);
  /* An algorithm that does not serve the collective (flat: no reduce). */
  in = costs(4, 0.5e-6, 0.1e-9, 1);
  in.forced = flat;
  got = baton__select_rank(&in, BATON__COLL_REDUCE, 4096, c, 16, &n, why, sizeof why);
  EXPECT(got && got != flat, "BATON_ALGO=flat for reduce: got %s", got ? got->name : "none");
  EXPECT(strstr(why, "does not serve"), "reason for reduce: \"%s\"", why);
  /* Scratch: an algorithm that keeps all of reduce-scatter's input. */
  baton__algo_t fake_rhd = {.name = "rhd",
                            .colls = 1u << BATON__COLL_REDUCE_SCATTER,
                            .scratch_colls = 1u << BATON__COLL_REDUCE_SCATTER};
  EXPECT(baton__algo_scratch(&fake_rhd, BATON__COLL_REDUCE_SCATTER, 1e6) == 1e6,
         "rhd reduce_scatter keeps the whole input in scratch");
  EXPECT(baton__algo_scratch(ring, BATON__COLL_ALLREDUCE, 1e6) == 0,
         "the ring needs no scratch for allreduce");
  const baton__algo_t *rhd = baton__algo_find("rhd");
  if (rhd && (rhd->colls & (1u << BATON__COLL_REDUCE_SCATTER))) {
    in = costs(8, 0.5e-6, 0.1e-9, 0);
    in.scratch_bytes = 1 << 20;
    in.forced = rhd;
    got = baton__select_rank(&in, BATON__COLL_REDUCE_SCATTER, 1 << 24, c, 16, &n, why, sizeof why);
    EXPECT(got && got != rhd, "rhd with 1 MiB of scratch for 16 MiB: got %s",
           got ? got->name : "none");
    EXPECT(strstr(why, "BATON_SCRATCH_BYTES"), "reason for scratch: \"%s\"", why);
  } else {
    printf("skip: the scratch fallback through select: no rhd reduce_scatter in this build\n");
  }
}

static void test_deterministic(void) {
  for (size_t k = 0; k < sizeof colls / sizeof colls[0]; k++)
    for (double bytes = 8; bytes <= 1 << 27; bytes *= 4) {
      baton__select_in_t in = costs(5, 2e-6, 0.2e-9, bytes <= 65536);
      baton__cand_t a[16], b[16];
      int na, nb;
      char why[256];
      const baton__algo_t *x =
          baton__select_rank(&in, colls[k], bytes, a, 16, &na, why, sizeof why);
      const baton__algo_t *y =
          baton__select_rank(&in, colls[k], bytes, b, 16, &nb, why, sizeof why);
      EXPECT(x == y && na == nb && memcmp(a, b, (size_t)na * sizeof a[0]) == 0,
             "%s %.0f B: two answers to one question", baton__coll_name(colls[k]), bytes);
    }
  /* A tie keeps the table's order: price every algorithm at zero. */
  baton__select_in_t zero = costs(4, 0, 0, 1);
  baton__cand_t c[16];
  int n, na;
  char why[256];
  const baton__algo_t *all = baton__algos(&na);
  const baton__algo_t *got =
      baton__select_rank(&zero, BATON__COLL_ALLREDUCE, 1024, c, 16, &n, why, sizeof why);
  const baton__algo_t *first = NULL;
  for (int i = 0; i < na && !first; i++)
    if (all[i].colls & (1u << BATON__COLL_ALLREDUCE))
      first = &all[i];
  EXPECT(got == first, "a tie goes to the first in the table: got %s, want %s",
         got ? got->name : "none", first ? first->name : "none");
}

static void test_tune_file(void) {
  char path[] = "/tmp/baton-tune-test.XXXXXX", why[700];
  int fd = mkstemp(path);
  EXPECT(fd >= 0, "mkstemp");
  if (fd < 0)
    return;
  close(fd);
  baton__link_cost_t want[BATON__LINK_COUNT], got[BATON__LINK_COUNT];
  baton__link_defaults(want);
  want[BATON__LINK_TCP].alpha = 12.5e-6;
  want[BATON__LINK_PAIR].beta = 0.25e-9;
  want[BATON__LINK_SHM].obeta = 0.3e-9;
  want[BATON__LINK_TCP].obeta = 0;
  EXPECT_EQ(baton__tune_write(path, want, "test"), 0);
  baton__link_defaults(got);
  got[BATON__LINK_TCP].obeta = 1e-9; /* the file's 0 must replace it */
  EXPECT_EQ(baton__tune_read(path, got, why, sizeof why), 1);
  for (int l = 0; l < BATON__LINK_COUNT; l++) {
    double *w = &want[l].alpha, *g = &got[l].alpha;
    for (int f = 0; f < BATON__LINK_DOUBLES; f++)
      EXPECT(g[f] >= w[f] * 0.999 && g[f] <= w[f] * 1.001, "%s field %d: %g, wrote %g",
             baton__link_names[l], f, g[f], w[f]);
  }
  /* A line it does not know: the reason names the file and the line. */
  FILE *f = fopen(path, "w");
  fprintf(f, "# a comment\ntcp alpha=1e-05\nshm alpha=fast\n");
  fclose(f);
  baton__link_defaults(got);
  EXPECT_EQ(baton__tune_read(path, got, why, sizeof why), -1);
  EXPECT(strstr(why, path) && strstr(why, ":3:") && strstr(why, "alpha=fast"),
         "malformed line: \"%s\"", why);
  EXPECT(got[BATON__LINK_TCP].alpha == 1e-5, "the line before the bad one is taken: %g",
         got[BATON__LINK_TCP].alpha);
  f = fopen(path, "w");
  fprintf(f, "ethernet alpha=1e-5\n");
  fclose(f);
  EXPECT_EQ(baton__tune_read(path, got, why, sizeof why), -1);
  unlink(path);
  EXPECT_EQ(baton__tune_read(path, got, why, sizeof why), 0);
  char p[256];
  baton__tune_path("/x/y", p, sizeof p);
  EXPECT(strcmp(p, "/x/y") == 0, "BATON_TUNE_FILE wins: %s", p);
  setenv("XDG_CACHE_HOME", "/cache", 1);
  baton__tune_path("", p, sizeof p);
  EXPECT(strcmp(p, "/cache/baton/tune") == 0, "XDG_CACHE_HOME: %s", p);
  unsetenv("XDG_CACHE_HOME");
  setenv("HOME", "/home/u", 1);
  baton__tune_path("", p, sizeof p);
  EXPECT(strcmp(p, "/home/u/.cache/baton/tune") == 0, "HOME: %s", p);
}

static void test_bytes(void) {
  EXPECT(baton__model_bytes(BATON__COLL_ALLREDUCE, 10, 4, 8) == 40, "allreduce: the buffer");
  EXPECT(baton__model_bytes(BATON__COLL_ALLGATHER, 10, 4, 8) == 320, "allgather: N blocks");
  EXPECT(baton__model_bytes(BATON__COLL_REDUCE_SCATTER, 10, 4, 8) == 320,
         "reduce_scatter: N blocks of input");
}

int main(void) {
  test_argmin();
  test_extremes();
  test_hier();
  test_fanout();
  test_alltoall_registered();
  test_forced();
  test_deterministic();
  test_tune_file();
  test_bytes();
  return unit_summary();
}
