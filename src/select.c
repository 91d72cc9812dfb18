/*
 * select.c - which algorithm runs a collective.
 *
 * BATON_ALGO forces a choice, for every collective an algorithm serves
 * ("rhd") or per collective ("allreduce:ring,broadcast:tree"); it is parsed
 * once, at init, and an unknown name is an error there. Otherwise, and
 * where the forced algorithm cannot serve a call, the cost model picks:
 * every algorithm of the table that serves the collective is priced with
 * its formula (model.c) and the costs of the communicator's links, and the
 * cheapest wins.
 *
 * The costs (select.h): one line per kind of link. The slowest link paces
 * a collective, so a communicator with any TCP link is priced with TCP's
 * costs; else the ring with the shared-memory ring channels' and the other
 * algorithms with the pair channels' (but an allgather of two ranks, all of
 * whose bytes cross the ring's channel, with the ring's beta: decide()).
 * When a host runs more ranks than it has cores, every message may wait
 * for the scheduler and the copies share the cores: alpha grows by
 * `oversub` for each rank per core beyond one, and beta and gamma in
 * proportion to the ranks per core; once a message is larger than a core's
 * L2 cache (rank 0's, shared like the costs) the memory bus paces the
 * copies, whatever the ranks per core, and each kind of channel pays its
 * own beta there, `obeta` (N=4 on 2 cores, 32 MiB: the ring's 0.2 ns/B,
 * rhd's 0.34; where they move the same bytes). The formulas are
 * the textbook's; baton__select_predict adds what this executor pays on
 * top (its rounds, hier's fold).
 *
 * Every rank must pick the same algorithm for a call, or the job hangs. A
 * decision depends only on (collective, bytes, N, topology, costs), and
 * rank 0 reads the tune file and hands its costs to the others through the
 * store, so all ranks price with the same numbers. Decisions are cached by
 * exact size, one per power of two per collective, so a run of calls of
 * one size pays one compare; BATON_DEBUG=INFO prints each decision with
 * the predicted times once per (collective, power of two).
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "comm.h"
#include "select.h"

const char *const baton__link_names[BATON__LINK_COUNT] = {"shm", "pair", "tcp"};

/* The built-in costs, fitted to this project's measurements on its
 * development machine (a 2-core VM) when it was quiet (the sweeps of
 * docs/performance.md; docs/algorithms.md shows the arithmetic):
 *  - shm: 1 KiB ring allreduce on 2 ranks, 1.18 us for 2 steps: alpha
 *    0.55 us. Per byte, the ring's slope is beta + gamma/2 = 0.10 ns/B
 *    between 16 KiB and 256 KiB and 0.14 ns/B at 128 MiB: beta 0.11 ns/B.
 *    4 ranks on the 2 cores of the Intel Xeon (since a waiter that
 *    shares its core yields instead of spinning), baton-tune -n 4 on
 *    2026-12-06, four runs: oversub 1.0-1.25 us a message (1.05 taken),
 *    and from a 32 MiB ring allreduce (10.4-11.5 ms in three of them)
 *    obeta 0.19-0.20 ns/B (0.2 taken; N=3 gave 0.20 as well). Below L2
 *    the slopes there are about twice N=2's, as beta * ranks per core
 *    has them (ring allreduce 8 B-32 KiB: 0.23 ns/B a byte sent, against
 *    0.22);
 *  - gamma: baton-tune's float32 sum on 64 KiB in cache, 0.014 ns/B, and
 *    flat's slopes at N=2 and N=4 (K(beta + (N-1) gamma)) give 0.0085;
 *  - pair: baton-tune on the quiet machine (2 ranks, 17:21 UTC on
 *    2026-12-02): alpha 0.62 us, beta 0.072 ns/B (4 ranks: 0.037 ns/B per
 *    rank per core); with 0.075 ns/B rd and rhd take over from the ring
 *    between 8 KiB and 1 MiB at N=4, as bench/select-check.sh measures.
 *    Oversubscribed (the same baton-tune runs): oversub 1.4-1.8 us (1.6
 *    taken), and from a 32 MiB rhd allreduce (18.1-20.3 ms in three,
 *    1.7x the ring's) obeta 0.27-0.37 ns/B (0.34 taken), so the ring keeps
 *    the large sizes (rhd 1.4-1.6x slower at 32-128 MiB, N=4);
 *  - tcp: 8 B ring allreduce on 4 emulated hosts (scripts/cluster.sh,
 *    1 Gbit/s links), 157 us for 6 steps: alpha 26 us; 119.5 MB/s: beta
 *    8.4 ns/B. The slowest network baton is tested on; loopback TCP is
 *    faster (baton-tune measures it). Its oversub, 6.3 us, is the shared
 *    memory's from before the yield (N=4 on 2 cores, AMD EPYC), and it
 *    has no obeta: neither was measured over TCP. */
