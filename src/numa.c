/*
 * numa.c - which NUMA node a rank runs on, so that the ring visits the
 * ranks of each node of a host together (bootstrap.c's choose_ring).
 *
 * A rank's node is the node that holds every CPU the rank may run on
 * (sched_getaffinity against /sys/devices/system/node/node*\/cpulist).
 * A rank that may run on the CPUs of several nodes, or a machine without
 * that sysfs directory, has no node of its own (BATON__NO_NODE): such
 * ranks keep the host's order among themselves. BATON_NUMA overrides all
 * of it: "0-1,2-3" says ranks 0 and 1 share a node and ranks 2 and 3
 * another ("0+2,1+3": ranks 0 and 2, then 1 and 3) (nodes numbered in the order of the list; every
 * rank in exactly one), for machines whose sysfs says one node and for tests.
 */
#include <ctype.h>
#include <dirent.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"

/* Whether every CPU of `allowed` is in the cpulist text (e.g. "0-3,8"),
 * and whether any is. */
static void cpulist_covers(const char *list, const cpu_set_t *allowed, int *all, int *any) {
  cpu_set_t in;
  CPU_ZERO(&in);
  for (const char *p = list; *p;) {
    char *end;
    long lo = strtol(p, &end, 10), hi = lo;
    if (end == p)
      break;
    if (*end == '-')
      hi = strtol(end + 1, &end, 10);
    for (long cpu = lo; cpu <= hi && cpu < CPU_SETSIZE; cpu++)
      if (cpu >= 0)
        CPU_SET((int)cpu, &in);
    p = *end == ',' ? end + 1 : end;
    if (*p == '\n')
      break;
  }
  cpu_set_t both;
  CPU_AND(&both, &in, allowed);
  *any = CPU_COUNT(&both) > 0;
  *all = CPU_EQUAL(&both, allowed);
}

int baton__numa_node_of_self(const char *sysfs_nodes) {
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0)
    return BATON__NO_NODE;
  DIR *d = opendir(sysfs_nodes);
  if (!d)
    return BATON__NO_NODE;
  int node = BATON__NO_NODE, touched = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    if (strncmp(e->d_name, "node", 4) != 0 || !isdigit((unsigned char)e->d_name[4]))
      continue;
    char path[512], list[4096];
    snprintf(path, sizeof path, "%s/%s/cpulist", sysfs_nodes, e->d_name);
    FILE *f = fopen(path, "r");
    if (!f)
      continue;
    int got = fgets(list, sizeof list, f) != NULL;
    fclose(f);
    int all = 0, any = 0;
    if (got)
      cpulist_covers(list, &allowed, &all, &any);
    touched += any;
    if (all)
      node = atoi(e->d_name + 4);
  }
  closedir(d);
  return touched == 1 ? node : BATON__NO_NODE;
}

/* One item of a node's list: a rank or a range of them; the end of it, or
 * NULL when it is neither (err says why). */
static const char *numa_item(const char *spec, const char *p, int size, long *lo, long *hi,
                             char *err, size_t errlen) {
  char *end;
  *lo = *hi = strtol(p, &end, 10);
  if (end == p || *lo < 0 || !isdigit((unsigned char)*p)) {
    snprintf(err, errlen, "BATON_NUMA=\"%s\": expected a rank at \"%s\"", spec, p);
    return NULL;
  }
  if (*end == '-') {
    const char *q = end + 1;
    *hi = strtol(q, &end, 10);
    if (end == q || !isdigit((unsigned char)*q) || *hi < *lo) {
      snprintf(err, errlen, "BATON_NUMA=\"%s\": \"%.*s\" is not a range of ranks", spec,
               (int)(end - p), p);
      return NULL;
    }
  }
  if (*hi >= size) {
    snprintf(err, errlen, "BATON_NUMA=\"%s\": rank %ld is not below the size %d", spec, *hi, size);
    return NULL;
  }
  return end;
}

int baton__numa_parse(const char *spec, int size, int *node, char *err, size_t errlen) {
  for (int r = 0; r < size; r++)
    node[r] = BATON__NO_NODE;
  int group = 0;
  for (const char *p = spec; *p;) {
    long lo, hi;
    if (!(p = numa_item(spec, p, size, &lo, &hi, err, errlen)))
      return BATON_EUSAGE;
    for (long r = lo; r <= hi; r++) {
      if (node[r] != BATON__NO_NODE) {
        snprintf(err, errlen, "BATON_NUMA=\"%s\": rank %ld is in two nodes", spec, r);
        return BATON_EUSAGE;
      }
      node[r] = group;
    }
    if ((*p == ',' || *p == '+') && p[1]) { /* ',' ends a node, '+' goes on with it */
      group += *p == ',';
      p++;
    } else if (*p) {
      snprintf(err, errlen, "BATON_NUMA=\"%s\": unexpected \"%s\" (the form is 0-1,2-3 or 0+2,1+3)",
               spec, p);
      return BATON_EUSAGE;
    }
  }
  for (int r = 0; r < size; r++)
    if (node[r] == BATON__NO_NODE) {
      snprintf(err, errlen, "BATON_NUMA=\"%s\" names no node for rank %d", spec, r);
      return BATON_EUSAGE;
    }
  return BATON_OK;
}
