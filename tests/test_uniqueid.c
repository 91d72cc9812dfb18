/*
 * test_uniqueid.c - the unique-id path: a program that starts its own
 * processes and hands them the id (here as a hex argument to exec).
 *
 *   test_uniqueid N       the first process: makes the id, starts N-1
 *                         others, joins as rank 0 and checks an allreduce
 *   test_uniqueid --with-comm
 *                         under baton-run: a process that already has a
 *                         communicator makes an id (rank 0, whose store
 *                         holds BATON_ADDR's port, then the last rank),
 *                         hands it round on that communicator, and every
 *                         rank makes a second communicator; both must work
 *
 * Checks: every rank gets the right allreduce and broadcast results; a
 * damaged id, a NULL id and a rank outside [0, size) are BATON_EINVAL with
 * a message, without touching the network.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "baton.h"

static int failures;

static void check(int ok, int rank, const char *what) {
  if (!ok) {
    fprintf(stderr, "rank %d: FAILED: %s\n", rank, what);
    failures++;
  }
}

static void to_hex(const baton_unique_id_t *id, char *hex) {
  const unsigned char *b = (const unsigned char *)id->internal;
  for (size_t i = 0; i < sizeof *id; i++)
    sprintf(hex + 2 * i, "%02x", b[i]);
}

static int from_hex(const char *hex, baton_unique_id_t *id) {
  unsigned char *b = (unsigned char *)id->internal;
  if (strlen(hex) != 2 * sizeof *id)
    return -1;
  for (size_t i = 0; i < sizeof *id; i++) {
    unsigned v;
    if (sscanf(hex + 2 * i, "%2x", &v) != 1)
      return -1;
    b[i] = (unsigned char)v;
  }
  return 0;
}

static void bad_ids(const baton_unique_id_t *good) {
  baton_comm_t *c = (baton_comm_t *)1;
  baton_unique_id_t bad = *good;
  memcpy(bad.internal, "garbage", 7);
  int rc = baton_comm_init_rank(&c, 2, &bad, 0);
  check(rc == BATON_EINVAL && c == NULL && strstr(baton_last_init_error(), "id"), 0,
        "a damaged id is not BATON_EINVAL naming the id");
  rc = baton_comm_init_rank(&c, 2, NULL, 0);
  check(rc == BATON_EINVAL && strstr(baton_last_init_error(), "NULL"), 0,
        "a NULL id is not BATON_EINVAL");
  check(baton_get_unique_id(NULL) == BATON_EINVAL, 0, "baton_get_unique_id(NULL)");
}

/* An allreduce and a broadcast on comm, with their results checked. */
static void check_comm(baton_comm_t *comm, int size, int rank) {
  double v[5], w[5];
  for (int i = 0; i < 5; i++)
    v[i] = rank * 10 + i;
  int rc = baton_allreduce(v, w, 5, BATON_FLOAT64, BATON_SUM, comm);
  for (int i = 0; i < 5; i++)
    check(rc == BATON_OK && w[i] == 10.0 * size * (size - 1) / 2 + (double)i * size, rank,
          "allreduce result");
  int b = rank == size - 1 ? 4242 : -1;
  rc = baton_broadcast(&b, &b, 1, BATON_INT32, size - 1, comm);
  check(rc == BATON_OK && b == 4242, rank, "broadcast result");
}

static int run_rank(int size, const baton_unique_id_t *id, int rank) {
  baton_comm_t *comm;
  int rc = baton_comm_init_rank(&comm, size, id, rank);
  if (rc != BATON_OK) {
    fprintf(stderr, "rank %d: baton_comm_init_rank: %s: %s\n", rank, baton_err_name(rc),
            baton_last_init_error());
    return 1;
  }
  check(baton_comm_rank(comm) == rank && baton_comm_size(comm) == size, rank, "rank/size");
  check_comm(comm, size, rank);
  check(baton_comm_destroy(comm) == BATON_OK, rank, "destroy");
  return failures != 0;
}

/* One id made by rank `maker` of world, handed round, a second
 * communicator made from it on every rank; both checked. */
