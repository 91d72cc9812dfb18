/*
 * sim_val.h - the values of the simulator (sim_val.c, for sim.c): sets of
 * contributing ranks, kept as sorted intervals so that a set of 5000 ranks
 * is a few bytes, immutable once made and shared by reference count
 * between the cells and messages that hold them. A value is named by an
 * id into its pool; id 0 is "nothing".
 */
#ifndef BATON_SIM_VAL_H
#define BATON_SIM_VAL_H

#include <stddef.h>

#include "sim.h"

struct baton__sim_val {
  int refs, fin, nint;
  int iv[]; /* [lo, hi) pairs, sorted and apart */
};

typedef struct {
  struct baton__sim_val **tab; /* by id */
  unsigned ntab, captab;
  unsigned *freed, nfreed, capfreed; /* ids free to reuse */
  unsigned *spare, nspare, capspare; /* ids whose one-interval value may be reused */
  int keep;                          /* free nothing before the end (panels point at values) */
  int *iv;                           /* scratch of a union */
  size_t capiv;
} baton__sim_pool_t;

/* calloc and realloc that abort when memory runs out (offline tools). */
void *baton__sim_alloc(size_t n, size_t size);
void *baton__sim_grow(void *p, size_t n, size_t size);

/* A new value (one reference) of nint intervals iv, finished or not. */
unsigned baton__sim_new(baton__sim_pool_t *p, int fin, int nint, const int *iv);
unsigned baton__sim_ref(baton__sim_pool_t *p, unsigned id);
void baton__sim_drop(baton__sim_pool_t *p, unsigned id);
/* a + b (new), or 0 when they share ranks, [*lo, *hi) the first shared. */
unsigned baton__sim_union(baton__sim_pool_t *p, unsigned a, unsigned b, int *lo, int *hi);
/* v finished, as a new value (v's reference is dropped). */
unsigned baton__sim_finish(baton__sim_pool_t *p, unsigned v);
int baton__sim_same(const baton__sim_val_t *a, const baton__sim_val_t *b);
int baton__sim_full(const baton__sim_val_t *v, int n); /* every rank of n */
void baton__sim_pool_free(baton__sim_pool_t *p);

static inline const baton__sim_val_t *baton__sim_at(const baton__sim_pool_t *p, unsigned id) {
  return id ? p->tab[id] : NULL;
}

#endif /* BATON_SIM_VAL_H */