void baton__link_defaults(baton__link_cost_t cost[BATON__LINK_COUNT]) {
  cost[BATON__LINK_SHM] = (baton__link_cost_t){
      .alpha = 0.55e-6, .beta = 0.11e-9, .gamma = 0.015e-9, .oversub = 1.05e-6, .obeta = 0.2e-9};
  cost[BATON__LINK_PAIR] = (baton__link_cost_t){
      .alpha = 0.65e-6, .beta = 0.09e-9, .gamma = 0.015e-9, .oversub = 1.6e-6, .obeta = 0.34e-9};
  cost[BATON__LINK_TCP] =
      (baton__link_cost_t){.alpha = 26e-6, .beta = 8.4e-9, .gamma = 0.015e-9, .oversub = 6.3e-6};
}

/* ------------------------------------------------------------ tune file */

void baton__tune_path(const char *knob, char *path, size_t len) {
  const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
  if (knob && knob[0])
    snprintf(path, len, "%s", knob);
  else if (xdg && xdg[0])
    snprintf(path, len, "%s/baton/tune", xdg);
  else
    snprintf(path, len, "%s/.cache/baton/tune", home && home[0] ? home : ".");
}

/* "shm alpha=5e-07 beta=1e-10 gamma=1e-10 oversub=1e-06 obeta=2e-10": 0, or -1. */
static int parse_line(char *line, baton__link_cost_t cost[BATON__LINK_COUNT]) {
  char *save = NULL, *word = strtok_r(line, " \t\r\n", &save);
  int link = -1;
  for (int l = 0; word && l < BATON__LINK_COUNT; l++)
    if (strcmp(word, baton__link_names[l]) == 0)
      link = l;
  if (link < 0)
    return -1;
  baton__link_cost_t c = cost[link];
  while ((word = strtok_r(NULL, " \t\r\n", &save))) {
    char *eq = strchr(word, '='), *end;
    if (!eq)
      return -1;
    *eq = '\0';
    errno = 0;
    double v = strtod(eq + 1, &end);
    if (errno || end == eq + 1 || *end || !(v >= 0 && v < 1))
      return -1;
    if (strcmp(word, "alpha") == 0)
      c.alpha = v;
    else if (strcmp(word, "beta") == 0)
      c.beta = v;
    else if (strcmp(word, "gamma") == 0)
      c.gamma = v;
    else if (strcmp(word, "oversub") == 0)
      c.oversub = v;
    else if (strcmp(word, "obeta") == 0)
      c.obeta = v;
    else
      return -1;
  }
  cost[link] = c;
  return 0;
}

int baton__tune_read(const char *path, baton__link_cost_t cost[BATON__LINK_COUNT], char *why,
                     size_t whylen) {
  FILE *f = fopen(path, "r");
  if (!f) {
    if (errno == ENOENT)
      return 0;
    snprintf(why, whylen, "%s: %s", path, strerror(errno));
    return -1;
  }
  char line[512];
  int rc = 1;
  for (int no = 1; rc == 1 && fgets(line, sizeof line, f); no++) {
    char copy[512];
    snprintf(copy, sizeof copy, "%s", line);
    copy[strcspn(copy, "\r\n")] = '\0';
    size_t skip = strspn(line, " \t");
    if (line[skip] == '#' || line[skip] == '\n' || line[skip] == '\0')
      continue;
    if (parse_line(line, cost) != 0) {
      snprintf(why, whylen,
               "%s:%d: \"%.200s\" is not \"LINK key=value ...\" with LINK "
               "shm, pair or tcp, keys alpha, beta, gamma, oversub, obeta and values in [0, 1) "
               "seconds",
               path, no, copy);
      rc = -1;
    }
  }
  fclose(f);
  return rc;
}

void baton__tune_print(FILE *f, const baton__link_cost_t cost[BATON__LINK_COUNT],
                       const char *comment) {
  fprintf(f,
          "# %s\n# link: alpha s/message, beta s/byte, gamma s/byte reduced, "
          "oversub s/message per rank per core beyond one, obeta s/byte above L2 with more "
          "ranks than cores (0: beta per rank per core)\n",
          comment);
  for (int l = 0; l < BATON__LINK_COUNT; l++)
    fprintf(f, "%s alpha=%.4g beta=%.4g gamma=%.4g oversub=%.4g obeta=%.4g\n", baton__link_names[l],
            cost[l].alpha, cost[l].beta, cost[l].gamma, cost[l].oversub, cost[l].obeta);
}

int baton__tune_write(const char *path, const baton__link_cost_t cost[BATON__LINK_COUNT],
                      const char *comment) {
  char tmp[600];
  snprintf(tmp, sizeof tmp, "%s.%d", path, (int)getpid());
  FILE *f = fopen(tmp, "w");
  if (!f)
    return -1;
  baton__tune_print(f, cost, comment);
  if (fclose(f) != 0 || rename(tmp, path) != 0) {
    int e = errno;
    unlink(tmp);
    errno = e;
    return -1;
  }
  return 0;
}

/* ------------------------------------------------------------ the model */

double baton__model_bytes(baton__coll_t coll, size_t count, size_t elsize, int size) {
  double k = (double)count * (double)elsize;
  switch (coll) {
  case BATON__COLL_REDUCE_SCATTER:
  case BATON__COLL_ALLGATHER:
  case BATON__COLL_ALLTOALL:
  case BATON__COLL_GATHER:
  case BATON__COLL_SCATTER:
    return k * size;
  default: /* allreduce, broadcast, reduce; the v-variants pass their total */
    return k;
  }
}

