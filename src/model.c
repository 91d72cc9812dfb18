/*
 * model.c - the alpha-beta-gamma formulas (model.h), one per algorithm.
 *
 * K is the message in bytes as model.h defines it, N the ranks, L =
 * ceil(log2 N), P the largest power of two <= N, H the hosts. Recursive
 * algorithms on a non-power-of-two N first fold the N - P extra ranks into
 * partners and unfold them at the end (recursive.h): what moves each way is
 * what the collective has there, the whole buffer for allreduce, the whole
 * input in and one chunk out for reduce-scatter, one block in and the
 * whole output out for allgather, each formula's "[+ fold: ...]". Chain
 * algorithms (the ring's broadcast and reduce) pipeline S = ceil(K /
 * segment) segments down a line of N ranks: N - 2 + S steps of one segment
 * each.
 *
 * "naive" (naive.c) passes everything through one rank: what must be
 * reduced or gathered goes to it, one message per peer, and the result
 * comes back the same way, so its costs add both legs. The hub's N - 1
 * messages of a leg all travel at once (no rank waits for another's), so a
 * leg pays one latency, while its bytes pass the hub one after the other:
 * a + (N-1)Kb per leg. "pairwise" (alltoall) sends one block to every
 * other rank in N - 1 steps that pair the ranks up so that no rank
 * receives two at once: N - 1 latencies, which the model counts, against a
 * contention it does not see.
 *
 * "flat" is one rendezvous (a): each rank copies its input into its
 * mailbox (Kb) and reduces the others' mailboxes straight out of the
 * shared cache (g per byte of each). Pulling the others' freshly written
 * mailboxes into its own core costs about one more Kb, whatever N: at N=2
 * and N=4 (2 cores) the measured slopes from 2 KiB to 64 KiB are 2b + g
 * and p(2b + 3g). Charging N Kb for the reads, as a copy through a channel
 * would cost, made flat 2-4 times too dear. The other collectives follow
 * the same rule, a copy in of what the rank puts in its mailbox and one
 * more b per byte it ends with: reduce-scatter copies K in and pulls its
 * chunk of the others' (K/N), allgather copies its block in (K/N) and all
 * N out (K), broadcast the root's K in and out.
 */
#include "model.h"

/* No libm: the library links only libc and pthreads. */
static double lg(int n) { /* ceil(log2 n) */
  int l = 0;
  while ((1L << l) < n)
    l++;
  return l;
}
static int pow2_below(int n) {
  int p = 1;
  while (p * 2 <= n)
    p *= 2;
  return p;
}
static double log2p(int n) { return lg(pow2_below(n)); }
/* The fold and unfold of recursive algorithms when N is not a power of 2:
 * `moves` exchanges of K, `reduces` reductions of K. */
static double fold(int n, double k, const baton__cost_t *c, int moves, int reduces) {
  if (pow2_below(n) == n)
    return 0;
  return moves * (c->alpha + k * c->beta) + reduces * k * c->gamma;
}
/* The one chunk or block a folded rank sends or receives besides: the
 * unfold of reduce-scatter, the fold of allgather. */
static double fold_block(int n, double k, const baton__cost_t *c) {
  return pow2_below(n) == n ? 0 : c->alpha + k / n * c->beta;
}
/* c for a step in which `active` of the n ranks run and the others wait:
 * where those fit on the cores, the costs with a core per rank. N=3 on 2
 * cores, 32 KiB, ranks pinned: rd's fold, exchange and unfold each have
 * two ranks running, and rd took 9.5-10.8 us where the costs of 1.5 ranks
 * per core priced it at 19.1 (the ring's 12: 13.6-15.4 measured). Where they do
 * not fit, every rank keeps its core's share: N=5 on 2 cores, 128 KiB, rhd
 * over 4 ranks took 83 us against the ring's 63, which the costs of 2
 * ranks per core instead of 2.5 priced the other way round. */
static baton__cost_t running(const baton__cost_t *c, int n, int active) {
  if (!(c->per_core > 1) || c->per_core * active > n)
    return *c;
  baton__cost_t r = *c;
  r.alpha = c->alpha1;
  r.beta = c->beta1;
  r.gamma = c->gamma1;
  return r;
}
static double segments(double k, const baton__cost_t *c) {
  if (c->segment <= 0 || k <= c->segment)
    return 1;
  double s = (double)(long long)(k / c->segment);
  return s * c->segment < k ? s + 1 : s;
}
static double frac(int n) { return (double)(n - 1) / n; }

