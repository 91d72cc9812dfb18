/*
 * sim.c - the simulator and validator of schedules (sim.h): runs the
 * schedules of every rank of one call on contribution sets, checks them
 * against schedule.h and the collective's definition, and keeps the rounds
 * for baton-viz.
 *
 * The values are those of sim_val.h, so that a ring of 5000 ranks costs a
 * few bytes a cell. Small calls keep every rank's
 * schedule whole (a test may alter it); larger ones keep a window of each
 * and rebuild it from the table as the run moves on.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
  int *at, *nsteps, *base, *window, nput;
  baton__step_t **win, *tmp;
  unsigned char *put, *blocked; /* [r]: waits in this round */
  int *woken, nwoken;           /* ranks to run again in this round */
  int *clock;                   /* [r * n + t], when the overwrite rule is checked */
  pending_t *pending;
  baton__sim_panel_t *p; /* the round being run */
};
typedef struct baton__sim_state st_t;

/* ---- The call */

int baton__sim_reduces(baton__coll_t c) {
  return c == BATON__COLL_ALLREDUCE || c == BATON__COLL_REDUCE_SCATTER ||
         c == BATON__COLL_REDUCE_SCATTERV || c == BATON__COLL_REDUCE;
}

int baton__sim_chunk_used(const baton__sim_call_t *call, int c) {
  return (call->coll != BATON__COLL_BROADCAST && call->coll != BATON__COLL_REDUCE) ||
         c == call->root;
}

int baton__sim_need(const baton__sim_call_t *call) {
  return baton__sim_reduces(call->coll) ? call->size : 1;
}

int baton__sim_has_input(const baton__sim_t *s, int r, int c) {
  return (s->st->flags[(size_t)r * (size_t)s->st->n + (size_t)c] & CELL_IN) != 0;
}

/* What rank r's output chunk c must end as: the rank whose input it is
 * (-1: every rank's, reduced) and the chunk it started as. */
static void promise(const baton__sim_call_t *k, int r, int c, int *from, int *origin) {
  *origin = c;
  switch (k->coll) {
  case BATON__COLL_BROADCAST:
  case BATON__COLL_SCATTER:
    *from = k->root;
    break;
  case BATON__COLL_ALLTOALL:
    *from = c, *origin = r; /* rank c's block for r */
    break;
  default:
    *from = baton__sim_reduces(k->coll) ? -1 : c;
  }
}

static size_t at(const st_t *t, int r, int c) { return (size_t)r * (size_t)t->n + (size_t)c; }

/* In place, WORK of an output chunk is the INPUT of the same chunk
 * (alltoall in place works from a copy of its input). */
static int aliased(const st_t *t, size_t k) {
  return (t->flags[k] & CELL_IN) && (t->flags[k] & CELL_OUT) && !t->alltoall;
}

static const baton__step_t *step_of(baton__sim_t *s, int r, int i) {
  st_t *t = s->st;
  if (t->materialized)
    return &s->sched[r].steps[i];
  if (i < t->base[r] || i >= t->base[r] + t->window[r]) { /* rebuild the window from i */
    baton__sched_t sc = {.steps = t->tmp, .cap = s->cap};
    baton__build_t b = {.coll = s->call.coll,
                        .rank = r,
                        .size = t->n,
                        .count = s->call.count,
                        .root = s->call.root,
                        .order = s->call.order,
                        .host = s->call.host};
    baton__schedule_build(&sc, s->call.algo, &b);
    int m = sc.nsteps - i < t->window[r] ? sc.nsteps - i : t->window[r];
    memcpy(t->win[r], t->tmp + i, (size_t)(m > 0 ? m : 0) * sizeof *t->tmp);
    t->base[r] = i;
  }
  return &t->win[r][i - t->base[r]];
}

