/*
 * test_coll.c - checks every collective (allreduce, reduce_scatter, allgather,
 * broadcast, reduce, alltoall, gather, scatter, allgatherv, reduce_scatterv)
 * and barrier against the naive reference in ref.h. Run it under
 * `baton-run -n N`.
 *
 *   test_coll [--quick] [--coll NAME] [--dtype NAME] [--op NAME] [--count N]
 *             [--registered all|some]
 *
 * NAME for --coll is one of the collectives above, barrier or consistency;
 * --dtype, --op and --count narrow the sweep down to one case when
 * reproducing a failure. --quick leaves out the two largest counts and, on
 * more than four ranks, tries one root per case instead of every root.
 *
 * Rooted collectives run with every root on up to eight ranks; a non-root
 * passes NULL for the buffer it need not give in the in-place pass (its
 * other buffer must stay untouched). The v-variants get uneven counts with
 * zeros (count + rank, or 0 for every third rank), and allgatherv puts the
 * blocks in reverse rank order with gaps, which must stay untouched (for odd
 * counts each rank's own gaps: displacements that differ between ranks).
 *
 * The exact sweep covers every dtype, op, count and in-place mode. Its inputs
 * are chosen (exact_spec) so that every order of reduction gives the same
 * bits: small integers, halves and powers of two for floats, wraparound only
 * where it is well defined, any bits for the bitwise ops, and for bool any
 * byte (true unless 0). So each result is compared bitwise with a
 * reference that reduces in rank order, whatever order the library uses.
 * The pairs without a meaning (a float with BAND, BOR or BXOR; bool with
 * AVG) are not swept: each reducing collective must refuse them with
 * BATON_EINVAL naming the op and the dtype, and leave recvbuf alone.
 *
 * The consistency sweep uses random non-integer floats, where the order
 * matters, and checks instead that the result is close to the exact one and
 * bitwise identical on every rank (hashes compared through allgather).
 *
 * Each case is one check: its return code, the result, the guard bytes just
 * before and after the receive buffer and, out of place, the send buffer.
 * Buffers start one element off a 64-byte boundary in some cases (by the
 * count's low bits), as pointers into a user's array may.
 *
 * --registered takes the send and receive buffers from baton_mem_alloc, on
 * every rank (all) or on the even ranks only (some: the odd ones allocate
 * too, as the call is collective, but pass malloc'd buffers), so that the
 * direct algorithm runs (BATON_ALGO=direct forces it), or hands the calls
 * to the staged path when some rank's buffers are not registered.
 * --registered local takes them from baton_mem_alloc_local on every rank
 * (run with BATON_MEM_LOCAL=1), mixed on the even ranks while the odd
 * ones take registered memory (which all allocate), local-some on the even ranks while the
 * odd ones pass malloc'd buffers. At the end each rank counts the local
 * blocks it maps (/proc/self/maps): with BATON_ALGO=direct under local and
 * mixed the peers' must be there (direct ran on them), under local-some
 * none (every call was staged).
 */
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "baton.h"
#include "common.h"
#include "mem_test.h"
#include "ref.h"

#define GUARD 64 /* bytes checked on each side of a receive buffer */
#define GUARD_BYTE 0xa5
#define POISON 0xcd /* fills an out-of-place receive buffer before a call */
#define MAX_SHOWN 3 /* mismatching elements printed per case */

enum {
  ALLREDUCE,
  REDUCE_SCATTER,
  ALLGATHER,
  BROADCAST,
  REDUCE,
  ALLTOALL,
  GATHER,
  SCATTER,
  ALLGATHERV,
  REDUCE_SCATTERV,
  BARRIER,
  CONSISTENCY,
  NCOLLS
};
static const char *const coll_names[NCOLLS] = {
    "allreduce", "reduce_scatter", "allgather",  "broadcast",       "reduce",  "alltoall",
    "gather",    "scatter",        "allgatherv", "reduce_scatterv", "barrier", "consistency"};
/* Collectives without a reduction operator. */
#define NO_OP(coll)                                                                                \
  ((coll) == ALLGATHER || (coll) == BROADCAST || (coll) == ALLTOALL || (coll) == GATHER ||         \
   (coll) == SCATTER || (coll) == ALLGATHERV)
#define ROOTED(coll)                                                                               \
  ((coll) == BROADCAST || (coll) == REDUCE || (coll) == GATHER || (coll) == SCATTER)
static const char *const dtype_names[BATON_DTYPE_COUNT] = {
    "int8",     "uint8",   "int32",   "uint32", "int64",  "uint64", "float16",
    "bfloat16", "float32", "float64", "int16",  "uint16", "bool"};
static const char *const op_names[BATON_OP_COUNT] = {"sum", "prod", "min", "max",
                                                     "avg", "band", "bor", "bxor"};

typedef struct {
  tally_t t;
  int quick;
  int registered; /* --registered: 0 none, 1 all, 2 some, 3 local, 4 mixed, 5 local-some */
  int only_coll, only_dtype, only_op; /* -1: all */
  long long only_count;               /* -1: all */
  size_t counts[16];
  int ncounts;
  /* Each buffer holds size * max count elements of 8 bytes; send and recv
   * have GUARD spare bytes on each side, and 8 more for the shifts. */
  unsigned char *send, *recv, *input, *expect;
  /* The v-variants' layout of the current case (v_layout). */
  size_t *vcounts, *displs, *prefix; /* prefix[r]: sum of vcounts[0 .. r) */
  size_t vtotal, vextent;            /* sum of vcounts; elements allgatherv's blocks span */
} test_t;

