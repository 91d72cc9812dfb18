/*
 * dbtree.c - the double binary tree (NCCL's), for allreduce, broadcast and
 * reduce.
 *
 * The ranks are numbered along the ring order, v = 0..N-1 (the order
 * follows the topology, so the lowest levels stay inside a host), from
 * the root's place for broadcast and reduce. Rank v = 0 is the root of two
 * binary trees, with one child in each:
 *  - tree A is the in-order binary tree: v's children are v - low/2 and
 *    v + low/2 (or the largest v + low/2^k below N), low being v's lowest
 *    set bit; its parent is v with low cleared and the next bit set, or
 *    cleared when that passes N; the root's one child is the highest power
 *    of two below N. Odd v are leaves, even v inner nodes.
 *  - tree B is tree A over the other N-1 ranks relabelled: mirrored
 *    (v -> N - v) when N - 1 is even, shifted by one (v -> v - 1, 1 ->
 *    N - 1) when it is odd. Either way a leaf of A is an inner node of B
 *    and the other way round (for even N rank 1 is a leaf in both), so no
 *    rank is inner in both and every rank sends about as much as another.
 * Both trees are L = ceil(log2 N) levels deep.
 *
 * The layout cuts the buffer in two chunks (BATON__ALGO_HALVES): tree A
 * carries chunk 0, tree B chunk 1. Each half goes up its tree, reduced on
 * the way (a rank adds its first child's half to its INPUT with
 * recv_reduce, then the last child's with recv_reduce_send to the parent),
 * is finished at the root (recv_reduce_copy_send back to its child) and
 * comes down (recv_copy_send to the first child, send to the second).
 * Every step is one chunk, so every inner node passes its half on segment
 * by segment: within a round the levels pipeline, as NCCL's do. (Each
 * half used to be a run of N/2 chunks of the N-chunk layout, which an
 * inner node landed whole before sending it on: on 8 emulated hosts that
 * ran 1.7-1.9x the ring's time from 2 MiB.)
 *
 * The pipeline is the executor's rounds: a round moves one piece of every
 * chunk, and a rank starts the next round as soon as it has finished this
 * one, so while the root finishes round r the leaves send round r + 1.
 *
 * Rounds of the schedule (the moments a drawing shows): a node of height h
 * (leaves 0) sends up at moment h, the root (height H) finishes at H, and
 * a node at depth d receives the result at H + d; a rank's steps follow
 * these moments, the two trees interleaved, which also keeps every
 * receive behind only the steps it depends on.
 *
 * Every chunk is reduced once, at the root, in one order (a node's input,
 * its first child's subtree, its second's), and every rank receives those
 * bits: the result is the same on every rank. Each rank sends about 2K
 * bytes (the ring's 2(N-1)/N K) in 2L levels.
 *
 * Broadcast and reduce are the two ways of that, their halves chunk root
 * (tree A) and the next one (tree B). A broadcast root sends each half to
 * its child in that tree (moment 0) and a node at depth d receives at d;
 * a reduce goes up as allreduce's does and ends at the root, whose
 * receive from each child finishes that half in its output. Each rank
 * sends about K bytes in L levels, where the binomial tree's root sends K
 * L times.
 */
#include "steps.h"

static int pow2_at_least(int n) {
  int p = 1;
  while (p < n)
    p *= 2;
  return p;
}

/* Tree A, in v numbers; -1 where there is none. */
static int parent_a(int v, int n) {
  if (v == 0)
    return -1;
  int low = v & -v, up = (v ^ low) | (low << 1);
  return up < n ? up : v ^ low;
}

static void children_a(int v, int n, int kid[2]) {
  kid[0] = kid[1] = -1;
  if (v == 0) {
    kid[1] = n > 1 ? pow2_at_least(n) / 2 : -1;
    return;
  }
  int half = (v & -v) / 2;
  if (half == 0)
    return;
  kid[0] = v - half;
  for (int d = half; d > 0 && kid[1] < 0; d /= 2)
    kid[1] = v + d < n ? v + d : -1;
}

