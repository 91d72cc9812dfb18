/*
 * viz_sim.h - baton-viz's simulator: runs the schedules of all ranks of one
 * collective (schedule.h) on contribution sets instead of numbers, the way
 * exec.c runs them on data, and cuts the run into the panels baton-viz
 * draws.
 *
 * What a rank holds of a chunk is a value: the set of ranks whose
 * contribution it contains, and the chunk it started as (its tag: the part
 * of the buffer for a reduction, the block's destination for alltoall and
 * scatter). Every rank has three places for chunks, as in exec.c:
 *  - INPUT: the caller's send buffer, fixed for the whole call;
 *  - WORK:  the chunk's working copy (output, or scratch);
 *  - the chunk just received that the next step sends on (`forward`),
 *    which does not land in memory unless the step says `keep`.
 * A message is a run of `n` chunks from `chunk` on, modulo N; it goes into
 * a queue per (sender, receiver), as the executor's connections are FIFO.
 * A receive takes the oldest message of its peer, checks that the run is
 * the one it expects, and copies or combines it into WORK; a reduction
 * that would add a contribution twice or mix two different chunks, a
 * `finish` on a partial sum, a receive that nothing sends and a send that
 * nobody receives are errors in the schedule, reported by name.
 *
 * Panels: the steps are taken by (phase, step) in the order of
 * baton__phase_t; a panel is everything that can run up to that key, so a
 * receive whose message comes later still lands where it really arrives.
 */
#ifndef BATON_VIZ_SIM_H
#define BATON_VIZ_SIM_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schedule.h"

#define MAX_N 64 /* a contribution set is one uint64_t */

typedef struct {
  uint64_t set; /* contributions; 0: nothing there */
  int tag;      /* the chunk it started as */
  int fin;      /* a reduction finished (AVG divided) here */
} val_t;

enum { SRC_INPUT, SRC_WORK, SRC_RECEIVED };

typedef struct {
  int from, to;
  int schunk, rchunk, n; /* first chunk on the sender and on the receiver; chunks */
  int op, src, with;     /* recv_op, SRC_*, recv_with */
  uint64_t carried;      /* every contribution the message carries */
} xfer_t;

typedef struct {
  int rank, chunk, n;
} copy_t; /* a local copy, INPUT to WORK */

typedef struct {
  int phase, step; /* phase -1: the result */
  xfer_t *x;
  int nx;
  copy_t *cp;
  int ncp;
  val_t *work;          /* [rank * n + chunk], before the panel */
  int fwd_chunk[MAX_N]; /* the chunk each rank holds to pass on, or -1 */
  val_t fwd[MAX_N];
  uint64_t sent_in[MAX_N], sent_work[MAX_N]; /* chunks sent from INPUT / WORK, bits */
  double t0[MAX_N], t1[MAX_N];               /* trace: seconds from the start, < 0 if none */
} panel_t;

typedef struct {
  baton__coll_t coll;
  const baton__algo_t *algo;
  int n, root;
  size_t count;
  val_t *input; /* [rank * n + chunk] */
  int mailbox;  /* no rank sends: each reads the others' input (flat) */
  panel_t *p;
  int np;
  int *panel_of;   /* [rank * cap + step]: the panel the step ran in */
  int cap;         /* steps per rank at most */
  int host[MAX_N]; /* per rank its host's index (hier), when has_hosts */
  int has_hosts;
  char bad[512]; /* why the result is not what the collective promises */
} sim_t;

static void sim_die(const sim_t *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3), noreturn));
static void sim_die(const sim_t *s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "baton-viz: the schedule of %s %s on %d ranks does not add up: ", s->algo->name,
          baton__coll_name(s->coll), s->n);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(1);
}

static void *sim_alloc(size_t n, size_t size) {
  void *p = calloc(n ? n : 1, size);
  if (!p) {
    fputs("baton-viz: out of memory\n", stderr);
    exit(2);
  }
  return p;
}

static int sim_reduces(baton__coll_t c) {
  return c == BATON__COLL_ALLREDUCE || c == BATON__COLL_REDUCE_SCATTER ||
         c == BATON__COLL_REDUCE_SCATTERV || c == BATON__COLL_REDUCE;
}

/* Only the root's chunk of broadcast and reduce holds data. */
static int sim_drawn(const sim_t *s, int c) {
  return (s->coll != BATON__COLL_BROADCAST && s->coll != BATON__COLL_REDUCE) || c == s->root;
}