/* One case of a sweep. */
typedef struct {
  int coll;
  baton_dtype_t dt;
  baton_op_t op; /* ignored by allgather and broadcast */
  size_t count;
  int root; /* rooted collectives */
  int inplace;
  size_t send_shift, recv_shift; /* bytes: buffers need not be 16-aligned */
  gen_spec_t gen;
  uint64_t seed;
  char name[128]; /* "allreduce float16 sum count 101 in-place" */
} case_t;

/* ------------------------------------------------------------- inputs */

/* Every case draws different inputs; every rank draws the same ones. */
static uint64_t case_seed(int coll, baton_dtype_t dt, int op, size_t count) {
  uint64_t key = (uint64_t)coll << 56 ^ (uint64_t)dt << 48 ^ (uint64_t)op << 40 ^ count;
  return ref_mix64(ref_mix64(key));
}

static void case_name(case_t *c) {
  char root[16] = "";
  if (ROOTED(c->coll))
    snprintf(root, sizeof root, " root %d", c->root);
  int v = c->coll == ALLGATHERV || c->coll == REDUCE_SCATTERV;
  snprintf(c->name, sizeof c->name, "%s %s%s%s count %zu%s%s %s", coll_names[c->coll],
           dtype_names[c->dt], NO_OP(c->coll) ? "" : " ", NO_OP(c->coll) ? "" : op_names[c->op],
           c->count, v ? " (uneven)" : "", root, c->inplace ? "in-place" : "out-of-place");
}

/*
 * The buffers of a case. Users pass pointers into their arrays, aligned to
 * the element but not necessarily to a vector or a cache line, so the
 * counts' low bits shift each buffer by one element or not.
 */
static unsigned char *send_buf(const test_t *T, const case_t *c) { return T->send + c->send_shift; }

static unsigned char *recv_buf(const test_t *T, const case_t *c) { return T->recv + c->recv_shift; }

/* ----------------------------------------------------------- checking */

static void format_elem(char *buf, size_t cap, baton_dtype_t dt, uint64_t bits) {
  int hex = 2 * (int)ref_size(dt);
  if (ref_is_float(dt))
    snprintf(buf, cap, "%.9g (0x%0*llx)", ref_to_double(dt, bits), hex, (unsigned long long)bits);
  else if (ref_is_signed(dt))
    snprintf(buf, cap, "%lld (0x%0*llx)", (long long)ref_sext(dt, bits), hex,
             (unsigned long long)bits);
  else
    snprintf(buf, cap, "%llu (0x%0*llx)", (unsigned long long)bits, hex, (unsigned long long)bits);
}

/* Compares n elements bitwise; prints the first few that differ. */
static int check_elems(test_t *T, const case_t *c, const char *what, const void *got,
                       const void *want, size_t n) {
  size_t bad = 0;
  if (memcmp(got, want, n * ref_size(c->dt)) == 0)
    return 1;
  for (size_t i = 0; i < n; i++) {
    uint64_t g = ref_load(got, c->dt, i), w = ref_load(want, c->dt, i);
    if (g == w || bad++ >= MAX_SHOWN)
      continue;
    char gs[64], ws[64];
    format_elem(gs, sizeof gs, c->dt, g);
    format_elem(ws, sizeof ws, c->dt, w);
    tally_say(&T->t, "%s: %s index %zu: got %s, expected %s", c->name, what, i, gs, ws);
  }
  tally_say(&T->t, "%s: %s: %zu of %zu elements differ", c->name, what, bad, n);
  return 0;
}

/* Fills the guard bytes on both sides of [buf, buf + len). */
static void guard_set(unsigned char *buf, size_t len) {
  memset(buf - GUARD, GUARD_BYTE, GUARD);
  memset(buf + len, GUARD_BYTE, GUARD);
}

static int guard_ok(test_t *T, const case_t *c, const unsigned char *buf, size_t len) {
  for (int i = 0; i < GUARD; i++) {
    if (buf[-1 - i] != GUARD_BYTE) {
      tally_say(&T->t, "%s: byte %d before recvbuf was overwritten", c->name, i + 1);
      return 0;
    }
    if (buf[len + i] != GUARD_BYTE) {
      tally_say(&T->t, "%s: byte %d past the end of recvbuf was overwritten", c->name, i);
      return 0;
    }
  }
  return 1;
}

/*
 * Everything a case checks after its call: the return code, the guards
 * around the receive region [region, region + region_bytes), the send buffer
 * (out of place it must still hold the input) and the n result elements.
 */
static int check_case(test_t *T, const case_t *c, int rc, const unsigned char *region,
                      size_t region_bytes, size_t send_elems, const void *result, size_t n) {
  if (!tally_rc(&T->t, rc, c->name))
    return 0;
  int ok = guard_ok(T, c, region, region_bytes);
  if (!c->inplace)
    ok &= check_elems(T, c, "sendbuf (modified)", send_buf(T, c), T->input, send_elems);
  return check_elems(T, c, "result", result, T->expect, n) && ok;
}

/* ---------------------------------------------------------- one case */

static int run_allreduce(test_t *T, const case_t *c) {
  size_t bytes = c->count * ref_size(c->dt);
  unsigned char *in = send_buf(T, c), *out = recv_buf(T, c);
  memcpy(c->inplace ? out : in, T->input, bytes);
  if (!c->inplace)
    memset(out, POISON, bytes);
  guard_set(out, bytes);
  int rc = baton_allreduce(c->inplace ? out : in, out, c->count, c->dt, c->op, T->t.comm);
  return check_case(T, c, rc, out, bytes, c->count, out, c->count);
}

