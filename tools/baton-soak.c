/*
 * baton-soak - random collectives for a given time, each checked bitwise
 * against the naive reference of tests/ref.h.
 *
 *   baton-run -n N baton-soak [--seconds S] [--seed X] [--max-count C]
 *
 * Every rank draws the same sequence of cases from the shared seed (rank
 * 0's, or X): collective, dtype, op, count, in place or not, a root (for
 * broadcast) and an algorithm, which no collective takes yet and which is
 * drawn so that the sequence stays the same once one does. Inputs come from exact_spec(),
 * for which every order of reduction gives the same bits, so a result that
 * differs from the reference in any bit is a mismatch. Every 32 cases the
 * ranks agree (one small allreduce) whether the time is up. At the end rank
 * 0 prints per collective the calls, the elements per rank they moved, and
 * the mismatches and errors summed over the ranks (a wrong result on two
 * ranks counts twice); the exit status is 1 when anything mismatched or
 * failed.
 */
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../tests/ref.h"
#include "baton.h"

enum { ALLREDUCE, REDUCE_SCATTER, ALLGATHER, BROADCAST, BARRIER, NCOLLS };
static const char *const coll_names[NCOLLS] = {"allreduce", "reduce_scatter", "allgather",
                                               "broadcast", "barrier"};
enum { NALGOS = 1 }; /* "default"; the draw is there for BATON_ALGO */

typedef struct {
  int coll, inplace, root, algo;
  baton_dtype_t dt;
  baton_op_t op;
  size_t count; /* per rank, as the call takes it */
  uint64_t seed;
} case_t;

typedef struct {
  int64_t calls[NCOLLS], elements[NCOLLS], mismatches[NCOLLS], errors[NCOLLS];
} tally_t;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The next case of the shared sequence: mostly small counts, where the
 * flat algorithm and the edges live, sometimes up to max_count. */
static case_t draw(uint64_t *state, int size, size_t max_count) {
  case_t c;
  uint64_t r[8];
  for (int i = 0; i < 8; i++)
    r[i] = ref_mix64((*state)++);
  c.coll = (int)(r[0] % NCOLLS);
  c.dt = (baton_dtype_t)(r[1] % BATON_DTYPE_COUNT);
  c.op = (baton_op_t)(r[2] % BATON_OP_COUNT);
  if (!ref_valid(c.dt, c.op)) /* a float with a bitwise op, bool's average: one that applies */
    c.op = (baton_op_t)(r[2] / BATON_OP_COUNT % BATON_AVG);
  size_t cap = r[3] % 4 == 0 ? max_count : max_count < 1024 ? max_count : 1024;
  c.count = (size_t)(r[4] % (cap + 1));
  c.inplace = (int)(r[5] & 1);
  c.root = (int)(r[6] % (uint64_t)size);
  c.algo = (int)((r[6] >> 32) % NALGOS);
  c.seed = r[7];
  return c;
}

/* Runs one case on this rank; the number of wrong elements, or -1 when the
 * call failed. */
static long run_case(const case_t *c, baton_comm_t *comm, unsigned char *send, unsigned char *recv,
                     unsigned char *expect) {
  int rank = baton_comm_rank(comm), size = baton_comm_size(comm), rc = BATON_OK;
  size_t es = ref_size(c->dt), n = c->count, total = n * (size_t)size;
  gen_spec_t g = exact_spec(c->dt, c->op), bits = {GEN_BITS, 0, 0, 0};
  memset(recv, 0xcd, total * es); /* nothing left from the case before */
  switch (c->coll) {
  case ALLREDUCE:
    ref_fill(send, c->dt, &g, c->seed, rank, 0, n);
    ref_reduce(expect, c->dt, c->op, &g, c->seed, size, 0, n);
    rc = baton_allreduce(send, c->inplace ? send : recv, n, c->dt, c->op, comm);
    return rc ? -1 : (long)(memcmp(c->inplace ? send : recv, expect, n * es) != 0);
  case REDUCE_SCATTER:
    ref_fill(send, c->dt, &g, c->seed, rank, 0, total);
    ref_reduce(expect, c->dt, c->op, &g, c->seed, size, (size_t)rank * n, n);
    unsigned char *out = c->inplace ? send + (size_t)rank * n * es : recv;
    rc = baton_reduce_scatter(send, out, n, c->dt, c->op, comm);
    return rc ? -1 : (long)(memcmp(out, expect, n * es) != 0);
  case ALLGATHER:
    for (int r = 0; r < size; r++)
      ref_fill(expect + (size_t)r * n * es, c->dt, &g, c->seed, r, 0, n);
    unsigned char *in = c->inplace ? recv + (size_t)rank * n * es : send;
    ref_fill(in, c->dt, &g, c->seed, rank, 0, n);
    rc = baton_allgather(in, recv, n, c->dt, comm);
    return rc ? -1 : (long)(memcmp(recv, expect, total * es) != 0);
  case BROADCAST: /* in place: the root's send is its recv, the others pass NULL */
    ref_fill(expect, c->dt, &bits, c->seed, c->root, 0, n);
    if (rank == c->root)
      ref_fill(c->inplace ? recv : send, c->dt, &bits, c->seed, c->root, 0, n);
    const void *src = c->inplace ? (rank == c->root ? recv : NULL) : send;
    rc = baton_broadcast(src, recv, n, c->dt, c->root, comm);
    return rc ? -1 : (long)(memcmp(recv, expect, n * es) != 0);
  default:
    return baton_barrier(comm) ? -1 : 0;
  }
}

