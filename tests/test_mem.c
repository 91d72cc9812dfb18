/*
 * test_mem.c - registered memory (baton_mem_alloc, baton_mem_free) and the
 * direct algorithm around the collective sweep of test_coll --registered:
 * run it under `baton-run -n N`.
 *
 *  - the arguments: 0 bytes, a pointer that is not registered, a double
 *    free are BATON_EINVAL naming what was wrong; NULL frees nothing; an
 *    allocation or a free with a request in flight is BATON_EUSAGE;
 *  - the memory: page-aligned, zeroed, private to the rank that writes it
 *    (each rank's allocation is its own);
 *  - calls in flight: direct calls on registered buffers interleaved with
 *    staged ones on malloc'd memory, issued together and waited for
 *    together, each result checked;
 *  - some ranks registered: rank 0's buffers registered, the others'
 *    not, every collective still right (the direct call hands itself to
 *    the staged path);
 *  - allocation and free in a loop: the results stay right, and the
 *    peers' mappings of freed memory are released (this process maps a
 *    bounded number of baton-mem files, read from /proc/self/maps);
 *  - one rank asks for more than the system gives: every rank fails with
 *    BATON_ENOMEM naming that rank, and the communicator still works.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "baton.h"
#include "common.h"
#include "mem_test.h"

static void test_arguments(tally_t *t) {
  void *p = (void *)1;
  int rc = baton_mem_alloc(t->comm, 0, &p);
  tally_record(t, rc == BATON_EINVAL && p == NULL &&
                      strstr(baton_comm_last_error(t->comm), "bytes is 0"));
  tally_record(t, baton_mem_alloc(NULL, 64, &p) == BATON_EINVAL);
  tally_record(t, baton_mem_free(t->comm, NULL) == BATON_OK);
  char local[64];
  rc = baton_mem_free(t->comm, local);
  if (!tally_record(t, rc == BATON_EINVAL &&
                           strstr(baton_comm_last_error(t->comm), "not memory that")))
    tally_say(t, "free of a stack pointer: %s: %s", baton_err_name(rc),
              baton_comm_last_error(t->comm));
  void *a = NULL;
  if (!tally_rc(t, baton_mem_alloc(t->comm, 5000, &a), "baton_mem_alloc 5000"))
    return;
  int zero = 1;
  for (int i = 0; i < 5000; i++)
    zero &= ((unsigned char *)a)[i] == 0;
  tally_record(t, zero && ((uintptr_t)a % (uintptr_t)sysconf(_SC_PAGESIZE)) == 0);
  memset(a, t->rank + 1, 5000); /* each rank's own: the others' stay theirs */
  tally_rc(t, baton_barrier(t->comm), "barrier");
  tally_record(t, ((unsigned char *)a)[4999] == t->rank + 1);
  /* With a request in flight: neither an allocation nor a free. */
  baton_request_t *req = NULL;
  int64_t v = 1;
  if (tally_rc(t, baton_iallreduce(&v, &v, 1, BATON_INT64, BATON_SUM, t->comm, &req),
               "iallreduce")) {
    void *b = NULL;
    rc = baton_mem_alloc(t->comm, 64, &b);
    tally_record(t, rc == BATON_EUSAGE && b == NULL);
    rc = baton_mem_free(t->comm, a);
    tally_record(t, rc == BATON_EUSAGE);
    tally_rc(t, baton_wait(req), "wait");
    tally_record(t, v == t->size);
  }
  tally_rc(t, baton_mem_free(t->comm, a), "baton_mem_free");
  rc = baton_mem_free(t->comm, a);
  tally_record(t, rc == BATON_EINVAL);
}

/* Direct and staged calls in flight together. */
static void test_in_flight(tally_t *t) {
  size_t n = N_ELEMS, bytes = n * sizeof(float);
  float *rx = NULL, *ry = NULL, *g = NULL;
  float *mx = malloc(bytes), *my = malloc(bytes);
  if (!mx || !my || !tally_rc(t, baton_mem_alloc(t->comm, bytes, (void **)&rx), "alloc") ||
      !tally_rc(t, baton_mem_alloc(t->comm, bytes, (void **)&ry), "alloc") ||
      !tally_rc(t, baton_mem_alloc(t->comm, bytes * (size_t)t->size, (void **)&g), "alloc")) {
    free(mx), free(my);
    return;
  }
  for (int round = 0; round < 3 && !t->broken; round++) {
    fill(rx, n, t->rank, round);
    fill(mx, n, t->rank, round + 10);
    baton_request_t *req[4] = {0};
    int ok = tally_rc(t, baton_iallreduce(rx, ry, n, BATON_FLOAT32, BATON_SUM, t->comm, &req[0]),
                      "iallreduce registered") &&
             tally_rc(t, baton_iallreduce(mx, my, n, BATON_FLOAT32, BATON_SUM, t->comm, &req[1]),
                      "iallreduce malloc'd") &&
             tally_rc(t, baton_iallgather(rx, g, n, BATON_FLOAT32, t->comm, &req[2]),
                      "iallgather registered") &&
             tally_rc(t, baton_iallreduce(mx, mx, n, BATON_FLOAT32, BATON_SUM, t->comm, &req[3]),
                      "iallreduce malloc'd in place");
    if (!tally_rc(t, baton_wait_all(4, req), "wait_all") || !ok)
      return;
    check_sum(t, ry, n, round, "registered allreduce in flight");
    check_sum(t, my, n, round + 10, "staged allreduce in flight");
    check_sum(t, mx, n, round + 10, "staged in-place allreduce in flight");
    int good = 1;
    for (int r = 0; r < t->size && good; r++)
      for (size_t i = 0; i < n && good; i++)
        good = g[(size_t)r * n + i] == (float)((int)(i % 97) + r * 3 + round);
    tally_record(t, good);
  }
  tally_rc(t, baton_mem_free(t->comm, rx), "free");
  tally_rc(t, baton_mem_free(t->comm, ry), "free");
  tally_rc(t, baton_mem_free(t->comm, g), "free");
  free(mx), free(my);
}