/* In place, the whole send buffer lives in recv and rank r's result lands
 * in its own chunk of it. */
static int run_reduce_scatter(test_t *T, const case_t *c) {
  size_t esz = ref_size(c->dt), n = c->count, all = n * (size_t)T->t.size;
  unsigned char *in = send_buf(T, c), *buf = recv_buf(T, c), *out = buf;
  size_t region = n * esz;
  if (c->inplace) {
    memcpy(buf, T->input, all * esz);
    out = buf + (size_t)T->t.rank * n * esz;
    region = all * esz;
  } else {
    memcpy(in, T->input, all * esz);
    memset(out, POISON, region);
  }
  guard_set(buf, region);
  int rc = baton_reduce_scatter(c->inplace ? buf : in, out, n, c->dt, c->op, T->t.comm);
  return check_case(T, c, rc, buf, region, all, out, n);
}

static int run_allgather(test_t *T, const case_t *c) {
  size_t esz = ref_size(c->dt), n = c->count, all = n * (size_t)T->t.size;
  unsigned char *in = send_buf(T, c), *out = recv_buf(T, c);
  unsigned char *mine = out + (size_t)T->t.rank * n * esz;
  memset(out, POISON, all * esz);
  memcpy(c->inplace ? mine : in, T->input, n * esz);
  guard_set(out, all * esz);
  int rc = baton_allgather(c->inplace ? mine : in, out, n, c->dt, T->t.comm);
  return check_case(T, c, rc, out, all * esz, n, out, all);
}

/* Every rank passes its own buffers; only the root's input may be read. */
static int run_broadcast(test_t *T, const case_t *c) {
  size_t bytes = c->count * ref_size(c->dt);
  unsigned char *in = send_buf(T, c), *out = recv_buf(T, c);
  int root = T->t.rank == c->root;
  memcpy(c->inplace ? out : in, T->input, bytes);
  if (!c->inplace || !root)
    memset(out, POISON, bytes);
  guard_set(out, bytes);
  int rc = baton_broadcast(c->inplace ? out : in, out, c->count, c->dt, c->root, T->t.comm);
  return check_case(T, c, rc, out, bytes, c->count, out, c->count);
}

/* Only the root's recvbuf is written: a non-root's must stay as it was
 * (expect holds the poison), and in the in-place pass it passes NULL. */
static int run_reduce(test_t *T, const case_t *c) {
  size_t bytes = c->count * ref_size(c->dt);
  unsigned char *in = send_buf(T, c), *out = recv_buf(T, c);
  int root = T->t.rank == c->root;
  memcpy(c->inplace && root ? out : in, T->input, bytes);
  if (!c->inplace || !root)
    memset(out, POISON, bytes);
  guard_set(out, bytes);
  int rc = baton_reduce(c->inplace && root ? out : in, root || !c->inplace ? out : NULL, c->count,
                        c->dt, c->op, c->root, T->t.comm);
  return check_case(T, c, rc, out, bytes, c->count, out, c->count);
}

static int run_alltoall(test_t *T, const case_t *c) {
  size_t bytes = c->count * (size_t)T->t.size * ref_size(c->dt);
  unsigned char *in = send_buf(T, c), *out = recv_buf(T, c);
  memcpy(c->inplace ? out : in, T->input, bytes);
  if (!c->inplace)
    memset(out, POISON, bytes);
  guard_set(out, bytes);
  int rc = baton_alltoall(c->inplace ? out : in, out, c->count, c->dt, T->t.comm);
  size_t all = c->count * (size_t)T->t.size;
  return check_case(T, c, rc, out, bytes, all, out, all);
}

/* In place, the root's block already sits in its place in recvbuf. */
static int run_gather(test_t *T, const case_t *c) {
  size_t esz = ref_size(c->dt), n = c->count, all = n * (size_t)T->t.size;
  unsigned char *in = send_buf(T, c), *out = recv_buf(T, c);
  int root = T->t.rank == c->root;
  unsigned char *send = c->inplace && root ? out + (size_t)c->root * n * esz : in;
  memset(out, POISON, all * esz);
  memcpy(send, T->input, n * esz);
  guard_set(out, all * esz);
  int rc = baton_gather(send, root || !c->inplace ? out : NULL, n, c->dt, c->root, T->t.comm);
  return check_case(T, c, rc, out, all * esz, n, out, all);
}

/* In place, the root's recvbuf is its block of sendbuf; a non-root passes
 * a NULL sendbuf in the in-place pass. */
static int run_scatter(test_t *T, const case_t *c) {
  size_t esz = ref_size(c->dt), n = c->count, all = n * (size_t)T->t.size;
  unsigned char *in = send_buf(T, c), *buf = recv_buf(T, c), *out = buf;
  int root = T->t.rank == c->root;
  size_t region = n * esz;
  if (c->inplace && root) {
    memcpy(buf, T->input, all * esz);
    out = buf + (size_t)c->root * n * esz;
    region = all * esz;
  } else {
    memcpy(in, T->input, all * esz);
    memset(out, POISON, region);
  }
  guard_set(buf, region);
  const void *send = c->inplace ? (root ? buf : NULL) : in;
  int rc = baton_scatter(send, out, n, c->dt, c->root, T->t.comm);
  return check_case(T, c, rc, buf, region, all, out, n);
}

