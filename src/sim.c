/*
 * sim.c - the simulator and validator of schedules (sim.h): runs the
 * schedules of every rank of one call on contribution sets, checks them
 * against schedule.h and the collective's definition, and keeps the rounds
 * for baton-viz. Running one step of one rank is sim_step.c.
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

#include "sim_impl.h"

/* ---- The call */

int baton__sim_reduces(baton__coll_t c) {
  return c == BATON__COLL_ALLREDUCE || c == BATON__COLL_REDUCE_SCATTER ||
         c == BATON__COLL_REDUCE_SCATTERV || c == BATON__COLL_REDUCE;
}

int baton__sim_chunk_used(const baton__sim_call_t *call, int c) {
  int halves = call->algo && (call->algo->traits & BATON__ALGO_HALVES) && call->size > 1;
  if (call->coll == BATON__COLL_BROADCAST || call->coll == BATON__COLL_REDUCE)
    return c == call->root || (halves && c == (call->root + 1) % call->size);
  return !halves || c < 2; /* an allreduce's halves are chunks 0 and 1 */
}

int baton__sim_need(const baton__sim_call_t *call) {
  return baton__sim_reduces(call->coll) ? call->size : 1;
}

int baton__sim_has_input(const baton__sim_t *s, int r, int c) {
  return (s->st->flags[(size_t)r * (size_t)s->st->n + (size_t)c] & CELL_IN) != 0;
}

size_t baton__sim_chunk_len(const baton__sim_t *s, int c) { return s->st->len[c]; }

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
  case BATON__COLL_ALLTOALLV:
    *from = c, *origin = r; /* rank c's block for r */
    break;
  default:
    *from = baton__sim_reduces(k->coll) ? -1 : c;
  }
}

