/*
 * internal.h - declarations shared inside libbaton. Nothing here is public:
 * internal non-static names start with baton__.
 */
#ifndef BATON_INTERNAL_H
#define BATON_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "auth.h"
#include "baton.h"

#define BATON__ERRLEN 512

/* ------------------------------------------------------------------ log.c */

enum { BATON__LOG_NONE, BATON__LOG_WARN, BATON__LOG_INFO, BATON__LOG_TRACE };
enum {
  BATON__SUB_INIT = 1u << 0,
  BATON__SUB_BOOT = 1u << 1,
  BATON__SUB_COLL = 1u << 2,
  BATON__SUB_SHM = 1u << 3,
  BATON__SUB_NET = 1u << 4,
  BATON__SUB_ENV = 1u << 5,
  BATON__SUB_ALL = 0x3f
};

/* Atomic: a store thread may log while baton_get_unique_id or another
 * communicator's init reloads the knobs. */
extern _Atomic int baton__log_level;       /* BATON_DEBUG */
extern _Atomic unsigned baton__log_subsys; /* BATON_DEBUG_SUBSYS */
extern _Atomic int baton__log_rank;        /* -1 until known */
/* Names by level and by subsystem bit, shared by the logger and the knobs. */
extern const char *const baton__level_names[4];
extern const char *const baton__subsys_names[6];

