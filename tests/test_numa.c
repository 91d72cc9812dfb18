/*
 * test_numa.c - NUMA nodes inside a host (src/numa.c) and the ring that
 * visits each node's ranks together (bootstrap.c).
 *
 *   test_numa                         the unit part: BATON_NUMA's lists,
 *                                     good and bad, and the node of this
 *                                     process from a made-up sysfs
 *   baton-run -n N test_numa --ring   every rank: the ring visits each node
 *                                     of each host in one stretch, a split
 *                                     child's too, and an allreduce over
 *                                     that ring is right; with BATON_NUMA
 *                                     set, the nodes are the list's
 */
#include <sched.h>
#include <sys/stat.h>

#include "comm.h"
#include "common.h"
#include "unit.h"

/* ---- The unit part. */

static void parse_ok(const char *spec, int size, const int *want) {
  int node[16];
  char err[BATON__ERRLEN] = "";
  int rc = baton__numa_parse(spec, size, node, err, sizeof err);
  EXPECT_RC(rc, BATON_OK, err);
  for (int r = 0; rc == 0 && r < size; r++)
    EXPECT(node[r] == want[r], "BATON_NUMA=%s: rank %d on node %d, want %d", spec, r, node[r],
           want[r]);
}

static void parse_bad(const char *spec, int size, const char *says) {
  int node[16];
  char err[BATON__ERRLEN] = "";
  int rc = baton__numa_parse(spec, size, node, err, sizeof err);
  EXPECT_RC(rc, BATON_EUSAGE, err);
  EXPECT(strstr(err, says) != NULL, "BATON_NUMA=%s: the error \"%s\" does not say \"%s\"", spec,
         err, says);
}

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  EXPECT(f != NULL, "cannot write %s", path);
  if (f) {
    fputs(text, f);
    fclose(f);
  }
}

/* A sysfs directory of nodes with the given cpulists; the node of this
 * process, pinned to CPU 0 or not pinned, must be `want`. */
static void node_of(const char *const *lists, int n, int pinned, int want) {
  char dir[] = "/tmp/baton-numa-XXXXXX", path[512];
  EXPECT(mkdtemp(dir) != NULL, "mkdtemp");
  for (int i = 0; i < n; i++) {
    snprintf(path, sizeof path, "%s/node%d", dir, i);
    mkdir(path, 0700);
    snprintf(path, sizeof path, "%s/node%d/cpulist", dir, i);
    write_file(path, lists[i]);
  }
  cpu_set_t old, one;
  sched_getaffinity(0, sizeof old, &old);
  CPU_ZERO(&one);
  CPU_SET(0, &one);
  if (pinned)
    sched_setaffinity(0, sizeof one, &one);
  int got = baton__numa_node_of_self(dir);
  sched_setaffinity(0, sizeof old, &old);
  EXPECT(got == want, "node %d, want %d (%d nodes, %s)", got, want, n,
         pinned ? "pinned to CPU 0" : "not pinned");
  for (int i = 0; i < n; i++) {
    snprintf(path, sizeof path, "%s/node%d/cpulist", dir, i);
    unlink(path);
    snprintf(path, sizeof path, "%s/node%d", dir, i);
    rmdir(path);
  }
  rmdir(dir);
}