/* The whole span of the blocks is checked: gaps must keep the poison. */
static int run_allgatherv(test_t *T, const case_t *c) {
  size_t esz = ref_size(c->dt), n = T->vcounts[T->t.rank], span = T->vextent;
  unsigned char *in = send_buf(T, c), *out = recv_buf(T, c);
  unsigned char *mine = out + T->displs[T->t.rank] * esz;
  memset(out, POISON, span * esz);
  memcpy(c->inplace ? mine : in, T->input, n * esz);
  guard_set(out, span * esz);
  int rc =
      baton_allgatherv(c->inplace ? mine : in, n, out, T->vcounts, T->displs, c->dt, T->t.comm);
  return check_case(T, c, rc, out, span * esz, n, out, span);
}

static int run_reduce_scatterv(test_t *T, const case_t *c) {
  size_t esz = ref_size(c->dt), n = T->vcounts[T->t.rank], all = T->vtotal;
  unsigned char *in = send_buf(T, c), *buf = recv_buf(T, c), *out = buf;
  size_t region = n * esz;
  if (c->inplace) {
    memcpy(buf, T->input, all * esz);
    out = buf + T->prefix[T->t.rank] * esz;
    region = all * esz;
  } else {
    memcpy(in, T->input, all * esz);
    memset(out, POISON, region);
  }
  guard_set(buf, region);
  int rc = baton_reduce_scatterv(c->inplace ? buf : in, out, T->vcounts, c->dt, c->op, T->t.comm);
  return check_case(T, c, rc, buf, region, all, out, n);
}

/*
 * The v-variants' counts for a case of `count`: count + r for rank r, or 0
 * for every third rank (which one depends on count, so two ranks see a
 * zero too); all 0 for count 0. allgatherv's blocks lie in reverse rank
 * order with gaps of one or two elements before each; for an odd count
 * the gaps depend on the rank too, so that the ranks' displacements
 * differ (baton.h: they are each rank's own), which the direct algorithm
 * must see and leave to the staged path.
 */
static void v_layout(test_t *T, size_t count) {
  int size = T->t.size;
  size_t at = 0;
  T->vtotal = 0;
  for (int q = 0; q < size; q++) {
    T->vcounts[q] = (q + count) % 3 == 2 || count == 0 ? 0 : count + (size_t)q;
    T->prefix[q] = T->vtotal;
    T->vtotal += T->vcounts[q];
  }
  for (int q = size - 1; q >= 0; q--) {
    at += 1 + (size_t)((q + (count & 1 ? T->t.rank : 0)) & 1);
    T->displs[q] = at;
    at += T->vcounts[q];
  }
  T->vextent = at + 1;
}

/* Computes this rank's input and the expected result of a case; both are
 * the same for its in-place and out-of-place runs. */
static void prepare(test_t *T, const case_t *c) {
  size_t n = c->count, esz = ref_size(c->dt);
  int rank = T->t.rank, size = T->t.size;
  switch (c->coll) {
  case ALLREDUCE:
    ref_fill(T->input, c->dt, &c->gen, c->seed, rank, 0, n);
    ref_reduce(T->expect, c->dt, c->op, &c->gen, c->seed, size, 0, n);
    break;
  case REDUCE_SCATTER:
    ref_fill(T->input, c->dt, &c->gen, c->seed, rank, 0, n * (size_t)size);
    ref_reduce(T->expect, c->dt, c->op, &c->gen, c->seed, size, (size_t)rank * n, n);
    break;
  case BROADCAST:
    ref_fill(T->expect, c->dt, &c->gen, c->seed, c->root, 0, n);
    /* The others' inputs differ from the root's: a rank that kept its
     * own would fail. */
    ref_fill(T->input, c->dt, &c->gen, c->seed, rank, 0, n);
    break;
  case REDUCE:
    ref_fill(T->input, c->dt, &c->gen, c->seed, rank, 0, n);
    if (rank == c->root)
      ref_reduce(T->expect, c->dt, c->op, &c->gen, c->seed, size, 0, n);
    else
      memset(T->expect, POISON, n * esz);
    break;
  case ALLTOALL: /* block q of rank r's input is element r*n on of rank q's */
    ref_fill(T->input, c->dt, &c->gen, c->seed, rank, 0, n * (size_t)size);
    for (int q = 0; q < size; q++)
      ref_fill(T->expect + (size_t)q * n * esz, c->dt, &c->gen, c->seed, q, (size_t)rank * n, n);
    break;
  case GATHER:
    ref_fill(T->input, c->dt, &c->gen, c->seed, rank, 0, n);
    memset(T->expect, POISON, n * (size_t)size * esz);
    for (int q = 0; q < size && rank == c->root; q++)
      ref_fill(T->expect + (size_t)q * n * esz, c->dt, &c->gen, c->seed, q, 0, n);
    break;
  case SCATTER: /* the others' inputs differ from the root's */
    ref_fill(T->input, c->dt, &c->gen, c->seed, rank, 0, n * (size_t)size);
    ref_fill(T->expect, c->dt, &c->gen, c->seed, c->root, (size_t)rank * n, n);
    break;
  case ALLGATHERV:
    ref_fill(T->input, c->dt, &c->gen, c->seed, rank, 0, T->vcounts[rank]);
    memset(T->expect, POISON, T->vextent * esz);
    for (int q = 0; q < size; q++)
      ref_fill(T->expect + T->displs[q] * esz, c->dt, &c->gen, c->seed, q, 0, T->vcounts[q]);
    break;
  case REDUCE_SCATTERV:
    ref_fill(T->input, c->dt, &c->gen, c->seed, rank, 0, T->vtotal);
    ref_reduce(T->expect, c->dt, c->op, &c->gen, c->seed, size, T->prefix[rank], T->vcounts[rank]);
    break;
  default: /* ALLGATHER */
    for (int q = 0; q < size; q++)
      ref_fill(T->expect + (size_t)q * n * esz, c->dt, &c->gen, c->seed, q, 0, n);
    memcpy(T->input, T->expect + (size_t)rank * n * esz, n * esz);
    break;
  }
}

