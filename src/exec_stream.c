/*
 * exec_stream.c - the steps that move messages: SEND, RECV_COPY,
 * RECV_REDUCE, the RECV_*_SEND kinds and COPY (exec.c runs them).
 *
 * A message is a stream: the pieces of its run one after the other, cut
 * into segments that may straddle chunks; the receiver walks the same
 * pieces as the segments arrive. Pieces that lie next to each other in
 * memory go out as one, so a small message is one segment whatever the
 * number of chunks. The *_SEND kinds (one chunk) pass each segment on as
 * it arrives: reduced or copied straight from the incoming slot into the
 * outgoing one.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#if defined(__x86_64__)
#include <immintrin.h>
#elif defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "exec.h"

/* Copies into the caller's output. For buffers far larger than the caches,
 * non-temporal stores skip reading each destination line before writing it
 * (a quarter of the memory traffic) and leave the caches to the slots. */
#if defined(__x86_64__)
/* Whole cache lines with one store each, where the CPU has AVX-512: four
 * 16-byte stores per line left the direct algorithm's copies to the
 * outputs the larger part of its time (perf, N=2 allreduce of 128 MiB),
 * and one store per line made the call 1.1-1.2x faster here. */
__attribute__((target("avx512f"))) static size_t stream_lines_512(char *d, const char *s,
                                                                  size_t n) {
  size_t done = 0;
  for (; n - done >= 64; done += 64)
    _mm512_stream_si512((__m512i *)(d + done), _mm512_loadu_si512((const void *)(s + done)));
  return done;
}

static int has_avx512(void) {
  static int known = -1;
  if (known < 0)
    known = __builtin_cpu_supports("avx512f") != 0;
  return known;
}
#endif

void baton__copy_out(const baton__call_t *c, void *dst, const void *src, size_t n) {
#if defined(__SSE2__)
  if (c->x.stream) {
    char *d = dst;
    const char *s = src;
    size_t head = (((uintptr_t) - (uintptr_t)d) & 63);
    head = head < n ? head : n;
    memcpy(d, s, head);
    d += head, s += head, n -= head;
#if defined(__x86_64__)
    if (has_avx512()) {
      size_t done = stream_lines_512(d, s, n);
      d += done, s += done, n -= done;
    }
#endif
    for (; n >= 64; n -= 64, d += 64, s += 64) {
      __m128i x0 = _mm_loadu_si128((const __m128i *)s);
      __m128i x1 = _mm_loadu_si128((const __m128i *)(s + 16));
      __m128i x2 = _mm_loadu_si128((const __m128i *)(s + 32));
      __m128i x3 = _mm_loadu_si128((const __m128i *)(s + 48));
      _mm_stream_si128((__m128i *)d, x0);
      _mm_stream_si128((__m128i *)(d + 16), x1);
      _mm_stream_si128((__m128i *)(d + 32), x2);
      _mm_stream_si128((__m128i *)(d + 48), x3);
    }
    memcpy(d, s, n);
    return;
  }
#endif
  memcpy(dst, src, n);
}

/* ---- Runs of chunks as spans of memory. */

/* Calls fn on the pieces of the run [first, first + n), in INPUT (input)
 * or WORK, merging pieces that follow each other in memory into one span. */
typedef int (*span_fn)(baton__call_t *c, const baton__step_t *st, char *p, size_t bytes, void *arg);
static int for_each_span(baton__call_t *c, const baton__step_t *st, int input, span_fn fn,
                         void *arg) {
  char *run = NULL;
  size_t bytes = 0;
  for (int i = 0; i < st->n; i++) {
    int ch = chunk_at(c, st->chunk, i);
    size_t b = (input ? in_piece_len(c, ch) : piece_len(c, ch)) * c->elsize;
    if (!b)
      continue;
    char *p = input ? (char *)in_ptr(c, ch, 0) : work_ptr(c, ch, 0);
    if (run && p == run + bytes) {
      bytes += b;
      continue;
    }
    int rc = run ? fn(c, st, run, bytes, arg) : 0;
    if (rc)
      return rc;
    run = p, bytes = b;
  }
  return run ? fn(c, st, run, bytes, arg) : 0;
}

