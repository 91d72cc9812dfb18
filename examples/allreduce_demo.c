/*
 * allreduce_demo.c - the smallest useful baton program.
 *
 *   build/bin/baton-run -n 4 build/examples/allreduce_demo [MiB]
 *
 * Every rank fills a buffer with its rank number plus one, the ranks sum it
 * with baton_allreduce, and rank 0 checks the result and prints the time
 * and bandwidth of the collective.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <baton.h>

static double seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 64;
  size_t count = mib * 1024 * 1024 / sizeof(float);
  baton_comm_t *comm;
  int rc = baton_comm_init(&comm);
  if (rc != BATON_OK) {
    fprintf(stderr, "baton_comm_init: %s: %s\n", baton_strerror(rc), baton_last_init_error());
    return 1;
  }
  int rank = baton_comm_rank(comm), size = baton_comm_size(comm);
  float *buf = malloc(count * sizeof(float));
  if (!buf) {
    fprintf(stderr, "out of memory\n");
    return 1;
  }
  for (size_t i = 0; i < count; i++) /* also faults the pages in, before timing */
    buf[i] = (float)(rank + 1);
  baton_allreduce(buf, buf, count, BATON_FLOAT32, BATON_SUM, comm); /* warm-up */
  for (size_t i = 0; i < count; i++)
    buf[i] = (float)(rank + 1);

  const int iters = 5;
  double best = 1e30;
  for (int it = 0; it < iters && rc == BATON_OK; it++) {
    baton_barrier(comm);
    double t0 = seconds();
    rc = baton_allreduce(buf, buf, count, BATON_FLOAT32, BATON_SUM, comm);
    double t = seconds() - t0;
    best = t < best ? t : best;
    if (it == 0) { /* check once, then keep summing the same input */
      float want = (float)size * (float)(size + 1) / 2;
      for (size_t i = 0; i < count && rc == BATON_OK; i++)
        if (buf[i] != want) {
          fprintf(stderr, "rank %d: element %zu is %g, expected %g\n", rank, i, buf[i], want);
          rc = -100;
        }
      for (size_t i = 0; i < count; i++)
        buf[i] = (float)(rank + 1);
    } else {
      for (size_t i = 0; i < count; i++)
        buf[i] = (float)(rank + 1);
    }
  }
  if (rc != BATON_OK && rc != -100)
    fprintf(stderr, "rank %d: %s: %s\n", rank, baton_strerror(rc), baton_comm_last_error(comm));
  if (rank == 0 && rc == BATON_OK) {
    double algbw = (double)count * sizeof(float) / best / 1e9;
    printf("allreduce of %zu MiB float32 over %d ranks: every element = %g (correct)\n", mib, size,
           (double)size * (size + 1) / 2);
    printf("best of %d: %.2f ms, algbw %.2f GB/s, busbw %.2f GB/s\n", iters, best * 1e3, algbw,
           algbw * 2 * (size - 1) / size);
  }
  baton_comm_destroy(comm);
  free(buf);
  return rc == BATON_OK ? 0 : 1;
}
