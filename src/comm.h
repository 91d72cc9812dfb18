/* comm.h - the communicator, as the library sees it. */
#ifndef BATON_COMM_H
#define BATON_COMM_H

#include "internal.h"
#include "schedule.h"
#include "trace.h"
#include "transport/shm.h"
#include "transport/tcp.h"

struct baton_comm {
  int rank, size;
  baton__params_t params;
  baton__secret_t secret;        /* BATON_SECRET; every connection proves it */
  baton__store_server_t *server; /* rank 0 only */
  baton__store_t *store;
  uint64_t id;                /* random, the same on every rank */
  char (*hosts)[64];          /* host name of every rank, for people */
  int *group;                 /* per rank: lowest rank sharing its memory */
  int one_host;               /* every rank shares this rank's memory */
  baton__net_t net[2];        /* the transports in use, reached only through their tables */
  int nnet;                   /* 0 for a single rank */
  baton__net_t *host_net;     /* the one with a rendezvous (shared memory), or NULL */
  baton__conn_t **to, **from; /* per peer rank, NULL when not connected */
  size_t slot_bytes;          /* segment size: the smallest slot of any connection */
  unsigned char *scratch;     /* 2 * size bytes for the barrier */
  int *order;                 /* the ring: ranks in ring order */
  int *host;                  /* per rank: its host's index along the ring */
  int nhosts;
  baton__sched_t sched;                           /* reused by every collective */
  const baton__algo_t *forced[BATON__COLL_COUNT]; /* BATON_ALGO, NULL: choose */
  struct baton__select_state *select;             /* link costs and cached decisions (select.c) */
  size_t *in_off, *out_off, *len;                 /* per-chunk layout, reused */
  size_t *work_off; /* per chunk: where in `work` it lives without an output */
  char *work;       /* scratch memory, grown on demand (baton__work_reserve) */
  size_t work_bytes;
  size_t stream_slot_bytes;    /* segment of messages of several chunks (exec.c) */
  uint64_t seq;                /* collectives started so far */
  baton__sig_t sig;            /* the current call, as peers must see it */
  baton__watch_t watch;        /* what every wait checks (fail.c) */
  _Atomic int abort_requested; /* baton_comm_abort was called */
  int fatal_rc;                /* the failure that broke this communicator */
  char fatal_msg[BATON__ERRLEN];
  uint32_t shm_calls;    /* shared-memory rendezvous so far */
  baton__trace_t *trace; /* BATON_TRACE; NULL when unset */
  char last_error[BATON__ERRLEN];
};

/* Records what failed in comm->last_error (and at WARN) and returns rc.
 * A failure of communication (a lost, stuck, mismatched or aborted peer,
 * a malformed message) breaks the communicator: every peer is told, and
 * later calls fail at once with the same code. */
int baton__fail(baton_comm_t *comm, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The watch every wait checks (fail.c): an abort on this rank, a failure a
 * transport has seen, a local rank in another call. */
int baton__comm_check(void *ctx, char *why, size_t whylen);
/* Some rank is reached other than through this host's memory (TCP). */
int baton__reaches_other_hosts(const baton_comm_t *comm);

/* What baton_last_init_error returns (bootstrap.c; uniqueid.c writes it too). */
extern char baton__init_error[BATON__ERRLEN];
/* uniqueid.c: reads "baton-id-1 <host:port> <nonce>" (-1 when it is not
 * one); and takes the store that baton_get_unique_id started for that
 * nonce in this process out of the registry, NULL when there is none. */
int baton__unique_id_parse(const baton_unique_id_t *id, char *addr, size_t addrlen, char *nonce);
baton__store_server_t *baton__unique_id_adopt(const char *nonce);

/* A barrier through the ring's connections (a one-byte allgather). */
int baton__ring_barrier(baton_comm_t *comm);

/* Starts a collective: 0, or the code of an earlier failure or abort. */
int baton__comm_begin(baton_comm_t *comm, const char *name);

/* Connections used by the schedule's steps. */
baton__conn_t *baton__conn_to(baton_comm_t *comm, int peer);
baton__conn_t *baton__conn_from(baton_comm_t *comm, int peer);

/* What the executor needs besides the schedule. Offsets and lengths are in
 * elements, per chunk; out_off[c] == BATON__NO_OUT when this rank does not
 * keep chunk c. */
#define BATON__NO_OUT ((size_t)-1)
typedef struct {
  const char *in;
  char *out;
  size_t elsize;
  baton_dtype_t dtype;
  baton_op_t op;
  int root; /* broadcast */
} baton__exec_args_t;

int baton__exec(baton_comm_t *comm, const baton__exec_args_t *a);

/* Bytes of scratch the current schedule needs for `elsize`-byte elements:
 * the WORK of the chunks this rank has no output for. */
size_t baton__sched_work_bytes(const baton_comm_t *comm, size_t elsize);
/* Makes comm->work hold at least `bytes`, pre-faulted; BATON_ENOMEM when it
 * cannot or when that passes BATON_SCRATCH_BYTES. */
int baton__work_reserve(baton_comm_t *comm, size_t bytes);

/* BATON_ALGO: fills forced[coll] for each collective it names (NULL for the
 * others); BATON_EUSAGE naming an unknown algorithm or collective. */
int baton__algo_parse(const char *spec, const baton__algo_t **forced, char *err, size_t errlen);
/* The algorithm for this call (select.c): BATON_ALGO's where it can serve
 * the call, else the cost model's choice. Logs why at INFO. */
const baton__algo_t *baton__select(baton_comm_t *comm, baton__coll_t coll, size_t count,
                                   size_t elsize);
/* After the connections: the link costs (rank 0's tune file, shared through
 * the store) and the empty cache of decisions; and their release. */
int baton__select_init(baton_comm_t *comm, char *err, size_t errlen);
void baton__select_free(baton_comm_t *comm);

/* The flat algorithm (coll/flat.c): whether it can serve this call, and the
 * call itself. count is the per-rank count of the public call. */
int baton__flat_fits(const baton_comm_t *comm, baton__coll_t coll, size_t count, size_t elsize);
int baton__flat_run(baton_comm_t *comm, baton__coll_t coll, size_t count,
                    const baton__exec_args_t *a);

#endif /* BATON_COMM_H */