/* ---- alltoallv's blocks (call.h, x.per_block).
 *
 * A block's two ends each know one count: the sender its sendcount, the
 * receiver its recvcount. Every message is one block (pairwise: chunk c to
 * or from rank c), and its signature carries both counts this rank has
 * for that peer: the block's own (count) and the one of the block going
 * the other way (root, 31 bits of it). The receiver compares both with
 * its own pair, so a mismatch on either block between two ranks fails
 * both of them, each in its own receive from the other, before its call
 * can complete. A block of 0 goes out as an empty segment in the first
 * round, so that it is checked as well. */

static void stamp_block(baton__call_t *c, size_t mine, size_t theirs) {
  c->comm->sig.count = mine;
  c->comm->sig.root = (int32_t)(theirs & 0x7fffffff);
}

static int send_empty(baton__call_t *c, const baton__step_t *st, baton__conn_t *conn) {
  void *slot;
  int rc = conn->ops->send_acquire(conn, &slot);
  if (rc)
    return conn_fail(c, st, rc, conn);
  conn->ops->send_commit(conn, 0);
  return 0;
}

static int recv_empty(baton__call_t *c, const baton__step_t *st, baton__conn_t *in) {
  const void *slot;
  size_t bytes;
  int rc = in->ops->recv_acquire(in, &slot, &bytes);
  if (rc)
    return conn_fail(c, st, rc, in);
  if (bytes != 0) {
    snprintf(in->why, sizeof in->why, "rank %d sent %zu bytes of an empty block", in->peer, bytes);
    return conn_fail(c, st, BATON_EPROTO, in);
  }
  in->ops->recv_release(in);
  return 0;
}

/* ---- SEND: the run's pieces as one stream. */

typedef struct {
  baton__conn_t *conn;
  void *slot;
  size_t filled;
} sender_t;

static int send_span(baton__call_t *c, const baton__step_t *st, char *run, size_t bytes,
                     void *arg) {
  sender_t *s = arg;
  baton__conn_t *conn = s->conn;
  size_t segb = c->x.seg * c->elsize;
  for (size_t off = 0; off < bytes;) {
    int rc;
    if (conn->ops->send_ref) { /* the memory itself goes out, no slot copy */
      size_t m = bytes - off < segb ? bytes - off : segb;
      if ((rc = conn->ops->send_ref(conn, run + off, m)) != 0)
        return conn_fail(c, st, rc, conn);
      off += m;
      continue;
    }
    if (!s->slot && (rc = conn->ops->send_acquire(conn, &s->slot)) != 0)
      return conn_fail(c, st, rc, conn);
    size_t m = bytes - off < segb - s->filled ? bytes - off : segb - s->filled;
    memcpy((char *)s->slot + s->filled, run + off, m);
    s->filled += m, off += m;
    if (s->filled == segb) {
      conn->ops->send_commit(conn, s->filled);
      s->slot = NULL, s->filled = 0;
    }
  }
  return 0;
}

int baton__send_run(baton__call_t *c, const baton__step_t *st) {
  sender_t s = {.conn = baton__conn_to(c->comm, st->send_peer)};
  if (c->x.per_block) {
    const baton__layout_t *l = &c->layout;
    stamp_block(c, l->in_len[st->chunk], l->len[st->chunk]);
    if (in_piece_len(c, st->chunk) == 0)
      return c->x.round_start == 0 ? send_empty(c, st, s.conn) : 0;
  }
  int rc = for_each_span(c, st, st->src == BATON__FROM_INPUT, send_span, &s);
  if (rc == 0 && s.slot)
    s.conn->ops->send_commit(s.conn, s.filled);
  return rc;
}

/* ---- RECV_COPY, RECV_REDUCE: the stream walked piece by piece. */

static void land(baton__call_t *c, const baton__step_t *st, int chunk, size_t at, char *dst,
                 const char *msg, size_t bytes) {
  size_t es = c->elsize;
  if (baton__step_does(st->kind) & BATON__DOES_REDUCE)
    c->x.reduce(dst, msg, src_ptr(c, st, chunk, at / es), bytes / es);
  else
    baton__copy_out(c, dst, msg, bytes);
  if (st->finish && c->args.op == BATON_AVG)
    baton__reduce_div(dst, bytes / es, c->args.dtype, c->comm->size);
}

