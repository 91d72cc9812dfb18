/*
 * sim.h - the simulator and validator of schedules (sim.c), shared by the
 * schedule tests and baton-viz.
 *
 * It builds the schedules of all N ranks of one call and runs them side by
 * side on *values* instead of numbers: a value is the set of ranks whose
 * contributions it holds, with the chunk it started as (its origin) and
 * whether its reduction was finished (AVG divided). Every rank has INPUT
 * (fixed), WORK (one cell per chunk) and, for MAILBOX_* steps, a mailbox;
 * messages go through a FIFO queue per (sender, receiver), as on the
 * transports; the chunks are those of baton__layout_fill. Everything is
 * checked against schedule.h and the collective's definition, and every
 * error is reported by name: rank, step index, kind and what was wrong
 * (baton__sim_err_t says which class).
 *
 * Rounds: the steps are taken in (phase, step) order; a round runs every
 * step of every rank up to its key as far as the messages allow, so a
 * receive whose message comes later lands where it really arrives. With
 * call.panels the simulator keeps, per round, what baton-viz draws.
 */
#ifndef BATON_SIM_H
#define BATON_SIM_H

#include "algo.h"

/* The rule that WORK a rank has sent is not overwritten too early needs a
 * vector clock per rank and message: checked up to this many ranks. */
#define BATON__SIM_HB_MAX 256

typedef enum {
  BATON__SIM_E_BUILD,   /* the builder refused the call, or overflowed */
  BATON__SIM_E_STEP,    /* a field out of range: kind, phase, src, chunk, n, a peer */
  BATON__SIM_E_STEPS,   /* nsteps > algo->max_steps(N), or that > baton__max_steps(N) */
  BATON__SIM_E_ORDER,   /* a rank's rounds go back in (phase, step) */
  BATON__SIM_E_MAILBOX, /* a mailbox step without the trait, or before the rank's put */
  BATON__SIM_E_EMPTY,   /* sends, copies or combines something that is not there */
  BATON__SIM_E_RUN,     /* the two ends of a message disagree on its run */
  BATON__SIM_E_TWICE,   /* a contribution added twice */
  BATON__SIM_E_MIX,     /* two different chunks combined */
  BATON__SIM_E_FINISH,  /* finish on a partial sum or a kind that does not reduce, twice, never */
  BATON__SIM_E_NO_MESSAGE, /* a receive (or rendezvous) that waits forever */
  BATON__SIM_E_UNRECEIVED, /* a message nobody receives */
  BATON__SIM_E_OVERWRITE,  /* sent WORK overwritten before the send is known to have arrived */
  BATON__SIM_E_INPUT,      /* INPUT read after a step overwrote it (in place, WORK is INPUT) */
  BATON__SIM_E_RESULT,     /* the end is not what the collective promises */
  BATON__SIM_E_COUNT
} baton__sim_err_t;

/* One call, as baton__build_t and baton__layout_args_t describe it. */
typedef struct {
  baton__coll_t coll;
  const baton__algo_t *algo;
  int size, root;
  size_t count;                  /* of the public call (v-variants: the sum) */
  const size_t *counts, *displs; /* the v-variants' (NULL: count / N each) */
  const int *order, *host;       /* as baton__build_t: NULL for 0..N-1, every rank its own */
  int panels;                    /* keep the rounds for drawing: N * N cells each */
} baton__sim_call_t;

/* A value (contributions, finished): owned by the simulator. */
typedef struct baton__sim_val baton__sim_val_t;
int baton__sim_val_count(const baton__sim_val_t *v); /* 0 for NULL */
int baton__sim_val_has(const baton__sim_val_t *v, int rank);
int baton__sim_val_finished(const baton__sim_val_t *v);
/* "{0-3,5}" into buf; returns buf. */
char *baton__sim_val_str(const baton__sim_val_t *v, char *buf, size_t cap);

typedef struct {
  const baton__sim_val_t *v; /* NULL: nothing there */
  int origin;                /* the chunk it started as */
} baton__sim_cell_t;

/* A message, or a read of another rank's mailbox, as it is received. */
typedef struct {
  int from, to;       /* a mailbox read: `from` owns the mailbox */
  int send_kind;      /* the sender's kind; -1 for a mailbox */
  int recv_kind;      /* the receiver's kind */
  int src;            /* what the sender sent: BATON__FROM_*, or -1: what it just received */
  int with;           /* a reducing receive's second operand, BATON__FROM_* */
  int schunk, rchunk; /* the run's first chunk on the sender and on the receiver */
  int n;
  int carried; /* the most contributions any chunk of it holds */
} baton__sim_xfer_t;

typedef struct {
  int rank, chunk, n; /* a COPY: INPUT to WORK */
} baton__sim_copy_t;

enum { BATON__SIM_SENT_INPUT = 1, BATON__SIM_SENT_WORK = 2 };

/* One round, or (phase -1) the result. */
typedef struct {
  int phase, step;
  baton__sim_xfer_t *x; /* by receiver, then sender */
  int nx;
  baton__sim_copy_t *cp;
  int ncp;
  baton__sim_cell_t *work; /* [rank * N + chunk]: WORK before the round */
  baton__sim_cell_t *pass; /* [rank]: what it received and sent on unstored; origin -1: none */
  unsigned char *sent;     /* [rank * N + chunk]: BATON__SIM_SENT_* in this round */
} baton__sim_panel_t;

typedef struct baton__sim_state baton__sim_state_t;

typedef struct {
  baton__sim_call_t call;
  baton__sched_t *sched; /* [size]: every rank's schedule, which a test may alter */
  int cap;               /* steps each schedule has room for */
  int nerrors;
  unsigned found;       /* bit (1u << baton__sim_err_t) for every class found */
  char errors[16][320]; /* the first ones */
  int hb_checked;       /* the overwrite rule was checked (size <= BATON__SIM_HB_MAX) */
  baton__sim_panel_t *panels;
  int npanels;
  int *panel_of; /* [rank * cap + step]: the round a step ran in; -1: never */
  baton__sim_state_t *st;
} baton__sim_t;

/* Builds every rank's schedule for `call` into s (zeroed by it); 0, or -1
 * with the errors in s. Then baton__sim_run runs and checks them: 0 when
 * they do what the collective promises without breaking a rule, else -1.
 * baton__sim_free releases everything either allocated. */
int baton__sim_build(baton__sim_t *s, const baton__sim_call_t *call);
int baton__sim_run(baton__sim_t *s);
void baton__sim_free(baton__sim_t *s);

/* The chunk holds data in this collective (broadcast and reduce: only the
 * root's). */
int baton__sim_chunk_used(const baton__sim_call_t *call, int chunk);
/* Rank r has chunk c in INPUT. */
int baton__sim_has_input(const baton__sim_t *s, int r, int c);
/* Elements of chunk c as the call is laid out (baton__layout_fill; the
 * same on every rank). */
size_t baton__sim_chunk_len(const baton__sim_t *s, int c);
/* The contributions a complete chunk holds: N for reductions, else 1. */
int baton__sim_need(const baton__sim_call_t *call);
/* The collective reduces (finish matters). */
int baton__sim_reduces(baton__coll_t coll);

#endif /* BATON_SIM_H */
