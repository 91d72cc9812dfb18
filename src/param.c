/*
 * param.c - every knob baton reads, as one table. Each row gives the
 * environment variable, its type, default, range and description; the
 * loader parses them all once, logs the ones that are set, and the same rows
 * print the table for `baton-bench --params` and the README.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "internal.h"
#include "algo.h"

/* P_SECRET is a string whose value is never logged. */
typedef enum { P_INT, P_DOUBLE, P_BYTES, P_STRING, P_LEVEL, P_SUBSYS, P_SECRET } ptype_t;

typedef struct {
  const char *name;
  ptype_t type;
  const char *def; /* default, in the same syntax as the variable */
  double min, max; /* inclusive range for numbers */
  size_t offset;   /* field in baton__params_t */
  /* NULL for BATON_ALGO alone, whose description is made from the table
   * of algorithms (algo_desc), so that it names every one. */
  const char *desc;
} param_row_t;

#define F(field) offsetof(baton__params_t, field)

static const param_row_t rows[] = {
    {"BATON_RANK", P_INT, "-1", 0, 1 << 20, F(rank),
     "this process's rank in [0, BATON_SIZE); baton-run sets it"},
    {"BATON_SIZE", P_INT, "-1", 1, 1 << 20, F(size), "number of ranks; baton-run sets it"},
    {"BATON_ADDR", P_STRING, "", 0, 0, F(addr),
     "host:port of the rendezvous store that rank 0 serves; baton-run sets it"},
    {"BATON_TIMEOUT", P_DOUBLE, "60", 0.001, 1e7, F(timeout_s),
     "seconds any wait for a peer may last before failing with BATON_ETIMEDOUT"},
    {"BATON_DEBUG", P_LEVEL, "WARN", 0, 0, F(debug), "log level: NONE, WARN, INFO or TRACE"},
    {"BATON_DEBUG_SUBSYS", P_SUBSYS, "ALL", 0, 0, F(debug_subsys),
     "comma-separated subsystems to log: INIT,BOOT,COLL,SHM,NET,ENV or ALL"},
    {"BATON_SEGMENT_BYTES", P_BYTES, "256K", 64, 64 << 20, F(segment_bytes),
     "pipeline unit: each chunk moves in segments of at most this many bytes"},
    {"BATON_SHM_SLOTS", P_INT, "8", 4, 256, F(shm_slots),
     "segments in flight on each channel, shared-memory and TCP alike"},
    {"BATON_SPIN_US", P_INT, "-1", -1, 1000000, F(spin_us),
     "shared memory: microseconds a waiter spins before it sleeps on a futex; -1: twice "
     "what a wake-up costs here, measured once per process (20 to 1000)"},
    {"BATON_YIELD_US", P_INT, "200", 0, 1000000, F(yield_us),
     "shared memory, more ranks than cores: microseconds a waiter hands its core to others "
     "(sched_yield) before it sleeps on a futex, instead of spinning"},
    {"BATON_FLAT_BYTES", P_BYTES, "64K", 0, 16 << 20, F(flat_bytes),
     "shared memory: largest per-rank buffer for the flat (one-step) algorithm (a broadcast "
     "past it fans out in BATON_SEGMENT_BYTES pieces)"},
    {"BATON_STREAM_BYTES", P_BYTES, "16M", 0, 1e18, F(stream_bytes),
     "buffers at least this large are written with non-temporal stores"},
    {"BATON_FUSED", P_INT, "1", 0, 1, F(fused),
     "registered buffers: 1 adds the inputs and stores the sum straight into the outputs in "
     "one pass (sums of 32- and 64-bit floats and integers, AVX2); 0 goes through a scratch "
     "piece"},
    {"BATON_CMA", P_INT, "1", 0, 1, F(cma),
     "one host: 1 lets direct copy an allgather's, alltoall's or broadcast's buffers that are "
     "not registered straight between the ranks' memory through the kernel (process_vm_readv "
     "and _writev, one copy instead of two), where every rank can; 0 stages them"},
    {"BATON_MEM_LOCAL", P_INT, "0", 0, 1, F(mem_local),
     "one host: 1 lets direct serve calls whose buffers are baton_mem_alloc_local memory, as "
     "registered memory, and makes `import baton.torch` put torch's CPU tensors of 256 KiB "
     "and more in it; the same on every rank"},
    {"BATON_TRANSPORT", P_STRING, "auto", 0, 0, F(transport),
     "auto (shared memory inside a host, TCP between hosts) or tcp (TCP everywhere)"},
    {"BATON_HOSTID", P_STRING, "", 0, 0, F(hostid),
     "host identity; ranks with the same value share memory (default: kernel and netns)"},
    {"BATON_NUMA", P_STRING, "", 0, 0, F(numa),
     "ranks that share a NUMA node, e.g. 0-1,2-3 (default: each rank's CPUs, from sysfs)"},
    {"BATON_SOCKET_IFNAME", P_STRING, "", 0, 0, F(socket_ifname),
     "TCP: interface name or prefix (default: the one that routes to BATON_ADDR)"},
    {"BATON_NSOCKS", P_INT, "1", 1, 16, F(nsocks),
     "TCP: sockets per connection; frames are spread over them"},
    {"BATON_TCP_SEGMENT_BYTES", P_BYTES, "1M", 64, 64 << 20, F(tcp_segment_bytes),
     "TCP: pipeline unit when no ring edge is shared memory (else BATON_SEGMENT_BYTES)"},
    {"BATON_PROGRESS_CPU", P_INT, "-1", -1, 4095, F(progress_cpu),
     "core the progress thread of the i-calls is pinned to; -1: not pinned (baton.h)"},
    {"BATON_TCP_SPIN_US", P_INT, "100", 0, 1000000, F(tcp_spin_us),
     "TCP: microseconds a waiter polls its sockets before it sleeps in poll()"},
    {"BATON_TCP_LINK_TIMEOUT", P_DOUBLE, "3", 0.1, 3600, F(tcp_link_timeout_s),
     "TCP: seconds sent data or a keepalive probe may go unanswered before the link "
     "counts as broken (TCP_USER_TIMEOUT); a loaded machine can stall 1 s"},
    {"BATON_PAIR_SEGMENT_BYTES", P_BYTES, "64K", 64, 64 << 20, F(pair_segment_bytes),
     "segment of the messages of non-ring algorithms; shared-memory channels between ranks "
     "that are not ring neighbours have slots this large"},
    {"BATON_P2P_EAGER_BYTES", P_BYTES, "64K", 0, 16 << 20, F(p2p_eager_bytes),
     "point-to-point: messages up to this size travel before the receiver has matched them "
     "(the rest wait for its go-ahead); the same on every rank"},
    {"BATON_SCRATCH_BYTES", P_BYTES, "256M", 0, 1e18, F(scratch_bytes),
     "most scratch memory an algorithm may use for blocks a rank only passes on; "
     "an algorithm that would need more gives way to the next best"},
    {"BATON_ALGO", P_STRING, "", 0, 0, F(algo), NULL},
    {"BATON_TUNE_FILE", P_STRING, "", 0, 0, F(tune_file),
     "alpha-beta-gamma costs per link (shm, pair, tcp) written by baton-tune, read by rank 0 "
     "(default: $XDG_CACHE_HOME/baton/tune or ~/.cache/baton/tune when it exists)"},
    {"BATON_TRACE", P_STRING, "", 0, 0, F(trace),
     "file to write a JSON line per step of every collective to, %r = rank (docs/trace.md)"},
    {"BATON_SECRET", P_SECRET, "", 0, 0, F(secret),
     "the job's shared secret: every connection proves it knows it (HMAC); baton-run sets one"},
};

