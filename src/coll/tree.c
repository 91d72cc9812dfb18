/*
 * tree.c - the binomial tree, for broadcast, reduce, allreduce, gather and
 * scatter.
 *
 * The ranks are numbered relative to the root, v = (rank - root) mod N, so
 * that the root is v = 0. The parent of v is v with its lowest set bit
 * cleared; the children of v are v + d for every power of two d below that
 * bit (below 2^L for the root, L = ceil(log2 N)), as long as v + d < N. So
 * the subtree of v is the contiguous run of relative ranks [v, v + low(v)),
 * cut at N: a gather can send a subtree's blocks as one run of chunks, and
 * a run that passes rank N-1 wraps to chunk 0, which schedule.h allows.
 *
 * Rounds. Towards the root (reduce, gather) round k moves distance d = 2^k:
 * every v that is an odd multiple of d sends to v - d, so the leaves go
 * first and each rank sends once it has heard from all its children. Away
 * from the root (broadcast, scatter) round k moves distance 2^(L-1-k): the
 * root hands the largest subtree on first. Each way takes L rounds; a rank
 * sends and receives at most one message per round.
 *
 *  - broadcast: the one chunk `root` goes down; the root sends from INPUT
 *    (and copies it into its output once), the others recv-copy it and
 *    send it on from WORK.
 *  - reduce: the chunk goes up; a rank recv-reduces its first child's
 *    message with its INPUT and later ones with WORK, and sends WORK (a
 *    leaf its INPUT) to its parent. The root's last recv-reduce finishes
 *    the sum. On the other ranks WORK is scratch: they have no output.
 *  - allreduce: a reduce of all N chunks to rank 0, then their broadcast
 *    from rank 0. 2L rounds of the whole buffer: L(a + Kb + Kg) + L(a + Kb),
 *    good for small messages, twice the ring's bytes for large ones.
 *  - gather: chunk (root + v) mod N is rank v's block. A rank with children
 *    first copies its own block into WORK, recv-copies its children's runs
 *    next to it and sends the whole run of its subtree up.
 *  - scatter: the reverse. The root sends each child its subtree's run from
 *    INPUT and copies its own block to its output; a rank recv-copies its
 *    run into WORK (its own block lands in its output) and sends the
 *    children their parts. Gather and scatter move (N-1)/N of the blocks in
 *    L rounds.
 * At most 2L steps a rank (allreduce: L receives and L sends at the root).
 */
#include "steps.h"

static int mod(int a, int n) { return ((a % n) + n) % n; }

static int ceil_log2(int n) {
  int l = 0;
  while ((1 << l) < n)
    l++;
  return l;
}

/* The lowest set bit of v: the size of v's subtree before the cut at N.
 * The root's is the whole tree. */
static int low(int v, int size) { return v ? v & -v : 1 << ceil_log2(size); }

static int log2_of(int d) { return ceil_log2(d); } /* d a power of two */

/* Ranks of v's subtree that exist. */
static int span(int v, int size) { return low(v, size) < size - v ? low(v, size) : size - v; }

/* What a collective moves: the run of chunks [chunk, chunk + n) for
 * broadcast, reduce and allreduce; a rank's own block for gather and
 * scatter (per_rank), chunk (root + v) mod N. */
typedef struct {
  const int *order; /* ranks in tree order, NULL for 0..N-1 */
  int root;         /* the root's place in that order */
  int size, v;
  int chunk, n; /* the whole message, when not per_rank */
  int per_rank;
} tree_t;

/* The rank at relative place v. */
static int real(const tree_t *t, int v) {
  int p = (t->root + v) % t->size;
  return t->order ? t->order[p] : p;
}

static int place(const int *order, int size, int rank) {
  int p = 0;
  while (p < size - 1 && order[p] != rank)
    p++;
  return p;
}

/* A step on the run that a message to or from the rank at place w
 * carries: the blocks of w's subtree, or the whole message. */
static baton__step_t *add(baton__sched_t *s, const tree_t *t, baton__step_kind_t kind,
                          baton__phase_t phase, int round, int peer, int w, baton__from_t src) {
  return baton__step_add(s, kind, phase, round, peer, t->per_rank ? real(t, w) : t->chunk,
                         t->per_rank ? span(w, t->size) : t->n, src);
}

/* Towards the root: receive each child's run (L rounds of distance 2^k),
 * then send this rank's to the parent. */