/* Rank 0 registered, the others not: every rank takes the staged path. */
static void test_some(tally_t *t) {
  size_t n = N_ELEMS, bytes = n * sizeof(float);
  void *reg = NULL;
  if (!tally_rc(t, baton_mem_alloc(t->comm, 2 * bytes, &reg), "alloc"))
    return;
  float *mem = t->rank == 0 ? reg : malloc(2 * bytes);
  if (!mem)
    return;
  float *x = mem, *y = mem + n;
  fill(x, n, t->rank, 5);
  if (tally_rc(t, baton_allreduce(x, y, n, BATON_FLOAT32, BATON_SUM, t->comm), "allreduce some"))
    check_sum(t, y, n, 5, "allreduce with some ranks registered");
  if (tally_rc(t, baton_allreduce(x, x, n, BATON_FLOAT32, BATON_SUM, t->comm), "allreduce some"))
    check_sum(t, x, n, 5, "in-place allreduce with some ranks registered");
  /* In flight: a call that hands itself to the staged path between two
   * staged ones on the same connections, all issued before any runs. */
  float *m = malloc(3 * bytes);
  if (m) {
    fill(x, n, t->rank, 6);
    fill(m, n, t->rank, 7);
    fill(m + 2 * n, n, t->rank, 8);
    baton_request_t *req[3] = {0};
    int ok = tally_rc(t, baton_iallreduce(m, m + n, n, BATON_FLOAT32, BATON_SUM, t->comm, &req[0]),
                      "iallreduce staged") &&
             tally_rc(t, baton_iallreduce(x, y, n, BATON_FLOAT32, BATON_SUM, t->comm, &req[1]),
                      "iallreduce some registered") &&
             tally_rc(t,
                      baton_iallreduce(m + 2 * n, m + 2 * n, n, BATON_FLOAT32, BATON_SUM, t->comm,
                                       &req[2]),
                      "iallreduce staged in place");
    if (tally_rc(t, baton_wait_all(3, req), "wait_all") && ok) {
      check_sum(t, m + n, n, 7, "staged allreduce before a restaged one");
      check_sum(t, y, n, 6, "restaged allreduce in flight");
      check_sum(t, m + 2 * n, n, 8, "staged allreduce after a restaged one");
    }
    free(m);
  }
  if (t->rank != 0)
    free(mem);
  tally_rc(t, baton_mem_free(t->comm, reg), "free");
}

static void test_cycles(tally_t *t) {
  size_t n = 70000, bytes = n * sizeof(float);
  int most = 0;
  for (int k = 0; k < 12 && !t->broken; k++) {
    float *x = NULL;
    if (!tally_rc(t, baton_mem_alloc(t->comm, bytes, (void **)&x), "alloc in a loop"))
      return;
    fill(x, n, t->rank, k);
    if (tally_rc(t, baton_allreduce(x, x, n, BATON_FLOAT32, BATON_SUM, t->comm), "allreduce"))
      check_sum(t, x, n, k, "allreduce on memory allocated in a loop");
    tally_rc(t, baton_mem_free(t->comm, x), "free in a loop");
    int m = maps_naming("/baton-mem-");
    most = m > most ? m : most;
  }
  /* One allocation's files at a time, and those freed since the last. */
  int bound = t->size > 1 ? 2 * (t->size - 1) : 0;
  if (!tally_record(t, most <= bound))
    tally_say(t, "up to %d baton-mem files mapped in the loop, want at most %d", most, bound);
}

static void test_enomem(tally_t *t) {
  void *p = NULL;
  size_t bytes = t->rank == t->size - 1 ? (size_t)1 << 50 : 4096;
  int rc = baton_mem_alloc(t->comm, bytes, &p);
  char want[32];
  snprintf(want, sizeof want, "rank %d", t->size - 1);
  int ok = rc == BATON_ENOMEM && p == NULL && strstr(baton_comm_last_error(t->comm), want);
  if (t->size == 1)
    ok = rc == BATON_ENOMEM && p == NULL;
  if (!tally_record(t, ok))
    tally_say(t, "a petabyte on rank %d: %s: %s", t->size - 1, baton_err_name(rc),
              baton_comm_last_error(t->comm));
  int64_t v = 1;
  if (tally_rc(t, baton_allreduce(&v, &v, 1, BATON_INT64, BATON_SUM, t->comm), "after ENOMEM"))
    tally_record(t, v == t->size);
}

int main(void) {
  tally_t t;
  tally_init(&t);
  test_arguments(&t);
  if (!t.broken)
    test_in_flight(&t);
  if (!t.broken)
    test_some(&t);
  if (!t.broken)
    test_cycles(&t);
  if (!t.broken)
    test_enomem(&t);
  return tally_finish(&t);
}