/* ------------------------------------------------------------ sweeps */

static int selected(const test_t *T, baton_dtype_t dt, int op, size_t count) {
  return (T->only_dtype < 0 || T->only_dtype == (int)dt) &&
         (T->only_op < 0 || op < 0 || T->only_op == op) &&
         (T->only_count < 0 || (size_t)T->only_count == count);
}

typedef int (*run_fn)(test_t *, const case_t *);
static const run_fn runs[BARRIER] = {
    run_allreduce, run_reduce_scatter, run_allgather, run_broadcast,  run_reduce,
    run_alltoall,  run_gather,         run_scatter,   run_allgatherv, run_reduce_scatterv};

/* Every root on up to eight ranks (four with --quick) for counts below a
 * segment, else one per case, turning with the case: the large counts'
 * paths do not depend on the root, and they cost most of the time. */
static int all_roots(const test_t *T, size_t count) {
  return T->t.size <= (T->quick ? 4 : 8) && count < 65536;
}

/* Runs one (dtype, op, count) in both modes, for each root of a rooted
 * collective; op is -1 for collectives without one. */
static void sweep_one(test_t *T, int coll, baton_dtype_t dt, int op, size_t count) {
  case_t c = {.coll = coll, .dt = dt, .op = op < 0 ? BATON_SUM : op, .count = count};
  c.send_shift = ((count >> 1) & 1) * ref_size(dt);
  c.recv_shift = (count & 1) * ref_size(dt);
  c.gen = NO_OP(coll) ? (gen_spec_t)BITS : exact_spec(dt, c.op);
  c.seed = case_seed(coll, dt, op, count);
  v_layout(T, count);
  int nroots = ROOTED(coll) && all_roots(T, count) ? T->t.size : 1;
  for (int i = 0; i < nroots && !T->t.broken; i++) {
    c.root = nroots > 1 ? i : (int)((count + (size_t)dt + (size_t)c.op) % (size_t)T->t.size);
    prepare(T, &c);
    for (c.inplace = 0; c.inplace < 2 && !T->t.broken; c.inplace++) {
      case_name(&c);
      tally_record(&T->t, runs[coll](T, &c));
    }
  }
}

/*
 * Whether baton has an algorithm for coll: a call of one element on every
 * rank, which fails with BATON_EUSAGE before anything moves when none
 * serves it (every collective has one now; a new collective may land
 * before its algorithms do). Any other failure counts as one.
 */
static int served(test_t *T, int coll) {
  static const size_t ones[] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  size_t n = (size_t)T->t.size;
  baton_comm_t *comm = T->t.comm;
  unsigned char *in = T->send, *out = T->recv;
  memset(in, 0, 8 * n);
  int rc;
  switch (coll) {
  case REDUCE:
    rc = baton_reduce(in, out, 1, BATON_INT32, BATON_SUM, 0, comm);
    break;
  case ALLTOALL:
    rc = baton_alltoall(in, out, 1, BATON_INT32, comm);
    break;
  case GATHER:
    rc = baton_gather(in, out, 1, BATON_INT32, 0, comm);
    break;
  case SCATTER:
    rc = baton_scatter(in, out, 1, BATON_INT32, 0, comm);
    break;
  case ALLGATHERV:
    if (n > 16)
      return 1;
    for (size_t q = 0; q < n; q++)
      T->displs[q] = q;
    rc = baton_allgatherv(in, 1, out, ones, T->displs, BATON_INT32, comm);
    break;
  case REDUCE_SCATTERV:
    rc = n > 16 ? BATON_OK : baton_reduce_scatterv(in, out, ones, BATON_INT32, BATON_SUM, comm);
    break;
  default:
    return 1; /* the core collectives always have the ring */
  }
  const char *why = baton_comm_last_error(comm);
  if (rc == BATON_EUSAGE && strstr(why, "no algorithm")) {
    if (T->t.rank == 0)
      printf("SKIP: test_coll %s: %s\n", coll_names[coll], why);
    return 0;
  }
  return tally_record(&T->t, tally_rc(&T->t, rc, coll_names[coll])) || 1;
}

/* alltoall and reduce_scatterv move N blocks of the count each, as
 * reduce_scatter does; past 65537 elements (many rounds already) their
 * paths are those of smaller counts and of reduce_scatter's largest, so the
 * largest count is left to reduce_scatter unless --count asks for it. */
static int too_large(const test_t *T, int coll, size_t count) {
  return (coll == ALLTOALL || coll == REDUCE_SCATTERV) && count > 65537 && T->only_count < 0;
}

/* Whether the text names `word` as a whole word ("float16" is not in
 * "bfloat16"). */
static int names_word(const char *text, const char *word) {
  size_t len = strlen(word);
  for (const char *p = strstr(text, word); p; p = strstr(p + 1, word)) {
    int before = p > text && (isalnum((unsigned char)p[-1]) || p[-1] == '_');
    int after = isalnum((unsigned char)p[len]) || p[len] == '_';
    if (!before && !after)
      return 1;
  }
  return 0;
}

/* An op that does not apply to dt: BATON_EINVAL from the call itself, on
 * every rank alike and before anything moves, naming both; recvbuf keeps
 * its poison. */