const baton__step_t *baton__sim_step_of(baton__sim_t *s, int r, int i) {
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

void baton__sim_report(baton__sim_t *s, baton__sim_err_t e, int r, int i, const char *fmt, ...) {
  s->found |= 1u << e;
  if (s->nerrors++ >= (int)(sizeof s->errors / sizeof s->errors[0]))
    return;
  char *o = s->errors[s->nerrors - 1];
  size_t cap = sizeof s->errors[0], used = 0;
  if (r >= 0 && i >= 0) {
    const baton__step_t *st = baton__sim_step_of(s, r, i);
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
    baton__sim_report(s, BATON__SIM_E_STEP, r, i,
                      "kind %d, phase %d or src %d is not one of schedule.h", st->kind, st->phase,
                      st->src);
  int meets = st->kind == BATON__STEP_MAILBOX_PUT || st->kind == BATON__STEP_DIRECT_ARRIVE ||
              st->kind == BATON__STEP_DIRECT_DONE;
  if (st->chunk < 0 || st->chunk >= n || st->n > n || (st->n < 1 && !meets))
    baton__sim_report(s, BATON__SIM_E_STEP, r, i, "run of %d chunks from chunk %d, on %d chunks",
                      st->n, st->chunk, n);
  if ((does & BATON__DOES_SEND) && (does & BATON__DOES_RECV) && st->n != 1)
    baton__sim_report(s, BATON__SIM_E_STEP, r, i, "passes on %d chunks; a *_send kind takes one",
                      st->n);
  int sends = (does & BATON__DOES_SEND) != 0;
  int recvs = (does & BATON__DOES_RECV) || st->kind == BATON__STEP_MAILBOX_COPY;
  int direct = (does & BATON__DOES_DIRECT) != 0; /* any rank, itself too, or all */
  if (direct) {
    if (st->send_peer < BATON__ALL_RANKS || st->send_peer == -1 || st->send_peer >= n ||
        st->recv_peer < BATON__ALL_RANKS || st->recv_peer == -1 || st->recv_peer >= n ||
        (st->kind == BATON__STEP_DIRECT_REDUCE) != (st->recv_peer == BATON__ALL_RANKS))
      baton__sim_report(s, BATON__SIM_E_STEP, r, i,
                        "recv_peer %d or send_peer %d is neither a rank nor every rank (a "
                        "direct_reduce reads every rank, a direct_copy one)",
                        st->recv_peer, st->send_peer);
  } else if (st->slice) {
    baton__sim_report(s, BATON__SIM_E_STEP, r, i, "a slice on a kind that is not direct");
  } else {
    if (sends ? st->send_peer < 0 || st->send_peer >= n || st->send_peer == r : st->send_peer != -1)
      baton__sim_report(s, BATON__SIM_E_STEP, r, i, "send_peer %d %s", st->send_peer,
                        sends ? "is not another rank" : "on a kind that does not send");
    if (recvs ? st->recv_peer < 0 || st->recv_peer >= n || st->recv_peer == r : st->recv_peer != -1)
      baton__sim_report(s, BATON__SIM_E_STEP, r, i, "recv_peer %d %s", st->recv_peer,
                        recvs ? "is not another rank" : "on a kind that does not receive");
  }
  if (st->finish && !(does & BATON__DOES_REDUCE))
    baton__sim_report(s, BATON__SIM_E_FINISH, r, i, "finish on a kind that does not reduce");
  unsigned trait = st->kind == BATON__STEP_DIRECT_ARRIVE || st->kind == BATON__STEP_DIRECT_DONE
                       ? BATON__ALGO_REGISTERED
                       : BATON__ALGO_MAILBOX;
  if (box && !(s->call.algo->traits & trait))
    baton__sim_report(s, BATON__SIM_E_MAILBOX, r, i,
                      "a rendezvous step in %s, which has no %s trait", s->call.algo->name,
                      trait == BATON__ALGO_MAILBOX ? "mailbox" : "registered");
  if (key < *last)
    baton__sim_report(s, BATON__SIM_E_ORDER, r, i, "comes after round %s %d",
                      baton__phase_name(*last >> 16), *last & 0xffff);
  *last = key > *last ? key : *last;
}

static void check_all(baton__sim_t *s) {
  st_t *t = s->st;
  int n = s->call.size, most = s->call.algo->max_steps(n);
  if (most > baton__max_steps(n))
    baton__sim_report(s, BATON__SIM_E_STEPS, -1, -1,
                      "%s's max_steps(%d) = %d exceeds baton__max_steps = %d", s->call.algo->name,
                      n, most, baton__max_steps(n));
  for (int r = 0; r < n; r++) {
    int last = 0;
    if (t->materialized)
      t->nsteps[r] = s->sched[r].nsteps;
    if (t->nsteps[r] > most)
      baton__sim_report(s, BATON__SIM_E_STEPS, r, -1, "%d steps, more than %s's max_steps(%d) = %d",
                        t->nsteps[r], s->call.algo->name, n, most);
    for (int i = 0; i < t->nsteps[r] && i < s->cap; i++)
      check_step(s, r, i, baton__sim_step_of(s, r, i), &last);
  }
}

static void layout(baton__sim_t *s) {
  st_t *t = s->st;
  int n = t->n;
  size_t *a = baton__sim_alloc(6 * (size_t)n, sizeof *a), *counts = a + 5 * n;
  baton__layout_t l = {a, a + n, a + 2 * n, a + 3 * n, t->len, a + 4 * n};
  /* The v-variants' counts, when not given: the count cut in N; alltoallv's,
   * `count` per block as alltoall's, the same on both ends of every block
   * (the simulator keeps one length per chunk). */
  int v = s->call.coll == BATON__COLL_ALLTOALLV;
  for (int c = 0; c < n; c++)
    counts[c] = s->call.counts ? s->call.counts[c]
                : v            ? s->call.count
                               : baton__chunk_len(s->call.count, n, c);
  for (int r = 0; r < n; r++) {
    baton__layout_args_t la = {s->call.coll,
                               r,
                               n,
                               s->call.root,
                               s->call.count,
                               counts,
                               s->call.displs,
                               v ? counts : NULL,
                               v ? s->call.displs : NULL,
                               (s->call.algo->traits & BATON__ALGO_HALVES) != 0};
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
    baton__sim_report(s, BATON__SIM_E_BUILD, -1, -1, "no algorithm, or %d ranks", n);
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
  t->alltoall = call->coll == BATON__COLL_ALLTOALL || call->coll == BATON__COLL_ALLTOALLV;
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
  t->done = baton__sim_alloc((size_t)n, 1);
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
      baton__sim_report(s, BATON__SIM_E_BUILD, r, -1,
                        "%s gives no schedule for %s on %d ranks (root %d)", call->algo->name,
                        baton__coll_name(call->coll), n, call->root);
    t->nsteps[r] = sc.nsteps;
    if (t->materialized)
      s->sched[r] = sc;
  }
  windows(t);
  return s->nerrors ? -1 : 0;
}

/* ---- Rounds and panels */

static int key_at(baton__sim_t *s, int r) {
  return s->st->at[r] < s->st->nsteps[r] ? baton__sim_step_of(s, r, s->st->at[r])->phase * 65536 +
                                               baton__sim_step_of(s, r, s->st->at[r])->step
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
    int rc = baton__sim_run_step(s, r, t->at[r]);
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
      const baton__step_t *st = baton__sim_step_of(s, r, t->at[r]);
      if (st->kind == BATON__STEP_MAILBOX_PUT || st->kind == BATON__STEP_DIRECT_ARRIVE)
        baton__sim_report(s, BATON__SIM_E_NO_MESSAGE, r, t->at[r],
                          "waits for %d rank(s) that never put", t->n - t->nput);
      else if (st->kind == BATON__STEP_DIRECT_DONE)
        baton__sim_report(s, BATON__SIM_E_NO_MESSAGE, r, t->at[r],
                          "waits for %d rank(s) that never reach direct_done", t->n - t->ndone);
      else
        baton__sim_report(s, BATON__SIM_E_NO_MESSAGE, r, t->at[r],
                          "waits forever for chunks %d+%d from rank %d", st->chunk, st->n,
                          st->recv_peer);
    }
  for (int r = 0; r < t->n; r++)
    for (msg_t *m = t->head[r]; m; m = m->next)
      baton__sim_report(s, BATON__SIM_E_UNRECEIVED, m->from, m->step,
                        "sends chunks %d+%d to rank %d, which never receives them", m->chunk, m->n,
                        m->to);
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
        baton__sim_report(s, BATON__SIM_E_RESULT, r, -1,
                          "ends with chunk %d holding %s of chunk %d; %s promises %s of chunk %d",
                          c, v ? baton__sim_val_str(v, a, sizeof a) : "nothing", o,
                          baton__coll_name(s->call.coll), want, origin);
      } else if (from < 0 && !v->fin)
        baton__sim_report(s, BATON__SIM_E_FINISH, r, -1,
                          "ends with chunk %d complete but never finished (AVG would not divide)",
                          c);
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
      baton__sim_land(s, 0, -1, c,
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
      nx = m->next, baton__sim_msg_free(t, m);
    free(t->win[r]);
  }
  for (msg_t *m = t->all, *nx; m; m = nx)
    nx = m->all, baton__sim_msg_free(t, m);
  for (size_t k = 0; t->pending && k < (size_t)t->n * (size_t)t->n; k++)
    free(t->pending[k].m);
  baton__sim_pool_free(&t->pool);
  for (msg_t *m = t->spare_msg, *nx; m; m = nx)
    nx = m->next, free(m);
  free(t->work), free(t->origin), free(t->flags), free(t->len);
  free(t->in_val), free(t->head), free(t->tail), free(t->at), free(t->nsteps), free(t->base),
      free(t->window);
  free(t->put), free(t->done), free(t->blocked), free(t->woken), free(t->win), free(t->tmp),
      free(t->clock), free(t->pending);
  free(t);
  s->st = NULL;
}