static void report(baton__sim_t *s, baton__sim_err_t e, int r, int i, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void report(baton__sim_t *s, baton__sim_err_t e, int r, int i, const char *fmt, ...) {
  s->found |= 1u << e;
  if (s->nerrors++ >= (int)(sizeof s->errors / sizeof s->errors[0]))
    return;
  char *o = s->errors[s->nerrors - 1];
  size_t cap = sizeof s->errors[0], used = 0;
  if (r >= 0 && i >= 0) {
    const baton__step_t *st = step_of(s, r, i);
    used = (size_t)snprintf(o, cap, "rank %d step %d (%s, %s round %d): ", r, i,
                            st->kind < BATON__STEP_KIND_COUNT ? baton__kinds[st->kind].name : "?",
                            baton__phase_name((baton__phase_t)st->phase), st->step);
  } else if (r >= 0) {
    used = (size_t)snprintf(o, cap, "rank %d: ", r);
  }
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(o + used, cap - used, fmt, ap);
  va_end(ap);
}

/* ---- Building, and the rules a schedule obeys on its own */

static void check_step(baton__sim_t *s, int r, int i, const baton__step_t *st, int *last) {
  int n = s->call.size;
  unsigned does = baton__step_does(st->kind);
  int key = st->phase * 65536 + st->step, box = (does & BATON__DOES_MAILBOX) != 0;
  if (st->kind >= BATON__STEP_KIND_COUNT || st->phase >= BATON__PHASE_COUNT ||
      st->src > BATON__FROM_WORK)
    report(s, BATON__SIM_E_STEP, r, i, "kind %d, phase %d or src %d is not one of schedule.h",
           st->kind, st->phase, st->src);
  if (st->chunk < 0 || st->chunk >= n || st->n > n ||
      (st->n < 1 && st->kind != BATON__STEP_MAILBOX_PUT))
    report(s, BATON__SIM_E_STEP, r, i, "run of %d chunks from chunk %d, on %d chunks", st->n,
           st->chunk, n);
  if ((does & BATON__DOES_SEND) && (does & BATON__DOES_RECV) && st->n != 1)
    report(s, BATON__SIM_E_STEP, r, i, "passes on %d chunks; a *_send kind takes one", st->n);
  int sends = (does & BATON__DOES_SEND) != 0;
  int recvs = (does & BATON__DOES_RECV) || st->kind == BATON__STEP_MAILBOX_COPY;
  if (sends ? st->send_peer < 0 || st->send_peer >= n || st->send_peer == r : st->send_peer != -1)
    report(s, BATON__SIM_E_STEP, r, i, "send_peer %d %s", st->send_peer,
           sends ? "is not another rank" : "on a kind that does not send");
  if (recvs ? st->recv_peer < 0 || st->recv_peer >= n || st->recv_peer == r : st->recv_peer != -1)
    report(s, BATON__SIM_E_STEP, r, i, "recv_peer %d %s", st->recv_peer,
           recvs ? "is not another rank" : "on a kind that does not receive");
  if (st->finish && !(does & BATON__DOES_REDUCE))
    report(s, BATON__SIM_E_FINISH, r, i, "finish on a kind that does not reduce");
  if (box && !(s->call.algo->traits & BATON__ALGO_MAILBOX))
    report(s, BATON__SIM_E_MAILBOX, r, i, "a mailbox step in %s, which has no mailbox trait",
           s->call.algo->name);
  if (key < *last)
    report(s, BATON__SIM_E_ORDER, r, i, "comes after round %s %d", baton__phase_name(*last >> 16),
           *last & 0xffff);
  *last = key > *last ? key : *last;
}

static void check_all(baton__sim_t *s) {
  st_t *t = s->st;
  int n = s->call.size, most = s->call.algo->max_steps(n);
  if (most > baton__max_steps(n))
    report(s, BATON__SIM_E_STEPS, -1, -1, "%s's max_steps(%d) = %d exceeds baton__max_steps = %d",
           s->call.algo->name, n, most, baton__max_steps(n));
  for (int r = 0; r < n; r++) {
    int last = 0;
    if (t->materialized)
      t->nsteps[r] = s->sched[r].nsteps;
    if (t->nsteps[r] > most)
      report(s, BATON__SIM_E_STEPS, r, -1, "%d steps, more than %s's max_steps(%d) = %d",
             t->nsteps[r], s->call.algo->name, n, most);
    for (int i = 0; i < t->nsteps[r] && i < s->cap; i++)
      check_step(s, r, i, step_of(s, r, i), &last);
  }
}

static void layout(baton__sim_t *s) {
  st_t *t = s->st;
  int n = t->n;
  size_t *a = baton__sim_alloc(6 * (size_t)n, sizeof *a), *counts = a + 5 * n;
  baton__layout_t l = {a, a + n, a + 2 * n, a + 3 * n, t->len};
  for (int c = 0; c < n; c++) /* the v-variants' counts, when not given: the count cut in N */
    counts[c] = s->call.counts ? s->call.counts[c] : baton__chunk_len(s->call.count, n, c);
  for (int r = 0; r < n; r++) {
    baton__layout_args_t la = {s->call.coll,  r, n, s->call.root, s->call.count, counts,
                               s->call.displs};
    baton__layout_fill(&l, &la);
    t->in_val[r] = baton__sim_new(&t->pool, 0, 1, (int[]){r, r + 1});
    for (int c = 0; c < n; c++) {
      int used = baton__sim_chunk_used(&s->call, c);
      /* Only the root of a broadcast reads its send buffer. */
      int in = l.in_off[c] != BATON__NO_OUT && used &&
               (s->call.coll != BATON__COLL_BROADCAST || r == s->call.root);
      t->flags[at(t, r, c)] =
          (unsigned char)((in ? CELL_IN : 0) | (l.out_off[c] != BATON__NO_OUT ? CELL_OUT : 0));
    }
  }
  free(a);
}

/* A large call keeps of each rank's schedule a window, 64 MiB in all,
 * each the same share of its schedule, so that every rank's is rebuilt
 * about as often. */
static void windows(st_t *t) {
  size_t total = 0, most = (64u << 20) / sizeof(baton__step_t);
  for (int r = 0; r < t->n && !t->materialized; r++)
    total += (size_t)t->nsteps[r];
  for (int r = 0; r < t->n && !t->materialized; r++) {
    size_t w = total <= most ? (size_t)t->nsteps[r] : (size_t)t->nsteps[r] * most / total;
    t->window[r] = (int)(w < 256 ? 256 : w);
    t->win[r] = baton__sim_alloc((size_t)t->window[r], sizeof(baton__step_t));
    t->base[r] = -t->window[r]; /* empty: filled on first use */
  }
}

int baton__sim_build(baton__sim_t *s, const baton__sim_call_t *call) {
  *s = (baton__sim_t){.call = *call};
  int n = call->size;
  if (!call->algo || n < 1 || (unsigned)call->coll >= BATON__COLL_COUNT) {
    report(s, BATON__SIM_E_BUILD, -1, -1, "no algorithm, or %d ranks", n);
    return -1;
  }
  st_t *t = s->st = baton__sim_alloc(1, sizeof *t);
  t->n = n;
  s->cap = baton__max_steps(n) + 8; /* room for a test's extra steps */
  s->cap = call->algo->max_steps(n) + 8 > s->cap ? call->algo->max_steps(n) + 8 : s->cap;
  t->materialized = (size_t)n * (size_t)s->cap * sizeof(baton__step_t) <= (64u << 20);
  t->pool.ntab = 1; /* id 0 is "nothing" */
  size_t cells = (size_t)n * (size_t)n;
  t->work = baton__sim_alloc(cells, sizeof *t->work);
  t->flags = baton__sim_alloc(cells, 1);
  t->alltoall = call->coll == BATON__COLL_ALLTOALL;
  t->origin = t->alltoall ? baton__sim_alloc(cells, sizeof *t->origin) : NULL;
  t->len = baton__sim_alloc((size_t)n, sizeof *t->len);
  t->in_val = baton__sim_alloc((size_t)n, sizeof *t->in_val);
  t->head = baton__sim_alloc((size_t)n, sizeof *t->head);
  t->tail = baton__sim_alloc((size_t)n, sizeof *t->tail);
  t->at = baton__sim_alloc((size_t)n, sizeof *t->at);
  t->nsteps = baton__sim_alloc((size_t)n, sizeof *t->nsteps);
  t->base = baton__sim_alloc((size_t)n, sizeof *t->base);
  t->window = baton__sim_alloc((size_t)n, sizeof *t->window);
  t->put = baton__sim_alloc((size_t)n, 1);
  t->blocked = baton__sim_alloc((size_t)n, 1);
  t->woken = baton__sim_alloc((size_t)n, sizeof *t->woken);
  t->win = baton__sim_alloc((size_t)n, sizeof *t->win);
  t->tmp = baton__sim_alloc((size_t)s->cap, sizeof *t->tmp);
  s->sched = t->materialized ? baton__sim_alloc((size_t)n, sizeof *s->sched) : NULL;
  layout(s);
  for (int r = 0; r < n; r++) {
    baton__sched_t sc = {
        .steps = t->materialized ? baton__sim_alloc((size_t)s->cap, sizeof(baton__step_t)) : t->tmp,
        .cap = s->cap};
    baton__build_t b = {.coll = call->coll,
                        .rank = r,
                        .size = n,
                        .count = call->count,
                        .root = call->root,
                        .order = call->order,
                        .host = call->host};
    if (baton__schedule_build(&sc, call->algo, &b) != 0)
      report(s, BATON__SIM_E_BUILD, r, -1, "%s gives no schedule for %s on %d ranks (root %d)",
             call->algo->name, baton__coll_name(call->coll), n, call->root);
    t->nsteps[r] = sc.nsteps;
    if (t->materialized)
      s->sched[r] = sc;
  }
  windows(t);
  return s->nerrors ? -1 : 0;
}

/* ---- Running */

/* Chunk c of rank r's INPUT or WORK, for step i; 0 (reported) when it is
 * not there. */
static unsigned get(baton__sim_t *s, int r, int i, int src, int c, int *origin) {
  st_t *t = s->st;
  size_t k = at(t, r, c);
  *origin = c;
  if (src == BATON__FROM_INPUT) {
    if (!(t->flags[k] & CELL_IN))
      report(s, BATON__SIM_E_EMPTY, r, i, "reads chunk %d from INPUT, which %s gives it none", c,
             baton__coll_name(s->call.coll));
    else if (t->flags[k] & CELL_CLOBBERED)
      report(s, BATON__SIM_E_INPUT, r, i,
             "reads chunk %d from INPUT after a step wrote WORK there, which in place is INPUT", c);
    return t->flags[k] & CELL_IN ? t->in_val[r] : 0;
  }
  if (!t->work[k])
    report(s, BATON__SIM_E_EMPTY, r, i, "reads chunk %d from WORK, which holds nothing there", c);
  *origin = t->origin ? t->origin[k] : c;
  return t->work[k];
}

static void pend(st_t *t, int r, int c, msg_t *m) {
  pending_t *p = &t->pending[at(t, r, c)];
  if (p->n == p->cap)
    p->m = baton__sim_grow(p->m, p->cap = p->cap ? 2 * p->cap : 4, sizeof *p->m);
  p->m[p->n++] = m;
}

/* Lands v (owned) with origin o in rank r's WORK chunk c. */
static void land(baton__sim_t *s, int r, int i, int c, unsigned v, int o) {
  st_t *t = s->st;
  size_t k = at(t, r, c);
  /* In place, a copy of INPUT onto itself changes no byte. */
  int unchanged =
      baton__sim_same(baton__sim_at(&t->pool, v), baton__sim_at(&t->pool, t->in_val[r])) && o == c;
  for (int j = 0; t->pending && j < t->pending[k].n; j++) {
    msg_t *m = t->pending[k].m[j];
    if (m->src == BATON__FROM_INPUT && unchanged)
      continue;
    int after_send = m->step == i - 1 && m->kind == BATON__STEP_SEND &&
                     (baton__step_does(step_of(s, r, i)->kind) & BATON__DOES_RECV);
    if (!after_send && !(m->taken && t->clock[at(t, r, m->to)] >= m->taken))
      report(s, BATON__SIM_E_OVERWRITE, r, i,
             "overwrites chunk %d, which step %d sent to rank %d, before anything received "
             "depends on that send's arrival (TCP may still be sending from it)",
             c, m->step, m->to);
  }
  if (t->pending)
    t->pending[k].n = 0;
  if (aliased(t, k) && !unchanged)
    t->flags[k] |= CELL_CLOBBERED;
  baton__sim_drop(&t->pool, t->work[k]);
  t->work[k] = v;
  if (t->origin)
    t->origin[k] = o;
}

static void wake(st_t *t, int r) {
  if (t->blocked[r])
    t->blocked[r] = 0, t->woken[t->nwoken++] = r;
}

static msg_t *send_new(baton__sim_t *s, int r, int i, const baton__step_t *st, int src) {
  st_t *t = s->st;
  msg_t *m = st->n == 1 && t->spare_msg ? t->spare_msg : baton__sim_alloc(1, sizeof *m);
  if (m == t->spare_msg)
    t->spare_msg = m->next;
  *m = (msg_t){.from = r,
               .to = st->send_peer,
               .step = i,
               .kind = st->kind,
               .src = src,
               .chunk = st->chunk,
               .n = st->n};
  m->val = st->n == 1 ? &m->val1 : baton__sim_alloc(st->n, sizeof *m->val);
  m->origin = st->n == 1 ? &m->origin1 : baton__sim_alloc(st->n, sizeof *m->origin);
  if (t->clock) {
    m->clock = baton__sim_alloc((size_t)t->n, sizeof *m->clock);
    memcpy(m->clock, &t->clock[at(t, r, 0)], (size_t)t->n * sizeof *m->clock);
    m->all = t->all, t->all = m;
  }
  wake(t, m->to);
  if (t->tail[m->to])
    t->tail[m->to]->next = m;
  else
    t->head[m->to] = m;
  t->tail[m->to] = m;
  return m;
}

static void msg_free(st_t *t, msg_t *m) {
  for (int j = 0; j < m->n; j++)
    baton__sim_drop(&t->pool, m->val[j]);
  if (m->val != &m->val1)
    free(m->val), free(m->origin);
  free(m->clock);
  if (m->n == 1 && !m->clock)
    m->next = t->spare_msg, t->spare_msg = m;
  else
    free(m);
}

static void sent_mark(baton__sim_t *s, int r, int c, int how) {
  if (s->st->p)
    s->st->p->sent[at(s->st, r, c)] |= (unsigned char)how;
}

static int do_send(baton__sim_t *s, int r, int i, const baton__step_t *st) {
  st_t *t = s->st;
  msg_t *m = send_new(s, r, i, st, st->src);
  for (int j = 0; j < st->n; j++) {
    int c = (st->chunk + j) % t->n;
    m->val[j] = baton__sim_ref(&t->pool, get(s, r, i, st->src, c, &m->origin[j]));
    size_t k = at(t, r, c);
    /* Sent memory that a later step may write: WORK, or in place INPUT. */
    if (t->pending && (st->src == BATON__FROM_WORK || aliased(t, k)))
      pend(t, r, c, m);
    sent_mark(s, r, c, st->src == BATON__FROM_WORK ? BATON__SIM_SENT_WORK : BATON__SIM_SENT_INPUT);
  }
  return 1;
}

/* The oldest message from q to r, unlinked; NULL when none yet. */
static msg_t *take(st_t *t, int q, int r) {
  for (msg_t **pp = &t->head[r], *prev = NULL; *pp; prev = *pp, pp = &(*pp)->next)
    if ((*pp)->from == q) {
      msg_t *m = *pp;
      *pp = m->next;
      if (t->tail[r] == m)
        t->tail[r] = prev;
      m->next = NULL;
      return m;
    }
  return NULL;
}

/* got + S for a reducing step: the combined value (owned), or 0. */
static unsigned combine(baton__sim_t *s, int r, int i, int c, unsigned got, int o, unsigned base,
                        int bo) {
  st_t *t = s->st;
  char a[64], b[64];
  if (!got || !base)
    return 0; /* reported where it was read */
  if (o != bo) {
    report(s, BATON__SIM_E_MIX, r, i, "combines chunk %d's data with chunk %d's", o, bo);
    return 0;
  }
  int lo = 0, hi = 0;
  unsigned v = baton__sim_union(&t->pool, got, base, &lo, &hi);
  if (v && (baton__sim_at(&t->pool, got)->fin || baton__sim_at(&t->pool, base)->fin)) {
    report(s, BATON__SIM_E_FINISH, r, i, "adds to chunk %d after its sum was finished", c);
    baton__sim_drop(&t->pool, v);
    return 0;
  }
  if (!v)
    report(s, BATON__SIM_E_TWICE, r, i,
           "adds the contributions of ranks [%d, %d) into chunk %d "
           "twice: %s and %s",
           lo, hi, c, baton__sim_val_str(baton__sim_at(&t->pool, got), a, sizeof a),
           baton__sim_val_str(baton__sim_at(&t->pool, base), b, sizeof b));
  return v;
}

static unsigned finish(baton__sim_t *s, int r, int i, int c, unsigned v) {
  char a[64];
  if (v && !baton__sim_full(baton__sim_at(&s->st->pool, v), s->st->n))
    report(s, BATON__SIM_E_FINISH, r, i,
           "finishes chunk %d holding %s only, so AVG would divide a partial sum", c,
           baton__sim_val_str(baton__sim_at(&s->st->pool, v), a, sizeof a));
  return v ? baton__sim_finish(&s->st->pool, v) : 0;
}

static void xfer(baton__sim_t *s, int from, int to, int send_kind, int src, int schunk,
                 const baton__step_t *st, int carried) {
  baton__sim_panel_t *p = s->st->p;
  if (!p)
    return;
  p->x = baton__sim_grow(p->x, (size_t)p->nx + 1, sizeof *p->x);
  p->x[p->nx++] = (baton__sim_xfer_t){from,    to,     send_kind, st->kind, src,
                                      st->src, schunk, st->chunk, st->n,    carried};
}

static int do_recv(baton__sim_t *s, int r, int i, const baton__step_t *st) {
  st_t *t = s->st;
  unsigned does = baton__step_does(st->kind);
  msg_t *m = take(t, st->recv_peer, r);
  if (!m)
    return 0;
  if (t->clock) {
    for (int q = 0; q < t->n; q++)
      if (m->clock[q] > t->clock[at(t, r, q)])
        t->clock[at(t, r, q)] = m->clock[q];
    m->taken = ++t->clock[at(t, r, r)];
  }
  int ok = m->n == st->n && (s->call.coll == BATON__COLL_ALLTOALL || m->chunk == st->chunk);
  for (int j = 0; ok && j < st->n; j++)
    ok = t->len[(m->chunk + j) % t->n] == t->len[(st->chunk + j) % t->n];
  if (!ok)
    report(s, BATON__SIM_E_RUN, r, i,
           "expects chunks %d+%d from rank %d, whose step %d (%s) sent chunks %d+%d", st->chunk,
           st->n, st->recv_peer, m->step, baton__kinds[m->kind].name, m->chunk, m->n);
  msg_t *fwd = ok && (does & BATON__DOES_SEND) ? send_new(s, r, i, st, -1) : NULL;
  int carried = 0;
  unsigned memo[3] = {0, 0, 0}; /* (message, S) -> their combination, finished as the step says */
  for (int j = 0; ok && j < st->n; j++) {
    int c = (st->chunk + j) % t->n, bo, o = m->origin[j];
    unsigned v = baton__sim_ref(&t->pool, m->val[j]);
    carried = baton__sim_val_count(baton__sim_at(&t->pool, v)) > carried
                  ? baton__sim_val_count(baton__sim_at(&t->pool, v))
                  : carried;
    unsigned base = does & BATON__DOES_REDUCE ? get(s, r, i, st->src, c, &bo) : 0;
    if (base && v == memo[0] && base == memo[1] && o == bo) { /* a run of equal values */
      baton__sim_drop(&t->pool, v);
      v = baton__sim_ref(&t->pool, memo[2]);
    } else if (does & BATON__DOES_REDUCE || st->finish) {
      unsigned in = v;
      if (does & BATON__DOES_REDUCE)
        v = combine(s, r, i, c, v, o, base, bo);
      if (st->finish)
        v = finish(s, r, i, c, v);
      for (int k = 0; k < 3; k++)
        baton__sim_drop(&t->pool, memo[k]);
      memo[0] = in, memo[1] = baton__sim_ref(&t->pool, base),
      memo[2] = baton__sim_ref(&t->pool, v); /* held: no id is reused */
    }
    if (fwd) {
      fwd->val[j] = baton__sim_ref(&t->pool, v), fwd->origin[j] = o;
      if (t->p && !(does & BATON__DOES_LAND))
        t->p->pass[r] = (baton__sim_cell_t){baton__sim_at(&t->pool, v), o};
    }
    if (does & BATON__DOES_LAND) {
      land(s, r, i, c, v, o);
      if (fwd && t->pending) /* passed on from WORK itself (TCP sends from the output) */
        pend(t, r, c, fwd);
      if (fwd)
        sent_mark(s, r, c, BATON__SIM_SENT_WORK);
    } else {
      baton__sim_drop(&t->pool, v);
    }
  }
  for (int k = 0; k < 3; k++)
    baton__sim_drop(&t->pool, memo[k]);
  xfer(s, m->from, r, m->kind, m->src, m->chunk, st, carried);
  if (!t->clock)
    msg_free(t, m);
  return 1;
}

static int do_copy(baton__sim_t *s, int r, int i, const baton__step_t *st) {
  for (int j = 0; j < st->n; j++) {
    int c = (st->chunk + j) % s->st->n, o;
    unsigned v = get(s, r, i, BATON__FROM_INPUT, c, &o);
    if (v)
      land(s, r, i, c, baton__sim_ref(&s->st->pool, v), o);
  }
  baton__sim_panel_t *p = s->st->p;
  if (p) {
    p->cp = baton__sim_grow(p->cp, (size_t)p->ncp + 1, sizeof *p->cp);
    p->cp[p->ncp++] = (baton__sim_copy_t){r, st->chunk, st->n};
  }
  return 1;
}

/* MAILBOX_PUT: 1 once every rank has put, 2 when this call put and waits. */
static int do_put(baton__sim_t *s, int r, int i, const baton__step_t *st) {
  st_t *t = s->st;
  if (!t->put[r]) {
    for (int j = 0; j < st->n; j++) {
      int c = (st->chunk + j) % t->n, o;
      if (get(s, r, i, BATON__FROM_INPUT, c, &o))
        t->flags[at(t, r, c)] |= CELL_BOX;
    }
    t->put[r] = 1, t->nput++;
    for (int q = 0; t->nput == t->n && q < t->n; q++)
      wake(t, q);
    return t->nput == t->n ? 1 : 2;
  }
  return t->nput == t->n;
}

static unsigned box(baton__sim_t *s, int r, int i, int q, int c) {
  if (s->st->flags[at(s->st, q, c)] & CELL_BOX)
    return s->st->in_val[q];
  report(s, BATON__SIM_E_EMPTY, r, i, "reads chunk %d from rank %d's mailbox, which it did not put",
         c, q);
  return 0;
}

static int do_mailbox(baton__sim_t *s, int r, int i, const baton__step_t *st) {
  st_t *t = s->st;
  if (!t->put[r]) {
    report(s, BATON__SIM_E_MAILBOX, r, i, "reads a mailbox before its own mailbox_put");
    return 1;
  }
  for (int j = 0; j < st->n; j++) {
    int c = (st->chunk + j) % t->n;
    unsigned v = 0;
    if (st->kind == BATON__STEP_MAILBOX_COPY)
      v = baton__sim_ref(&t->pool, box(s, r, i, st->recv_peer, c));
    for (int q = 0; st->kind == BATON__STEP_MAILBOX_REDUCE && q < t->n; q++) {
      unsigned w = box(s, r, i, q, c),
               sum = q == 0 ? baton__sim_ref(&t->pool, w) : combine(s, r, i, c, w, c, v, c);
      baton__sim_drop(&t->pool, v);
      if (!(v = sum))
        break;
    }
    if (st->finish)
      v = finish(s, r, i, c, v);
    if (v)
      land(s, r, i, c, v, c);
  }
  for (int q = 0; q < t->n; q++)
    if (q != r && (st->kind == BATON__STEP_MAILBOX_REDUCE || q == st->recv_peer))
      xfer(s, q, r, -1, BATON__FROM_INPUT, st->chunk, st, 1);
  return 1;
}

/* 1: step done; 0: it waits; 2: it waits but moved (a put). */
static int run_step(baton__sim_t *s, int r, int i) {
  const baton__step_t *st = step_of(s, r, i);
  unsigned does = baton__step_does(st->kind);
  if (s->st->clock && !(does & BATON__DOES_RECV))
    s->st->clock[at(s->st, r, r)]++;
  if (st->kind == BATON__STEP_SEND)
    return do_send(s, r, i, st);
  if (does & BATON__DOES_RECV)
    return do_recv(s, r, i, st);
  if (st->kind == BATON__STEP_COPY)
    return do_copy(s, r, i, st);
  if (st->kind == BATON__STEP_MAILBOX_PUT)
    return do_put(s, r, i, st);
  return do_mailbox(s, r, i, st);
}

/* ---- Rounds and panels */

static int key_at(baton__sim_t *s, int r) {
  return s->st->at[r] < s->st->nsteps[r]
             ? step_of(s, r, s->st->at[r])->phase * 65536 + step_of(s, r, s->st->at[r])->step
             : -1;
}

static void snapshot(st_t *t, baton__sim_cell_t *cells) {
  for (int r = 0; r < t->n; r++)
    for (int c = 0; c < t->n; c++) {
      size_t k = at(t, r, c);
      cells[k] =
          (baton__sim_cell_t){baton__sim_at(&t->pool, t->work[k]), t->origin ? t->origin[k] : c};
    }
}

static baton__sim_panel_t *panel_new(baton__sim_t *s, int key) {
  st_t *t = s->st;
  size_t cells = (size_t)t->n * (size_t)t->n;
  s->panels = baton__sim_grow(s->panels, (size_t)s->npanels + 1, sizeof *s->panels);
  baton__sim_panel_t *p = &s->panels[s->npanels++];
  *p = (baton__sim_panel_t){.phase = key < 0 ? -1 : key >> 16, .step = key < 0 ? 0 : key & 0xffff};
  p->work = baton__sim_alloc(cells, sizeof *p->work);
  p->pass = baton__sim_alloc((size_t)t->n, sizeof *p->pass);
  p->sent = baton__sim_alloc(cells, 1);
  for (int r = 0; r < t->n; r++)
    p->pass[r].origin = -1;
  snapshot(t, p->work);
  return p;
}

static void panel_free(baton__sim_panel_t *p) {
  free(p->work), free(p->pass), free(p->sent), free(p->x), free(p->cp);
}

static int cmp_xfer(const void *a, const void *b) {
  const baton__sim_xfer_t *x = a, *y = b;
  return x->to != y->to ? x->to - y->to : x->from - y->from;
}

/* Runs every step up to `key` as far as the messages allow; how many ran. */
/* Runs rank r's steps up to `key` until one waits; how many ran. */
static int advance(baton__sim_t *s, int r, int key, int *next) {
  st_t *t = s->st;
  int ran = 0, k;
  while ((k = key_at(s, r)) >= 0 && k <= key) {
    int rc = run_step(s, r, t->at[r]);
    if (rc == 0 || rc == 2) {
      t->blocked[r] = 1; /* a message to r, or the last put, wakes it */
      return ran + (rc == 2);
    }
    if (s->panel_of)
      s->panel_of[r * s->cap + t->at[r]] = s->npanels - 1;
    t->at[r]++, ran++;
  }
  if (k > key && (*next < 0 || k < *next))
    *next = k;
  return ran;
}

/* Runs every step up to `key` as far as the messages allow; how many ran.
 * *next: the smallest key past it that a rank waits at. */
static int round_run(baton__sim_t *s, int key, int *next) {
  st_t *t = s->st;
  int ran = 0;
  *next = -1;
  for (int r = 0; r < t->n; r++)
    t->blocked[r] = 0, ran += advance(s, r, key, next);
  while (t->nwoken)
    ran += advance(s, t->woken[--t->nwoken], key, next);
  return ran;
}

static void check_end(baton__sim_t *s) {
  st_t *t = s->st;
  char a[64];
  for (int r = 0; r < t->n; r++)
    if (t->at[r] < t->nsteps[r]) {
      const baton__step_t *st = step_of(s, r, t->at[r]);
      if (st->kind == BATON__STEP_MAILBOX_PUT)
        report(s, BATON__SIM_E_NO_MESSAGE, r, t->at[r], "waits for %d rank(s) that never put",
               t->n - t->nput);
      else
        report(s, BATON__SIM_E_NO_MESSAGE, r, t->at[r],
               "waits forever for chunks %d+%d from rank %d", st->chunk, st->n, st->recv_peer);
    }
  for (int r = 0; r < t->n; r++)
    for (msg_t *m = t->head[r]; m; m = m->next)
      report(s, BATON__SIM_E_UNRECEIVED, m->from, m->step,
             "sends chunks %d+%d to rank %d, which never receives them", m->chunk, m->n, m->to);
  for (int r = 0; r < t->n; r++)
    for (int c = 0; c < t->n; c++) {
      size_t k = at(t, r, c);
      int from, origin;
      if (!(t->flags[k] & CELL_OUT) || !baton__sim_chunk_used(&s->call, c))
        continue;
      promise(&s->call, r, c, &from, &origin);
      const val_t *v = baton__sim_at(&t->pool, t->work[k]);
      int o = t->origin ? t->origin[k] : c;
      int set_ok = from < 0 ? baton__sim_full(v, t->n)
                            : v && v->nint == 1 && v->iv[0] == from && v->iv[1] == from + 1;
      if (!set_ok || o != origin) {
        char want[32];
        snprintf(want, sizeof want, from < 0 ? "every rank's" : "rank %d's", from);
        report(s, BATON__SIM_E_RESULT, r, -1,
               "ends with chunk %d holding %s of chunk %d; %s promises %s of chunk %d", c,
               v ? baton__sim_val_str(v, a, sizeof a) : "nothing", o,
               baton__coll_name(s->call.coll), want, origin);
      } else if (from < 0 && !v->fin)
        report(s, BATON__SIM_E_FINISH, r, -1,
               "ends with chunk %d complete but never finished (AVG would not divide)", c);
    }
}

int baton__sim_run(baton__sim_t *s) {
  st_t *t = s->st;
  if (!t || s->nerrors)
    return -1;
  check_all(s);
  if (s->nerrors)
    return -1;
  int n = t->n;
  if (n <= BATON__SIM_HB_MAX) {
    t->clock = baton__sim_alloc((size_t)n * (size_t)n, sizeof *t->clock);
    t->pending = baton__sim_alloc((size_t)n * (size_t)n, sizeof *t->pending);
    s->hb_checked = 1;
  }
  if (s->call.panels) {
    t->pool.keep = 1;
    s->panel_of = baton__sim_alloc((size_t)n * (size_t)s->cap, sizeof *s->panel_of);
    for (size_t k = 0; k < (size_t)n * (size_t)s->cap; k++)
      s->panel_of[k] = -1;
  }
  /* On one rank there is no schedule: the library copies the input. */
  for (int c = 0; n == 1 && c < n; c++)
    if (t->flags[at(t, 0, c)] & CELL_IN)
      land(s, 0, -1, c,
           baton__sim_reduces(s->call.coll)
               ? baton__sim_finish(&t->pool, baton__sim_ref(&t->pool, t->in_val[0]))
               : baton__sim_ref(&t->pool, t->in_val[0]),
           c);
  int next = -1; /* the smallest key of a step not yet run */
  for (int r = 0; r < n; r++)
    if (key_at(s, r) >= 0 && (next < 0 || key_at(s, r) < next))
      next = key_at(s, r);
  for (int key; next >= 0;) {
    key = next;
    t->p = s->call.panels ? panel_new(s, key) : NULL;
    int ran = round_run(s, key, &next);
    if (t->p && ran == 0) {
      panel_free(t->p);
      s->npanels--;
    } else if (t->p && t->p->nx) {
      qsort(t->p->x, (size_t)t->p->nx, sizeof *t->p->x, cmp_xfer);
    }
    t->p = NULL;
  }
  check_end(s);
  if (s->call.panels)
    panel_new(s, -1);
  return s->nerrors ? -1 : 0;
}

void baton__sim_free(baton__sim_t *s) {
  st_t *t = s->st;
  for (int r = 0; s->sched && r < s->call.size; r++)
    free(s->sched[r].steps);
  free(s->sched);
  if (!t)
    return;
  for (int i = 0; i < s->npanels; i++)
    panel_free(&s->panels[i]);
  free(s->panels);
  free(s->panel_of);
  for (int r = 0; r < t->n; r++) {
    for (msg_t *m = t->head[r], *nx; !t->clock && m; m = nx)
      nx = m->next, msg_free(t, m);
    free(t->win[r]);
  }
  for (msg_t *m = t->all, *nx; m; m = nx)
    nx = m->all, msg_free(t, m);
  for (size_t k = 0; t->pending && k < (size_t)t->n * (size_t)t->n; k++)
    free(t->pending[k].m);
  baton__sim_pool_free(&t->pool);
  for (msg_t *m = t->spare_msg, *nx; m; m = nx)
    nx = m->next, free(m);
  free(t->work), free(t->origin), free(t->flags), free(t->len);
  free(t->in_val), free(t->head), free(t->tail), free(t->at), free(t->nsteps), free(t->base),
      free(t->window);
  free(t->put), free(t->blocked), free(t->woken), free(t->win), free(t->tmp), free(t->clock),
      free(t->pending);
  free(t);
  s->st = NULL;
}
