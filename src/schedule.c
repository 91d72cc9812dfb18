/*
 * schedule.c - the vocabulary of schedule.h as data: what each step kind
 * does, the names of collectives and phases, and the table that says where
 * every chunk of every collective lives (baton__layout_fill), which the
 * executor and the simulator both use.
 */
#include <string.h>

#include "schedule.h"

#define S BATON__DOES_SEND
#define R BATON__DOES_RECV
#define X BATON__DOES_REDUCE
#define L BATON__DOES_LAND
#define M BATON__DOES_MAILBOX
#define D BATON__DOES_DIRECT
const baton__kind_info_t baton__kinds[BATON__STEP_KIND_COUNT] = {
    [BATON__STEP_SEND] = {"send", S},
    [BATON__STEP_RECV_COPY] = {"recv_copy", R | L},
    [BATON__STEP_RECV_REDUCE] = {"recv_reduce", R | X | L},
    [BATON__STEP_RECV_REDUCE_SEND] = {"recv_reduce_send", R | X | S},
    [BATON__STEP_RECV_REDUCE_COPY_SEND] = {"recv_reduce_copy_send", R | X | L | S},
    [BATON__STEP_RECV_COPY_SEND] = {"recv_copy_send", R | L | S},
    [BATON__STEP_COPY] = {"copy", L},
    [BATON__STEP_MAILBOX_PUT] = {"mailbox_put", M},
    [BATON__STEP_MAILBOX_COPY] = {"mailbox_copy", M | L},
    [BATON__STEP_MAILBOX_REDUCE] = {"mailbox_reduce", M | X | L},
    [BATON__STEP_DIRECT_ARRIVE] = {"direct_arrive", M},
    [BATON__STEP_DIRECT_REDUCE] = {"direct_reduce", X | D},
    [BATON__STEP_DIRECT_COPY] = {"direct_copy", D},
    [BATON__STEP_DIRECT_DONE] = {"direct_done", M},
};
#undef S
#undef R
#undef X
#undef L
#undef M
#undef D

const char *baton__coll_name(baton__coll_t coll) {
  static const char *const names[] = {"allreduce",  "reduce_scatter",  "allgather", "broadcast",
                                      "reduce",     "alltoall",        "gather",    "scatter",
                                      "allgatherv", "reduce_scatterv", "barrier",   "alltoallv"};
  _Static_assert(sizeof names / sizeof names[0] == BATON__COLL_COUNT, "a name per collective");
  return (unsigned)coll < BATON__COLL_COUNT ? names[coll] : "?";
}

const char *baton__phase_name(baton__phase_t phase) {
  static const char *const names[] = {"fold",     "reduce_scatter", "reduce",  "gather",
                                      "exchange", "allgather",      "scatter", "broadcast",
                                      "unfold",   "flat",           "direct"};
  _Static_assert(sizeof names / sizeof names[0] == BATON__PHASE_COUNT, "a name per phase");
  return (unsigned)phase < BATON__PHASE_COUNT ? names[phase] : "?";
}

/* ---- The layout table.
 *
 * Each collective says, for INPUT and for the output, where chunk c sits
 * (`at`) and which ranks have it (`who`); WORK's place in scratch and in a
 * mailbox is `work`, and a chunk's length `len` (in INPUT too, but where
 * `in_len` says otherwise). */