static uint64_t sim_all(const sim_t *s) { return s->n == 64 ? ~0ull : (1ull << s->n) - 1; }

/* What the caller passes in: chunk c of rank r's INPUT. */
static val_t sim_input(const sim_t *s, int r, int c) {
  val_t none = {0, c, 0}, mine = {1ull << r, c, 0};
  if (!sim_drawn(s, c))
    return none;
  switch (s->coll) {
  case BATON__COLL_ALLGATHER:
  case BATON__COLL_ALLGATHERV:
  case BATON__COLL_GATHER:
    return c == r ? mine : none;
  case BATON__COLL_BROADCAST:
  case BATON__COLL_SCATTER:
    return r == s->root ? mine : none;
  default:
    return mine; /* reductions, alltoall: every chunk */
  }
}

/* What the collective promises chunk c of rank r's output holds, or
 * set 0 where it promises nothing. */
static val_t sim_promise(const sim_t *s, int r, int c) {
  val_t none = {0, c, 0}, all = {sim_all(s), c, !s->mailbox}, own = {1ull << c, c, 0};
  if (!sim_drawn(s, c))
    return none;
  switch (s->coll) {
  case BATON__COLL_ALLREDUCE:
    return all;
  case BATON__COLL_REDUCE_SCATTER:
  case BATON__COLL_REDUCE_SCATTERV:
    return c == r ? all : none;
  case BATON__COLL_REDUCE:
    return r == s->root ? all : none;
  case BATON__COLL_ALLGATHER:
  case BATON__COLL_ALLGATHERV:
    return own;
  case BATON__COLL_GATHER:
    return r == s->root ? own : none;
  case BATON__COLL_BROADCAST:
    return (val_t){1ull << s->root, c, 0};
  case BATON__COLL_SCATTER:
    return c == r ? (val_t){1ull << s->root, c, 0} : none;
  case BATON__COLL_ALLTOALL:
    return (val_t){1ull << c, r, 0}; /* rank c's block for r */
  default:
    return none;
  }
}

/* The contributions a complete chunk c holds, for the colours. */
static uint64_t sim_need(const sim_t *s, int r, int c) {
  val_t p = sim_promise(s, r, c);
  if (p.set)
    return p.set;
  return sim_reduces(s->coll)                                                 ? sim_all(s)
         : s->coll == BATON__COLL_BROADCAST || s->coll == BATON__COLL_SCATTER ? 1ull << s->root
                                                                              : 1ull << c;
}

typedef struct {
  int from, to, chunk, n, src, done;
  val_t v[MAX_N];
} msg_t;

typedef struct {
  sim_t *s;
  baton__sched_t *sch;
  int *at;     /* per rank: the next step */
  val_t *work; /* [rank * n + chunk] */
  int fwd_chunk[MAX_N];
  val_t fwd[MAX_N];
  int sent[MAX_N]; /* per rank: the next step's send has gone out */
  msg_t *m;
  int nm, total;
} run_t;

static const char *sim_where(const baton__step_t *st) {
  static char buf[64];
  snprintf(buf, sizeof buf, "%s step %d", baton__phase_name((baton__phase_t)st->phase), st->step);
  return buf;
}

static int sim_chunk(const sim_t *s, int first, int i) {
  return first == BATON__ALL_CHUNKS ? i : (first + i) % s->n;
}

static int sim_run_len(const sim_t *s, int first, int n) {
  return first == BATON__ALL_CHUNKS ? s->n : n;
}