/* How much of the message an algorithm may hold in scratch memory: the
 * table says for which collectives it is all of it (recursive halving
 * keeps the whole input of reduce-scatter, a tree's inner ranks hold their
 * subtree's data). */
double baton__algo_scratch(const baton__algo_t *algo, baton__coll_t coll, double bytes) {
  return algo->scratch_colls & (1u << coll) ? bytes : 0;
}

/* Why direct by the kernel (in->cma) cannot serve a call of `bytes`, or
 * NULL. Measured, not assumed: a safety net for kernels whose copies are
 * slow. Up to a core's L2 cache, not where rank 0's copy by the kernel
 * costs twice what a staged message pays a byte (b; the staged byte runs
 * up to 1.6x b at 128 KiB-2 MiB). Past the cache the staged copies run
 * through slots that stay in it, so the kernel's one copy must beat two
 * memcpys there, both measured past the cache (measure_once): with the own
 * block's copy streaming as the staged copies out do, it did on the Intel
 * Xeon (its kernel copy 1.2x memcpy past the cache, 1.5-2.4x in it; N=2
 * allgather 4-32 MiB in place 1.3-1.6x the staged ring's speed, alltoall
 * 8-32 MiB 1.1-1.3x, N=4 alltoall 8 MiB 1.45x, 32 MiB level;
 * docs/performance.md), and would not have on the AMD EPYC of the first
 * design (process_vm_readv 5.4-7.9 GB/s, memcpy 14-21: 0.13-0.19 against
 * 0.048-0.07 ns/B, in pieces of up to 1 MiB), where that one lost to the
 * staged two. */
static const char *cma_cannot(const baton__select_in_t *in, baton__coll_t coll, double bytes) {
  if (!(in->cma_beta > 0))
    return "the kernel refused rank 0's copy of its own memory (process_vm_readv)";
  if (in->cma_beta >= 2 * in->pair.beta)
    return "a copy by the kernel costs rank 0 over twice what a staged message pays a byte";
  if (bytes > in->cache_bytes &&
      !(in->cma_big_beta > 0 && in->cma_big_beta < 2 * in->memcpy_big_beta))
    return "past a core's L2 cache a copy by the kernel costs rank 0 more than the two memcpys of "
           "the staged path (or could not be measured there)";
  /* The split broadcast keeps every core copying where each rank has one;
   * with more ranks than cores the root's writes and the peers' reads
   * queue for the cores instead (N=4 on 2 cores, in place: 1.04-1.24x flat's
   * time from 512 KiB, 1.6-2.3x the tree's at 32-128 KiB; N=2 1.5-2.6x
   * faster than the staged path). */
  if (coll == BATON__COLL_BROADCAST && in->ranks_per_core > 1)
    return "a broadcast by the kernel needs a core for each rank of the host";
  return NULL;
}

/* Why `algo` cannot serve this call, or NULL. */
static const char *cannot(const baton__select_in_t *in, const baton__algo_t *algo,
                          baton__coll_t coll, double bytes) {
  if (!(algo->colls & (1u << coll)))
    return "it does not serve this collective";
  if ((algo->traits & BATON__ALGO_MAILBOX) && !in->flat_fits)
    return "it needs every rank on one host and at most BATON_FLAT_BYTES per rank";
  if ((algo->traits & BATON__ALGO_REGISTERED) && !in->direct_ok)
    return "it needs every rank on one host and buffers from baton_mem_alloc (or "
           "baton_mem_alloc_local with BATON_MEM_LOCAL=1; or, for allgather, alltoall and "
           "broadcast, BATON_CMA=1)";
  const char *by_kernel =
      (algo->traits & BATON__ALGO_REGISTERED) && in->cma ? cma_cannot(in, coll, bytes) : NULL;
  if (by_kernel)
    return by_kernel;
  if (baton__algo_scratch(algo, coll, bytes) > (double)in->scratch_bytes)
    return "it needs more scratch memory than BATON_SCRATCH_BYTES";
  if ((algo->traits & BATON__ALGO_HOST_LEADERS) && (in->hosts < 2 || in->hostmax < 2))
    return "it needs ranks on several hosts and more than one rank on some host";
  return NULL;
}

/* The model's time, plus what the executor adds (exec.c): it runs the
 * whole schedule once per round, each round moving one piece of every
 * chunk (a window of slots for the ring, a share of one for the others), so
 * a chunk larger than a piece pays every message's alpha again each extra
 * round. The chain (the ring's broadcast and reduce) forwards each segment
 * as it arrives, across rounds too, which its formula counts with S = K /
 * segment; flat is one rendezvous whatever its size. */
