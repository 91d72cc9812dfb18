/*
 * sim_impl.h - what the simulator's two files share (sim.c: the call, its
 * rules, its rounds and panels; sim_step.c: running one step of one rank).
 */
#ifndef BATON_SIM_IMPL_H
#define BATON_SIM_IMPL_H

#include "sim_val.h"

typedef struct baton__sim_val val_t;

typedef struct msg {
  struct msg *next, *all; /* the receiver's queue; every message, when clocks are kept */
  int from, to, step, kind, src, chunk, n;
  int taken;  /* the receiver's own clock when it took the message; 0: not yet */
  int *clock; /* the sender's vector clock as it sent */
  unsigned *val, val1;
  int *origin, origin1;
} msg_t;

typedef struct {
  msg_t **m;
  int n, cap;
} pending_t;

enum { CELL_IN = 1, CELL_OUT = 2, CELL_CLOBBERED = 4, CELL_BOX = 8 };

struct baton__sim_state {
  int n, materialized, alltoall;
  baton__sim_pool_t pool; /* the values */
  unsigned *work;         /* [r * n + c] */
  int *origin;            /* [r * n + c], alltoall only (elsewhere a chunk stays at its index) */
  unsigned char *flags;   /* [r * n + c]: CELL_* */
  size_t *len;
  unsigned *in_val; /* [r]: {r} */
  msg_t **head, **tail, *all, *spare_msg;
  int *at, *nsteps, *base, *window, nput, ndone;
  baton__step_t **win, *tmp;
  unsigned char *put, *blocked; /* [r]: waits in this round */
  unsigned char *done;          /* [r]: reached direct-done */
  int *woken, nwoken;           /* ranks to run again in this round */
  int *clock;                   /* [r * n + t], when the overwrite rule is checked */
  pending_t *pending;
  baton__sim_panel_t *p; /* the round being run */
};
typedef struct baton__sim_state st_t;

static inline size_t at(const st_t *t, int r, int c) {
  return (size_t)r * (size_t)t->n + (size_t)c;
}

/* In place, WORK of an output chunk is the INPUT of the same chunk
 * (alltoall in place works from a copy of its input). */
static inline int aliased(const st_t *t, size_t k) {
  return (t->flags[k] & CELL_IN) && (t->flags[k] & CELL_OUT) && !t->alltoall;
}

/* Step i of rank r (a window of it for a large call, rebuilt on demand). */
const baton__step_t *baton__sim_step_of(baton__sim_t *s, int r, int i);
/* Records an error of class e at rank r's step i (-1: none). */
void baton__sim_report(baton__sim_t *s, baton__sim_err_t e, int r, int i, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* sim_step.c: runs rank r's step i; 1 when it ran, 0 when it waits. */
int baton__sim_run_step(baton__sim_t *s, int r, int i);
/* Value v (origin o) lands in rank r's WORK of chunk c, by step i. */
void baton__sim_land(baton__sim_t *s, int r, int i, int c, unsigned v, int o);
void baton__sim_msg_free(st_t *t, msg_t *m);

#endif /* BATON_SIM_IMPL_H */
