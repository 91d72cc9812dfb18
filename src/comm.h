/* comm.h - the communicator, as the library sees it. */
#ifndef BATON_COMM_H
#define BATON_COMM_H

#include <pthread.h>
#include <stdatomic.h>

#include "internal.h"
#include "algo.h"
#include "trace.h"
#include "transport/shm.h"
#include "transport/tcp.h"

struct baton_comm {
  int rank, size;
  baton__params_t params;
  baton__secret_t secret; /* BATON_SECRET; every connection proves it */
  /* The store: served in the process of rank 0 of the communicator made
   * from the environment or a unique id, and held (baton__store_hold) by
   * each communicator of that process made from it; the others NULL. */
  baton__store_server_t *server;
  baton__store_t *store;      /* this communicator's client; a child's keys have a prefix */
  uint64_t id;                /* random, or derived from the parent's; the same on every rank */
  uint32_t splits;            /* baton_comm_split calls so far: numbers the children (split.c) */
  char (*hosts)[64];          /* host name of every rank, for people */
  int *group;                 /* per rank: lowest rank sharing its memory */
  int *node;                  /* per rank: its NUMA node on its host, or BATON__NO_NODE (numa.c) */
  int one_host;               /* every rank shares this rank's memory */
  int cma;                    /* this rank reads its host's peers through the kernel (shm.h) */
  baton__net_t net[2];        /* the transports in use, reached only through their tables */
  int nnet;                   /* 0 for a single rank */
  baton__net_t *host_net;     /* the one with a rendezvous (shared memory), or NULL */
  baton__conn_t **to, **from; /* per peer rank, NULL when not connected */
  size_t slot_bytes;          /* segment size: the smallest slot of any connection */
  int *order;                 /* the ring: ranks in ring order */
  int *host;                  /* per rank: its host's index along the ring */
  int nhosts;
  const baton__algo_t *forced[BATON__COLL_COUNT]; /* BATON_ALGO, NULL: choose */
  struct baton__select_state *select;             /* link costs and cached decisions (select.c) */
  size_t stream_slot_bytes;         /* segment of messages of several chunks (exec.c) */
  struct baton_request *calls_free; /* the pool of call objects (call.c) */
  struct baton_request *calls_all;
  struct baton_request *live_first, *live_last; /* issued, not finished, in issue order */
  struct baton__engine *engine;                 /* progress.c: NULL until the first i-call */
  struct baton__p2p *p2p;                       /* point-to-point (p2p.c) */
  _Atomic int busy;                             /* a thread is inside a call on it (coll.c) */
  baton__conn_t **flushers; /* the connections that buffer (TCP), once known (exec.c) */
  int nflushers, flushers_known;
  char **boxes;    /* the host's mailboxes, [set * size + rank], once known (exec.c) */
  size_t box_room; /* and the bytes of each */
  int boxes_known;
  uint32_t fan_pieces; /* the host's fan-out stream: pieces its broadcasts have taken (exec.c) */
  _Atomic uint64_t
      seq; /* calls issued so far: the last call's number (read by a waiting progress thread) */
  _Atomic uint32_t shm_calls; /* the host's rendezvous numbers taken so far (likewise) */
  /* Registered memory (mem.c): the table, the allocations made so far
   * (the same on every rank: a collective), and a count that moves with
   * each, which a repeated call's plan must have been made under. */
  struct baton__region *regions;
  int nregions;
  uint32_t mem_allocs, mem_gen;
  /* Local memory (mem_local.c): the peers' blocks mapped here, and a
   * pidfd per rank (-1: none yet), once a call has needed them. */
  struct baton__lmap *lmaps;
  int nlmaps, lmaps_cap;
  size_t lmapped; /* bytes, of all of them */
  int *pidfds;
  /* The signature of the call whose step runs now: what the transports
   * stamp on what they send and check what they receive against. */
  baton__sig_t sig;
  baton__watch_t watch;        /* what every wait checks (fail.c) */
  _Atomic int abort_requested; /* baton_comm_abort was called */
  /* The failure that broke this communicator, written once (fail.c): the
   * thread that wins fatal_claimed writes fatal_msg, then publishes
   * fatal_rc; a reader that sees fatal_rc != 0 sees the whole message. */
  _Atomic int fatal_rc, fatal_claimed;
  char fatal_msg[BATON__ERRLEN];
  baton__trace_t *trace; /* BATON_TRACE; NULL when unset */
  /* What the last failed call did: the writer (baton__set_error, under
   * err_mu) fills the buffer not shown and then shows it, so a reader in
   * another thread sees the old message or the new one, whole. */
  pthread_mutex_t err_mu;
  char last_error[2][BATON__ERRLEN];
  _Atomic int err_shown;
  /* The family (split.c): the communicator this one was split from, while
   * it lives, and this one's children; links under split.c's lock. A
   * child fails when its parent (or, through it, a grandparent) fails. */
  struct baton_comm *parent, *children, *next_sibling;
  int from_split;                 /* made by a split: its checks look at the parent */
  _Atomic unsigned failures_seen; /* baton__failures when the last look found nothing */
  int parent_rc;                  /* the parent failed and was destroyed since: its code */
  char parent_msg[BATON__ERRLEN]; /* and why */
};

/* A new communicator, zeroed but for its error lock; baton__comm_free
 * frees it (bootstrap.c). */