void baton__log_emit(int level, unsigned subsys, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Checked before the arguments are evaluated, so a disabled line costs one
 * compare. */
#define baton__log(level, subsys, ...)                                                             \
  do {                                                                                             \
    if (baton__log_level >= (level) && (baton__log_subsys & (subsys)))                             \
      baton__log_emit((level), (subsys), __VA_ARGS__);                                             \
  } while (0)
#define baton__log_warn(sub, ...) baton__log(BATON__LOG_WARN, BATON__SUB_##sub, __VA_ARGS__)
#define baton__log_info(sub, ...) baton__log(BATON__LOG_INFO, BATON__SUB_##sub, __VA_ARGS__)
#define baton__log_trace(sub, ...) baton__log(BATON__LOG_TRACE, BATON__SUB_##sub, __VA_ARGS__)

/* ---------------------------------------------------------------- param.c */

/* Every knob is one row of the table in param.c and one field here. */
typedef struct {
  int rank;                  /* BATON_RANK, -1 when unset */
  int size;                  /* BATON_SIZE, -1 when unset */
  char addr[256];            /* BATON_ADDR, "" when unset */
  double timeout_s;          /* BATON_TIMEOUT */
  int debug;                 /* BATON_DEBUG */
  unsigned debug_subsys;     /* BATON_DEBUG_SUBSYS */
  size_t segment_bytes;      /* BATON_SEGMENT_BYTES */
  int shm_slots;             /* BATON_SHM_SLOTS */
  int spin_us;               /* BATON_SPIN_US */
  int yield_us;              /* BATON_YIELD_US */
  int tcp_spin_us;           /* BATON_TCP_SPIN_US */
  double tcp_link_timeout_s; /* BATON_TCP_LINK_TIMEOUT */
  int progress_cpu;          /* BATON_PROGRESS_CPU */
  size_t stream_bytes;       /* BATON_STREAM_BYTES */
  size_t flat_bytes;         /* BATON_FLAT_BYTES */
  int fused;                 /* BATON_FUSED */
  int cma;                   /* BATON_CMA */
  int mem_local;             /* BATON_MEM_LOCAL */
  char transport[256];       /* BATON_TRANSPORT: "auto" or "tcp" */
  char hostid[256];          /* BATON_HOSTID, "" when unset */
  char numa[256];            /* BATON_NUMA, "" when unset */
  char socket_ifname[256];   /* BATON_SOCKET_IFNAME, "" when unset */
  int nsocks;                /* BATON_NSOCKS */
  size_t tcp_segment_bytes;  /* BATON_TCP_SEGMENT_BYTES */
  size_t pair_segment_bytes; /* BATON_PAIR_SEGMENT_BYTES */
  size_t scratch_bytes;      /* BATON_SCRATCH_BYTES */
  size_t p2p_eager_bytes;    /* BATON_P2P_EAGER_BYTES */
  /* Not a knob: set by p2p.c for its own segment, where the thread and a
   * caller may sleep on one channel at once, so a commit wakes them all. */
  int shm_wake_all;
  char algo[256];      /* BATON_ALGO */
  char tune_file[256]; /* BATON_TUNE_FILE */
  char secret[256];    /* BATON_SECRET, "" when unset */
  char trace[256];     /* BATON_TRACE, "" when unset */
  /* Not knobs: filled by baton__launch_env (launch_env.c). */
  char launcher[96];  /* where rank and size came from, e.g. "torchrun (RANK, WORLD_SIZE)" */
  char addr_from[80]; /* where addr came from, e.g. "MASTER_ADDR:MASTER_PORT" */
  int local_rank;     /* rank on this host; -1: the launcher did not say */
  int local_size;     /* ranks on this host; -1: the launcher did not say */
} baton__params_t;

/* Parses every knob from the environment. On a bad value returns
 * BATON_EUSAGE with err naming the variable, the value and the range. */
int baton__params_load(baton__params_t *p, char *err, size_t errlen);

/* ----------------------------------------------------------- launch_env.c */

/* After baton__params_load: rank, size and rendezvous address from the
 * launcher's variables where BATON_* leave them unset (torchrun, Open MPI,
 * MPICH Hydra, Slurm; BATON_ADDR or MASTER_ADDR:MASTER_PORT), and the local
 * rank and size. For baton_comm_init only: a launcher without an address is
 * an error there, as is a missing rank or size. */
int baton__launch_env(baton__params_t *p, char *err, size_t errlen);

/* ------------------------------------------------------------- reduce.c */

/* dst[i] = a[i] op b[i] for i < n; dst may alias a or b. For BATON_AVG this
 * is the sum; baton__reduce_div() finishes the average. */
typedef void (*baton__reduce_fn)(void *dst, const void *a, const void *b, size_t n);
/* NULL for a dtype or op out of range and for the pairs that have no
 * meaning (baton__reduce_ok). */
baton__reduce_fn baton__reduce_get(baton_dtype_t dtype, baton_op_t op);
/* Whether the kernels' AVX2 tier is in effect (the CPU has it, with
 * F16C, and no test capped it): reduce_stream.c's loops need it too. */
int baton__reduce_avx2(void);
/* reduce_stream.c: dst[j][i] = src[0][i] op src[1][i] op ... (in that
 * order, as baton__reduce_fn applied rank by rank gives), for every output
 * j, in one pass: with non-temporal stores where `streaming`, else plain
 * ones (for outputs whose lines were just read, in place). Does the
 * elements [*first, *first + the result), whole cache lines of the
 * outputs, and leaves the rest to the caller; 0 where no fused kernel
 * applies (only SUM of 32- and 64-bit floats and integers, on AVX2, with
 * outputs of one alignment and at most BATON__REDUCE_STREAM_MAX of
 * either). Streaming stores need an sfence before the results are shown. */
#define BATON__REDUCE_STREAM_MAX 64
size_t baton__reduce_stream(baton_dtype_t dtype, baton_op_t op, size_t elsize, char *const *dst,
                            int ndst, const char *const *src, int nsrc, size_t n, int streaming,
                            size_t *first);
/* Whether op reduces dtype, both in range: the bitwise ops take no floats,
 * and bool has no average (baton.h). Inline: every reducing call asks. */
static inline int baton__reduce_ok(baton_dtype_t dtype, baton_op_t op) {
  const unsigned floats =
      1u << BATON_FLOAT16 | 1u << BATON_BFLOAT16 | 1u << BATON_FLOAT32 | 1u << BATON_FLOAT64;
  if (op >= BATON_BAND)
    return !(floats >> dtype & 1);
  return op != BATON_AVG || dtype != BATON_BOOL;
}
/* buf[i] = buf[i] != 0 for bool: a reduction's result where no kernel
 * made it (a communicator of one rank). */
void baton__reduce_bool_normalize(void *buf, size_t n);
/* buf[i] = buf[i] / divisor: floats divide (rounding once to the type),
 * integers truncate toward zero. */
void baton__reduce_div(void *buf, size_t n, baton_dtype_t dtype, int divisor);

/* Conversions used by the kernels and by the tests' reference. */
float baton__half_to_float(uint16_t h);
uint16_t baton__float_to_half(float f); /* round to nearest even */
float baton__bf16_to_float(uint16_t h);
uint16_t baton__float_to_bf16(float f); /* round to nearest even */

/* ----------------------------------------------------------------- wake.c */

/* What waking a thread asleep on a futex costs here (the 90th percentile of
 * a few handoffs between two threads), measured on the first call; 0 with
 * one usable core. */
double baton__wake_cost_s(void);

/* ---------------------------------------------------------------- store.c */

/* The rendezvous store: a small key-value store that rank 0 serves over TCP
 * while the communicator lives. Values are opaque bytes. */
typedef struct baton__store_server baton__store_server_t;
typedef struct baton__store baton__store_t;

/* Listens on host:port only (host "0.0.0.0" means every interface) and
 * serves from a thread. With a secret (len > 0) a client must pass the
 * handshake of auth.h within timeout_s before any request is read. */
int baton__store_serve(const char *host, int port, const baton__secret_t *secret, double timeout_s,
                       baton__store_server_t **out, char *err, size_t errlen);
/* Held by every communicator of this process that was made from the one
 * that started it (its children, theirs, ...): hold adds a holder, stop
 * drops one, and the last stop stops the server. */
baton__store_server_t *baton__store_hold(baton__store_server_t *srv);
void baton__store_stop(baton__store_server_t *srv);
/* The port it listens on (useful after asking for port 0). */
int baton__store_port(const baton__store_server_t *srv);

/* Connects, retrying until timeout_s has passed, and then authenticates
 * with secret when it is set (BATON_EAUTH when the store turns us away). */
int baton__store_connect(const char *host, int port, double timeout_s,
                         const baton__secret_t *secret, baton__store_t **out, char *err,
                         size_t errlen);
int baton__store_set(baton__store_t *st, const char *key, const void *val, size_t len, char *err,
                     size_t errlen);
/* Waits until key exists (or timeout_s passes) and copies its value into
 * val (at most cap bytes); *len gets the stored length. */
int baton__store_get(baton__store_t *st, const char *key, void *val, size_t cap, size_t *len,
                     double timeout_s, char *err, size_t errlen);
void baton__store_close(baton__store_t *st);
/* A client that keeps its keys in the caller's store (baton_comm_init_kv);
 * host is where the data connections should face ("" when unknown). */
int baton__store_connect_kv(const baton_kv_t *kv, const char *host, double timeout_s,
                            baton__store_t **out, char *err, size_t errlen);
/* A second client of the store that parent talks to (same address, same
 * secret, its own connection), whose keys all begin with prefix: a child
 * communicator's, so that its keys never meet its parent's or a sibling's.
 * Its own connection, so that communicators used from different threads
 * never wait on each other's requests. Over a caller's store (connect_kv)
 * the child shares the caller's store with its parent. */
#define BATON__STORE_PREFIX_MAX 40
int baton__store_open_child(const baton__store_t *parent, const char *prefix, baton__store_t **out,
                            char *err, size_t errlen);
/* The host it connects to (the rendezvous, for choosing an interface). */
const char *baton__store_host(const baton__store_t *st);

/* Splits "host:port" (host may be [v6]); BATON_EUSAGE naming `what` when
 * malformed. */
int baton__parse_hostport(const char *s, const char *what, char *host, size_t hostcap, int *port,
                          char *err, size_t errlen);

/* ----------------------------------------------------------------- util */

double baton__now(void); /* seconds, CLOCK_MONOTONIC */

/* splitmix64's finalizer: every input bit moves about half the output bits
 * (a communicator's id, split.c; a digest of allgatherv's displacements,
 * exec_direct.c). */
static inline uint64_t baton__mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ x >> 31;
}

/* One beat of a spin-wait: tells the core that this is a wait loop (x86
 * PAUSE, Arm YIELD), so that it saves power and leaves the pipeline to a
 * sibling thread; elsewhere at least a compiler barrier, so that the loop
 * reloads what it waits for. */
static inline void baton__cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ volatile("yield" ::: "memory");
#else
  __asm__ volatile("" ::: "memory");
#endif
}
/* BATON_OK once fd has one of events, BATON_ETIMEDOUT at deadline
 * (baton__now() seconds), or BATON_ESYS with errno set. */
int baton__wait_fd(int fd, short events, double deadline);

#endif /* BATON_INTERNAL_H */