/* One rank's send: the message goes into the queue. */
static void sim_send(run_t *R, panel_t *p, int r, const baton__step_t *st, int fed) {
  sim_t *s = R->s;
  int n = s->n, len = sim_run_len(s, st->send_chunk, st->send_n);
  if (st->send_chunk != BATON__ALL_CHUNKS &&
      (st->send_chunk < 0 || st->send_chunk >= n || st->send_n < 1 || st->send_n > n))
    sim_die(s, "rank %d, %s: sends chunk %d, run of %d", r, sim_where(st), st->send_chunk,
            st->send_n);
  if (st->send_peer >= n || st->send_peer == r)
    sim_die(s, "rank %d, %s: sends to rank %d", r, sim_where(st), st->send_peer);
  msg_t *m = st->send_peer >= 0 ? &R->m[R->nm++] : NULL;
  if (m)
    *m = (msg_t){.from = r,
                 .to = st->send_peer,
                 .chunk = st->send_chunk,
                 .n = len,
                 .src = fed                                 ? SRC_RECEIVED
                        : st->send_from == BATON__FROM_WORK ? SRC_WORK
                                                            : SRC_INPUT};
  for (int i = 0; i < len; i++) {
    int c = sim_chunk(s, st->send_chunk, i);
    val_t in = s->input[r * n + c], *w = &R->work[r * n + c];
    if (st->send_keep && (st->send_peer < 0 || st->send_from == BATON__FROM_INPUT))
      *w = in; /* a local copy, or allgather's own block on its way out */
    if (!m)
      continue;
    if (fed) {
      if (R->fwd_chunk[r] != c || len != 1)
        sim_die(s,
                "rank %d, %s: sends chunk %d fed by the previous step, which received "
                "chunk %d",
                r, sim_where(st), c, R->fwd_chunk[r]);
      m->v[i] = R->fwd[r];
    } else {
      m->v[i] = m->src == SRC_WORK ? *w : in;
    }
    if (!m->v[i].set && sim_drawn(s, c))
      sim_die(s, "rank %d, %s: sends chunk %d from its %s, which holds nothing there yet", r,
              sim_where(st), c,
              m->src == SRC_WORK ? "WORK"
              : fed              ? "last receive"
                                 : "INPUT");
    if (m->src == SRC_INPUT)
      p->sent_in[r] |= 1ull << c;
    else
      p->sent_work[r] |= 1ull << c;
  }
  if (!m)
    p->cp[p->ncp++] = (copy_t){r, st->send_chunk, st->send_n};
}

/* The oldest message from q to r that is not yet received, or NULL. */
static msg_t *sim_queue(run_t *R, int q, int r) {
  for (int i = 0; i < R->nm; i++)
    if (!R->m[i].done && R->m[i].from == q && R->m[i].to == r)
      return &R->m[i];
  return NULL;
}

/* Combines the received value into what recv_with names. */
static val_t sim_combine(run_t *R, int r, const baton__step_t *st, int c, val_t got) {
  sim_t *s = R->s;
  if (st->recv_op == BATON__RECV_COPY)
    return got;
  val_t base = st->recv_with == BATON__FROM_INPUT ? s->input[r * s->n + c] : R->work[r * s->n + c];
  if (!base.set && got.set && sim_drawn(s, c))
    sim_die(s, "rank %d, %s: combines chunk %d with its %s, which holds nothing", r, sim_where(st),
            c, st->recv_with == BATON__FROM_INPUT ? "INPUT" : "WORK");
  if (!got.set)
    return base;
  if (base.fin || got.fin)
    sim_die(s, "rank %d, %s: adds to chunk %d after its sum was finished", r, sim_where(st), c);
  if (base.tag != got.tag)
    sim_die(s, "rank %d, %s: combines chunk %d's data with chunk %d's", r, sim_where(st), got.tag,
            base.tag);
  if (base.set & got.set)
    sim_die(s, "rank %d, %s: adds the contribution of rank(s) %#llx into chunk %d twice", r,
            sim_where(st), (unsigned long long)(base.set & got.set), c);
  return (val_t){base.set | got.set, base.tag, 0};
}