typedef enum {
  AT_ZERO,   /* at 0: the rank's whole buffer is the one chunk */
  AT_SPLIT,  /* baton__chunk_off(count, N, c): one buffer cut into N */
  AT_BLOCK,  /* c * count: N blocks of count */
  AT_DISPL,  /* displs[c] */
  AT_PREFIX, /* counts[0] + ... + counts[c-1] */
  AT_SDISPL, /* send_displs[c] (NULL: c * count) */
  AT_RDISPL, /* displs[c] (NULL: c * count) */
} at_t;
typedef enum {
  WHO_ALL,     /* every rank, every chunk */
  WHO_OWN,     /* only chunk c == rank */
  WHO_AT_ROOT, /* every chunk, on the root only */
} who_t;
typedef enum {
  LEN_AS_OUT,     /* in_len only: len's (the zero of the rows that do not say) */
  LEN_SPLIT,      /* baton__chunk_len(count, N, c) */
  LEN_COUNT,      /* count */
  LEN_ROOT_CHUNK, /* count for chunk root, 0 for the others */
  LEN_COUNTS,     /* counts[c] */
  LEN_RCOUNTS,    /* counts[c] (NULL: count) */
  LEN_SCOUNTS,    /* send_counts[c] (NULL: count); for in_len only */
} len_t;
typedef struct {
  uint8_t in_at, in_who, out_at, out_who, work, len;
  uint8_t in_len; /* LEN_AS_OUT but for alltoallv */
} layout_row_t;

static const layout_row_t layouts[BATON__COLL_COUNT] = {
    [BATON__COLL_ALLREDUCE] = {AT_SPLIT, WHO_ALL, AT_SPLIT, WHO_ALL, AT_SPLIT, LEN_SPLIT,
                               LEN_AS_OUT},
    [BATON__COLL_REDUCE_SCATTER] = {AT_BLOCK, WHO_ALL, AT_ZERO, WHO_OWN, AT_BLOCK, LEN_COUNT,
                                    LEN_AS_OUT},
    [BATON__COLL_ALLGATHER] = {AT_ZERO, WHO_OWN, AT_BLOCK, WHO_ALL, AT_BLOCK, LEN_COUNT,
                               LEN_AS_OUT},
    [BATON__COLL_BROADCAST] = {AT_ZERO, WHO_ALL, AT_ZERO, WHO_ALL, AT_ZERO, LEN_ROOT_CHUNK,
                               LEN_AS_OUT},
    [BATON__COLL_REDUCE] = {AT_ZERO, WHO_ALL, AT_ZERO, WHO_AT_ROOT, AT_ZERO, LEN_ROOT_CHUNK,
                            LEN_AS_OUT},
    [BATON__COLL_ALLTOALL] = {AT_BLOCK, WHO_ALL, AT_BLOCK, WHO_ALL, AT_BLOCK, LEN_COUNT,
                              LEN_AS_OUT},
    [BATON__COLL_GATHER] = {AT_ZERO, WHO_OWN, AT_BLOCK, WHO_AT_ROOT, AT_BLOCK, LEN_COUNT,
                            LEN_AS_OUT},
    [BATON__COLL_SCATTER] = {AT_BLOCK, WHO_AT_ROOT, AT_ZERO, WHO_OWN, AT_BLOCK, LEN_COUNT,
                             LEN_AS_OUT},
    [BATON__COLL_ALLGATHERV] = {AT_ZERO, WHO_OWN, AT_DISPL, WHO_ALL, AT_DISPL, LEN_COUNTS,
                                LEN_AS_OUT},
    [BATON__COLL_REDUCE_SCATTERV] = {AT_PREFIX, WHO_ALL, AT_ZERO, WHO_OWN, AT_PREFIX, LEN_COUNTS,
                                     LEN_AS_OUT},
    /* The barrier's ring: a one-byte allgather. */
    [BATON__COLL_BARRIER] = {AT_ZERO, WHO_OWN, AT_BLOCK, WHO_ALL, AT_BLOCK, LEN_COUNT, LEN_AS_OUT},
    /* Every block lands in the output, so WORK is never scratch. */
    [BATON__COLL_ALLTOALLV] = {AT_SDISPL, WHO_ALL, AT_RDISPL, WHO_ALL, AT_PREFIX, LEN_RCOUNTS,
                               LEN_SCOUNTS},
};

