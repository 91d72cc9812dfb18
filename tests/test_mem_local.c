/*
 * test_mem_local.c - local memory (baton_mem_alloc_local,
 * baton_mem_free_local): run it under `baton-run -n N`, with
 * BATON_MEM_LOCAL=1 (direct on local memory) or without (staged).
 *
 *  - the arguments: 0 bytes, a NULL ptr, a pointer that is not local
 *    memory and a double free are BATON_EINVAL naming what was wrong; a
 *    free of NULL is a no-op; baton_mem_is_local says 1 for a held
 *    block's start only, and sets no error;
 *  - the pool: page-aligned blocks; a freed block comes back for the next
 *    allocation of its size class, another class gets another block;
 *  - collectives on local buffers, in and out of place, and two in flight
 *    at once, every result checked; with BATON_MEM_LOCAL=1 each rank then
 *    maps its peers' blocks (/proc/self/maps), which is how the test
 *    knows direct ran on them, and without it none;
 *  - a loop that frees and allocates again: the block comes back, so the
 *    peers map no more blocks than before;
 *  - past a quarter of the file descriptors (RLIMIT_NOFILE lowered here)
 *    an allocation fails with BATON_ENOMEM saying so, and the pool works
 *    again once blocks are freed;
 *  - a child made by fork() gets a pool of its own, the parent's held
 *    blocks are local memory to it that it may not free, and its writes
 *    into them stay its own;
 *  - the memory outlives the communicator.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "baton.h"
#include "common.h"
#include "mem_test.h"

static int expect_einval(tally_t *t, int rc, const char *want, const char *what) {
  int ok = rc == BATON_EINVAL && strstr(baton_last_init_error(), want);
  if (!ok)
    tally_say(t, "%s: %s: %s (want BATON_EINVAL naming \"%s\")", what, baton_err_name(rc),
              baton_last_init_error(), want);
  return tally_record(t, ok);
}

static void test_arguments(tally_t *t) {
  void *p = (void *)1;
  expect_einval(t, baton_mem_alloc_local(0, &p), "bytes is 0", "0 bytes");
  tally_record(t, p == NULL);
  expect_einval(t, baton_mem_alloc_local(64, NULL), "ptr is NULL", "NULL ptr");
  tally_record(t, baton_mem_free_local(NULL) == BATON_OK);
  char stack[64];
  expect_einval(t, baton_mem_free_local(stack), "not memory that", "free of a stack pointer");
  void *a = NULL;
  if (!tally_record(t, baton_mem_alloc_local(5000, &a) == BATON_OK && a))
    return;
  tally_record(t, ((uintptr_t)a % (uintptr_t)sysconf(_SC_PAGESIZE)) == 0);
  memset(a, 7, 5000);
  /* A held block's start only; and the question leaves the last error. */
  int held = baton_mem_is_local(a), inside = baton_mem_is_local((char *)a + 64);
  int others = baton_mem_is_local(stack) + baton_mem_is_local(NULL);
  if (!tally_record(t, held == 1 && inside == 0 && others == 0 &&
                           strstr(baton_last_init_error(), "not memory that")))
    tally_say(t, "baton_mem_is_local: held %d, inside %d, others %d; last error \"%s\"", held,
              inside, others, baton_last_init_error());
  tally_record(t, baton_mem_free_local(a) == BATON_OK);
  tally_record(t, baton_mem_is_local(a) == 0);
  expect_einval(t, baton_mem_free_local(a), "freed already", "double free");
}