/* One rank's receive; 0 when its message is not there yet. */
static int sim_recv(run_t *R, panel_t *p, int r, const baton__step_t *st) {
  sim_t *s = R->s;
  int n = s->n, q = st->recv_peer, len = sim_run_len(s, st->recv_chunk, st->recv_n);
  if (q >= n || q == r)
    sim_die(s, "rank %d, %s: receives from rank %d", r, sim_where(st), q);
  if (st->recv_chunk != BATON__ALL_CHUNKS &&
      (st->recv_chunk < 0 || st->recv_chunk >= n || st->recv_n < 1 || st->recv_n > n))
    sim_die(s, "rank %d, %s: receives chunk %d, run of %d", r, sim_where(st), st->recv_chunk,
            st->recv_n);
  msg_t mailbox = {.from = q, .to = r, .chunk = st->recv_chunk, .n = len, .src = SRC_INPUT};
  msg_t *m = &mailbox;
  if (s->mailbox) {
    for (int i = 0; i < len; i++)
      mailbox.v[i] = s->input[q * n + sim_chunk(s, st->recv_chunk, i)];
  } else if (!(m = sim_queue(R, q, r))) {
    return 0;
  }
  if (m->n != len || (s->coll != BATON__COLL_ALLTOALL && m->chunk != st->recv_chunk))
    sim_die(s,
            "rank %d, %s: expects chunk %d (run of %d) from rank %d, which sent chunk %d "
            "(run of %d)",
            r, sim_where(st), st->recv_chunk, len, q, m->chunk, m->n);
  m->done = 1;
  xfer_t *x = &p->x[p->nx++];
  *x = (xfer_t){q, r, m->chunk, st->recv_chunk, len, st->recv_op, m->src, st->recv_with, 0};
  R->fwd_chunk[r] = -1;
  for (int i = 0; i < len; i++) {
    int c = sim_chunk(s, st->recv_chunk, i);
    val_t v = sim_combine(R, r, st, c, m->v[i]);
    x->carried |= m->v[i].set;
    if (st->finish && sim_reduces(s->coll) && v.set != sim_all(s) && sim_drawn(s, c))
      sim_die(s,
              "rank %d, %s: finishes chunk %d with the contributions %#llx only, so AVG "
              "would divide a partial sum",
              r, sim_where(st), c, (unsigned long long)v.set);
    v.fin |= st->finish && sim_reduces(s->coll);
    if (st->forward)
      R->fwd_chunk[r] = c, R->fwd[r] = v;
    if (st->keep || !st->forward)
      R->work[r * n + c] = v;
  }
  return 1;
}

/* Runs every rank's steps with a key up to `key` as far as their messages
 * allow; returns how many sends and steps ran. */
static int sim_advance(run_t *R, panel_t *p, int key, int pi) {
  sim_t *s = R->s;
  int ran = 0;
  for (int progress = 1; progress;) {
    progress = 0;
    for (int r = 0; r < s->n; r++)
      while (R->at[r] < R->sch[r].nsteps) {
        const baton__step_t *st = &R->sch[r].steps[R->at[r]];
        if (st->phase * 65536 + st->step > key)
          break;
        int fed = R->at[r] > 0 && R->sch[r].steps[R->at[r] - 1].forward;
        if (!R->sent[r] && (st->send_peer >= 0 || st->send_keep)) {
          /* The send goes out first, as in exec.c, even if the receive
           * then has to wait. */
          sim_send(R, p, r, st, fed);
          progress = 1;
          ran++;
        }
        R->sent[r] = 1;
        s->panel_of[r * s->cap + R->at[r]] = pi;
        if (st->recv_peer >= 0 && !sim_recv(R, p, r, st))
          break;
        R->sent[r] = 0;
        R->at[r]++;
        ran++;
        progress = 1;
      }
  }
  return ran;
}

/* What went wrong with the result, in s->bad; 0 when it is what the
 * collective promises. */
static int sim_check(sim_t *s, const val_t *work) {
  for (int r = 0; r < s->n; r++)
    for (int c = 0; c < s->n; c++) {
      val_t want = sim_promise(s, r, c), got = work[r * s->n + c];
      if (!want.set || (got.set == want.set && got.tag == want.tag && got.fin >= want.fin))
        continue;
      snprintf(s->bad, sizeof s->bad,
               "rank %d ends with chunk %d holding the contributions "
               "%#llx of chunk %d%s; %s promises %#llx of chunk %d%s",
               r, c, (unsigned long long)got.set, got.tag, got.fin ? ", finished" : "",
               baton__coll_name(s->coll), (unsigned long long)want.set, want.tag,
               want.fin ? ", finished once (AVG divides there)" : "");
      return -1;
    }
  return 0;
}

static panel_t *sim_panel(sim_t *s, const run_t *R, int total) {
  panel_t *p = &s->p[s->np++];
  size_t cells = (size_t)s->n * (size_t)s->n;
  p->x = sim_alloc((size_t)total, sizeof *p->x);
  p->cp = sim_alloc((size_t)total, sizeof *p->cp);
  p->work = sim_alloc(cells, sizeof *p->work);
  memcpy(p->work, R->work, cells * sizeof *p->work);
  for (int r = 0; r < s->n; r++) {
    p->fwd_chunk[r] = R->fwd_chunk[r];
    p->fwd[r] = R->fwd[r];
    p->t0[r] = p->t1[r] = -1;
  }
  return p;
}

static void sim_panel_free(panel_t *p) {
  free(p->x);
  free(p->cp);
  free(p->work);
}

