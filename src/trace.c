/*
 * trace.c - BATON_TRACE (see trace.h and docs/trace.md).
 *
 * Times are CLOCK_MONOTONIC in microseconds, a clock that every process on
 * one host shares, so the lines of different ranks can be laid side by side.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "trace.h"

struct baton__trace {
  FILE *f;
  int rank, size, cap;
  double *t0, *t1; /* per step, seconds; < 0 when not (yet) run */
};

/* pattern with %r -> rank and %% -> %; -1 on any other % or overflow. */
static int expand(const char *pattern, int rank, char *out, size_t cap, int *has_rank) {
  size_t o = 0;
  *has_rank = 0;
  for (const char *p = pattern; *p; p++) {
    char num[16];
    const char *piece = p;
    size_t n = 1;
    if (*p == '%') {
      if (p[1] == 'r') {
        n = (size_t)snprintf(num, sizeof num, "%d", rank);
        piece = num;
        *has_rank = 1;
      } else if (p[1] != '%') {
        return -1;
      }
      p++;
    }
    if (o + n >= cap)
      return -1;
    memcpy(out + o, piece, n);
    o += n;
  }
  out[o] = '\0';
  return 0;
}

int baton__trace_open(baton__trace_t **out, const char *pattern, int rank, int size, int max_steps,
                      char *err, size_t errlen) {
  char path[512];
  int has_rank;
  *out = NULL;
  if (expand(pattern, rank, path, sizeof path, &has_rank) != 0) {
    snprintf(err, errlen, "BATON_TRACE=\"%s\": only %%r (the rank) and %%%% may follow a %%",
             pattern);
    return BATON_EUSAGE;
  }
  if (!has_rank && size > 1) {
    snprintf(err, errlen,
             "BATON_TRACE=\"%s\" has no %%r: with %d ranks every rank would "
             "write the same file; use e.g. trace.%%r",
             pattern, size);
    return BATON_EUSAGE;
  }
  baton__trace_t *t = calloc(1, sizeof *t);
  if (!t || !(t->t0 = calloc((size_t)max_steps + 1, sizeof *t->t0)) ||
      !(t->t1 = calloc((size_t)max_steps + 1, sizeof *t->t1))) {
    baton__trace_close(t);
    snprintf(err, errlen, "out of memory for the trace of %d steps", max_steps);
    return BATON_ENOMEM;
  }
  if (!(t->f = fopen(path, "w"))) {
    baton__trace_close(t);
    snprintf(err, errlen, "BATON_TRACE: cannot create \"%s\": %m", path);
    return BATON_EUSAGE;
  }
  t->rank = rank;
  t->size = size;
  t->cap = max_steps + 1;
  *out = t;
  baton__log_info(INIT, "tracing the steps of every collective to %s", path);
  return BATON_OK;
}

void baton__trace_close(baton__trace_t *t) {
  if (!t)
    return;
  if (t->f)
    fclose(t->f);
  free(t->t0);
  free(t->t1);
  free(t);
}

void baton__trace_begin(baton__trace_t *t) {
  for (int i = 0; i < t->cap; i++)
    t->t0[i] = t->t1[i] = -1;
}

void baton__trace_step_begin(baton__trace_t *t, int i) {
  if (t->t0[i] < 0)
    t->t0[i] = baton__now();
}

void baton__trace_step_end(baton__trace_t *t, int i) { t->t1[i] = baton__now(); }

/* Bytes of the run of n chunks from `chunk` on (modulo the number of
 * chunks, as schedule.h says), or of the whole buffer. */
static size_t run_bytes(const baton__trace_t *t, const baton__trace_call_t *c, int chunk, int n) {
  size_t elems = 0;
  if (chunk == BATON__ALL_CHUNKS)
    return c->count * c->elsize;
  if (chunk < 0)
    return 0;
  for (int i = 0; i < n; i++)
    elems += c->len[(chunk + i) % t->size];
  return elems * c->elsize;
}

static const char *from_name(int from) { return from == BATON__FROM_WORK ? "work" : "input"; }

/* Where a step's send takes its bytes: what the previous step received
 * and forwards, or the step's own send_from. */