static void usage(FILE *f) {
  fprintf(f, "usage: baton-run -n N baton-soak [--seconds S] [--seed X] [--max-count C]\n"
             "  --seconds S     how long to run (default 10)\n"
             "  --seed X        the shared seed (default: rank 0's clock)\n"
             "  --max-count C   largest per-rank count drawn (default 65536)\n");
}

static void parse(int argc, char **argv, double *seconds, uint64_t *seed, size_t *max_count) {
  static const struct option longs[] = {{"seconds", required_argument, NULL, 's'},
                                        {"seed", required_argument, NULL, 'x'},
                                        {"max-count", required_argument, NULL, 'c'},
                                        {"help", no_argument, NULL, 'h'},
                                        {NULL, 0, NULL, 0}};
  char *end;
  for (int o; (o = getopt_long(argc, argv, "h", longs, NULL)) != -1;) {
    if (o == 's' && (*seconds = strtod(optarg, &end), *end == '\0' && *seconds >= 0))
      continue;
    if (o == 'x' && (*seed = strtoull(optarg, &end, 0), *end == '\0'))
      continue;
    if (o == 'c' && (*max_count = strtoull(optarg, &end, 0),
                     *end == '\0' && *max_count > 0 && *max_count <= (1u << 24)))
      continue;
    usage(o == 'h' ? stdout : stderr);
    exit(o == 'h' ? 0 : 2);
  }
}

static void report(const tally_t *t, int size, double seconds, uint64_t seed) {
  int64_t calls = 0, bad = 0;
  printf("baton-soak: %d ranks, %.1f s, seed 0x%016llx\n", size, seconds, (unsigned long long)seed);
  printf("%-16s %10s %14s %11s %7s\n", "collective", "calls", "elements", "mismatches", "errors");
  for (int c = 0; c < NCOLLS; c++) {
    printf("%-16s %10lld %14lld %11lld %7lld\n", coll_names[c], (long long)t->calls[c] / size,
           (long long)t->elements[c] / size, (long long)t->mismatches[c], (long long)t->errors[c]);
    calls += t->calls[c] / size;
    bad += t->mismatches[c] + t->errors[c];
  }
  printf("%lld calls, %lld mismatches or errors\n", (long long)calls, (long long)bad);
}

int main(int argc, char **argv) {
  double seconds = 10;
  uint64_t seed = 0;
  size_t max_count = 65536;
  baton_comm_t *comm;
  parse(argc, argv, &seconds, &seed, &max_count);
  if (baton_comm_init(&comm) != BATON_OK) {
    fprintf(stderr, "baton-soak: %s\n", baton_last_init_error());
    return 1;
  }
  int rank = baton_comm_rank(comm), size = baton_comm_size(comm);
  uint64_t shared = seed ? seed : rank == 0 ? (uint64_t)time(NULL) ^ (uint64_t)clock() : 0;
  if (!seed && baton_allreduce(&shared, &shared, 1, BATON_UINT64, BATON_MAX, comm)) {
    fprintf(stderr, "baton-soak: %s\n", baton_comm_last_error(comm));
    return 1;
  }
  size_t bytes = max_count * (size_t)size * 8;
  unsigned char *send = malloc(bytes), *recv = malloc(bytes), *expect = malloc(bytes);
  tally_t t = {0};
  double t0 = now();
  int failed = !send || !recv || !expect;
  for (uint64_t state = shared, i = 1; !failed; i++) {
    case_t c = draw(&state, size, max_count);
    long wrong = run_case(&c, comm, send, recv, expect);
    t.calls[c.coll]++;
    t.elements[c.coll] += c.coll == BARRIER ? 0 : (int64_t)c.count;
    if (wrong < 0) {
      fprintf(stderr, "rank %d: %s %s %s count %zu: %s\n", rank, coll_names[c.coll],
              baton_dtype_name(c.dt), baton_op_name(c.op), c.count, baton_comm_last_error(comm));
      t.errors[c.coll]++;
      failed = 1; /* the communicator may be broken: stop talking */
    } else if (wrong > 0) {
      fprintf(stderr, "rank %d: mismatch: %s %s %s count %zu %s seed 0x%llx\n", rank,
              coll_names[c.coll], baton_dtype_name(c.dt), baton_op_name(c.op), c.count,
              c.inplace ? "in place" : "out of place", (unsigned long long)c.seed);
      t.mismatches[c.coll]++;
    }
    if (i % 32 == 0) { /* agree whether the time is up */
      int64_t up = now() - t0 >= seconds;
      failed |= baton_allreduce(&up, &up, 1, BATON_INT64, BATON_MAX, comm) != BATON_OK;
      if (up)
        break;
    }
  }
  int sum_ok = !failed && baton_allreduce(&t, &t, sizeof t / sizeof(int64_t), BATON_INT64,
                                          BATON_SUM, comm) == BATON_OK;
  if (sum_ok && rank == 0)
    report(&t, size, now() - t0, shared);
  int64_t bad = 0;
  for (int c = 0; c < NCOLLS; c++)
    bad += t.mismatches[c] + t.errors[c];
  free(send), free(recv), free(expect);
  if (sum_ok)
    baton_comm_destroy(comm);
  return failed || bad ? 1 : 0;
}