/* Everything simulate() allocated. */
static void sim_free(sim_t *s) {
  for (int i = 0; i < s->np; i++)
    sim_panel_free(&s->p[i]);
  free(s->p);
  free(s->input);
  free(s->panel_of);
}

static int sim_cmp_int(const void *a, const void *b) {
  return (*(const int *)a > *(const int *)b) - (*(const int *)a < *(const int *)b);
}

static int sim_cmp_xfer(const void *a, const void *b) {
  const xfer_t *x = a, *y = b;
  return x->to != y->to ? x->to - y->to : x->from - y->from;
}

/* Builds every rank's schedule, runs it and fills s->p; returns 0, or -1
 * with s->bad saying how the result differs from the promise. Dies on a
 * schedule that contradicts itself. */
static int simulate(sim_t *s) {
  int n = s->n, total = 0;
  s->cap = s->algo->max_steps(n);
  run_t R = {.s = s};
  R.sch = sim_alloc((size_t)n, sizeof *R.sch);
  R.at = sim_alloc((size_t)n, sizeof *R.at);
  size_t cells = (size_t)n * (size_t)n;
  s->input = sim_alloc(cells, sizeof *s->input);
  R.work = sim_alloc(cells, sizeof *R.work);
  s->panel_of = sim_alloc((size_t)n * (size_t)s->cap, sizeof *s->panel_of);
  int sends = 0;
  for (int r = 0; r < n; r++) {
    R.sch[r].steps = sim_alloc((size_t)s->cap, sizeof *R.sch[r].steps);
    R.sch[r].host = s->has_hosts ? s->host : NULL;
    if (baton__schedule_for(&R.sch[r], s->coll, s->algo, r, n, s->count, s->root) != 0)
      sim_die(s, "the library gives no schedule for rank %d", r);
    total += R.sch[r].nsteps;
    for (int i = 0; i < R.sch[r].nsteps; i++)
      sends += R.sch[r].steps[i].send_peer >= 0;
    for (int c = 0; c < n; c++)
      s->input[r * n + c] = sim_input(s, r, c);
    R.fwd_chunk[r] = -1;
  }
  /* Without messages (flat) each rank starts from its own input and reads
   * the others' from their mailboxes; on one rank the library copies. */
  s->mailbox = sends == 0;
  for (size_t i = 0; i < cells && s->mailbox; i++)
    R.work[i] = s->input[i];
  R.m = sim_alloc((size_t)total, sizeof *R.m);
  int *keys = sim_alloc((size_t)total, sizeof *keys), nkeys = 0;
  for (int r = 0; r < n; r++)
    for (int i = 0; i < R.sch[r].nsteps; i++)
      keys[nkeys++] = R.sch[r].steps[i].phase * 65536 + R.sch[r].steps[i].step;
  qsort(keys, (size_t)nkeys, sizeof *keys, sim_cmp_int);
  s->p = sim_alloc((size_t)total + 1, sizeof *s->p);
  for (int k = 0; k < nkeys; k++) {
    if (k > 0 && keys[k] == keys[k - 1])
      continue;
    panel_t *p = sim_panel(s, &R, total);
    p->phase = keys[k] / 65536;
    p->step = keys[k] % 65536;
    if (sim_advance(&R, p, keys[k], s->np - 1) == 0)
      sim_panel_free(&s->p[--s->np]); /* nothing could run: every rank of this key waits */
    else
      qsort(p->x, (size_t)p->nx, sizeof *p->x, sim_cmp_xfer); /* by receiver */
  }
  for (int r = 0; r < n; r++)
    if (R.at[r] < R.sch[r].nsteps) {
      const baton__step_t *st = &R.sch[r].steps[R.at[r]];
      sim_die(s, "rank %d waits forever at %s for chunk %d from rank %d, which never sends it", r,
              sim_where(st), st->recv_chunk, st->recv_peer);
    }
  for (int i = 0; i < R.nm; i++)
    if (!R.m[i].done)
      sim_die(s, "rank %d sends chunk %d (run of %d) to rank %d, which never receives it",
              R.m[i].from, R.m[i].chunk, R.m[i].n, R.m[i].to);
  panel_t *last = sim_panel(s, &R, 0);
  last->phase = -1;
  for (int r = 0; r < n; r++)
    free(R.sch[r].steps);
  free(R.sch), free(R.at), free(R.work), free(R.m), free(keys);
  return sim_check(s, last->work);
}

#endif /* BATON_VIZ_SIM_H */
