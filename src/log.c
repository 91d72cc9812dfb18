/*
 * log.c - levelled logging by subsystem. Every line starts
 * "host:pid [rank] baton LEVEL SUBSYS" and goes to stderr in one write, so
 * lines of different ranks do not interleave mid-line.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

_Atomic int baton__log_level = BATON__LOG_WARN;
_Atomic unsigned baton__log_subsys = BATON__SUB_ALL;
_Atomic int baton__log_rank = -1;

const char *const baton__level_names[4] = {"NONE", "WARN", "INFO", "TRACE"};
const char *const baton__subsys_names[6] = {"INIT", "BOOT", "COLL", "SHM", "NET", "ENV"};

static const char *level_name(int level) {
  return level >= 0 && level <= BATON__LOG_TRACE ? baton__level_names[level] : "?";
}

static const char *subsys_name(unsigned subsys) {
  for (unsigned i = 0; i < 6; i++)
    if (subsys & (1u << i))
      return baton__subsys_names[i];
  return "?";
}

void baton__log_emit(int level, unsigned subsys, const char *fmt, ...) {
  static char host[64];
  if (!host[0] && gethostname(host, sizeof host - 1) != 0)
    strcpy(host, "?");
  char line[2048];
  int n = snprintf(line, sizeof line, "%s:%d [%d] baton %s %s ", host, (int)getpid(),
                   baton__log_rank, level_name(level), subsys_name(subsys));
  if (n < 0 || (size_t)n >= sizeof line)
    return;
  va_list ap;
  va_start(ap, fmt);
  int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
  va_end(ap);
  if (m < 0)
    return;
  size_t len = (size_t)n +
               ((size_t)m < sizeof line - (size_t)n - 1 ? (size_t)m : sizeof line - (size_t)n - 2);
  line[len++] = '\n';
  ssize_t w = write(2, line, len);
  (void)w;
}

double baton__now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