static void test_pool(tally_t *t) {
  void *a = NULL, *b = NULL, *c = NULL;
  size_t big = 3u << 20;
  if (!tally_record(t, baton_mem_alloc_local(big, &a) == BATON_OK))
    return;
  tally_record(t, baton_mem_free_local(a) == BATON_OK);
  /* A little smaller: the same size class, so the same block. */
  tally_record(t, baton_mem_alloc_local(big - 1000, &b) == BATON_OK && b == a);
  /* Held, so another allocation of the class gets another block; and a
   * class twice as large yet another. */
  tally_record(t, baton_mem_alloc_local(big, &c) == BATON_OK && c && c != b);
  void *d = NULL;
  tally_record(t, baton_mem_alloc_local(2 * big, &d) == BATON_OK && d && d != b && d != c);
  baton_mem_free_local(b);
  baton_mem_free_local(c);
  baton_mem_free_local(d);
}

/* Allreduce in and out of place and two in flight, on local buffers. */
static void test_calls(tally_t *t, int direct) {
  size_t n = N_ELEMS, bytes = n * sizeof(float);
  float *x = NULL, *y = NULL, *z = NULL;
  int before = maps_naming("memfd:baton-local");
  if (!tally_record(t, baton_mem_alloc_local(bytes, (void **)&x) == BATON_OK &&
                           baton_mem_alloc_local(bytes, (void **)&y) == BATON_OK &&
                           baton_mem_alloc_local(bytes, (void **)&z) == BATON_OK))
    return;
  int own = maps_naming("memfd:baton-local") - before;
  fill(x, n, t->rank, 1);
  if (tally_rc(t, baton_allreduce(x, y, n, BATON_FLOAT32, BATON_SUM, t->comm), "allreduce"))
    check_sum(t, y, n, 1, "allreduce out of place on local memory");
  if (tally_rc(t, baton_allreduce(x, x, n, BATON_FLOAT32, BATON_SUM, t->comm), "allreduce"))
    check_sum(t, x, n, 1, "allreduce in place on local memory");
  fill(y, n, t->rank, 2);
  fill(z, n, t->rank, 3);
  baton_request_t *r[2] = {NULL, NULL};
  if (tally_rc(t, baton_iallreduce(y, y, n, BATON_FLOAT32, BATON_SUM, t->comm, &r[0]), "i1") &&
      tally_rc(t, baton_iallreduce(z, z, n, BATON_FLOAT32, BATON_SUM, t->comm, &r[1]), "i2") &&
      tally_rc(t, baton_wait_all(2, r), "wait_all")) {
    check_sum(t, y, n, 2, "iallreduce on local memory in flight (first)");
    check_sum(t, z, n, 3, "iallreduce on local memory in flight (second)");
  }
  int peers = maps_naming("memfd:baton-local") - before - own;
  int ok = t->size == 1 || (direct ? peers > 0 : peers == 0);
  if (!tally_record(t, ok))
    tally_say(t, "this rank maps %d of its peers' local blocks with BATON_MEM_LOCAL=%d", peers,
              direct);
  /* Freed and taken again, many times: the same blocks, so the peers map
   * nothing more. */
  int most = maps_naming("memfd:baton-local");
  for (int k = 0; k < 12 && !t->broken; k++) {
    baton_mem_free_local(x);
    x = NULL;
    if (!tally_record(t, baton_mem_alloc_local(bytes, (void **)&x) == BATON_OK))
      break;
    fill(x, n, t->rank, k);
    if (tally_rc(t, baton_allreduce(x, x, n, BATON_FLOAT32, BATON_SUM, t->comm), "loop"))
      check_sum(t, x, n, k, "allreduce on local memory freed and taken again");
  }
  if (!tally_record(t, maps_naming("memfd:baton-local") == most))
    tally_say(t, "the loop took the local mappings from %d to %d", most,
              maps_naming("memfd:baton-local"));
  baton_mem_free_local(x);
  baton_mem_free_local(y);
  baton_mem_free_local(z);
}

