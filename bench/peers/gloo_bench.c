/*
 * gloo_bench.c - the Gloo peer of tools/baton-bench.c.
 *
 * Measures Gloo's allreduce (ring or bcube of gloo::allreduce(), or the
 * halving-doubling class), allgather and broadcast over its TCP transport,
 * with the flags, the timing method and the columns of baton-bench:
 *
 *   baton-run -n 2 build/bench/gloo_bench --store DIR -a ring -b 8 -e 128M
 *
 * Gloo has no launcher of its own: this one reads BATON_RANK and
 * BATON_SIZE, as baton-run and scripts/cluster.sh launch set them, and
 * meets its peers through a FileStore in DIR (an empty directory every
 * rank sees). --host names the address the TCP device binds to: 127.0.0.1
 * by default; `auto` takes this network namespace's address in
 * 198.18.0.0/15 (the emulated cluster of scripts/cluster.sh).
 *
 * Built by `make -f bench/Makefile.peers` from this file, the shared
 * benchmark in tools/bench_common.h and the C++ of gloo_shim.cc. Gloo has
 * only int32, int64, float32 and float64 here, and no average; the
 * halving-doubling allreduce works in place only, so -a hd prints the
 * in-place group alone.
 */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "bench_common.h"
#include "gloo_shim.h"

static const char *algo_names[] = {"ring", "hd", "bcube"};

static struct {
  gb_ctx_t *ctx;
  gb_algo_t algo;
  const char *store, *host;
  double timeout_s;
} gloo = {NULL, GB_RING, NULL, "127.0.0.1", 60};

static gb_dtype_t gb_dtype(dtype_t dt) {
  switch (dt) {
  case DT_INT32:
    return GB_INT32;
  case DT_INT64:
    return GB_INT64;
  case DT_FLOAT64:
    return GB_FLOAT64;
  default:
    return GB_FLOAT32;
  }
}

static int has_dtype(dtype_t dt) {
  return dt == DT_INT32 || dt == DT_INT64 || dt == DT_FLOAT32 || dt == DT_FLOAT64;
}

static int has_op(op_t op) { return op <= OP_MAX; }

static const char *why_not(coll_t c) {
  if (c == COLL_ALLREDUCE || c == COLL_ALLGATHER || c == COLL_BROADCAST)
    return NULL;
  return "gloo_bench measures allreduce, allgather and broadcast only";
}

static void usage(FILE *f) {
  fprintf(f, "usage: baton-run -n N gloo_bench [options]\n"
             "  -c, --collective NAME   allreduce (default), allgather, "
             "broadcast\n" BENCH_USAGE_SIZES
             "  -d, --datatype DTYPE    int32 int64 float32 (default) float64\n"
             "  -o, --op OP             sum (default) prod min max\n"
             "  -a, --algo ALGO         allreduce: ring (default), hd "
             "(halving-doubling, in place), bcube\n" BENCH_USAGE_CHECK
             "      --store DIR         FileStore directory every rank sees "
             "(default: from BATON_ADDR)\n"
             "      --host ADDR         address of the TCP device: 127.0.0.1 "
             "(default) or auto\n"
             "      --timeout S         seconds a call may wait for a peer "
             "(default 60)\n"
             "  -h, --help              this text\n");
}

static void check_rc(int rc, const char *what) {
  if (rc != 0)
    bench_die("%s failed: %s", what, gb_error());
}

