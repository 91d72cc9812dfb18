/*
 * select.h - choosing an algorithm from the cost model (select.c).
 *
 * A communicator's links are of three kinds: the shared-memory channels of
 * the ring ("shm"), the smaller shared-memory channels between any two
 * ranks of a host that the other algorithms use ("pair"), and TCP ("tcp").
 * Each has its alpha, beta and gamma (model.h): built-in defaults measured
 * on the development machine, replaced line by line by the tune file that
 * baton-tune writes. A decision may depend only on what every rank knows
 * alike: the collective, the size, N, the topology and these costs (which
 * rank 0 reads and shares), so every rank picks the same algorithm.
 */
#ifndef BATON_SELECT_H
#define BATON_SELECT_H

#include <stddef.h>
#include <stdio.h>

#include "model.h"
#include "algo.h"

typedef enum {
  BATON__LINK_SHM,
  BATON__LINK_PAIR,
  BATON__LINK_TCP,
  BATON__LINK_COUNT
} baton__link_t;

/* One link kind's costs as the tune file states them: alpha is the latency
 * per message with at most one rank per core; oversub is what each message
 * costs more per rank beyond one per core (ranks wait for the scheduler);
 * obeta is beta when ranks outnumber cores and a message is larger than a
 * core's L2 cache (0: beta times the ranks per core): then the memory bus,
 * busy whatever the number of ranks, paces the copies, and each kind of
 * channel pays its own there. */
typedef struct {
  double alpha, beta, gamma, oversub, obeta;
} baton__link_cost_t;

/* The doubles of one baton__link_cost_t, as rank 0 publishes them. */
#define BATON__LINK_DOUBLES ((int)(sizeof(baton__link_cost_t) / sizeof(double)))

extern const char *const baton__link_names[BATON__LINK_COUNT];

/* The built-in costs. */
void baton__link_defaults(baton__link_cost_t cost[BATON__LINK_COUNT]);

/* Reads a tune file into cost (lines it lacks keep their values). 1 when
 * the file was read, 0 when it does not exist, -1 with why filled when a
 * line is malformed (the lines before it are taken). */
int baton__tune_read(const char *path, baton__link_cost_t cost[BATON__LINK_COUNT], char *why,
                     size_t whylen);
/* Writes cost as a tune file, with `comment` as its first line ("# ..."),
 * through a temporary file and a rename. 0, or -1 with errno set. */
int baton__tune_write(const char *path, const baton__link_cost_t cost[BATON__LINK_COUNT],
                      const char *comment);
/* The same text to f. */
void baton__tune_print(FILE *f, const baton__link_cost_t cost[BATON__LINK_COUNT],
                       const char *comment);
/* BATON_TUNE_FILE, else $XDG_CACHE_HOME/baton/tune, else ~/.cache/baton/tune. */
void baton__tune_path(const char *knob, char *path, size_t len);

/* Everything a decision depends on, the same on every rank. */
typedef struct {
  int size;         /* N */
  int tcp;          /* some link of the communicator is TCP: it sets the pace */
  int tcp_inside;   /* BATON_TRANSPORT=tcp with several ranks on a host */
  int flat_fits;    /* baton__flat_fits for this call */
  double box_bytes; /* a mailbox's room: flat's broadcast past it fans out (0: never) */
  int direct_ok;    /* direct may serve: one host, and registered memory, or an allgather or
                       alltoall with BATON_CMA (baton__algo_by_cma) */
  int cma;          /* and it would copy by the kernel: the communicator has no registered memory */
  double cache_bytes;            /* a core's L2 cache (rank 0's) */
  double cma_beta;               /* a copy by the kernel, s/B (rank 0's; 0: the kernel refused) */
  double memcpy_beta;            /* memcpy beside it, s/B (rank 0's, in the cache) */
  double cma_big_beta;           /* the kernel's copy past the cache (rank 0's; 0: not measured,
                                  * and then it does not serve there) */
  double memcpy_big_beta;        /* memcpy beside it */
  double ranks_per_core;         /* the most ranks of one host per core (rank 0's; 0: one) */
  size_t scratch_bytes;          /* BATON_SCRATCH_BYTES */
  baton__cost_t ring;            /* what the ring (and its chain), flat and direct pay; segment:
                                  * a slot */
  baton__cost_t pair;            /* what every other algorithm pays */
  baton__cost_t local;           /* shared memory between two ranks of a host (hier's fold) */
  double ring_piece, pair_piece; /* bytes of a chunk one round moves (exec.c) */
  double ring_wait, pair_wait;   /* of ring's and pair's alpha, the wait for a descheduled
                                  * peer (oversub), which back-to-back rooted calls hide */
  const baton__algo_t *forced;   /* BATON_ALGO for this collective, or NULL */
  int hosts, hostmax;            /* hosts, and the most ranks on one (hier) */
} baton__select_in_t;

/* A candidate and its predicted seconds. */
typedef struct {
  const baton__algo_t *algo;
  double t;
} baton__cand_t;

/* The model's choice for `bytes` (as model.h counts them) of `coll`:
 * every algorithm of the table that serves coll and fits, ranked by
 * predicted time (ties by table order), at most `cap` of them in cands
 * (*ncands set). The forced algorithm wins where it can serve the call;
 * where it cannot, why says so and the best other is returned. */
const baton__algo_t *baton__select_rank(const baton__select_in_t *in, baton__coll_t coll,
                                        double bytes, baton__cand_t *cands, int cap, int *ncands,
                                        char *why, size_t whylen);

/* Predicted seconds of `algo` for this call: the model's formula with the
 * ring's costs (ring, flat) or the pair channels' (the others), plus every
 * message's alpha again for each round of the executor beyond the first
 * (a round moves one piece of each chunk). */
double baton__select_predict(const baton__select_in_t *in, const baton__algo_t *algo,
                             baton__coll_t coll, double bytes);

/* Bytes of scratch `algo` may need for `bytes` of `coll` on any rank: the
 * blocks a rank only passes on. An estimate from the algorithm's shape. */
double baton__algo_scratch(const baton__algo_t *algo, baton__coll_t coll, double bytes);

/* The message of `count` elements of coll as model.h counts it. */
double baton__model_bytes(baton__coll_t coll, size_t count, size_t elsize, int size);

/* For baton-tune, which links the library's internals. What the
 * communicator's collectives are priced as: "shm", "tcp" or "shm+tcp", and
 * the most ranks of one host per core. */
struct baton_comm;
const char *baton__select_net(const struct baton_comm *comm, double *ranks_per_core);
/* Rank 0's memcpy over its copy by the kernel, per byte (the same number
 * on every rank; 0 when either was not measured): how much faster a core
 * copies within its process than across two. */
double baton__select_copy_ratio(const struct baton_comm *comm);
/* Bytes of a chunk that one round of the executor moves: a window of ring
 * segments (ring != 0), or a share of a window of pair slots. */
double baton__select_piece(const struct baton_comm *comm, int ring);
/* Forces `algo` (NULL: the model's choice) for coll, forgetting the cached
 * decisions. Every rank must do the same. */
void baton__select_force(struct baton_comm *comm, baton__coll_t coll, const baton__algo_t *algo);

#endif /* BATON_SELECT_H */
