/*
 * sim_step.c - the simulator's run of one step of one rank (sim.h): what
 * each kind reads, sends, receives, combines and lands, checked as it
 * happens against the schedule's rules.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_impl.h"

/* ---- Running */

/* Chunk c of rank r's INPUT or WORK, for step i; 0 (reported) when it is
 * not there. */
static unsigned get(baton__sim_t *s, int r, int i, int src, int c, int *origin) {
  st_t *t = s->st;
  size_t k = at(t, r, c);
  *origin = c;
  if (src == BATON__FROM_INPUT) {
    if (!(t->flags[k] & CELL_IN))
      baton__sim_report(s, BATON__SIM_E_EMPTY, r, i,
                        "reads chunk %d from INPUT, which %s gives it none", c,
                        baton__coll_name(s->call.coll));
    else if (t->flags[k] & CELL_CLOBBERED)
      baton__sim_report(
          s, BATON__SIM_E_INPUT, r, i,
          "reads chunk %d from INPUT after a step wrote WORK there, which in place is INPUT", c);
    return t->flags[k] & CELL_IN ? t->in_val[r] : 0;
  }
  if (!t->work[k])
    baton__sim_report(s, BATON__SIM_E_EMPTY, r, i,
                      "reads chunk %d from WORK, which holds nothing there", c);
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
void baton__sim_land(baton__sim_t *s, int r, int i, int c, unsigned v, int o) {
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
                     (baton__step_does(baton__sim_step_of(s, r, i)->kind) & BATON__DOES_RECV);
    if (!after_send && !(m->taken && t->clock[at(t, r, m->to)] >= m->taken))
      baton__sim_report(
          s, BATON__SIM_E_OVERWRITE, r, i,
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

void baton__sim_msg_free(st_t *t, msg_t *m) {
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
    baton__sim_report(s, BATON__SIM_E_MIX, r, i, "combines chunk %d's data with chunk %d's", o, bo);
    return 0;
  }
  int lo = 0, hi = 0;
  unsigned v = baton__sim_union(&t->pool, got, base, &lo, &hi);
  if (v && (baton__sim_at(&t->pool, got)->fin || baton__sim_at(&t->pool, base)->fin)) {
    baton__sim_report(s, BATON__SIM_E_FINISH, r, i, "adds to chunk %d after its sum was finished",
                      c);
    baton__sim_drop(&t->pool, v);
    return 0;
  }
  if (!v)
    baton__sim_report(s, BATON__SIM_E_TWICE, r, i,
                      "adds the contributions of ranks [%d, %d) into chunk %d "
                      "twice: %s and %s",
                      lo, hi, c, baton__sim_val_str(baton__sim_at(&t->pool, got), a, sizeof a),
                      baton__sim_val_str(baton__sim_at(&t->pool, base), b, sizeof b));
  return v;
}

static unsigned finish(baton__sim_t *s, int r, int i, int c, unsigned v) {
  char a[64];
  if (v && !baton__sim_full(baton__sim_at(&s->st->pool, v), s->st->n))
    baton__sim_report(s, BATON__SIM_E_FINISH, r, i,
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
  int ok = m->n == st->n && (s->st->alltoall || m->chunk == st->chunk);
  for (int j = 0; ok && j < st->n; j++)
    ok = t->len[(m->chunk + j) % t->n] == t->len[(st->chunk + j) % t->n];
  if (!ok)
    baton__sim_report(s, BATON__SIM_E_RUN, r, i,
                      "expects chunks %d+%d from rank %d, whose step %d (%s) sent chunks %d+%d",
                      st->chunk, st->n, st->recv_peer, m->step, baton__kinds[m->kind].name,
                      m->chunk, m->n);
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
      baton__sim_land(s, r, i, c, v, o);
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
    baton__sim_msg_free(t, m);
  return 1;
}

static int do_copy(baton__sim_t *s, int r, int i, const baton__step_t *st) {
  for (int j = 0; j < st->n; j++) {
    int c = (st->chunk + j) % s->st->n, o;
    unsigned v = get(s, r, i, BATON__FROM_INPUT, c, &o);
    if (v)
      baton__sim_land(s, r, i, c, baton__sim_ref(&s->st->pool, v), o);
  }
  baton__sim_panel_t *p = s->st->p;
  if (p) {
    p->cp = baton__sim_grow(p->cp, (size_t)p->ncp + 1, sizeof *p->cp);
    p->cp[p->ncp++] = (baton__sim_copy_t){r, st->chunk, st->n};
  }
  return 1;
}

/* A rendezvous: rank r marks its arrival; 1 once every rank has, 2 when
 * this call marked it and waits, 0 when it still waits. */
static int meet(st_t *t, unsigned char *mark, int *count, int r) {
  if (!mark[r]) {
    mark[r] = 1, (*count)++;
    for (int q = 0; *count == t->n && q < t->n; q++)
      wake(t, q);
    return *count == t->n ? 1 : 2;
  }
  return *count == t->n;
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
  }
  return meet(t, t->put, &t->nput, r);
}

static unsigned box(baton__sim_t *s, int r, int i, int q, int c) {
  if (s->st->flags[at(s->st, q, c)] & CELL_BOX)
    return s->st->in_val[q];
  baton__sim_report(s, BATON__SIM_E_EMPTY, r, i,
                    "reads chunk %d from rank %d's mailbox, which it did not put", c, q);
  return 0;
}

/* Chunk c of every rank's mailbox (or INPUT shown), combined in rank
 * order (owned), or 0. */
static unsigned box_sum(baton__sim_t *s, int r, int i, int c) {
  st_t *t = s->st;
  unsigned v = 0;
  for (int q = 0; q < t->n; q++) {
    unsigned w = box(s, r, i, q, c),
             sum = q == 0 ? baton__sim_ref(&t->pool, w) : combine(s, r, i, c, w, c, v, c);
    baton__sim_drop(&t->pool, v);
    if (!(v = sum))
      break;
  }
  return v;
}

static int do_mailbox(baton__sim_t *s, int r, int i, const baton__step_t *st) {
  st_t *t = s->st;
  if (!t->put[r]) {
    baton__sim_report(s, BATON__SIM_E_MAILBOX, r, i, "reads a mailbox before its own mailbox_put");
    return 1;
  }
  for (int j = 0; j < st->n; j++) {
    int c = (st->chunk + j) % t->n;
    unsigned v = 0;
    if (st->kind == BATON__STEP_MAILBOX_COPY)
      v = baton__sim_ref(&t->pool, box(s, r, i, st->recv_peer, c));
    if (st->kind == BATON__STEP_MAILBOX_REDUCE)
      v = box_sum(s, r, i, c);
    if (st->finish)
      v = finish(s, r, i, c, v);
    if (v)
      baton__sim_land(s, r, i, c, v, c);
  }
  for (int q = 0; q < t->n; q++)
    if (q != r && (st->kind == BATON__STEP_MAILBOX_REDUCE || q == st->recv_peer))
      xfer(s, q, r, -1, BATON__FROM_INPUT, st->chunk, st, 1);
  return 1;
}

/* DIRECT_ARRIVE: the rank's whole INPUT, for the peers to read where it
 * lies; then a put's rendezvous. */
static int do_arrive(baton__sim_t *s, int r) {
  st_t *t = s->st;
  for (int c = 0; !t->put[r] && c < t->n; c++)
    if (t->flags[at(t, r, c)] & CELL_IN)
      t->flags[at(t, r, c)] |= CELL_BOX;
  return meet(t, t->put, &t->nput, r);
}

/* DIRECT_DONE: every rank's, as a put's rendezvous. */
static int do_done(baton__sim_t *s, int r, int i) {
  st_t *t = s->st;
  if (!t->put[r])
    baton__sim_report(s, BATON__SIM_E_MAILBOX, r, i, "reaches direct_done before direct_arrive");
  return meet(t, t->done, &t->ndone, r);
}

/* v (owned) into the output chunk c of rank `to`, or of every rank. */
static void land_out(baton__sim_t *s, int r, int i, const baton__step_t *st, int c, unsigned v,
                     int o) {
  int to = st->send_peer;
  st_t *t = s->st;
  for (int q = 0; q < t->n; q++) {
    if (to != BATON__ALL_RANKS && q != to)
      continue;
    if (!(t->flags[at(t, q, c)] & CELL_OUT)) {
      baton__sim_report(s, BATON__SIM_E_EMPTY, r, i,
                        "writes chunk %d into rank %d's output, which has no such chunk", c, q);
      continue;
    }
    baton__sim_land(s, q, i, c, baton__sim_ref(&t->pool, v), o);
    if (q != r)
      xfer(s, r, q, -1, BATON__FROM_WORK, c, st, 1);
  }
  baton__sim_drop(&t->pool, v);
}

/* DIRECT_REDUCE and DIRECT_COPY: the peers' INPUT read where it lies (each
 * rank's direct_arrive put all of it), the outputs written the same way.
 * A slice (one rank's N-th of the chunk) counts as the whole chunk here:
 * the simulator has no parts of chunks. */
static int do_direct(baton__sim_t *s, int r, int i, const baton__step_t *st) {
  st_t *t = s->st;
  if (!t->put[r]) {
    baton__sim_report(s, BATON__SIM_E_MAILBOX, r, i, "reads a peer before direct_arrive");
    return 1;
  }
  for (int j = 0; j < st->n; j++) {
    int c = (st->chunk + j) % t->n, from = st->recv_peer, o = c;
    unsigned v = 0;
    if (st->kind == BATON__STEP_DIRECT_COPY) {
      o = t->alltoall ? st->send_peer : c; /* output chunk `from` is INPUT chunk `to` */
      v = baton__sim_ref(&t->pool, box(s, r, i, from, o));
    }
    if (st->kind == BATON__STEP_DIRECT_REDUCE)
      v = box_sum(s, r, i, c);
    if (st->finish)
      v = finish(s, r, i, c, v);
    for (int q = 0; q < t->n; q++)
      if (q != r && (st->kind == BATON__STEP_DIRECT_REDUCE || q == from))
        xfer(s, q, r, -1, BATON__FROM_INPUT, o, st, 1);
    if (v)
      land_out(s, r, i, st, c, v, o);
  }
  return 1;
}

/* 1: step done; 0: it waits; 2: it waits but moved (a put). */
int baton__sim_run_step(baton__sim_t *s, int r, int i) {
  const baton__step_t *st = baton__sim_step_of(s, r, i);
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
  if (st->kind == BATON__STEP_DIRECT_ARRIVE)
    return do_arrive(s, r);
  if (st->kind == BATON__STEP_DIRECT_DONE)
    return do_done(s, r, i);
  if (baton__step_does(st->kind) & BATON__DOES_DIRECT)
    return do_direct(s, r, i, st);
  return do_mailbox(s, r, i, st);
}