static void run_coll(const bench_t *b, const layout_t *L, int inplace) {
  gb_dtype_t dt = gb_dtype(b->o.dtype);
  const void *send = inplace ? NULL : L->send;

  /* Gloo's allgather divides by the size of a part: 0 elements is not
   * passed on (it would be a no-op anyway). */
  if (b->total == 0)
    return;
  switch (b->o.coll) {
  case COLL_ALLREDUCE:
    check_rc(gb_allreduce(gloo.ctx, send, L->recv, b->part, dt, (gb_op_t)b->o.op, gloo.algo),
             "allreduce");
    break;
  case COLL_ALLGATHER:
    check_rc(gb_allgather(gloo.ctx, send, L->recv, b->part, dt), "allgather");
    break;
  case COLL_BROADCAST:
    check_rc(gb_broadcast(gloo.ctx, send, L->recv, b->total, dt, b->o.root), "broadcast");
    break;
  default:
    break;
  }
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void barrier(const bench_t *b) {
  (void)b;
  check_rc(gb_barrier(gloo.ctx), "barrier");
}

static void max_over_ranks(const bench_t *b, double *x, int n) {
  (void)b;
  check_rc(gb_max_doubles(gloo.ctx, x, (size_t)n), "allreduce of the times");
}

static long long sum_over_ranks(const bench_t *b, long long n) {
  (void)b;
  check_rc(gb_sum_int64(gloo.ctx, &n), "allreduce of #wrong");
  return n;
}

enum { OPT_STORE = 1000, OPT_HOST, OPT_TIMEOUT };

static const struct option gloo_longopts[] = {{"store", required_argument, NULL, OPT_STORE},
                                              {"host", required_argument, NULL, OPT_HOST},
                                              {"timeout", required_argument, NULL, OPT_TIMEOUT},
                                              {NULL, 0, NULL, 0}};

/* The flags of gloo_longopts, from bench_parse_args(). */
static void own_opt(int c, const char *arg) {
  char *end;

  switch (c) {
  case OPT_STORE:
    gloo.store = arg;
    break;
  case OPT_HOST:
    gloo.host = arg;
    break;
  case OPT_TIMEOUT:
    gloo.timeout_s = strtod(arg, &end);
    if (*end || !(gloo.timeout_s > 0 && gloo.timeout_s <= 1e6))
      bench_die("--timeout %s: expected seconds > 0", arg);
    break;
  default:
    break;
  }
}

static const bench_prog_t gloo_bench = {
    .name = "gloo_bench",
    .run = run_coll,
    .barrier = barrier,
    .now = now,
    .max_over_ranks = max_over_ranks,
    .sum_over_ranks = sum_over_ranks,
    .why_not = why_not,
    .algo_help = "ring, hd or bcube",
    .longopts = gloo_longopts,
    .own_opt = own_opt,
    .bad_dtype = "unknown dtype",
    .bad_op = "expected sum, prod, min or max",
    .lib = "Gloo",
    .has_dtype = has_dtype,
    .has_op = has_op,
};

/* --host auto: the first address in 198.18.0.0/15 of this namespace. */
static const char *cluster_address(void) {
  static char buf[INET_ADDRSTRLEN];
  struct ifaddrs *ifs, *i;

  if (getifaddrs(&ifs) != 0)
    bench_die("--host auto: getifaddrs failed");
  buf[0] = '\0';
  for (i = ifs; i && !buf[0]; i = i->ifa_next) {
    struct sockaddr_in *sin = (struct sockaddr_in *)i->ifa_addr;
    if (!sin || sin->sin_family != AF_INET)
      continue;
    if ((ntohl(sin->sin_addr.s_addr) & 0xfffe0000u) == 0xc6120000u)
      inet_ntop(AF_INET, &sin->sin_addr, buf, sizeof buf);
  }
  freeifaddrs(ifs);
  if (!buf[0])
    bench_die("--host auto: no address in 198.18.0.0/15 here; is this a "
              "host of scripts/cluster.sh?");
  return buf;
}

static int env_int(const char *name) {
  const char *s = getenv(name);
  int v;
  if (!s || parse_int(s, 0, 1 << 20, &v) != 0)
    bench_die("%s is '%s': run under baton-run or scripts/cluster.sh launch", name, s ? s : "");
  return v;
}

int main(int argc, char **argv) {
  static char store[512];
  bench_t b;
  long long wrong;
  int algo;

  bench_prog = &gloo_bench;
  memset(&b, 0, sizeof b);
  switch (bench_parse_args(argc, argv, &b.o)) {
  case BENCH_ARGS_HELP:
    usage(stdout);
    exit(0);
  case BENCH_ARGS_BAD:
    usage(stderr);
    exit(2);
  default:
    break;
  }
  b.rank = bench_rank = env_int("BATON_RANK");
  b.nranks = env_int("BATON_SIZE");
  if (b.o.algo) {
    if ((algo = lookup(b.o.algo, algo_names, 3)) < 0)
      bench_die("-a %s: expected ring, hd or bcube", b.o.algo);
    gloo.algo = (gb_algo_t)algo;
  }
  if (gloo.algo == GB_HD)
    b.o.inplace_only = 1;
  if (!gloo.store) {
    const char *addr = getenv("BATON_ADDR");
    snprintf(store, sizeof store, "%s/gloo_bench.%s", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
             addr ? addr : "");
    gloo.store = store;
  }
  mkdir(gloo.store, 0700); /* the FileStore wants it to exist */
  if (strcmp(gloo.host, "auto") == 0)
    gloo.host = cluster_address();
  gloo.ctx = gb_connect(b.rank, b.nranks, gloo.store, gloo.host, gloo.timeout_s);
  if (!gloo.ctx)
    bench_die("connecting through FileStore %s on %s: %s", gloo.store, gloo.host, gb_error());
  bench_note_allocator(&b);
  snprintf(b.note + strlen(b.note), sizeof b.note - strlen(b.note),
           "; TCP device on %s; allreduce algorithm %s", gloo.host, algo_names[gloo.algo]);

  wrong = bench_run(&b, argc, argv, "Gloo (Debian libgloo-dev " GLOO_DEB_VERSION ")");
  barrier(&b);
  gb_close(gloo.ctx);
  return wrong ? 1 : 0;
}
