/*
 * sim_val.c - the simulator's values (sim_val.h): sets of ranks as sorted
 * intervals in a pool of reference-counted, immutable objects.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_val.h"

typedef struct baton__sim_val val_t;

void *baton__sim_alloc(size_t n, size_t size) {
  void *p = calloc(n ? n : 1, size);
  if (!p) {
    fputs("baton sim: out of memory\n", stderr);
    abort();
  }
  return p;
}

void *baton__sim_grow(void *p, size_t n, size_t size) {
  p = realloc(p, (n ? n : 1) * size);
  if (!p) {
    fputs("baton sim: out of memory\n", stderr);
    abort();
  }
  return p;
}

unsigned baton__sim_new(baton__sim_pool_t *t, int fin, int nint, const int *iv) {
  unsigned id;
  if (nint <= 1 && t->nspare) { /* the ring makes and drops one a step: reuse them */
    id = t->spare[--t->nspare];
    *t->tab[id] = (val_t){.refs = 1, .fin = fin, .nint = nint};
    memcpy(t->tab[id]->iv, iv, 2 * (size_t)nint * sizeof(int));
    return id;
  }
  val_t *v = baton__sim_alloc(1, sizeof *v + 2 * (size_t)(nint > 1 ? nint : 1) * sizeof(int));
  *v = (val_t){.refs = 1, .fin = fin, .nint = nint};
  memcpy(v->iv, iv, 2 * (size_t)nint * sizeof(int));
  if (t->nfreed) {
    id = t->freed[--t->nfreed];
  } else {
    if (t->ntab >= t->captab)
      t->tab =
          baton__sim_grow(t->tab, t->captab = t->captab ? 2 * t->captab : 1024, sizeof *t->tab);
    id = t->ntab++;
  }
  t->tab[id] = v;
  return id;
}

unsigned baton__sim_ref(baton__sim_pool_t *t, unsigned id) {
  if (id)
    t->tab[id]->refs++;
  return id;
}

void baton__sim_drop(baton__sim_pool_t *t, unsigned id) {
  if (!id || --t->tab[id]->refs > 0 || t->keep)
    return;
  if (t->tab[id]->nint <= 1) {
    if (t->nspare == t->capspare)
      t->spare = baton__sim_grow(t->spare, t->capspare = t->capspare ? 2 * t->capspare : 1024,
                                 sizeof(unsigned));
    t->spare[t->nspare++] = id;
    return;
  }
  free(t->tab[id]);
  t->tab[id] = NULL;
  if (t->nfreed == t->capfreed)
    t->freed = baton__sim_grow(t->freed, t->capfreed = t->capfreed ? 2 * t->capfreed : 1024,
                               sizeof(unsigned));
  t->freed[t->nfreed++] = id;
}

int baton__sim_val_count(const baton__sim_val_t *v) {
  int k = 0;
  for (int i = 0; v && i < v->nint; i++)
    k += v->iv[2 * i + 1] - v->iv[2 * i];
  return k;
}

int baton__sim_val_has(const baton__sim_val_t *v, int rank) {
  for (int i = 0; v && i < v->nint; i++)
    if (rank >= v->iv[2 * i] && rank < v->iv[2 * i + 1])
      return 1;
  return 0;
}

int baton__sim_val_finished(const baton__sim_val_t *v) { return v && v->fin; }

char *baton__sim_val_str(const baton__sim_val_t *v, char *buf, size_t cap) {
  size_t o = (size_t)snprintf(buf, cap, "{");
  for (int i = 0; v && i < v->nint && o < cap; i++) {
    int lo = v->iv[2 * i], hi = v->iv[2 * i + 1] - 1;
    o += (size_t)(lo == hi ? snprintf(buf + o, cap - o, "%s%d", i ? "," : "", lo)
                           : snprintf(buf + o, cap - o, "%s%d-%d", i ? "," : "", lo, hi));
  }
  if (o < cap)
    snprintf(buf + o, cap - o, "}");
  return buf;
}

int baton__sim_same(const val_t *a, const val_t *b) {
  return a && b && a->nint == b->nint && a->fin == b->fin &&
         !memcmp(a->iv, b->iv, 2 * (size_t)a->nint * sizeof(int));
}

int baton__sim_full(const val_t *v, int n) {
  return v && v->nint == 1 && v->iv[0] == 0 && v->iv[1] == n;
}

unsigned baton__sim_union(baton__sim_pool_t *t, unsigned a, unsigned b, int *lo, int *hi) {
  const val_t *x = baton__sim_at(t, a), *y = baton__sim_at(t, b);
  size_t need = 2 * (size_t)(x->nint + y->nint);
  if (need > t->capiv)
    t->iv = baton__sim_grow(t->iv, t->capiv = need, sizeof(int));
  int i = 0, j = 0, k = 0;
  while (i < x->nint || j < y->nint) {
    const int *in = j >= y->nint || (i < x->nint && x->iv[2 * i] < y->iv[2 * j]) ? &x->iv[2 * i++]
                                                                                 : &y->iv[2 * j++];
    if (k && in[0] < t->iv[2 * k - 1]) {
      *lo = in[0], *hi = in[1] < t->iv[2 * k - 1] ? in[1] : t->iv[2 * k - 1];
      return 0;
    }
    if (k && in[0] == t->iv[2 * k - 1])
      t->iv[2 * k - 1] = in[1];
    else
      t->iv[2 * k] = in[0], t->iv[2 * k + 1] = in[1], k++;
  }
  return baton__sim_new(t, 0, k, t->iv);
}

unsigned baton__sim_finish(baton__sim_pool_t *t, unsigned v) {
  const val_t *x = baton__sim_at(t, v);
  unsigned f = baton__sim_new(t, 1, x->nint, x->iv);
  baton__sim_drop(t, v);
  return f;
}

void baton__sim_pool_free(baton__sim_pool_t *t) {
  for (unsigned id = 1; id < t->ntab; id++)
    free(t->tab[id]);
  free(t->tab), free(t->freed), free(t->spare), free(t->iv);
}