double baton__select_predict(const baton__select_in_t *in, const baton__algo_t *algo,
                             baton__coll_t coll, double bytes) {
  int flat = (algo->traits & BATON__ALGO_MAILBOX) != 0;
  /* direct pays two of flat's rendezvous and no rounds: its pieces are
   * only for the cache. */
  int direct = (algo->traits & BATON__ALGO_REGISTERED) != 0;
  int ring_links = (algo->traits & BATON__ALGO_RING_LINKS) != 0, ring = ring_links && !flat;
  int one_chunk = coll == BATON__COLL_BROADCAST || coll == BATON__COLL_REDUCE;
  const baton__cost_t *c = flat || direct || ring_links ? &in->ring : &in->pair;
  double piece = ring_links                             ? in->ring_piece
                 : algo->traits & BATON__ALGO_ONE_BLOCK ? in->pair_piece * in->size
                                                        : in->pair_piece;
  /* A broadcast or a reduce overlaps the next call: a rank that has passed
   * its data on leaves and starts it, so back to back, as a framework
   * issues them, the wait for a descheduled peer hides behind the next
   * call's messages. Not for flat and direct, whose rendezvous every rank
   * must reach, nor the double tree, whose ranks pass data on in both
   * trees (without its wait it was picked from 4 KiB to 2 MiB at N=8 and
   * ran 1.1-2.5x slower than the best). N=4 on 2 cores, 8 B: the chain's
   * broadcast took 1.22 us a call where its three hops at the 1 us a step
   * of the ring's allreduce would take 3; naive 1.09, flat 2.36
   * (bench/results/select-rooted-shm4-2026-12-06-1936.txt). */
  baton__cost_t overlapped;
  if (one_chunk && !flat && !direct && !(algo->traits & BATON__ALGO_HALVES)) {
    overlapped = *c;
    overlapped.alpha -= ring_links ? in->ring_wait : in->pair_wait;
    c = &overlapped;
  }
  baton__cost_t boxed;
  if (flat) { /* its broadcast fans out past a mailbox */
    boxed = *c;
    boxed.room = in->box_bytes;
    c = &boxed;
  }
  double t = baton__model_time(algo, coll, in->size, bytes, c);
  if (t > 0 && direct && in->cma) {
    /* By the kernel: two rendezvous, and N-1 system calls, each priced
     * as a message to one peer (with more ranks than cores the peer's
     * core-mate may hold the core: N=4 on 2 cores, 8-32 KiB, pairwise ran
     * 1.2-1.6x faster than the two rendezvous alone predict for direct);
     * the (N-1)/N K bytes that cross between the ranks are copied once,
     * where a staged message copies them twice: b/2 a byte; an alltoall's
     * own block too (1/N K), as pairwise's formula counts it (the ring's
     * allgather does not count its own). (Rank 0's measured kernel copy,
     * 0.082 ns/B on the Intel Xeon, priced it above
     * b/2 and lost picks that ran 1.2-2.5x faster by the kernel: N=2, 512
     * KiB alltoall took 17 us by the kernel and 37 staged, where the pair
     * channels' b says 24; the staged byte costs more than b here.) */
    double n = in->size, copied = coll == BATON__COLL_ALLTOALL ? bytes : (n - 1) / n * bytes;
    return 2 * in->ring.alpha + (n - 1) * in->pair.alpha + copied * in->pair.beta / 2;
  }
  if (t > 0 && (algo->traits & BATON__ALGO_HOST_LEADERS)) {
    /* Its formula counts the fold and unfold inside a host as reductions
     * only; each is also a message of the whole buffer per other rank of
     * the host, through shared memory, or TCP with BATON_TRANSPORT=tcp. */
    const baton__cost_t *l = in->tcp_inside ? c : &in->local;
    double m = c->hosts >= 1 ? in->size / c->hosts : 1;
    t += 2 * (m - 1) * (l->alpha + bytes * l->beta);
  }
  if (t <= 0 || flat || direct || (ring && one_chunk) || piece <= 0)
    return t;
  double chunk = algo->traits & BATON__ALGO_HALVES ? bytes / 2
                 : !one_chunk                      ? bytes / in->size
                                                   : bytes;
  double rounds = (double)(unsigned long long)(chunk / piece);
  rounds += rounds * piece < chunk;
  if (rounds <= 1)
    return t;
  const baton__cost_t per_msg = {.alpha = 1, .segment = c->segment};
  return t + (rounds - 1) * baton__model_time(algo, coll, in->size, bytes, &per_msg) * c->alpha;
}

double baton__select_piece(const baton_comm_t *comm, int ring) {
  double window = comm->params.shm_slots / 2;
  if (ring)
    return (double)comm->slot_bytes * window;
  double piece = (double)comm->stream_slot_bytes * window / comm->size;
  return piece > 64 ? piece : 64;
}

/* Predicted time as a sort key: an algorithm without a formula goes last. */
static int faster(double a, double b) { return a >= 0 && (b < 0 || a < b); }