static size_t offset(at_t at, const baton__layout_args_t *a, int c, size_t prefix) {
  switch (at) {
  case AT_SPLIT:
    return baton__chunk_off(a->count, a->size, c);
  case AT_BLOCK:
    return (size_t)c * a->count;
  case AT_DISPL:
    return a->displs ? a->displs[c] : prefix;
  case AT_PREFIX:
    return prefix;
  case AT_SDISPL:
    return a->send_displs ? a->send_displs[c] : (size_t)c * a->count;
  case AT_RDISPL:
    return a->displs ? a->displs[c] : (size_t)c * a->count;
  default:
    return 0;
  }
}

static int has(who_t who, const baton__layout_args_t *a, int c) {
  return who == WHO_ALL || (who == WHO_OWN && c == a->rank) ||
         (who == WHO_AT_ROOT && a->rank == a->root);
}

static size_t length(len_t len, const baton__layout_args_t *a, int c) {
  switch (len) {
  case LEN_SPLIT:
    return baton__chunk_len(a->count, a->size, c);
  case LEN_ROOT_CHUNK:
    return c == a->root ? a->count : 0;
  case LEN_COUNTS:
    return a->counts[c];
  case LEN_RCOUNTS:
    return a->counts ? a->counts[c] : a->count;
  case LEN_SCOUNTS:
    return a->send_counts ? a->send_counts[c] : a->count;
  default:
    return a->count;
  }
}

/* Broadcast and reduce in two halves: the second half of chunk root's
 * buffer moves to chunk root + 1, wherever chunk root is. */
static void halve(baton__layout_t *l, const baton__layout_args_t *a) {
  int r = a->root, h = (r + 1) % a->size;
  size_t first = a->count - a->count / 2;
  size_t *off[] = {l->in_off, l->out_off, l->work_off, l->box_off};
  for (size_t i = 0; i < sizeof off / sizeof off[0]; i++)
    off[i][h] = off[i][r] == BATON__NO_OUT ? BATON__NO_OUT : off[i][r] + first;
  l->len[h] = l->in_len[h] = a->count / 2;
  l->len[r] = l->in_len[r] = first;
}

/* Allreduce in two halves: chunks 0 and 1 hold the first ceil(count/2)
 * elements and the rest, the others are empty (at the end). */
static void split_in_two(baton__layout_t *l, const baton__layout_args_t *a) {
  size_t *off[] = {l->in_off, l->out_off, l->work_off, l->box_off};
  for (int c = 0; c < a->size; c++) {
    size_t at = c < 2 ? baton__chunk_off(a->count, 2, c) : a->count;
    for (size_t i = 0; i < sizeof off / sizeof off[0]; i++)
      off[i][c] = off[i][c] == BATON__NO_OUT ? BATON__NO_OUT : at;
    l->len[c] = l->in_len[c] = c < 2 ? baton__chunk_len(a->count, 2, c) : 0;
  }
}

void baton__layout_fill(baton__layout_t *l, const baton__layout_args_t *a) {
  const layout_row_t *row = &layouts[a->coll];
  size_t prefix = 0;
  for (int c = 0; c < a->size; c++) {
    l->len[c] = length((len_t)row->len, a, c);
    l->in_len[c] = row->in_len != LEN_AS_OUT ? length((len_t)row->in_len, a, c) : l->len[c];
    l->in_off[c] =
        has((who_t)row->in_who, a, c) ? offset((at_t)row->in_at, a, c, prefix) : BATON__NO_OUT;
    l->out_off[c] =
        has((who_t)row->out_who, a, c) ? offset((at_t)row->out_at, a, c, prefix) : BATON__NO_OUT;
    l->work_off[c] = offset((at_t)row->work, a, c, prefix);
    l->box_off[c] = offset((at_t)row->in_at, a, c, prefix);
    prefix += l->len[c];
  }
  if (a->halves && row->len == LEN_ROOT_CHUNK && a->size > 1)
    halve(l, a);
  else if (a->halves && row->len == LEN_SPLIT && a->size > 1)
    split_in_two(l, a);
}