static int unit(void) {
  parse_ok("0-1,2-3", 4, (const int[]){0, 0, 1, 1});
  parse_ok("0+2,1+3", 4, (const int[]){0, 1, 0, 1});
  parse_ok("3,0-2", 4, (const int[]){1, 1, 1, 0});
  parse_ok("0", 1, (const int[]){0});
  parse_bad("0-1", 4, "names no node for rank 2");
  parse_bad("0-1,1-3", 4, "rank 1 is in two nodes");
  parse_bad("0-4", 4, "rank 4 is not below the size 4");
  parse_bad("2-1,0,3", 4, "\"2-1\" is not a range");
  parse_bad("0-1,,2-3", 4, "expected a rank at \",2-3\"");
  parse_bad("0-1;2-3", 4, "unexpected \";2-3\"");
  parse_bad("a", 1, "expected a rank at \"a\"");
  parse_bad("0,", 1, "unexpected \",\"");
  parse_bad("-1", 1, "expected a rank");

  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  node_of((const char *const[]){"0-4095\n"}, 1, 0, 0);        /* every CPU on node 0 */
  node_of((const char *const[]){"1-4095\n", "0\n"}, 2, 1, 1); /* CPU 0 alone on node 1 */
  if (ncpu > 1)                                               /* unpinned, across two nodes */
    node_of((const char *const[]){"0\n", "1-4095\n"}, 2, 0, BATON__NO_NODE);
  node_of((const char *const[]){"4000-4095\n"}, 1, 1, BATON__NO_NODE); /* none of ours */
  EXPECT(baton__numa_node_of_self("/nonexistent/baton") == BATON__NO_NODE,
         "a missing sysfs directory gives a node");
  printf("%d passed, %d failed\n", n_pass, n_fail);
  return n_fail ? 1 : 0;
}

/* ---- The ring part. */

/* Whether the ring visits each (host, node) in one stretch, and, with
 * BATON_NUMA set, whether every rank's node is the list's. */
static void check_ring(tally_t *T, baton_comm_t *comm, const char *what) {
  int n = comm->size, stretches = 0, places = 0;
  for (int i = 0; i < n; i++) {
    int r = comm->order[i], q = comm->order[(i + 1) % n];
    stretches += comm->group[r] != comm->group[q] || comm->node[r] != comm->node[q];
  }
  for (int i = 0; i < n; i++) { /* the (host, node) pairs there are */
    int r = comm->order[i], first = 1;
    for (int j = 0; j < i && first; j++)
      first = comm->group[comm->order[j]] != comm->group[r] ||
              comm->node[comm->order[j]] != comm->node[r];
    places += first;
  }
  if (!tally_record(T, places == 1 ? stretches == 0 : stretches == places))
    tally_say(T, "%s: the ring crosses %d times between %d (host, node) pairs", what, stretches,
              places);
}

static int ring(void) {
  tally_t T;
  tally_init(&T);
  baton_comm_t *comm = T.comm;
  const char *spec = getenv("BATON_NUMA");
  if (spec && *spec) {
    int node[64];
    char err[BATON__ERRLEN];
    int ok = comm->size <= 64 && baton__numa_parse(spec, comm->size, node, err, sizeof err) == 0;
    for (int r = 0; ok && r < comm->size; r++)
      if (!tally_record(&T, comm->node[r] == node[r]))
        tally_say(&T, "rank %d is on node %d, BATON_NUMA=%s says %d", r, comm->node[r], spec,
                  node[r]);
  }
  check_ring(&T, comm, "the world");
  /* A child of the odd ranks and one of the even, keys reversed: nodes
   * come from the parent. */
  baton_comm_t *child = NULL;
  int rc = baton_comm_split(comm, T.rank % 2, -T.rank, &child);
  if (tally_rc(&T, rc, "baton_comm_split") && child) {
    check_ring(&T, child, "a child");
    float x = 1.0f;
    rc = baton_allreduce(&x, &x, 1, BATON_FLOAT32, BATON_SUM, child);
    if (tally_rc(&T, rc, "allreduce on the child") && !tally_record(&T, x == child->size))
      tally_say(&T, "allreduce on the child gave %g, want %d", x, child->size);
    baton_comm_destroy(child);
  }
  enum { N = 1 << 16 }; /* through the ring itself */
  static float buf[N];
  for (int i = 0; i < N; i++)
    buf[i] = (float)(T.rank + i % 7);
  rc = baton_allreduce(buf, buf, N, BATON_FLOAT32, BATON_SUM, comm);
  int bad = 0;
  for (int i = 0; rc == 0 && i < N; i++)
    bad += buf[i] != (float)(T.size * (T.size - 1) / 2 + T.size * (i % 7));
  if (tally_rc(&T, rc, "allreduce of 256 KiB") && !tally_record(&T, bad == 0))
    tally_say(&T, "allreduce of 256 KiB: %d elements wrong", bad);
  return tally_finish(&T);
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--ring") == 0)
    return ring();
  return unit();
}