#define A c->alpha
#define B (k * c->beta)
#define G (k * c->gamma)
#define FN(name, expr)                                                                             \
  static double name(int n, double k, const baton__cost_t *c) {                                    \
    (void)n, (void)k, (void)c;                                                                     \
    return (expr);                                                                                 \
  }
/* A recursive algorithm: its steps among P ranks (`steps`, the N - P
 * folded ones waiting), and its fold and unfold (`folds`, 2(N - P) ranks
 * running), each at the costs of the ranks that run (running). */
#define FN_FOLDED(name, steps, folds)                                                              \
  static double name(int n, double k, const baton__cost_t *all) {                                  \
    int P = pow2_below(n);                                                                         \
    baton__cost_t in_steps = running(all, n, P), in_folds = running(all, n, 2 * (n - P));          \
    const baton__cost_t *c = &in_steps;                                                            \
    double t = (steps);                                                                            \
    c = &in_folds;                                                                                 \
    return t + (folds);                                                                            \
  }

/* allreduce */
FN(ar_ring, 2 * (n - 1) * A + 2 * frac(n) * B + frac(n) * G)
FN(ar_naive, 2 * A + (n - 1) * (2 * B + G)) /* all in to rank 0, reduced, all out again */
FN_FOLDED(ar_rhd, 2 * log2p(n) * A + 2 * frac(P) * B + frac(P) * G, fold(n, k, c, 2, 1))
FN_FOLDED(ar_rd, log2p(n) * (A + B + G), fold(n, k, c, 2, 1))
FN(ar_tree, 2 * lg(n) * (A + B) + lg(n) * G)
FN(ar_flat, A + 2 * B + (n - 1) * G)
/* dbtree: two binary trees of depth L, each carrying K/2 as one chunk. A
 * binary tree's level costs two messages where the binomial tree's costs
 * one: an inner node sends to its first child and then its second (or
 * receives from one and then the other), so the second waits for both;
 * and each rank also serves its other tree between them. Up and down is 2L
 * levels, 4L a; every rank sends about 2K and reduces about K. The
 * executor's rounds (a piece of every chunk each) pipeline the levels,
 * which baton__select_predict adds. */
FN(ar_dbtree, 4 * lg(n) * A + 2 * B + G)
/* Its broadcast and reduce are the way down and the way up: an inner
 * node sends its half to two children (K in all), and reduces two. */
FN(bc_dbtree, 2 * lg(n) * A + B)
FN(rd_dbtree, 2 * lg(n) * A + B + G)
/* hier: the leaders' ring over H hosts; the shared-memory fold and unfold
 * inside a host are counted as the leader's extra reductions only. */
static double hosts_of(int n, const baton__cost_t *c) {
  return c->hosts >= 1 && c->hosts <= n ? c->hosts : n;
}
FN(ar_hier, 2 * (hosts_of(n, c) - 1) * A + 2 * frac((int)hosts_of(n, c)) * B +
                frac((int)hosts_of(n, c)) * G + (n / hosts_of(n, c) - 1) * G)
/* reduce_scatter: K is the input, N blocks of K/N */
FN(rs_ring, (n - 1) * A + frac(n) * (B + G))
FN_FOLDED(rs_rhd, log2p(n) * A + frac(P) * (B + G), fold(n, k, c, 1, 1) + fold_block(n, k, c))
FN(rs_naive, 2 * A + (n - 1) * (B + G) + (n - 1) * B / n)
FN(rs_flat, A + B + B / n + frac(n) * G)
/* allgather: K is the output, N blocks of K/N */
FN(ag_ring, (n - 1) * A + frac(n) * B)
FN_FOLDED(ag_rd, log2p(n) * A + frac(P) * B, fold(n, k, c, 1, 0) + fold_block(n, k, c))
FN(ag_naive, 2 * A + (n - 1) * B / n + (n - 1) * frac(n) * B)
FN(ag_flat, A + B / n + B)
/* broadcast and reduce: K is the buffer */
FN(bc_naive, A + (n - 1) * B)
FN(bc_tree, lg(n) * (A + B))
FN(bc_chain, (n - 2 + segments(k, c)) * (A + B / segments(k, c)))
/* flat's broadcast within a mailbox is one rendezvous; past it the root
 * puts the buffer through the host's fan-out stream a segment at a time
 * and every other rank copies each one out: the chain's pipeline with one
 * hop, and N copies of the buffer where the chain makes 2(N-1), which is
 * what the time goes by when the copies share the cores (N=4 on 2 cores,
 * 8 MiB: 1271-1283 us against the chain's 1548-2328 and the binomial
 * tree's 1567-1634; at N=2 level or slower, as the one-hop pipeline
 * prices it). */