/* v's height in tree A (leaves 0): its left subtree, v - low + 1 .. v - 1,
 * is whole and no lower than its right one, so the height is log2(low);
 * the root's one child is the highest power of two below N, one level
 * under it. */
static int height_a(int v, int n) {
  int h = 0;
  for (int low = v ? v & -v : pow2_at_least(n); low > 1; low /= 2)
    h++;
  return h;
}

static int depth_a(int v, int n) {
  int d = 0;
  for (; v > 0; v = parent_a(v, n))
    d++;
  return d;
}

/* Tree B's relabelling of the non-root ranks, and its inverse. */
static int to_b(int v, int n) {
  if (v == 0)
    return 0;
  if ((n - 1) % 2 == 0)
    return n - v;
  return v == 1 ? n - 1 : v - 1;
}
static int from_b(int w, int n) {
  if (w == 0)
    return 0;
  if ((n - 1) % 2 == 0)
    return n - w;
  return w == n - 1 ? 1 : w + 1;
}

/* One rank's place in one tree, as ranks (order NULL: as v numbers), and
 * its moments. */
typedef struct {
  int parent, kid[2], nkids;
  int chunk;    /* the tree's half */
  int up, down; /* the moments it sends up (finishes, at the root) and receives down */
  int root;
} node_t;

/* Where the trees stand: the ring order, and the root's place in it (v = 0
 * there); the collective, which decides the chunks and the moments. */
typedef struct {
  const int *order; /* NULL: ranks 0..N-1 */
  int shift;        /* the root's place in the order */
  int n;
  baton__coll_t coll;
} trees_t;

static int rank_of(int v, const trees_t *g) {
  int p = (v + g->shift) % g->n;
  return g->order ? g->order[p] : p;
}

static node_t node(int v, int tree, const trees_t *g) {
  int n = g->n;
  node_t t = {.parent = -1, .kid = {-1, -1}, .root = v == 0};
  int w = tree ? to_b(v, n) : v, kid[2];
  int p = parent_a(w, n);
  children_a(w, n, kid);
  if (p >= 0)
    t.parent = rank_of(tree ? from_b(p, n) : p, g);
  for (int i = 0; i < 2; i++)
    if (kid[i] >= 0)
      t.kid[t.nkids++] = rank_of(tree ? from_b(kid[i], n) : kid[i], g);
  t.up = height_a(w, n);
  if (g->coll == BATON__COLL_ALLREDUCE) {
    t.chunk = tree;
    t.down = height_a(0, n) + depth_a(w, n);
  } else { /* the root's half, or the next chunk's */
    int root = rank_of(0, g);
    t.chunk = tree ? (root + 1) % n : root;
    t.down = depth_a(w, n);
  }
  return t;
}

/* A half received and passed on, segment by segment. */
static void pass(baton__sched_t *s, baton__step_kind_t fwd, baton__phase_t phase, int round,
                 int from, int to, const node_t *t, baton__from_t src, int finish) {
  baton__step_t *st = baton__step_add(s, fwd, phase, round, from, t->chunk, 1, src);
  st->send_peer = to;
  st->finish = (uint8_t)finish;
}

/* Tree t's run towards the root; at the root, finished (and for
 * allreduce sent back). */
static void up(baton__sched_t *s, const node_t *t, int back) {
  if (t->nkids == 0) {
    baton__step_add(s, BATON__STEP_SEND, BATON__PHASE_REDUCE, t->up, t->parent, t->chunk, 1,
                    BATON__FROM_INPUT);
    return;
  }
  baton__from_t src = BATON__FROM_INPUT;
  if (t->nkids == 2) {
    baton__step_add(s, BATON__STEP_RECV_REDUCE, BATON__PHASE_REDUCE, t->up, t->kid[0], t->chunk, 1,
                    src);
    src = BATON__FROM_WORK;
  }
  int last = t->kid[t->nkids - 1];
  if (t->root && !back)
    baton__step_add(s, BATON__STEP_RECV_REDUCE, BATON__PHASE_REDUCE, t->up, last, t->chunk, 1, src)
        ->finish = 1;
  else if (t->root)
    pass(s, BATON__STEP_RECV_REDUCE_COPY_SEND, BATON__PHASE_REDUCE, t->up, last, last, t, src, 1);
  else
    pass(s, BATON__STEP_RECV_REDUCE_SEND, BATON__PHASE_REDUCE, t->up, last, t->parent, t, src, 0);
}

