/*
 * split_overlap.c - two groups of ranks, each with its own communicator,
 * written only against baton.h.
 *
 *   baton-run -n 4 build/examples/split_overlap
 *
 * A 4-rank job splits into 2 x 2 groups: ranks {0, 1} and {2, 3}, as a
 * tensor-parallel group would be (color = rank / 2), and the two
 * "data-parallel" groups across them, {0, 2} and {1, 3} (color =
 * rank % 2). Each group runs allreduces of its own, and every rank checks
 * its results against what the group's ranks contributed. Any even number
 * of ranks works: the groups are pairs. Exits 0 when every result is right.
 *
 * Each allreduce is a baton_iallreduce that moves while the rank computes
 * (a fixed arithmetic loop on a buffer of its own), then baton_wait.
 */
#include <stdio.h>
#include <stdlib.h>

#include "baton.h"

#define COUNT (1 << 16)
#define ITERS 5

static int die(const char *what, int rc, baton_comm_t *comm) {
  fprintf(stderr, "%s: %s: %s\n", what, baton_err_name(rc),
          comm ? baton_comm_last_error(comm) : baton_last_init_error());
  exit(1);
}

/* The computation the allreduce overlaps with. */
static volatile double sink;
static void compute(void) {
  static double w[4096];
  double acc = 0;
  for (int r = 0; r < 200; r++)
    for (int i = 0; i < 4096; i++)
      acc += w[i] = w[i] * 0.5 + 1.0;
  sink = acc;
}

/* Each rank contributes rank + iteration + i / COUNT (exact in float32);
 * the sum over a group is the sum over its members' ranks. */
static int run_group(baton_comm_t *group, int world_rank, int member_sum, int members,
                     const char *name) {
  float *x = malloc(COUNT * sizeof *x);
  int bad = 0;
  for (int it = 0; it < ITERS && !bad; it++) {
    for (int i = 0; i < COUNT; i++)
      x[i] = (float)(world_rank + it) + (float)(i % 64) / 64.0f;
    baton_request_t *req;
    int rc = baton_iallreduce(x, x, COUNT, BATON_FLOAT32, BATON_SUM, group, &req);
    if (rc != BATON_OK)
      die("baton_iallreduce", rc, group);
    compute();
    if ((rc = baton_wait(req)) != BATON_OK)
      die("baton_wait", rc, group);
    for (int i = 0; i < COUNT; i++) {
      float want = (float)(member_sum + members * it) + (float)members * (float)(i % 64) / 64.0f;
      if (x[i] != want) {
        fprintf(stderr, "rank %d, %s group: [%d] is %g, want %g\n", world_rank, name, i,
                (double)x[i], (double)want);
        bad = 1;
        break;
      }
    }
  }
  free(x);
  return bad;
}

int main(void) {
  baton_comm_t *world, *tp, *dp;
  int rc = baton_comm_init(&world);
  if (rc != BATON_OK)
    die("baton_comm_init", rc, NULL);
  int rank = baton_comm_rank(world), size = baton_comm_size(world);
  if (size % 2) {
    fprintf(stderr, "split_overlap: run it on an even number of ranks (baton-run -n 4)\n");
    baton_comm_destroy(world);
    return 2;
  }
  if ((rc = baton_comm_split(world, rank / 2, rank, &tp)) != BATON_OK)
    die("baton_comm_split (pairs)", rc, world);
  if ((rc = baton_comm_split(world, rank % 2, rank, &dp)) != BATON_OK)
    die("baton_comm_split (across)", rc, world);
  /* The pair {2p, 2p+1}; across: every rank of this parity. */
  int pair_sum = 2 * (rank / 2) * 2 + 1, across_sum = 0;
  for (int r = rank % 2; r < size; r += 2)
    across_sum += r;
  int bad = run_group(tp, rank, pair_sum, 2, "pair");
  bad |= run_group(dp, rank, across_sum, size / 2, "across");
  int total = 0;
  if ((rc = baton_allreduce(&bad, &total, 1, BATON_INT32, BATON_SUM, world)) != BATON_OK)
    die("baton_allreduce", rc, world);
  if (rank == 0)
    printf("split_overlap: %d ranks, groups of 2 and of %d: %s\n", size, size / 2,
           total ? "WRONG RESULTS" : "all results correct");
  baton_comm_destroy(tp);
  baton_comm_destroy(dp);
  baton_comm_destroy(world);
  return total != 0;
}