static double bc_flat(int n, double k, const baton__cost_t *c) {
  if (c->room <= 0 || k <= c->room)
    return A + 2 * B;
  double s = segments(k, c);
  return (1 + s) * A + (1 + 1 / s) * B * n / (2 * (n - 1));
}
FN(rd_naive, A + (n - 1) * (B + G))
FN(rd_tree, lg(n) * (A + B + G))
FN(rd_chain, (n - 2 + segments(k, c)) * (A + (B + G) / segments(k, c)))
/* alltoall, gather, scatter: K is N blocks of K/N. Pairwise sends N-1
 * blocks and copies its own from input to output once (b/2 a byte, as
 * direct's copies), which direct's formula counts too: without it, direct
 * (2a + Kb/2) never beat pairwise (a + Kb/2) at N=2 on registered buffers,
 * where it ran 1.2-1.4x faster at 2-32 MiB. */
FN(blocks_pairwise, (n - 1) * (A + B / n) + B / (2 * n))
FN(blocks_hub, A + frac(n) * B)
FN(blocks_tree, lg(n) * A + frac(n) * B)

/* direct: two rendezvous; a byte a rank writes costs b/2, half of what a
 * message through shared memory pays for its two copies (into the
 * channel and out of it), since nothing is staged; g per byte combined. */
FN(dr_all, 2 * A + B / 2 + frac(n) * G)         /* allreduce: K/N of every input, written N times */
FN(dr_share, 2 * A + B / (2 * n) + frac(n) * G) /* reduce-scatter (K: the input), reduce */
FN(dr_copy, 2 * A + B / 2)                      /* allgather, broadcast, alltoall: K written */
FN(dr_block, 2 * A + B / (2 * n))               /* gather, scatter: one block */

/* [coll] = {formula, time}: the cells of one algorithm's table. */
#define COST(coll, formula, time) [BATON__COLL_##coll] = {formula, time}

const char baton__cost_legend[] =
    "a = alpha, b = 1/bandwidth, g = gamma, K bytes, N ranks, L = ceil(log2 N), "
    "P = largest power of 2 <= N, S = ceil(K/segment), H = hosts; [+ fold: ...] only when N is "
    "not a power of 2";

/* The ring; broadcast and reduce run the chain, the ring opened at the
 * root. The v-variants: K is all blocks; the largest sets the pace. */
const baton__cost_row_t baton__ring_costs[BATON__COLL_COUNT] = {
    COST(ALLREDUCE, "2(N-1)a + 2(N-1)/N Kb + (N-1)/N Kg", ar_ring),
    COST(REDUCE_SCATTER, "(N-1)a + (N-1)/N K(b + g)", rs_ring),
    COST(REDUCE_SCATTERV, "(N-1)a + (N-1)/N K(b + g)", rs_ring),
    COST(ALLGATHER, "(N-1)a + (N-1)/N Kb", ag_ring),
    COST(ALLGATHERV, "(N-1)a + (N-1)/N Kb", ag_ring),
    COST(BROADCAST, "(N-2+S)(a + Kb/S)", bc_chain),
    COST(REDUCE, "(N-2+S)(a + K(b + g)/S)", rd_chain),
};

const baton__cost_row_t baton__flat_costs[BATON__COLL_COUNT] = {
    COST(ALLREDUCE, "a + 2Kb + (N-1) Kg", ar_flat),
    COST(REDUCE_SCATTER, "a + Kb + Kb/N + (N-1)/N Kg", rs_flat),
    COST(ALLGATHER, "a + Kb/N + Kb", ag_flat),
    COST(BROADCAST, "a + 2Kb within a mailbox; past it (1+S)a + (1+1/S) Kb N/(2(N-1))", bc_flat),
};

const baton__cost_row_t baton__pairwise_costs[BATON__COLL_COUNT] = {
    COST(ALLTOALL, "(N-1)(a + Kb/N) + Kb/2N", blocks_pairwise),
    COST(ALLTOALLV, "(N-1)(a + Kb/N) + Kb/2N", blocks_pairwise), /* K: the rank's blocks */
};

const baton__cost_row_t baton__tree_costs[BATON__COLL_COUNT] = {
    COST(ALLREDUCE, "2L(a + Kb) + L Kg", ar_tree), COST(BROADCAST, "L(a + Kb)", bc_tree),
    COST(REDUCE, "L(a + Kb + Kg)", rd_tree),       COST(GATHER, "La + (N-1)/N Kb", blocks_tree),
    COST(SCATTER, "La + (N-1)/N Kb", blocks_tree),
};