int baton__recv_run(baton__call_t *c, const baton__step_t *st) {
  baton__conn_t *in = baton__conn_from(c->comm, st->recv_peer);
  size_t es = c->elsize, total = 0;
  for (int i = 0; i < st->n; i++)
    total += piece_len(c, chunk_at(c, st->chunk, i)) * es;
  if (c->x.per_block) {
    stamp_block(c, c->layout.len[st->chunk], c->layout.in_len[st->chunk]);
    if (total == 0)
      return c->x.round_start == 0 ? recv_empty(c, st, in) : 0;
  }
  int i = 0;
  size_t at = 0; /* bytes of chunk i's piece done */
  for (size_t got = 0; got < total;) {
    const void *slot;
    size_t bytes;
    int rc = in->ops->recv_acquire(in, &slot, &bytes);
    if (rc)
      return conn_fail(c, st, rc, in);
    if (bytes == 0 || bytes > total - got || bytes % es) {
      snprintf(in->why, sizeof in->why,
               "rank %d sent a segment of %zu bytes where at most %zu were left: do all ranks "
               "call this collective with the same arguments?",
               in->peer, bytes, total - got);
      return conn_fail(c, st, BATON_EPROTO, in);
    }
    for (size_t used = 0; used < bytes;) {
      int ch = chunk_at(c, st->chunk, i);
      size_t len = piece_len(c, ch) * es;
      if (at == len) {
        i++, at = 0;
        continue;
      }
      size_t m = len - at < bytes - used ? len - at : bytes - used;
      land(c, st, ch, at, work_ptr(c, ch, at / es), (const char *)slot + used, m);
      used += m, at += m;
    }
    got += bytes;
    in->ops->recv_release(in);
  }
  return 0;
}

/* ---- RECV_*_SEND: one chunk, each segment passed on as it arrives. */

static int forward_segment(baton__call_t *c, const baton__step_t *st, baton__conn_t *in,
                           baton__conn_t *out, size_t off, size_t m) {
  const void *slot;
  size_t bytes, es = c->elsize;
  unsigned does = baton__step_does(st->kind);
  int lands = (does & BATON__DOES_LAND) != 0, rc = in->ops->recv_acquire(in, &slot, &bytes);
  if (rc)
    return conn_fail(c, st, rc, in);
  if (bytes != m * es) {
    snprintf(in->why, sizeof in->why,
             "rank %d sent %zu bytes where %zu were expected: do all ranks call this "
             "collective with the same count and dtype?",
             in->peer, bytes, m * es);
    return conn_fail(c, st, BATON_EPROTO, in);
  }
  /* A segment that both lands and goes on is written once, into WORK, when
   * the next transport sends from the caller's memory (TCP). */
  int by_ref = lands && out->ops->send_ref;
  void *dst = NULL;
  if (by_ref)
    dst = work_ptr(c, st->chunk, off);
  else if ((rc = out->ops->send_acquire(out, &dst)) != 0)
    return conn_fail(c, st, rc, out);
  if (does & BATON__DOES_REDUCE)
    c->x.reduce(dst, slot, src_ptr(c, st, st->chunk, off), m);
  else
    memcpy(dst, slot, m * es);
  if (st->finish && c->args.op == BATON_AVG)
    baton__reduce_div(dst, m, c->args.dtype, c->comm->size);
  if (by_ref && (rc = out->ops->send_ref(out, dst, m * es)) != 0)
    return conn_fail(c, st, rc, out);
  if (!by_ref) {
    out->ops->send_commit(out, m * es);
    if (lands)
      baton__copy_out(c, work_ptr(c, st->chunk, off), dst, m * es);
  }
  in->ops->recv_release(in);
  return 0;
}

int baton__recv_forward(baton__call_t *c, const baton__step_t *st) {
  baton__conn_t *in = baton__conn_from(c->comm, st->recv_peer);
  baton__conn_t *out = baton__conn_to(c->comm, st->send_peer);
  size_t n = piece_len(c, st->chunk), seg = c->x.seg;
  for (size_t off = 0; off < n; off += seg) {
    int rc = forward_segment(c, st, in, out, off, n - off < seg ? n - off : seg);
    if (rc)
      return rc;
  }
  return 0;
}

/* ---- COPY: INPUT to WORK, where they differ. */

void baton__copy_run(baton__call_t *c, const baton__step_t *st) {
  for (int i = 0; i < st->n; i++) {
    int ch = chunk_at(c, st->chunk, i);
    size_t len = piece_len(c, ch);
    const char *src = in_ptr(c, ch, 0);
    char *dst = work_ptr(c, ch, 0);
    if (len && dst != src)
      baton__copy_out(c, dst, src, len * c->elsize);
  }
}