/* Tree t's result away from the root (not at the root: it sent it back as
 * it finished it). */
static void down(baton__sched_t *s, const node_t *t) {
  if (t->root) { /* a broadcast's: its half of INPUT to its one child */
    baton__step_add(s, BATON__STEP_SEND, BATON__PHASE_BROADCAST, 0, t->kid[0], t->chunk, 1,
                    BATON__FROM_INPUT);
    return;
  }
  if (t->nkids == 0) {
    baton__step_add(s, BATON__STEP_RECV_COPY, BATON__PHASE_BROADCAST, t->down, t->parent, t->chunk,
                    1, BATON__FROM_INPUT);
    return;
  }
  pass(s, BATON__STEP_RECV_COPY_SEND, BATON__PHASE_BROADCAST, t->down, t->parent, t->kid[0], t,
       BATON__FROM_INPUT, 0);
  if (t->nkids == 2)
    baton__step_add(s, BATON__STEP_SEND, BATON__PHASE_BROADCAST, t->down, t->kid[1], t->chunk, 1,
                    BATON__FROM_WORK);
}

/* The steps rank v takes in one tree for allreduce (what up() and down()
 * add); broadcast and reduce each take one way of it, no more. */
static int steps_in(const node_t *t) {
  if (t->nkids == 0)
    return 2;
  if (t->root)
    return 1;
  return 2 * (1 + (t->nkids == 2));
}

int baton__dbtree_max_steps(int size) {
  int most = 0;
  trees_t g = {.n = size, .coll = BATON__COLL_ALLREDUCE};
  for (int v = 0; v < size && size > 1; v++) {
    node_t a = node(v, 0, &g), b = node(v, 1, &g);
    int steps = steps_in(&a) + steps_in(&b);
    most = steps > most ? steps : most;
  }
  /* Broadcast and reduce take one way of allreduce's steps; a broadcast
   * root's three (two sends, a copy) are fewer than any other rank's four
   * in allreduce. */
  return most;
}

static int place(const int *order, int n, int rank) {
  int p = 0;
  while (p < n - 1 && order[p] != rank)
    p++;
  return p;
}

int baton__dbtree_build(baton__sched_t *s, const baton__build_t *b) {
  int n = b->size;
  baton__coll_t coll = b->coll;
  if ((coll != BATON__COLL_ALLREDUCE && coll != BATON__COLL_BROADCAST &&
       coll != BATON__COLL_REDUCE) ||
      n > UINT16_MAX)
    return -1;
  int rooted = coll != BATON__COLL_ALLREDUCE, shift = rooted ? place(b->order, n, b->root) : 0;
  trees_t g = {.order = b->order, .shift = shift, .n = n, .coll = coll};
  int v = (place(b->order, n, b->rank) - shift + n) % n;
  node_t t[2] = {node(v, 0, &g), node(v, 1, &g)};
  /* Up, then down, each in the order of its moments (the tree whose moment
   * comes first, first). */
  int first = t[1].up < t[0].up;
  if (coll != BATON__COLL_BROADCAST) {
    up(s, &t[first], !rooted);
    up(s, &t[1 - first], !rooted);
  }
  if (coll == BATON__COLL_REDUCE || (v == 0 && !rooted))
    return 0;
  first = t[1].down < t[0].down;
  down(s, &t[first]);
  down(s, &t[1 - first]);
  if (v == 0) /* the broadcast root's own output, once */
    baton__step_add(s, BATON__STEP_COPY, BATON__PHASE_BROADCAST, 0, -1, t[0].chunk, 2,
                    BATON__FROM_INPUT);
  return 0;
}