/* The pool stops at a quarter of the file descriptors, and says so. */
static void test_fd_budget(tally_t *t) {
  struct rlimit old, low;
  if (getrlimit(RLIMIT_NOFILE, &old) != 0)
    return;
  low = old;
  low.rlim_cur = 128; /* a budget of 32 blocks */
  if (setrlimit(RLIMIT_NOFILE, &low) != 0)
    return;
  void *p[64] = {NULL};
  int got = 0, rc = BATON_OK;
  for (; got < 64; got++) /* each a class of its own: no block comes back */
    if ((rc = baton_mem_alloc_local((size_t)(got + 1) * 65536, &p[got])) != BATON_OK)
      break;
  int ok = rc == BATON_ENOMEM && got < 33 && strstr(baton_last_init_error(), "file descriptors");
  if (!tally_record(t, ok))
    tally_say(t, "%d blocks under a limit of 128 descriptors, then %s: %s", got, baton_err_name(rc),
              baton_last_init_error());
  for (int i = 0; i < got; i++)
    baton_mem_free_local(p[i]);
  setrlimit(RLIMIT_NOFILE, &old);
  void *q = NULL;
  tally_record(t, baton_mem_alloc_local(65536, &q) == BATON_OK);
  baton_mem_free_local(q);
}

/* A child made by fork() starts with a pool of its own: a block the
 * parent had freed is not handed to it, nor may it free the parent's
 * (which still count as local memory); and what it writes into the
 * parent's blocks stays its own. */
static void test_fork(tally_t *t) {
  unsigned char *held = NULL;
  void *freed = NULL;
  if (!tally_record(t, baton_mem_alloc_local(1 << 20, (void **)&held) == BATON_OK &&
                           baton_mem_alloc_local(2 << 20, &freed) == BATON_OK))
    return;
  baton_mem_free_local(freed); /* in the parent's pool, for its next 2 MiB */
  memset(held, 5, 1 << 20);
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    void *mine = NULL;
    int bad = held[4096] != 5; /* the child sees the parent's data */
    memset(held, 9, 1 << 20);  /* and writes its own copy of it */
    bad |= baton_mem_alloc_local(2 << 20, &mine) != BATON_OK || mine == freed;
    /* Still local memory to it, so an allocator never hands it to free(),
     * but not the child's to free. */
    bad |= !baton_mem_is_local(held) || baton_mem_free_local(held) != BATON_EINVAL;
    bad |= baton_mem_is_local(freed); /* the parent's free block: nobody's here */
    if (mine)
      memset(mine, 1, 2 << 20);
    bad |= baton_mem_free_local(mine) != BATON_OK;
    _exit(bad ? 3 : 0);
  }
  int status = -1;
  int ok =
      pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  if (!tally_record(t, ok))
    tally_say(t,
              "a forked child's pool: status %d (3: it got the parent's freed block, freed "
              "the parent's or misjudged which are local)",
              status);
  int mine = 1;
  for (size_t i = 0; i < (1 << 20); i += 4093)
    mine &= held[i] == 5;
  if (!tally_record(t, mine))
    tally_say(t, "a forked child's writes into a local block reached the parent");
  void *again = NULL;
  tally_record(t, baton_mem_alloc_local(2 << 20, &again) == BATON_OK && again == freed);
  baton_mem_free_local(again);
  baton_mem_free_local(held);
}

int main(void) {
  tally_t t;
  tally_init(&t);
  const char *env = getenv("BATON_MEM_LOCAL");
  int direct = env && strcmp(env, "1") == 0;
  test_arguments(&t);
  test_pool(&t);
  if (!t.broken)
    test_calls(&t, direct);
  test_fd_budget(&t);
  test_fork(&t);
  /* Local memory is the process's: it outlives the communicator. */
  float *keep = NULL;
  int have = baton_mem_alloc_local(4096, (void **)&keep) == BATON_OK;
  int status = tally_finish(&t);
  if (have) {
    keep[1023] = 1.5f;
    if (keep[1023] != 1.5f || baton_mem_free_local(keep) != BATON_OK) {
      fprintf(stderr, "rank %d: local memory after the communicator's end\n", t.rank);
      status = 1;
    }
  }
  return status;
}