const baton__algo_t *baton__select_rank(const baton__select_in_t *in, baton__coll_t coll,
                                        double bytes, baton__cand_t *cands, int cap, int *ncands,
                                        char *why, size_t whylen) {
  int na, n = 0;
  const baton__algo_t *all = baton__algos(&na), *roomless = NULL;
  double roomless_t = -1;
  why[0] = '\0';
  for (int i = 0; i < na; i++) {
    const baton__algo_t *a = &all[i];
    if (!(a->colls & (1u << coll)))
      continue;
    double t = baton__select_predict(in, a, coll, bytes);
    if (!cannot(in, a, coll, bytes)) {
      if (n < cap)
        cands[n++] = (baton__cand_t){a, t};
    } else if (!(a->traits & (BATON__ALGO_MAILBOX | BATON__ALGO_REGISTERED)) &&
               (!roomless || faster(t, roomless_t))) {
      roomless = a, roomless_t = t; /* too large for scratch: better than nothing */
    }
  }
  /* Insertion sort, stable: ties keep the table's order on every rank. */
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && faster(cands[j].t, cands[j - 1].t); j--) {
      baton__cand_t tmp = cands[j];
      cands[j] = cands[j - 1];
      cands[j - 1] = tmp;
    }
  *ncands = n;
  if (in->forced) {
    const char *no = cannot(in, in->forced, coll, bytes);
    if (!no)
      return in->forced;
    snprintf(why, whylen, "BATON_ALGO asks for %s, but %s; using the next best", in->forced->name,
             no);
  }
  return n ? cands[0].algo : roomless;
}

/* ------------------------------------------------ a communicator's state */

#define BUCKETS 64

struct baton__select_state {
  baton__link_cost_t link[BATON__LINK_COUNT]; /* as rank 0 read them */
  double ranks_per_core; /* the most ranks of one host per core of rank 0's host */
  double cache_bytes;    /* rank 0's L2 cache per core: beta grows with ranks per core above it */
  double cma_beta;       /* rank 0's copy by the kernel, s/B (0: none) */
  double memcpy_beta;    /* rank 0's memcpy beside it, s/B (0: not measured) */
  double cma_big_beta, memcpy_big_beta; /* the same past the cache (0: not measured) */
  int hosts, hostmax;  /* hosts (groups that share memory), and the most ranks on one */
  int tcp, tcp_inside; /* some link is TCP; ranks of one host talk over TCP */
  const char *net;     /* "shm", "tcp" or "shm+tcp", for the log */
  struct {
    double bytes;
    const baton__algo_t *algo;            /* NULL: empty */
  } cache[2][BATON__COLL_COUNT][BUCKETS]; /* [direct may serve] */
  uint64_t logged[BATON__COLL_COUNT];     /* bit b: bucket b's decision was printed */
  unsigned fallback_said;                 /* bit c: collective c's fallback was printed */
};

/* What a message of link l waits for a descheduled peer: oversub for each
 * rank per core beyond one. */
static double link_wait(const struct baton__select_state *s, baton__link_t l) {
  return s->ranks_per_core > 1 ? s->link[l].oversub * (s->ranks_per_core - 1) : 0;
}

/* A link's costs for a message of `bytes`, with the ranks per core. */
static baton__cost_t link_cost(const struct baton__select_state *s, baton__link_t l, double segment,
                               double bytes) {
  const baton__link_cost_t *c = &s->link[l];
  double p = s->ranks_per_core > 1 ? s->ranks_per_core : 1;
  double beta = p > 1 && bytes > s->cache_bytes && c->obeta > 0 ? c->obeta : c->beta * p;
  return (baton__cost_t){.alpha = c->alpha + link_wait(s, l),
                         .beta = beta,
                         .gamma = c->gamma * p,
                         .segment = segment,
                         .hosts = s->hosts,
                         .per_core = p,
                         .alpha1 = c->alpha,
                         .beta1 = c->beta,
                         .gamma1 = c->gamma};
}

/* What a copy by the kernel costs here, seconds a byte: process_vm_readv
 * of this process's own n bytes into n others (the kernel pins the pages,
 * then copies), best of `reps`, with memcpy's of the same buffers beside
 * it. Measured, not assumed: on the AMD EPYC this project began on, the
 * kernel copied 64 KiB-1 MiB pieces at 5.4-7.9 GB/s against memcpy's
 * 14-15, and one copy by the kernel lost to the staged two there. 0 when
 * the kernel refuses, or there is no memory to measure with. */
static double measure_cma_beta(size_t n, int reps, double *memcpy_beta) {
  char *a = malloc(2 * n);
  *memcpy_beta = 0;
  if (!a)
    return 0;
  char *b = a + n;
  memset(a, 1, 2 * n);
  double mem = HUGE_VAL, kernel = HUGE_VAL;
  for (int i = 0; i < reps; i++) {
    double t0 = baton__now();
    memcpy(b, a, n);
    double t1 = baton__now();
    struct iovec here = {b, n}, there = {a, n};
    ssize_t got = process_vm_readv(getpid(), &here, 1, &there, 1, 0);
    double t2 = baton__now();
    if (got != (ssize_t)n) {
      free(a);
      return 0;
    }
    mem = t1 - t0 < mem ? t1 - t0 : mem;
    kernel = t2 - t1 < kernel ? t2 - t1 : kernel;
  }
  free(a);
  *memcpy_beta = mem / (double)n;
  return kernel / (double)n;
}