const baton__cost_row_t baton__naive_costs[BATON__COLL_COUNT] = {
    COST(ALLREDUCE, "2a + (N-1)(2Kb + Kg)", ar_naive),
    COST(REDUCE_SCATTER, "2a + (N-1)(Kb + Kg) + (N-1)Kb/N", rs_naive),
    COST(REDUCE_SCATTERV, "2a + (N-1)(Kb + Kg) + (N-1)Kb/N", rs_naive),
    COST(ALLGATHER, "2a + (N-1)Kb/N + (N-1)(N-1)/N Kb", ag_naive),
    COST(ALLGATHERV, "2a + (N-1)Kb/N + (N-1)(N-1)/N Kb", ag_naive),
    COST(BROADCAST, "a + (N-1)Kb", bc_naive),
    COST(REDUCE, "a + (N-1)(Kb + Kg)", rd_naive),
    COST(GATHER, "a + (N-1)/N Kb", blocks_hub),
    COST(SCATTER, "a + (N-1)/N Kb", blocks_hub),
};

const baton__cost_row_t baton__hier_costs[BATON__COLL_COUNT] = {
    COST(ALLREDUCE, "2(H-1)a + 2(H-1)/H Kb + (H-1)/H Kg + (N/H-1) Kg", ar_hier),
};

const baton__cost_row_t baton__rhd_costs[BATON__COLL_COUNT] = {
    COST(ALLREDUCE, "2 log2(P) a + 2(P-1)/P Kb + (P-1)/P Kg [+ fold: 2a + 2Kb + Kg]", ar_rhd),
    COST(REDUCE_SCATTER, "log2(P) a + (P-1)/P K(b + g) [+ fold: 2a + Kb + Kb/N + Kg]", rs_rhd),
    COST(REDUCE_SCATTERV, "log2(P) a + (P-1)/P K(b + g) [+ fold: 2a + Kb + Kb/N + Kg]", rs_rhd),
};

const baton__cost_row_t baton__dbtree_costs[BATON__COLL_COUNT] = {
    COST(ALLREDUCE, "4L a + 2Kb + Kg", ar_dbtree),
    COST(BROADCAST, "2L a + Kb", bc_dbtree),
    COST(REDUCE, "2L a + K(b + g)", rd_dbtree),
};

const baton__cost_row_t baton__direct_costs[BATON__COLL_COUNT] = {
    COST(ALLREDUCE, "2a + Kb/2 + (N-1)/N Kg", dr_all),
    COST(REDUCE_SCATTER, "2a + Kb/2N + (N-1)/N Kg", dr_share),
    COST(REDUCE_SCATTERV, "2a + Kb/2N + (N-1)/N Kg", dr_share),
    COST(REDUCE, "2a + Kb/2N + (N-1)/N Kg", dr_share),
    COST(ALLGATHER, "2a + Kb/2", dr_copy),
    COST(ALLGATHERV, "2a + Kb/2", dr_copy),
    COST(BROADCAST, "2a + Kb/2", dr_copy),
    COST(ALLTOALL, "2a + Kb/2", dr_copy),
    COST(GATHER, "2a + Kb/2N", dr_block),
    COST(SCATTER, "2a + Kb/2N", dr_block),
};

const baton__cost_row_t baton__rd_costs[BATON__COLL_COUNT] = {
    COST(ALLREDUCE, "log2(P)(a + Kb + Kg) [+ fold: 2a + 2Kb + Kg]", ar_rd),
    COST(ALLGATHER, "log2(P) a + (P-1)/P Kb [+ fold: 2a + Kb/N + Kb]", ag_rd),
    COST(ALLGATHERV, "log2(P) a + (P-1)/P Kb [+ fold: 2a + Kb/N + Kb]", ag_rd),
};

static const baton__cost_row_t *cell(const baton__algo_t *algo, baton__coll_t coll) {
  if (!algo || !algo->costs || (unsigned)coll >= BATON__COLL_COUNT || !algo->costs[coll].time)
    return NULL;
  return &algo->costs[coll];
}

double baton__model_time(const baton__algo_t *algo, baton__coll_t coll, int n, double bytes,
                         const baton__cost_t *c) {
  const baton__cost_row_t *row = cell(algo, coll);
  if (!row || n < 1)
    return -1;
  return n == 1 ? 0 : row->time(n, bytes, c);
}

const char *baton__model_formula(const baton__algo_t *algo, baton__coll_t coll) {
  const baton__cost_row_t *row = cell(algo, coll);
  return row ? row->formula : NULL;
}