static void up(baton__sched_t *s, const tree_t *t, baton__phase_t phase, int reduce) {
  int v = t->v, heard = 0;
  if (!reduce && v + 1 < t->size && low(v, t->size) > 1) /* own block beside the children's */
    baton__step_add(s, BATON__STEP_COPY, phase, 0, -1, real(t, v), 1, BATON__FROM_INPUT);
  for (int d = 1; d < low(v, t->size) && v + d < t->size; d *= 2) {
    baton__step_t *st =
        add(s, t, reduce ? BATON__STEP_RECV_REDUCE : BATON__STEP_RECV_COPY, phase, log2_of(d),
            real(t, v + d), v + d, heard ? BATON__FROM_WORK : BATON__FROM_INPUT);
    /* The root's last child (the next d reaches past N) completes it. */
    st->finish = (uint8_t)(reduce && v == 0 && 2 * d >= t->size);
    heard = 1;
  }
  if (v > 0)
    add(s, t, BATON__STEP_SEND, phase, log2_of(low(v, t->size)), real(t, v - low(v, t->size)), v,
        heard ? BATON__FROM_WORK : BATON__FROM_INPUT);
}

/* Away from the root: receive this rank's run from the parent, then send
 * each child its part, largest subtree first. At the root the data is in
 * INPUT (root_from) or, after a reduce, in WORK. */
static void down(baton__sched_t *s, const tree_t *t, baton__phase_t phase,
                 baton__from_t root_from) {
  int v = t->v, L = ceil_log2(t->size), first = 1;
  if (v > 0)
    add(s, t, BATON__STEP_RECV_COPY, phase, L - 1 - log2_of(low(v, t->size)),
        real(t, v - low(v, t->size)), v, BATON__FROM_INPUT);
  else if (t->per_rank) /* the root's own block, INPUT to output */
    baton__step_add(s, BATON__STEP_COPY, phase, 0, -1, real(t, 0), 1, BATON__FROM_INPUT);
  for (int d = low(v, t->size) / 2; d >= 1; d /= 2) {
    if (v + d >= t->size)
      continue;
    int round = L - 1 - log2_of(d);
    add(s, t, BATON__STEP_SEND, phase, round, real(t, v + d), v + d,
        v == 0 ? root_from : BATON__FROM_WORK);
    /* A broadcast root's output gets the buffer too, once. */
    if (v == 0 && first && !t->per_rank && root_from == BATON__FROM_INPUT)
      baton__step_add(s, BATON__STEP_COPY, phase, round, -1, t->chunk, t->n, BATON__FROM_INPUT);
    first = 0;
  }
}

int baton__tree_max_steps(int size) { return 2 * ceil_log2(size); }

int baton__tree_build(baton__sched_t *s, const baton__build_t *b) {
  int size = b->size, root = b->root, rank = b->rank;
  if (size > UINT16_MAX) /* an allreduce message is a run of N chunks */
    return -1;
  /* Broadcast and reduce number the ranks along the ring order, which
   * follows the topology: ranks of one host stand together, so the first
   * halvings cross between hosts and the rest stay inside them. Gather and
   * scatter keep rank order, so that a subtree's blocks are one run of
   * chunks. */
  int pr = place(b->order, size, root);
  tree_t t = {.order = b->order,
              .root = pr,
              .size = size,
              .v = mod(place(b->order, size, rank) - pr, size),
              .chunk = root,
              .n = 1};
  switch (b->coll) {
  case BATON__COLL_BROADCAST:
    down(s, &t, BATON__PHASE_BROADCAST, BATON__FROM_INPUT);
    break;
  case BATON__COLL_REDUCE:
    up(s, &t, BATON__PHASE_REDUCE, 1);
    break;
  case BATON__COLL_ALLREDUCE:
    t = (tree_t){.order = b->order,
                 .root = 0,
                 .size = size,
                 .v = place(b->order, size, rank),
                 .chunk = 0,
                 .n = size};
    up(s, &t, BATON__PHASE_REDUCE, 1);
    down(s, &t, BATON__PHASE_BROADCAST, BATON__FROM_WORK);
    break;
  case BATON__COLL_GATHER:
    t = (tree_t){.root = root, .size = size, .v = mod(rank - root, size), .per_rank = 1};
    up(s, &t, BATON__PHASE_GATHER, 0);
    break;
  case BATON__COLL_SCATTER:
    t = (tree_t){.root = root, .size = size, .v = mod(rank - root, size), .per_rank = 1};
    down(s, &t, BATON__PHASE_SCATTER, BATON__FROM_INPUT);
    break;
  default:
    return -1;
  }
  return 0;
}