/* BATON_ALGO's description: the syntax, then every algorithm of the table
 * with the collectives it serves. */
static char algo_text[1024];
static void algo_desc_once(void) {
  int n;
  const baton__algo_t *all = baton__algos(&n);
  size_t off = (size_t)snprintf(algo_text, sizeof algo_text,
                                "force algorithms: a name for every collective it serves (rhd) or "
                                "coll:name,... (allreduce:ring,broadcast:tree); names:");
  for (int i = 0; i < n && off < sizeof algo_text; i++) {
    char colls[256];
    off += (size_t)snprintf(algo_text + off, sizeof algo_text - off, "%s %s (%s)", i ? "," : "",
                            all[i].name, baton__algo_colls(&all[i], colls, sizeof colls));
  }
}
static const char *algo_desc(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, algo_desc_once);
  return algo_text;
}

static const char *desc_of(const param_row_t *r) { return r->desc ? r->desc : algo_desc(); }

static const char *const type_names[] = {"int",   "float", "bytes", "string",
                                         "level", "list",  "secret"};

/* "64K", "1M", "3G" or plain bytes. */
static int parse_bytes(const char *s, double *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s)
    return -1;
  switch (*end) {
  case 'k':
  case 'K':
    v *= 1024;
    end++;
    break;
  case 'm':
  case 'M':
    v *= 1024 * 1024;
    end++;
    break;
  case 'g':
  case 'G':
    v *= 1024.0 * 1024 * 1024;
    end++;
    break;
  default:
    break;
  }
  if (*end == 'B' || *end == 'b')
    end++;
  if (*end)
    return -1;
  *out = v;
  return 0;
}

static int parse_level(const char *s, int *out) {
  for (int i = 0; i < 4; i++)
    if (strcasecmp(s, baton__level_names[i]) == 0) {
      *out = i;
      return 0;
    }
  return -1;
}