static int refused(test_t *T, int coll, baton_dtype_t dt, baton_op_t op) {
  baton_comm_t *comm = T->t.comm;
  size_t n = (size_t)T->t.size, bytes = 8 * n;
  char name[96];
  snprintf(name, sizeof name, "%s %s %s (no meaning)", coll_names[coll], dtype_names[dt],
           op_names[op]);
  memset(T->send, 0, bytes);
  memset(T->recv, POISON, bytes);
  for (size_t q = 0; q < n; q++)
    T->vcounts[q] = 1;
  int rc;
  switch (coll) {
  case ALLREDUCE:
    rc = baton_allreduce(T->send, T->recv, 1, dt, op, comm);
    break;
  case REDUCE_SCATTER:
    rc = baton_reduce_scatter(T->send, T->recv, 1, dt, op, comm);
    break;
  case REDUCE:
    rc = baton_reduce(T->send, T->recv, 1, dt, op, 0, comm);
    break;
  default:
    rc = baton_reduce_scatterv(T->send, T->recv, T->vcounts, dt, op, comm);
    break;
  }
  const char *why = baton_comm_last_error(comm);
  int ok = rc == BATON_EINVAL && names_word(why, dtype_names[dt]) && names_word(why, op_names[op]);
  for (size_t i = 0; ok && i < bytes; i++)
    ok = T->recv[i] == POISON;
  if (!ok)
    tally_say(&T->t, "%s: returned %s, last error \"%s\"; expected BATON_EINVAL naming both", name,
              baton_err_name(rc), why);
  return ok;
}

static void sweep(test_t *T, int coll) {
  int nops = NO_OP(coll) ? 1 : BATON_OP_COUNT;
  for (int dt = 0; dt < BATON_DTYPE_COUNT; dt++)
    for (int op = 0; op < nops; op++) {
      int o = NO_OP(coll) ? -1 : op;
      if (o >= 0 && !ref_valid(dt, o)) {
        if (selected(T, dt, o, T->only_count < 0 ? 0 : (size_t)T->only_count) && !T->t.broken)
          tally_record(&T->t, refused(T, coll, dt, o));
        continue;
      }
      for (int i = 0; i < T->ncounts && !T->t.broken; i++)
        if (selected(T, dt, o, T->counts[i]) && !too_large(T, coll, T->counts[i]))
          sweep_one(T, coll, dt, o, T->counts[i]);
    }
}

/* ------------------------------------------------------- consistency */

/* Unit roundoff of each float type. */
static double unit_roundoff(baton_dtype_t dt) {
  switch (dt) {
  case BATON_FLOAT16:
    return 0x1p-11;
  case BATON_BFLOAT16:
    return 0x1p-8;
  case BATON_FLOAT32:
    return 0x1p-24;
  default:
    return 0x1p-53;
  }
}

/*
 * Checks a result computed from rounded inputs against the exact value
 * within a generous bound: any order of N - 1 roundings plus the final
 * one stays inside 2 (N + 1) u times the sum of magnitudes.
 */
static int check_close(test_t *T, const case_t *c, const void *got) {
  int size = T->t.size;
  double u = unit_roundoff(c->dt);
  for (size_t i = 0; i < c->count; i++) {
    double exact = c->op == BATON_PROD ? 1 : 0, mag = 0;
    for (int r = 0; r < size; r++) {
      double v = ref_to_double(c->dt, ref_gen(c->dt, &c->gen, c->seed, r, i));
      exact = c->op == BATON_PROD ? exact * v : exact + v;
      mag += fabs(v);
    }
    if (c->op == BATON_PROD)
      mag = fabs(exact);
    if (c->op == BATON_AVG) {
      exact /= size;
      mag /= size;
    }
    double g = ref_to_double(c->dt, ref_load(got, c->dt, i));
    if (!(fabs(g - exact) <= 2 * (size + 1) * u * mag)) {
      tally_say(&T->t,
                "%s: index %zu: got %.17g, exact %.17g, off by more "
                "than %.3g",
                c->name, i, g, exact, 2 * (size + 1) * u * mag);
      return 0;
    }
  }
  return 1;
}

/* One random-float allreduce: its result hash goes in *hash. */
static int consistency_case(test_t *T, case_t *c, uint64_t *hash) {
  size_t bytes = c->count * ref_size(c->dt);
  ref_fill(T->input, c->dt, &c->gen, c->seed, T->t.rank, 0, c->count);
  memcpy(c->inplace ? T->recv : T->send, T->input, bytes);
  int rc =
      baton_allreduce(c->inplace ? T->recv : T->send, T->recv, c->count, c->dt, c->op, T->t.comm);
  *hash = ref_hash(T->recv, bytes);
  return tally_rc(&T->t, rc, c->name) && check_close(T, c, T->recv);
}

/*
 * Random non-integer floats, where rounding depends on the order of the
 * reduction: every rank must still end with the same bits. Each case's
 * result hash is gathered from all ranks and compared with rank 0's.
 */