/* The kernel's copy and memcpy twice: 1 MiB in the cache, for the sizes
 * that stay in it, and past a core's L2 (twice it, at least 4 MiB and at
 * most 32), where memory paces both. The past-the-cache rule used to read
 * the 1 MiB figures, whose ratio moves with the machine's load (1.5-2.4x
 * on the Intel Xeon, across its threshold of 2), while past the cache it
 * held at 1.18-1.25x, quiet or beside a core copying 64 MiB; 2-6 ms once a
 * process, faults of the fresh pages included. Once per process, however
 * many communicators it makes (baton_comm_split, torch's new_group): the
 * machine does not change between them. */
static pthread_once_t cma_once = PTHREAD_ONCE_INIT;
static struct {
  double cma, memcpy;         /* 1 MiB in the cache */
  double big_cma, big_memcpy; /* past it */
  size_t big;                 /* bytes of the measurement past it */
} measured;

static void measure_once(void) {
  measured.cma = measure_cma_beta(1 << 20, 5, &measured.memcpy);
  long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
  size_t big = l2 > 0 ? 2 * (size_t)l2 : 0;
  big = big < (4u << 20) ? 4u << 20 : big > (32u << 20) ? 32u << 20 : big;
  measured.big = big;
  if (measured.cma > 0)
    measured.big_cma = measure_cma_beta(big, 3, &measured.big_memcpy);
}

/* The costs every rank uses: rank 0's file, rank 0's cores, rank 0's
 * kernel copies. */
static int share_costs(baton_comm_t *comm, struct baton__select_state *s, int hostmax, char *err,
                       size_t errlen) {
  double blob[BATON__LINK_COUNT * BATON__LINK_DOUBLES + 6],
      *at = &blob[BATON__LINK_COUNT * BATON__LINK_DOUBLES];
  if (comm->rank == 0) {
    char path[512], why[700];
    baton__link_defaults(s->link);
    baton__tune_path(comm->params.tune_file, path, sizeof path);
    int got = baton__tune_read(path, s->link, why, sizeof why);
    if (got < 0)
      baton__log_warn(INIT, "tune file: %s; the built-in costs stand for the rest", why);
    else if (got == 0 && comm->params.tune_file[0])
      baton__log_warn(INIT, "BATON_TUNE_FILE=%s does not exist; using the built-in costs", path);
    else
      baton__log_info(INIT, "link costs %s %s", got ? "from" : "built in; no tune file at", path);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    for (int l = 0; l < BATON__LINK_COUNT; l++)
      memcpy(&blob[BATON__LINK_DOUBLES * l], &s->link[l], sizeof s->link[l]);
    long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    at[0] = cores > 0 ? (double)hostmax / (double)cores : 1;
    at[1] = l2 > 0 ? (double)l2 : 1 << 20; /* unknown: 1 MiB */
    int cma = comm->params.cma && comm->one_host && comm->host_net;
    if (cma)
      pthread_once(&cma_once, measure_once);
    at[2] = cma ? measured.cma : 0;
    at[3] = cma ? measured.memcpy : 0;
    at[4] = cma ? measured.big_cma : 0;
    at[5] = cma ? measured.big_memcpy : 0;
    if (at[2] > 0) /* 0 past the cache: not measured there, so staged there */
      baton__log_info(INIT,
                      "a copy by the kernel (CMA): %.3g ns/B, memcpy %.3g (1 MiB in cache); "
                      "%.3g and %.3g past it (%zu KiB)",
                      at[2] * 1e9, at[3] * 1e9, at[4] * 1e9, at[5] * 1e9, measured.big >> 10);
    int rc = comm->size > 1
                 ? baton__store_set(comm->store, "select.costs", blob, sizeof blob, err, errlen)
                 : BATON_OK;
    if (rc)
      return rc;
  } else {
    size_t len = 0;
    int rc = baton__store_get(comm->store, "select.costs", blob, sizeof blob, &len,
                              comm->params.timeout_s, err, errlen);
    if (rc)
      return rc;
    if (len != sizeof blob) {
      snprintf(err, errlen, "rank 0 published link costs of %zu bytes, not %zu", len, sizeof blob);
      return BATON_EPROTO;
    }
    for (int l = 0; l < BATON__LINK_COUNT; l++)
      memcpy(&s->link[l], &blob[BATON__LINK_DOUBLES * l], sizeof s->link[l]);
  }
  s->ranks_per_core = at[0];
  s->cache_bytes = at[1];
  s->cma_beta = at[2];
  s->memcpy_beta = at[3];
  s->cma_big_beta = at[4];
  s->memcpy_big_beta = at[5];
  return BATON_OK;
}