baton_comm_t *baton__comm_new(void);

/* Replaces comm's last error (baton_comm_last_error); safe from any thread. */
void baton__set_error(baton_comm_t *comm, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The family (split.c). Failures of communicators so far in this process
 * (fail.c counts them, baton_comm_abort too): a child looks up its family
 * only when the count has moved since it last found nothing. */
extern _Atomic unsigned baton__failures;
/* After a split: child is parent's, until one of them is destroyed. */
void baton__family_link(baton_comm_t *parent, baton_comm_t *child);
/* At the start of baton_comm_destroy: comm leaves its parent's children,
 * and its children lose their parent (a failure it had is left with them). */
void baton__family_unlink(baton_comm_t *comm);
/* 0, or the code of a failure of comm's parent or an ancestor through
 * living parents, with why naming it ("the parent communicator ..."). Any
 * thread; cheap while nothing anywhere has failed. */
int baton__family_check(baton_comm_t *comm, char *why, size_t whylen);
/* What baton__family_check's messages begin with. */
#define BATON__PARENT_FAILED "the parent communicator"

/* Records what failed in comm->last_error (and at WARN) and returns rc.
 * A failure of communication (a lost, stuck, mismatched or aborted peer,
 * a malformed message) breaks the communicator: every peer is told, and
 * later calls fail at once with the same code. */
int baton__fail(baton_comm_t *comm, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The end-of-init barrier: collective number 0, before any call (coll.c). */
int baton__init_barrier(baton_comm_t *comm);

/* The watch every wait checks (fail.c): an abort on this rank, a failure a
 * transport has seen, a local rank in another call. */
int baton__comm_check(void *ctx, char *why, size_t whylen);
/* Some rank is reached other than through this host's memory (TCP). */
int baton__reaches_other_hosts(const baton_comm_t *comm);

/* The steps of creating a communicator that one made from the environment
 * and one made from a parent share (bootstrap.c): the tables of size
 * ranks; everything after ranks, hosts, store and id are known (origin ends
 * the communicator part of the INIT line); and freeing it, whole or in
 * part, without a barrier. */
int baton__comm_tables(baton_comm_t *c, char *err, size_t errlen);
int baton__comm_connect(baton_comm_t *c, const char *origin, char *err, size_t errlen);
/* clean: every rank ends it together (baton_comm_destroy's barrier
 * passed), so the transports may end their streams gently. */
void baton__comm_free(baton_comm_t *c, int clean);

/* numa.c: this process's NUMA node, from the CPUs it may run on and the
 * sysfs directory of nodes (/sys/devices/system/node), or BATON__NO_NODE;
 * and BATON_NUMA's list ("0-1,2-3": a node per group of ranks, every rank
 * in one) read into node[size], or BATON_EUSAGE naming what is wrong. */
#define BATON__NO_NODE (-1)
int baton__numa_node_of_self(const char *sysfs_nodes);
int baton__numa_parse(const char *spec, int size, int *node, char *err, size_t errlen);

/* What baton_last_init_error returns, the calling thread's (bootstrap.c;
 * uniqueid.c and mem_local.c write it too). */
extern _Thread_local char baton__init_error[BATON__ERRLEN];
/* uniqueid.c: reads "baton-id-1 <host:port> <nonce>" (-1 when it is not
 * one); and takes the store that baton_get_unique_id started for that
 * nonce in this process out of the registry, NULL when there is none. */
int baton__unique_id_parse(const baton_unique_id_t *id, char *addr, size_t addrlen, char *nonce);
baton__store_server_t *baton__unique_id_adopt(const char *nonce);

/* Starts a collective: 0, or the code of an earlier failure or abort. */
int baton__comm_begin(baton_comm_t *comm, const char *name);

/* Connections used by the schedule's steps. */
baton__conn_t *baton__conn_to(baton_comm_t *comm, int peer);
baton__conn_t *baton__conn_from(baton_comm_t *comm, int peer);

/* BATON_ALGO: fills forced[coll] for each collective it names (NULL for the
 * others); BATON_EUSAGE naming an unknown algorithm or collective. */
int baton__algo_parse(const char *spec, const baton__algo_t **forced, char *err, size_t errlen);
/* The algorithm for this call (select.c): BATON_ALGO's where it can serve
 * the call, else the cost model's choice. Logs why at INFO. */
const baton__algo_t *baton__select(baton_comm_t *comm, baton__coll_t coll, size_t count,
                                   size_t elsize);
/* The same as if no buffer were registered: what a direct call runs when
 * some rank's buffers are not (exec_direct.c). */
const baton__algo_t *baton__select_staged(baton_comm_t *comm, baton__coll_t coll, size_t count,
                                          size_t elsize);
/* After the connections: the link costs (rank 0's tune file, shared through
 * the store) and the empty cache of decisions; and their release. */
int baton__select_init(baton_comm_t *comm, char *err, size_t errlen);
void baton__select_free(baton_comm_t *comm);

/* Whether the flat algorithm can serve this call: every rank on one host
 * and the input within a mailbox. count is the per-rank count of the
 * public call. */
int baton__flat_fits(const baton_comm_t *comm, baton__coll_t coll, size_t count, size_t elsize);
/* Bytes one mailbox holds, past which flat's broadcast fans out; 0 off one host. */
double baton__flat_room(const baton_comm_t *comm);

#endif /* BATON_COMM_H */