static void second_comm(baton_comm_t *world, int size, int rank, int maker) {
  baton_unique_id_t id;
  memset(&id, 0, sizeof id);
  int32_t rc = rank == maker ? baton_get_unique_id(&id) : BATON_OK, worst = 0;
  if (rc != BATON_OK)
    fprintf(stderr, "rank %d: baton_get_unique_id: %s: %s\n", rank, baton_err_name(rc),
            baton_last_init_error());
  check(baton_allreduce(&rc, &worst, 1, BATON_INT32, BATON_MIN, world) == BATON_OK, rank,
        "allreduce of the outcome");
  check(worst == BATON_OK, rank, "baton_get_unique_id in a process with a communicator");
  if (worst != BATON_OK ||
      baton_broadcast(&id, &id, sizeof id, BATON_UINT8, maker, world) != BATON_OK)
    return;
  baton_comm_t *second = NULL;
  rc = baton_comm_init_rank(&second, size, &id, rank);
  if (rc != BATON_OK)
    fprintf(stderr, "rank %d: baton_comm_init_rank: %s: %s\n", rank, baton_err_name(rc),
            baton_last_init_error());
  check(rc == BATON_OK, rank, "a second communicator");
  if (rc != BATON_OK)
    return;
  check_comm(second, size, rank);
  check_comm(world, size, rank);
  check(baton_comm_destroy(second) == BATON_OK, rank, "destroy the second");
}

static int with_comm(void) {
  baton_comm_t *world;
  int rc = baton_comm_init(&world);
  if (rc != BATON_OK) {
    fprintf(stderr, "baton_comm_init: %s: %s\n", baton_err_name(rc), baton_last_init_error());
    return 1;
  }
  int rank = baton_comm_rank(world), size = baton_comm_size(world);
  second_comm(world, size, rank, 0);
  second_comm(world, size, rank, size - 1);
  int32_t f = failures, all = 0;
  check(baton_allreduce(&f, &all, 1, BATON_INT32, BATON_SUM, world) == BATON_OK, rank, "summary");
  if (rank == 0)
    printf("%d passed, %d failed\n", 2 * (4 + 12) + 1 - all, all);
  check(baton_comm_destroy(world) == BATON_OK, rank, "destroy the world");
  return failures != 0;
}

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "--with-comm") == 0)
    return with_comm();
  if (argc == 5 && strcmp(argv[1], "--child") == 0) {
    baton_unique_id_t id;
    if (from_hex(argv[4], &id) != 0)
      return 2;
    return run_rank(atoi(argv[2]), &id, atoi(argv[3]));
  }
  int size = argc > 1 ? atoi(argv[1]) : 3;
  if (size < 1 || size > 64) {
    fprintf(stderr, "usage: test_uniqueid N\n");
    return 2;
  }
  baton_unique_id_t id;
  int rc = baton_get_unique_id(&id);
  if (rc != BATON_OK) {
    fprintf(stderr, "baton_get_unique_id: %s: %s\n", baton_err_name(rc), baton_last_init_error());
    return 1;
  }
  bad_ids(&id);
  baton_comm_t *c = (baton_comm_t *)1;
  rc = baton_comm_init_rank(&c, size, &id, size);
  check(rc == BATON_EINVAL && c == NULL, 0, "rank == size is not BATON_EINVAL");
  char hex[2 * sizeof id + 1], sz[16], rk[16];
  to_hex(&id, hex);
  snprintf(sz, sizeof sz, "%d", size);
  pid_t kids[64];
  for (int r = 1; r < size; r++) {
    snprintf(rk, sizeof rk, "%d", r);
    if ((kids[r] = fork()) == 0) {
      execl("/proc/self/exe", argv[0], "--child", sz, rk, hex, (char *)NULL);
      _exit(127);
    }
  }
  int status = run_rank(size, &id, 0);
  for (int r = 1; r < size; r++) {
    int st = 0;
    waitpid(kids[r], &st, 0);
    check(WIFEXITED(st) && WEXITSTATUS(st) == 0, r, "child exited non-zero");
  }
  int total = 3 + 1 + 5 * size + 2 * size + size + size;
  printf("%d passed, %d failed\n", total - failures, failures);
  return status || failures;
}