int baton__select_init(baton_comm_t *comm, char *err, size_t errlen) {
  struct baton__select_state *s = calloc(1, sizeof *s);
  if (!s) {
    snprintf(err, errlen, "out of memory");
    return BATON_ENOMEM;
  }
  comm->select = s;
  int hostmax = 0, hosts = 0;
  for (int r = 0; r < comm->size; r++) {
    int here = 0;
    for (int q = 0; q < comm->size; q++)
      here += comm->group[q] == comm->group[r];
    hostmax = here > hostmax ? here : hostmax;
    hosts += comm->group[r] == r;
  }
  int tcp_only = strcmp(comm->params.transport, "tcp") == 0;
  s->hosts = hosts, s->hostmax = hostmax;
  s->tcp_inside = tcp_only && hostmax > 1;
  s->tcp = comm->size > 1 && (hosts > 1 || tcp_only);
  s->net = !s->tcp ? "shm" : hosts > 1 && hostmax > 1 && !tcp_only ? "shm+tcp" : "tcp";
  int rc = share_costs(comm, s, hostmax, err, errlen);
  if (rc == 0 && comm->rank == 0)
    for (int l = 0; l < BATON__LINK_COUNT; l++)
      baton__log_info(INIT,
                      "%s: alpha %.3g us, beta %.3g ns/B, gamma %.3g ns/B, oversub %.3g us, "
                      "obeta %.3g ns/B (%.2f ranks per core; beta grows with them above %.0f "
                      "KiB)",
                      baton__link_names[l], s->link[l].alpha * 1e6, s->link[l].beta * 1e9,
                      s->link[l].gamma * 1e9, s->link[l].oversub * 1e6, s->link[l].obeta * 1e9,
                      s->ranks_per_core, s->cache_bytes / 1024);
  return rc;
}

void baton__select_free(baton_comm_t *comm) {
  free(comm->select);
  comm->select = NULL;
}

double baton__select_copy_ratio(const baton_comm_t *comm) {
  const struct baton__select_state *s = comm->select;
  return s && s->cma_beta > 0 && s->memcpy_beta > 0 ? s->memcpy_beta / s->cma_beta : 0;
}

const char *baton__select_net(const baton_comm_t *comm, double *ranks_per_core) {
  *ranks_per_core = comm->select ? comm->select->ranks_per_core : 1;
  return comm->select ? comm->select->net : "shm";
}

void baton__select_force(baton_comm_t *comm, baton__coll_t coll, const baton__algo_t *algo) {
  comm->forced[coll] = algo;
  for (int reg = 0; comm->select && reg < 2; reg++)
    memset(comm->select->cache[reg][coll], 0, sizeof comm->select->cache[reg][coll]);
}

/* floor(log2 bytes), 0 for less than 2 bytes. */
static int bucket(double bytes) {
  unsigned long long b = bytes < 2 ? 1 : bytes >= 0x1p63 ? 1ull << 63 : (unsigned long long)bytes;
  return 63 - __builtin_clzll(b);
}

static void log_choice(baton_comm_t *comm, baton__coll_t coll, double bytes,
                       const baton__cand_t *cands, int n, const baton__algo_t *pick) {
  char line[1024];
  size_t off =
      (size_t)snprintf(line, sizeof line, "%s %.0f B on %d ranks (%s):", baton__coll_name(coll),
                       bytes, comm->size, comm->select->net);
  for (int i = 0; i < n && off < sizeof line; i++)
    off += (size_t)snprintf(line + off, sizeof line - off, "%s %s %.3g us", i ? " <" : "",
                            cands[i].algo->name, cands[i].t * 1e6);
  if (off < sizeof line)
    snprintf(line + off, sizeof line - off, " -> %s%s", pick->name,
             pick == comm->forced[coll] ? " (BATON_ALGO)" : "");
  baton__log_info(COLL, "%s", line);
}

static const baton__algo_t *decide(baton_comm_t *comm, baton__coll_t coll, size_t count,
                                   size_t elsize, double bytes, int direct_ok) {
  struct baton__select_state *s = comm->select;
  baton__select_in_t in = {.size = comm->size,
                           .tcp = s->tcp,
                           .tcp_inside = s->tcp_inside,
                           .flat_fits = baton__flat_fits(comm, coll, count, elsize),
                           .box_bytes = baton__flat_room(comm),
                           .direct_ok = direct_ok,
                           /* by the kernel unless the buffers may be shared memory */
                           .cma = direct_ok && comm->mem_allocs == 0 && !comm->params.mem_local,
                           .cma_beta = s->cma_beta,
                           .memcpy_beta = s->memcpy_beta,
                           .cma_big_beta = s->cma_big_beta,
                           .memcpy_big_beta = s->memcpy_big_beta,
                           .ranks_per_core = s->ranks_per_core,
                           .cache_bytes = s->cache_bytes,
                           .scratch_bytes = comm->params.scratch_bytes,
                           .forced = comm->forced[coll],
                           .hosts = s->hosts,
                           .hostmax = s->hostmax};
  baton__link_t ring_link = s->tcp ? BATON__LINK_TCP : BATON__LINK_SHM;
  baton__link_t pair_link = s->tcp ? BATON__LINK_TCP : BATON__LINK_PAIR;
  in.ring = link_cost(s, ring_link, (double)comm->slot_bytes, bytes);
  in.pair = link_cost(s, pair_link, (double)comm->stream_slot_bytes, bytes);
  in.ring_wait = link_wait(s, ring_link);
  in.pair_wait = link_wait(s, pair_link);
  /* Two ranks have one peer each, which every algorithm reaches over the
   * ring's channel (baton__shm_conn_to): an allgather's bytes, only
   * copied, cost what they cost the ring. With the pair channels' beta, rd
   * took allgather from 32 KiB up at N=2, where the ring is as fast and in
   * place 1.1-1.3x faster from 2 MiB (bench/select-check.sh --part shm2
   * -c allgather, docs/performance.md "Issue 20"). The reducing
   * collectives keep the pair's costs: there rhd runs 1.15-1.5x faster than
   * the ring at N=2 from 128 KiB, which the two formulas do not tell apart
   * and the pair's lower beta stands for. */
  if (comm->size == 2 && !s->tcp &&
      (coll == BATON__COLL_ALLGATHER || coll == BATON__COLL_ALLGATHERV))
    in.pair.beta = in.ring.beta;
  in.local = link_cost(s, BATON__LINK_PAIR, (double)comm->stream_slot_bytes, bytes);
  in.ring_piece = baton__select_piece(comm, 1);
  in.pair_piece = baton__select_piece(comm, 0);
  baton__cand_t cands[16];
  int n;
  char why[256];
  const baton__algo_t *pick = baton__select_rank(&in, coll, bytes, cands, 16, &n, why, sizeof why);
  if (why[0] && !(s->fallback_said & (1u << coll))) {
    s->fallback_said |= 1u << coll;
    baton__log_info(COLL, "%s: %s", baton__coll_name(coll), why);
  }
  int b = bucket(bytes);
  if (!(s->logged[coll] & (1ull << b))) {
    s->logged[coll] |= 1ull << b;
    if (baton__log_level >= BATON__LOG_INFO)
      log_choice(comm, coll, bytes, cands, n < 16 ? n : 16, pick);
  }
  return pick;
}