static void consistency(test_t *T) {
  static const baton_dtype_t dts[] = {BATON_FLOAT16, BATON_BFLOAT16, BATON_FLOAT32, BATON_FLOAT64};
  static const baton_op_t ops[] = {BATON_SUM, BATON_AVG, BATON_PROD};
  size_t counts[] = {(size_t)T->t.size + 1, 1009, 65537};
  int ncounts = T->quick ? 2 : 3;
  if (T->only_count >= 0) {
    counts[0] = (size_t)T->only_count;
    ncounts = 1;
  }
  enum { MAXCASES = 4 * 3 * 3 * 2 };
  uint64_t hashes[MAXCASES], *all = calloc(MAXCASES * (size_t)T->t.size, 8);
  char names[MAXCASES][128];
  int ok[MAXCASES], n = 0;
  for (int d = 0; d < 4; d++)
    for (int o = 0; o < 3; o++)
      for (int k = 0; k < ncounts && !T->t.broken; k++) {
        if (!selected(T, dts[d], ops[o], counts[k]))
          continue;
        case_t c = {.coll = CONSISTENCY, .dt = dts[d], .op = ops[o], .count = counts[k]};
        c.gen = ops[o] == BATON_PROD ? (gen_spec_t)REAL(0.5, 2) : (gen_spec_t)REAL(-1, 1);
        c.seed = case_seed(CONSISTENCY, c.dt, c.op, c.count);
        for (c.inplace = 0; c.inplace < 2 && !T->t.broken; c.inplace++, n++) {
          case_name(&c);
          memcpy(names[n], c.name, sizeof c.name);
          ok[n] = consistency_case(T, &c, &hashes[n]);
        }
      }
  if (!T->t.broken && n > 0 &&
      tally_rc(&T->t, baton_allgather(hashes, all, n, BATON_UINT64, T->t.comm),
               "consistency: allgather of result hashes")) {
    for (int i = 0; i < n; i++)
      for (int r = 1; r < T->t.size; r++)
        if (all[(size_t)r * n + i] != all[i]) {
          tally_say(&T->t, "%s: rank %d's result differs from rank 0's", names[i], r);
          ok[i] = 0;
          break;
        }
  }
  for (int i = 0; i < n && !T->t.broken; i++)
    tally_record(&T->t, ok[i]);
  free(all);
}

/* ------------------------------------------------------------ barrier */

/* CLOCK_MONOTONIC is one clock for every process on the host (and baton's
 * ranks share a host), and unlike the wall clock it never steps back. */
static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * One rank arrives 30 ms late; nobody may leave before it arrived. The ranks
 * share the host's clock, so each compares its exit time with every rank's
 * entry time (gathered afterwards), with no timing slack needed.
 */
static int barrier_late_rank(test_t *T, int late) {
  uint64_t times[2], *all = calloc(2 * (size_t)T->t.size, 8);
  int ok = tally_rc(&T->t, baton_barrier(T->t.comm), "barrier");
  if (T->t.rank == late)
    nanosleep(&(struct timespec){0, 30 * 1000 * 1000}, NULL);
  times[0] = now_ns();
  ok = ok && tally_rc(&T->t, baton_barrier(T->t.comm), "barrier");
  times[1] = now_ns();
  ok = ok && tally_rc(&T->t, baton_allgather(times, all, 2, BATON_UINT64, T->t.comm),
                      "barrier: allgather");
  for (int r = 0; ok && r < T->t.size; r++)
    if (all[2 * r] > times[1]) {
      tally_say(&T->t,
                "barrier: left %.3f ms before rank %d entered (rank %d "
                "late)",
                (all[2 * r] - times[1]) / 1e6, r, late);
      ok = 0;
    }
  free(all);
  return ok;
}

static void barrier_checks(test_t *T) {
  for (int round = 0; round < 3 && !T->t.broken; round++)
    tally_record(&T->t, barrier_late_rank(T, round % T->t.size));
  int ok = 1;
  for (int i = 0; i < 200 && ok && !T->t.broken; i++)
    ok = tally_rc(&T->t, baton_barrier(T->t.comm), "barrier (200 in a row)");
  if (!T->t.broken)
    tally_record(&T->t, ok);
}

/* -------------------------------------------------------------- main */

__attribute__((noreturn)) static void usage(void) {
  fprintf(stderr, "usage: test_coll [--quick] [--coll NAME] [--dtype NAME] "
                  "[--op NAME] [--count N] [--registered all|some|local|mixed|local-some]\n");
  exit(2);
}

static int lookup(const char *const *names, int n, const char *s) {
  for (int i = 0; i < n; i++)
    if (strcmp(names[i], s) == 0)
      return i;
  fprintf(stderr, "test_coll: unknown name '%s'\n", s);
  usage();
}

static void parse_args(test_t *T, int argc, char **argv) {
  T->only_coll = T->only_dtype = T->only_op = -1;
  T->only_count = -1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--quick") == 0) {
      T->quick = 1;
      continue;
    }
    if (!v)
      usage();
    static const char *const modes[] = {"all", "some", "local", "mixed", "local-some"};
    int mode = 0;
    for (int m = 0; strcmp(a, "--registered") == 0 && m < 5; m++)
      if (strcmp(v, modes[m]) == 0)
        mode = m + 1;
    if (mode)
      T->registered = mode;
    else if (strcmp(a, "--coll") == 0)
      T->only_coll = lookup(coll_names, NCOLLS, v);
    else if (strcmp(a, "--dtype") == 0)
      T->only_dtype = lookup(dtype_names, BATON_DTYPE_COUNT, v);
    else if (strcmp(a, "--op") == 0)
      T->only_op = lookup(op_names, BATON_OP_COUNT, v);
    else if (strcmp(a, "--count") == 0)
      T->only_count = atoll(v);
    else
      usage();
    i++;
  }
}

/* The count sweep, sorted and without duplicates; --quick drops the two
 * largest (65537 and 262147 elements: more than one 64 KiB segment), and
 * --count replaces it with any one count. */
