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
  int rank, size;
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

int baton__trace_open(baton__trace_t **out, const char *pattern, int rank, int size, char *err,
                      size_t errlen) {
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
  if (!t) {
    snprintf(err, errlen, "out of memory for the trace");
    return BATON_ENOMEM;
  }
  if (!(t->f = fopen(path, "w"))) {
    baton__trace_close(t);
    snprintf(err, errlen, "BATON_TRACE: cannot create \"%s\": %m", path);
    return BATON_EUSAGE;
  }
  t->rank = rank;
  t->size = size;
  *out = t;
  baton__log_info(INIT, "tracing the steps of every collective to %s", path);
  return BATON_OK;
}

void baton__trace_close(baton__trace_t *t) {
  if (!t)
    return;
  if (t->f)
    fclose(t->f);
  free(t);
}

/* Bytes of the run of n chunks from `chunk` on, modulo the number of
 * chunks (schedule.h). */
static size_t run_bytes(const baton__trace_t *t, const baton__trace_call_t *c, int chunk, int n) {
  size_t elems = 0;
  for (int i = 0; i < n; i++)
    elems += c->len[(chunk + i) % t->size];
  return elems * c->elsize;
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

/* What `src` means depends on the kind: a SEND's bytes, a reducing
 * receive's second operand; "none" where the kind reads neither. */
static const char *src_name(const baton__step_t *st) {
  unsigned does = baton__step_does(st->kind);
  int used =
      st->kind == BATON__STEP_SEND || ((does & BATON__DOES_REDUCE) && (does & BATON__DOES_RECV));
  return !used ? "none" : st->src == BATON__FROM_WORK ? "work" : "input";
}

static void write_line(baton__trace_t *t, const baton__trace_call_t *c, const baton__step_t *st,
                       int i) {
  fprintf(t->f,
          "{\"rank\":%d,\"size\":%d,\"seq\":%llu,\"coll\":\"%s\",\"algo\":\"%s\","
          "\"dtype\":\"%s\",\"count\":%zu,\"root\":%d,\"host\":%d,",
          t->rank, t->size, (unsigned long long)c->seq, baton__coll_name(c->coll), c->algo,
          c->dtype, c->count, c->root, c->host);
  write_counts(t, c);
  fprintf(t->f,
          "\"phase\":\"%s\",\"step\":%d,\"kind\":\"%s\",\"chunk\":%d,\"n\":%d,"
          "\"src\":\"%s\",\"send_to\":%d,\"recv_from\":%d,\"finish\":%d,\"bytes\":%zu,"
          "\"t_start_us\":%.3f,\"t_end_us\":%.3f,\"rc\":%d}\n",
          baton__phase_name((baton__phase_t)st->phase), st->step,
          (unsigned)st->kind < BATON__STEP_KIND_COUNT ? baton__kinds[st->kind].name : "?",
          st->chunk, st->n, src_name(st), st->send_peer, st->recv_peer, st->finish,
          run_bytes(t, c, st->chunk, st->n), c->t0[i] < 0 ? -1.0 : c->t0[i] * 1e6,
          c->t1[i] < 0 ? -1.0 : c->t1[i] * 1e6, c->rc);
}

void baton__trace_end(baton__trace_t *t, const baton__trace_call_t *c) {
  /* The call's arrays hold sched->cap steps, and nsteps <= cap. */
  for (int i = 0; i < c->sched->nsteps && i < c->sched->cap; i++)
    write_line(t, c, &c->sched->steps[i], i);
  fflush(t->f);
}