static const baton__algo_t *select_as(baton_comm_t *comm, baton__coll_t coll, size_t count,
                                      size_t elsize, int direct_ok) {
  const baton__algo_t *forced = comm->forced[coll];
  if (comm->size == 1 || !comm->select)
    return forced && (direct_ok || !(forced->traits & BATON__ALGO_REGISTERED))
               ? forced
               : baton__algo_default();
  double bytes = baton__model_bytes(coll, count, elsize, comm->size);
  int b = bucket(bytes);
  if (comm->select->cache[direct_ok][coll][b].algo &&
      comm->select->cache[direct_ok][coll][b].bytes == bytes)
    return comm->select->cache[direct_ok][coll][b].algo;
  const baton__algo_t *pick = decide(comm, coll, count, elsize, bytes, direct_ok);
  comm->select->cache[direct_ok][coll][b].bytes = bytes;
  comm->select->cache[direct_ok][coll][b].algo = pick;
  return pick;
}

/* Direct may serve on one host once the communicator has registered
 * memory (an allocation is collective, so every rank decides alike,
 * whatever its own buffers are) or BATON_MEM_LOCAL says buffers may be
 * local memory (the same on every rank), and a copy collective with BATON_CMA:
 * the direct algorithm's first step finds out whether every rank's
 * buffers are registered, or else whether every rank reaches the others
 * through the kernel (exec_direct.c). */
const baton__algo_t *baton__select(baton_comm_t *comm, baton__coll_t coll, size_t count,
                                   size_t elsize) {
  int direct = comm->one_host && comm->host_net &&
               (comm->mem_allocs > 0 || comm->params.mem_local ||
                (comm->params.cma && baton__algo_by_cma(coll)));
  return select_as(comm, coll, count, elsize, direct);
}

const baton__algo_t *baton__select_staged(baton_comm_t *comm, baton__coll_t coll, size_t count,
                                          size_t elsize) {
  return select_as(comm, coll, count, elsize, 0);
}

/* ------------------------------------------------------------ BATON_ALGO */

int baton__algo_parse(const char *spec, const baton__algo_t **forced, char *err, size_t errlen) {
  for (int c = 0; c < BATON__COLL_COUNT; c++)
    forced[c] = NULL;
  char buf[256];
  snprintf(buf, sizeof buf, "%s", spec);
  for (char *save = NULL, *item = strtok_r(buf, ",", &save); item;
       item = strtok_r(NULL, ",", &save)) {
    while (*item == ' ')
      item++;
    char *colon = strchr(item, ':');
    const char *name = colon ? colon + 1 : item;
    const baton__algo_t *algo = baton__algo_find(name);
    if (!algo) {
      int n;
      const baton__algo_t *all = baton__algos(&n);
      size_t off =
          (size_t)snprintf(err, errlen, "BATON_ALGO: unknown algorithm \"%s\"; known:", name);
      for (int i = 0; i < n && off < errlen; i++)
        off += (size_t)snprintf(err + off, errlen - off, " %s", all[i].name);
      return BATON_EUSAGE;
    }
    if (!colon) {
      for (int c = 0; c < BATON__COLL_COUNT; c++)
        if (algo->colls & (1u << c))
          forced[c] = algo;
      continue;
    }
    *colon = '\0';
    baton__coll_t coll = baton__coll_find(item);
    if (coll == BATON__COLL_COUNT || coll == BATON__COLL_BARRIER) {
      snprintf(err, errlen, "BATON_ALGO: unknown collective \"%s\" in \"%s:%s\"", item, item, name);
      return BATON_EUSAGE;
    }
    forced[coll] = algo;
  }
  return BATON_OK;
}