static const char *send_source(const baton__step_t *st, int fed) {
  if (st->send_peer < 0)
    return st->send_keep ? "input" : "none";
  return fed ? "received" : from_name(st->send_from);
}

/* The v-variants' count of every rank, as "counts":"3,5,7", (the
 * drawing needs them; the others' chunks follow from count). */
static void write_counts(baton__trace_t *t, const baton__trace_call_t *c) {
  if (c->coll != BATON__COLL_ALLGATHERV && c->coll != BATON__COLL_REDUCE_SCATTERV)
    return;
  fputs("\"counts\":\"", t->f);
  for (int r = 0; r < t->size; r++)
    fprintf(t->f, "%s%zu", r ? "," : "", c->len[r]);
  fputs("\",", t->f);
}

static void write_line(baton__trace_t *t, const baton__trace_call_t *c, const char *algo,
                       const baton__step_t *st, int fed, size_t flat_bytes, int i) {
  static const char *const ops[] = {"copy", "reduce"};
  int sends = st->send_peer >= 0, recvs = st->recv_peer >= 0;
  int local = !sends && st->send_keep; /* a copy from INPUT to WORK on this rank */
  size_t sb = sends || local ? run_bytes(t, c, st->send_chunk, st->send_n) : 0;
  size_t rb = recvs ? run_bytes(t, c, st->recv_chunk, st->recv_n) : 0;
  size_t bytes = !c->sched ? flat_bytes : sends || local ? sb : rb;
  fprintf(t->f,
          "{\"rank\":%d,\"size\":%d,\"seq\":%llu,\"coll\":\"%s\",\"algo\":\"%s\","
          "\"dtype\":\"%s\",\"count\":%zu,\"root\":%d,\"host\":%d,",
          t->rank, t->size, (unsigned long long)c->seq, baton__coll_name(c->coll), algo, c->dtype,
          c->count, c->root, c->sched && c->sched->host ? c->sched->host[t->rank] : t->rank);
  write_counts(t, c);
  fprintf(t->f,
          "\"phase\":\"%s\",\"step\":%d,"
          "\"send_to\":%d,\"send_chunk\":%d,\"send_n\":%d,\"send_from\":\"%s\","
          "\"send_bytes\":%zu,\"local_copy\":%d,"
          "\"recv_from\":%d,\"recv_chunk\":%d,\"recv_n\":%d,\"op\":\"%s\","
          "\"recv_with\":\"%s\",\"recv_bytes\":%zu,\"keep\":%d,\"forward\":%d,"
          "\"finish\":%d,\"bytes\":%zu,\"t_start_us\":%.3f,\"t_end_us\":%.3f,\"rc\":%d}\n",
          baton__phase_name((baton__phase_t)st->phase), st->step, st->send_peer,
          sends || local ? st->send_chunk : -1, sends || local ? st->send_n : 0,
          send_source(st, fed), sb, local, st->recv_peer, recvs ? st->recv_chunk : -1,
          recvs ? st->recv_n : 0, recvs ? ops[st->recv_op & 1] : "none",
          recvs && st->recv_op == BATON__RECV_REDUCE ? from_name(st->recv_with) : "none", rb,
          recvs && (st->keep || !st->forward), recvs && st->forward, recvs && st->finish, bytes,
          t->t0[i] < 0 ? -1.0 : t->t0[i] * 1e6, t->t1[i] < 0 ? -1.0 : t->t1[i] * 1e6, c->rc);
}

void baton__trace_end(baton__trace_t *t, const baton__trace_call_t *c) {
  if (!c->sched) {
    /* flat.c: one step; the peers are every rank, through the mailboxes. */
    baton__step_t st = {.phase = BATON__PHASE_FLAT, .send_peer = -1, .recv_peer = -1};
    write_line(t, c, "flat", &st, 0, c->flat_bytes, 0);
  } else {
    for (int i = 0; i < c->sched->nsteps && i < t->cap; i++) {
      const baton__step_t *st = &c->sched->steps[i];
      write_line(t, c, c->sched->algo, st, i > 0 && c->sched->steps[i - 1].forward, 0, i);
    }
  }
  fflush(t->f);
}
