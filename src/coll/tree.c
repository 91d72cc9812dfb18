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
 * Steps. Towards the root (reduce, gather) step k moves distance d = 2^k:
 * every v that is an odd multiple of d sends to v - d, so the leaves go
 * first and each rank sends once it has heard from all its children. Away
 * from the root (broadcast, scatter) step k moves distance 2^(L-1-k): the
 * root hands the largest subtree on first. Each way takes L steps; a rank
 * sends and receives at most one message per step.
 *
 *  - broadcast: the one chunk `root` goes down; the root sends from INPUT
 *    (and keeps a copy in its output), the others from WORK once received.
 *  - reduce: the chunk goes up; a rank combines its first child's message
 *    with its INPUT and later ones with WORK, and sends WORK (a leaf its
 *    INPUT) to its parent. The root's last receive is the finished sum. On
 *    the other ranks WORK is scratch: they have no output.
 *  - allreduce: a reduce of all N chunks to rank 0, then their broadcast
 *    from rank 0. 2L steps of the whole buffer: L(a + Kb + Kg) + L(a + Kb),
 *    good for small messages, twice the ring's bytes for large ones.
 *  - gather: chunk (root + v) mod N is rank v's block. A rank with children
 *    first copies its own block into WORK (a local copy), receives its
 *    children's runs next to it and sends the whole run of its subtree up.
 *  - scatter: the reverse. The root sends each child its subtree's run from
 *    INPUT and copies its own block to its output; a rank receives its run
 *    into WORK (its own block lands in its output) and passes the children
 *    their parts. Gather and scatter move (N-1)/N of the blocks in L steps.
 */
#include "schedule.h"

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

static baton__step_t *add(baton__sched_t *s, baton__phase_t phase, int step) {
  baton__step_t *st = &s->steps[s->nsteps++];
  *st = (baton__step_t){.phase = (uint8_t)phase,
                        .step = (uint16_t)step,
                        .send_peer = -1,
                        .send_chunk = -1,
                        .recv_peer = -1,
                        .recv_chunk = -1};
  return st;
}

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

/* The run of chunks a message to or from the rank at place w carries:
 * the blocks of w's subtree, or the whole message. */
static void run_of(const tree_t *t, int w, int *chunk, uint16_t *n) {
  *chunk = t->per_rank ? real(t, w) : t->chunk;
  *n = (uint16_t)(t->per_rank ? span(w, t->size) : t->n);
}

/* Towards the root: receive each child's run (L steps of distance 2^k),
 * then send this rank's to the parent. */
static void up(baton__sched_t *s, const tree_t *t, baton__phase_t phase, int reduce) {
  int v = t->v, heard = 0;
  if (!reduce && v + 1 < t->size && low(v, t->size) > 1) { /* own block beside the children's */
    baton__step_t *st = add(s, phase, 0);
    st->send_chunk = real(t, v);
    st->send_n = 1;
    st->send_keep = 1;
  }
  for (int d = 1; d < low(v, t->size) && v + d < t->size; d *= 2) {
    baton__step_t *st = add(s, phase, log2_of(d));
    st->recv_peer = real(t, v + d);
    run_of(t, v + d, &st->recv_chunk, &st->recv_n);
    st->recv_op = reduce ? BATON__RECV_REDUCE : BATON__RECV_COPY;
    st->recv_with = heard ? BATON__FROM_WORK : BATON__FROM_INPUT;
    st->keep = 1;
    /* The root's last child (the next d reaches past N) completes it. */
    st->finish = (uint8_t)(reduce && v == 0 && 2 * d >= t->size);
    heard = 1;
  }
  if (v == 0)
    return;
  baton__step_t *st = add(s, phase, log2_of(low(v, t->size)));
  st->send_peer = real(t, v - low(v, t->size));
  run_of(t, v, &st->send_chunk, &st->send_n);
  st->send_from = heard ? BATON__FROM_WORK : BATON__FROM_INPUT;
}

/* Away from the root: receive this rank's run from the parent, then send
 * each child its part, largest subtree first. At the root the data is in
 * INPUT (root_from) or, after a reduce, in WORK. */
static void down(baton__sched_t *s, const tree_t *t, baton__phase_t phase, int root_from) {
  int v = t->v, L = ceil_log2(t->size);
  if (v > 0) {
    baton__step_t *st = add(s, phase, L - 1 - log2_of(low(v, t->size)));
    st->recv_peer = real(t, v - low(v, t->size));
    run_of(t, v, &st->recv_chunk, &st->recv_n);
    st->recv_op = BATON__RECV_COPY;
    st->keep = 1;
  } else if (t->per_rank) { /* the root's own block, INPUT to output */
    baton__step_t *st = add(s, phase, 0);
    st->send_chunk = real(t, 0);
    st->send_n = 1;
    st->send_keep = 1;
  }
  int first = 1;
  for (int d = low(v, t->size) / 2; d >= 1; d /= 2) {
    if (v + d >= t->size)
      continue;
    baton__step_t *st = add(s, phase, L - 1 - log2_of(d));
    st->send_peer = real(t, v + d);
    run_of(t, v + d, &st->send_chunk, &st->send_n);
    st->send_from = (uint8_t)(v == 0 ? root_from : BATON__FROM_WORK);
    /* A broadcast root's output gets the buffer too, once. */
    st->send_keep = (uint8_t)(v == 0 && first && !t->per_rank && root_from == BATON__FROM_INPUT);
    first = 0;
  }
}

int baton__tree_max_steps(int size) { return 2 * ceil_log2(size) + 3; }

void baton__tree_schedule(baton__sched_t *s, baton__coll_t coll, int rank, int size, size_t count,
                          int root, const int *order) {
  (void)count;
  s->coll = coll;
  s->algo = "tree";
  s->nsteps = 0;
  if (size == 1)
    return;
  /* Broadcast and reduce number the ranks along the ring order, which
   * follows the topology: ranks of one host stand together, so the first
   * halvings cross between hosts and the rest stay inside them. Gather and
   * scatter keep rank order, so that a subtree's blocks are one run of
   * chunks. */
  int pr = place(order, size, root);
  tree_t t = {.order = order,
              .root = pr,
              .size = size,
              .v = mod(place(order, size, rank) - pr, size),
              .chunk = root,
              .n = 1};
  switch (coll) {
  case BATON__COLL_BROADCAST:
    down(s, &t, BATON__PHASE_BROADCAST, BATON__FROM_INPUT);
    break;
  case BATON__COLL_REDUCE:
    up(s, &t, BATON__PHASE_REDUCE, 1);
    break;
  case BATON__COLL_ALLREDUCE:
    t = (tree_t){.order = order,
                 .root = 0,
                 .size = size,
                 .v = place(order, size, rank),
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
    break;
  }
}
