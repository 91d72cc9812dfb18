/*
 * mem_test.h - what test_mem.c and test_mem_local.c share: inputs whose sum
 * over ranks is exact in float32, its check, and a count of this process's
 * mappings of baton's shared files.
 */
#ifndef BATON_TESTS_MEM_TEST_H
#define BATON_TESTS_MEM_TEST_H

#include <stdio.h>
#include <string.h>

#include "common.h"

#define N_ELEMS (300 * 1024 + 7) /* float32: larger than a mailbox and a piece */

static inline void fill(float *x, size_t n, int rank, int salt) {
  for (size_t i = 0; i < n; i++)
    x[i] = (float)((int)(i % 97) + rank * 3 + salt);
}

/* The sum over ranks of fill(), exact in float32. */
static inline float sum_at(size_t i, int size, int salt) {
  float s = 0;
  for (int r = 0; r < size; r++)
    s += (float)((int)(i % 97) + r * 3 + salt);
  return s;
}

static inline int check_sum(tally_t *t, const float *y, size_t n, int salt, const char *what) {
  for (size_t i = 0; i < n; i++)
    if (y[i] != sum_at(i, t->size, salt)) {
      tally_say(t, "%s: element %zu is %g, want %g", what, i, y[i], sum_at(i, t->size, salt));
      return tally_record(t, 0);
    }
  return tally_record(t, 1);
}

/* How many of this process's mappings (/proc/self/maps) name `needle`. */
static inline int maps_naming(const char *needle) {
  FILE *f = fopen("/proc/self/maps", "r");
  char line[512];
  int n = 0;
  while (f && fgets(line, sizeof line, f))
    n += strstr(line, needle) != NULL;
  if (f)
    fclose(f);
  return n;
}

#endif /* BATON_TESTS_MEM_TEST_H */
