/*
 * exec.h - what the executor's two files share (exec.c runs the steps,
 * exec_stream.c moves a step's messages): where a chunk's piece lies in
 * INPUT and WORK this round, and how a step fails.
 */
#ifndef BATON_EXEC_H
#define BATON_EXEC_H

#include <stddef.h>

#include "call.h"
#include "comm.h"

/* Chunk i of the run from `first` (both below N): no division on the
 * data path. */
static inline int chunk_at(const baton__call_t *c, int first, int i) {
  return baton__run_chunk(first, i, c->comm->size);
}

/* Elements of the current round's piece of a chunk `len` long. */
static inline size_t piece_of(const baton__call_t *c, size_t len) {
  size_t at = c->x.round_start;
  if (len <= at)
    return 0;
  return len - at < c->x.piece ? len - at : c->x.piece;
}

/* Of chunk's piece in WORK, and in INPUT (the same but for alltoallv). */
static inline size_t piece_len(const baton__call_t *c, int chunk) {
  return piece_of(c, c->layout.len[chunk]);
}
static inline size_t in_piece_len(const baton__call_t *c, int chunk) {
  return piece_of(c, c->layout.in_len[chunk]);
}

/* WORK of a chunk (schedule.h): the output, or scratch where there is none. */
static inline char *work_ptr(const baton__call_t *c, int chunk, size_t off) {
  const baton__layout_t *l = &c->layout;
  size_t at = c->x.round_start + off;
  if (l->out_off[chunk] == BATON__NO_OUT)
    return c->work + (l->work_off[chunk] + at) * c->elsize;
  return c->out + (l->out_off[chunk] + at) * c->elsize;
}

static inline const char *in_ptr(const baton__call_t *c, int chunk, size_t off) {
  return c->in + (c->layout.in_off[chunk] + c->x.round_start + off) * c->elsize;
}

static inline const char *src_ptr(const baton__call_t *c, const baton__step_t *st, int chunk,
                                  size_t off) {
  return st->src == BATON__FROM_INPUT ? in_ptr(c, chunk, off) : work_ptr(c, chunk, off);
}

int baton__step_fail(baton__call_t *c, const baton__step_t *st, int rc, const char *why);
static inline int conn_fail(baton__call_t *c, const baton__step_t *st, int rc,
                            baton__conn_t *conn) {
  return baton__step_fail(c, st, rc, conn->why);
}

/* The kinds that move messages (exec_stream.c). */
int baton__send_run(baton__call_t *c, const baton__step_t *st);
int baton__recv_run(baton__call_t *c, const baton__step_t *st);
int baton__recv_forward(baton__call_t *c, const baton__step_t *st);
void baton__copy_run(baton__call_t *c, const baton__step_t *st);
/* n bytes into an output, with non-temporal stores where the call streams. */
void baton__copy_out(const baton__call_t *c, void *dst, const void *src, size_t n);

/* The direct algorithm's kinds (exec_direct.c). direct-arrive answers
 * BATON__DIRECT_RESTAGED when the call now runs a staged algorithm's
 * schedule from its first step. */
enum { BATON__DIRECT_RESTAGED = 3 };
int baton__direct_arrive(baton__call_t *c, const baton__step_t *st);
int baton__direct_reduce(baton__call_t *c, const baton__step_t *st);
int baton__direct_copy(baton__call_t *c, const baton__step_t *st);
int baton__direct_done(baton__call_t *c, const baton__step_t *st);

#endif