static int parse_subsys(const char *s, unsigned *out) {
  char buf[256];
  if (strlen(s) >= sizeof buf)
    return -1;
  strcpy(buf, s);
  unsigned mask = 0;
  char *save = NULL;
  for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    unsigned bit = 0;
    if (strcasecmp(tok, "ALL") == 0)
      bit = BATON__SUB_ALL;
    for (int i = 0; i < 6 && !bit; i++)
      if (strcasecmp(tok, baton__subsys_names[i]) == 0)
        bit = 1u << i;
    if (!bit)
      return -1;
    mask |= bit;
  }
  *out = mask;
  return mask ? 0 : -1;
}

static int parse_number(const param_row_t *r, const char *s, double *v) {
  char *end;
  if (r->type == P_BYTES)
    return parse_bytes(s, v);
  errno = 0;
  *v = strtod(s, &end);
  if (errno || end == s || *end)
    return -1;
  if (r->type == P_INT && *v != (double)(long)*v)
    return -1;
  return 0;
}

/* Parses one row's value s into the field; -1 when malformed or out of range. */
static int set_field(const param_row_t *r, const char *s, baton__params_t *p, int check_range) {
  char *field = (char *)p + r->offset;
  double v;
  switch (r->type) {
  case P_STRING:
  case P_SECRET: /* both fields are char[256] */
    if (strlen(s) >= sizeof p->addr)
      return -1;
    strcpy(field, s);
    return 0;
  case P_LEVEL:
    return parse_level(s, (int *)field);
  case P_SUBSYS:
    return parse_subsys(s, (unsigned *)field);
  default:
    if (parse_number(r, s, &v) != 0)
      return -1;
    if (check_range && (v < r->min || v > r->max))
      return -1;
    if (r->type == P_INT)
      *(int *)field = (int)v;
    else if (r->type == P_DOUBLE)
      *(double *)field = v;
    else
      *(size_t *)field = (size_t)v;
    return 0;
  }
}

static void describe_range(const param_row_t *r, char *buf, size_t len) {
  if (r->type == P_STRING || r->type == P_LEVEL || r->type == P_SUBSYS || r->type == P_SECRET)
    snprintf(buf, len, "see description");
  else
    snprintf(buf, len, "%.15g..%.15g", r->min, r->max);
}

int baton__params_load(baton__params_t *p, char *err, size_t errlen) {
  const size_t nrows = sizeof rows / sizeof rows[0];
  memset(p, 0, sizeof *p);
  for (size_t i = 0; i < nrows; i++)
    if (set_field(&rows[i], rows[i].def, p, 0) != 0) {
      snprintf(err, errlen, "internal: bad default for %s", rows[i].name);
      return BATON_EINTERNAL;
    }
  for (size_t i = 0; i < nrows; i++) {
    const char *s = getenv(rows[i].name);
    if (!s)
      continue;
    if (set_field(&rows[i], s, p, 1) != 0) {
      char range[64];
      describe_range(&rows[i], range, sizeof range);
      snprintf(err, errlen, "%s=\"%s\" is not a valid %s (range %s): %s", rows[i].name,
               rows[i].type == P_SECRET ? "(not shown)" : s, type_names[rows[i].type], range,
               desc_of(&rows[i]));
      return BATON_EUSAGE;
    }
  }
  baton__log_level = p->debug;
  baton__log_subsys = p->debug_subsys;
  baton__log_rank = p->rank;
  if (p->spin_us < 0) {
    double wake_us = baton__wake_cost_s() * 1e6;
    p->spin_us = wake_us < 10 ? 20 : wake_us > 500 ? 1000 : (int)(2 * wake_us + 0.5);
    static _Atomic int said;
    if (!atomic_exchange(&said, 1))
      baton__log_info(ENV, "BATON_SPIN_US is %d: a futex wake-up costs %.1f us here", p->spin_us,
                      wake_us);
  }
  for (size_t i = 0; i < nrows; i++) {
    const char *s = getenv(rows[i].name);
    if (s && rows[i].type == P_SECRET)
      baton__log_info(ENV, "%s set (%zu bytes, not shown)", rows[i].name, strlen(s));
    else if (s)
      baton__log_info(ENV, "%s set to %s", rows[i].name, s);
  }
  return BATON_OK;
}

const char *baton_params_describe(void) {
  static char text[8192];
  if (text[0])
    return text;
  size_t off = 0;
  off += (size_t)snprintf(text + off, sizeof text - off, "%-20s %-6s %-8s %-18s %s\n", "name",
                          "type", "default", "range", "description");
  for (size_t i = 0; i < sizeof rows / sizeof rows[0] && off < sizeof text; i++) {
    char range[64];
    describe_range(&rows[i], range, sizeof range);
    off += (size_t)snprintf(text + off, sizeof text - off, "%-20s %-6s %-8s %-18s %s\n",
                            rows[i].name, type_names[rows[i].type],
                            rows[i].def[0] ? rows[i].def : "\"\"", range, desc_of(&rows[i]));
  }
  return text;
}