static void make_counts(test_t *T) {
  size_t n = (size_t)T->t.size;
  size_t all[] = {0, 1, n - 1, n, n + 1, 7, 13, 101, 1009, 65537, 262147};
  int len = T->quick ? 9 : 11;
  if (T->only_count >= 0) {
    all[0] = (size_t)T->only_count;
    len = 1;
  }
  T->ncounts = 0;
  for (int i = 0; i < len; i++) {
    int j = T->ncounts;
    while (j > 0 && T->counts[j - 1] > all[i])
      j--;
    if (j > 0 && T->counts[j - 1] == all[i])
      continue;
    memmove(&T->counts[j + 1], &T->counts[j], (size_t)(T->ncounts - j) * sizeof T->counts[0]);
    T->counts[j] = all[i];
    T->ncounts++;
  }
}

/* With --registered, send and receive buffers (shared) come from
 * baton_mem_alloc, which every rank calls; under "some" the odd ranks then
 * use malloc'd memory instead. */
/* baton_mem_alloc (local: baton_mem_alloc_local) of bytes, or exit. */
static void *alloc_or_die(test_t *T, size_t bytes, int local) {
  void *p = NULL;
  int rc = local ? baton_mem_alloc_local(bytes, &p) : baton_mem_alloc(T->t.comm, bytes, &p);
  if (rc != BATON_OK) {
    fprintf(stderr, "test_coll: %s: %s: %s\n", local ? "baton_mem_alloc_local" : "baton_mem_alloc",
            baton_err_name(rc), local ? baton_last_init_error() : baton_comm_last_error(T->t.comm));
    exit(1);
  }
  return p;
}

static unsigned char *alloc_buffer(test_t *T, size_t bytes, int guarded, int shared) {
  int even = T->t.rank % 2 == 0;
  size_t skip = guarded ? GUARD : 0;
  if (shared && T->registered == 4) { /* collective: every rank allocates, the odd ones use it */
    unsigned char *reg = alloc_or_die(T, bytes + 2 * GUARD, 0);
    if (!even)
      return reg + skip;
  }
  if (shared && (T->registered == 3 || (T->registered >= 4 && even)))
    return (unsigned char *)alloc_or_die(T, bytes + 2 * GUARD, 1) + skip;
  if (shared && T->registered && T->registered <= 2) {
    unsigned char *reg = alloc_or_die(T, bytes + 2 * GUARD, 0);
    if (T->registered == 1 || even)
      return reg + skip;
  }
  unsigned char *p = malloc(bytes + 2 * GUARD);
  if (!p) {
    fprintf(stderr, "test_coll: out of memory (%zu bytes)\n", bytes);
    exit(1);
  }
  return guarded ? p + GUARD : p;
}

/* The local blocks this process maps: its own `own` and, where direct
 * ran on local memory, the peers' it mapped. */
static void local_maps_check(test_t *T, int own) {
  int n = maps_naming("memfd:baton-local");
  /* local: every rank's peers are local; mixed: the odd ranks see the even
   * ones' (and at N >= 3 the even ones each other's); local-some: none. */
  int want_peers = T->registered == 3 || (T->registered == 4 && (T->t.rank % 2 || T->t.size > 2));
  int ok = want_peers ? n > own : n == own;
  if (!ok)
    tally_say(&T->t, "--registered %s: this rank maps %d local blocks, %d of them its own: %s",
              T->registered == 3   ? "local"
              : T->registered == 4 ? "mixed"
                                   : "local-some",
              n, own,
              want_peers ? "no peer's, so direct never ran on them" : "a peer's, on a staged call");
  tally_record(&T->t, ok);
}

int main(int argc, char **argv) {
  test_t T = {0};
  parse_args(&T, argc, argv);
  tally_init(&T.t);
  make_counts(&T);
  size_t n = (size_t)T.t.size;
  /* The v-variants' uneven counts and gaps need up to n * (n + 3) more. */
  size_t bytes = (T.counts[T.ncounts - 1] * n + n * (n + 3) + 8) * 8;
  T.vcounts = calloc(3 * n, sizeof(size_t));
  if (!T.vcounts) {
    fprintf(stderr, "test_coll: out of memory\n");
    return 1;
  }
  T.displs = T.vcounts + n;
  T.prefix = T.displs + n;
  T.send = alloc_buffer(&T, bytes + 8, 1, 1); /* + 8: room for the shifts */
  T.recv = alloc_buffer(&T, bytes + 8, 1, 1);
  T.input = alloc_buffer(&T, bytes, 0, 0);
  T.expect = alloc_buffer(&T, bytes, 0, 0);
  int even = T.t.rank % 2 == 0, local = T.registered == 3 || (T.registered >= 4 && even);
  int mine = T.registered == 1 || (T.registered == 2 && even) || T.registered == 4;
  for (int coll = 0; coll < NCOLLS && !T.t.broken; coll++) {
    if (T.only_coll >= 0 && T.only_coll != coll)
      continue;
    if (coll == BARRIER)
      barrier_checks(&T);
    else if (coll == CONSISTENCY)
      consistency(&T);
    else if (served(&T, coll))
      sweep(&T, coll);
  }
  const char *forced = getenv("BATON_ALGO"); /* the automatic choice may never pick direct */
  if (T.registered >= 3 && T.t.size > 1 && !T.t.broken &&
      (T.registered == 5 || (forced && strstr(forced, "direct"))))
    local_maps_check(&T, local ? 2 : 0);
  int status = tally_finish(&T.t); /* its baton_comm_destroy frees registered memory */
  if (local) {
    baton_mem_free_local(T.send - GUARD);
    baton_mem_free_local(T.recv - GUARD);
  } else if (!mine) {
    free(T.send - GUARD);
    free(T.recv - GUARD);
  }
  free(T.input);
  free(T.expect);
  free(T.vcounts);
  return status;
}
