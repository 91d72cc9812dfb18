/*
 * exec.c - runs a schedule (schedule.h) over the transports.
 *
 * The data is processed in rounds: in each round every chunk advances by one
 * `piece` of at most half a channel's worth of segments, and the whole
 * schedule runs on those pieces. A received segment that the next step
 * sends on (`forward`) is reduced or copied straight from the incoming slot
 * into the outgoing one. Holding the incoming slot while waiting for an
 * outgoing one is deadlock-free only while a piece needs fewer segments than
 * a channel has slots; half leaves the pipeline room to flow. A message of
 * several chunks (the logarithmic algorithms) carries one piece of each, so
 * the piece shrinks with the most chunks any step sends: every message of
 * a round still fits in half a channel, and a rank that sends before it
 * receives never waits on a peer that does the same.
 *
 * Such a message is a stream: the chunks' pieces one after the other, cut
 * into segments that may straddle chunks; the receiver walks the same
 * pieces as the segments arrive. Pieces that lie next to each other in
 * memory go out as one, so a small message is one segment whatever the
 * number of chunks.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "comm.h"

typedef struct {
  baton_comm_t *comm;
  const baton__exec_args_t *a;
  char *scratch; /* WORK of the chunks this rank has no output for */
  baton__reduce_fn reduce;
  size_t seg;   /* elements per segment */
  size_t piece; /* elements per chunk per round */
  size_t round_start;
  int stream; /* write the output with non-temporal stores */
  int ring;   /* the ring's paths: one chunk a message, forwarding */
  const baton__step_t *step;
} run_t;

/* Copies into the caller's output. For buffers far larger than the caches,
 * non-temporal stores skip reading each destination line before writing it
 * (a quarter of the memory traffic) and leave the caches to the slots. */
static void copy_out(const run_t *r, void *dst, const void *src, size_t n) {
#if defined(__SSE2__)
  if (r->stream) {
    char *d = dst;
    const char *s = src;
    size_t head = (16 - ((uintptr_t)d & 15)) & 15;
    head = head < n ? head : n;
    memcpy(d, s, head);
    d += head, s += head, n -= head;
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

static size_t piece_len(const run_t *r, int chunk) {
  size_t len = r->comm->len[chunk];
  if (len <= r->round_start)
    return 0;
  return len - r->round_start < r->piece ? len - r->round_start : r->piece;
}

static int step_fail(run_t *r, int rc, baton__conn_t *c) {
  const baton__step_t *st = r->step;
  return baton__fail(r->comm, rc, "%s #%llu (%s, %s step %d): %s",
                     baton__coll_name(r->comm->sched.coll), (unsigned long long)r->comm->seq,
                     r->comm->sched.algo, baton__phase_name(st->phase), st->step, c->why);
}

/* WORK of a chunk (schedule.h): the output, or scratch where there is none. */
static char *out_ptr(const run_t *r, int chunk, size_t off) {
  const baton_comm_t *c = r->comm;
  if (c->out_off[chunk] == BATON__NO_OUT)
    return r->scratch + (c->work_off[chunk] + r->round_start + off) * r->a->elsize;
  return r->a->out + (c->out_off[chunk] + r->round_start + off) * r->a->elsize;
}

static const char *in_ptr(const run_t *r, int chunk, size_t off) {
  return r->a->in + (r->comm->in_off[chunk] + r->round_start + off) * r->a->elsize;
}

/* A send that is not fed by the previous step: from this rank's input. */
static int send_local(run_t *r, const baton__step_t *st) {
  baton__conn_t *c = baton__conn_to(r->comm, st->send_peer);
  size_t n = piece_len(r, st->send_chunk), es = r->a->elsize;
  int keep = st->send_keep, from_in = st->send_from == BATON__FROM_INPUT;
  for (size_t off = 0; off < n; off += r->seg) {
    size_t m = n - off < r->seg ? n - off : r->seg;
    const char *src = from_in ? in_ptr(r, st->send_chunk, off) : out_ptr(r, st->send_chunk, off);
    char *dst = keep ? out_ptr(r, st->send_chunk, off) : NULL;
    if (c->ops->send_ref) { /* the input itself goes out, no slot copy */
      if (dst && dst != src)
        memcpy(dst, src, m * es);
      int rc = c->ops->send_ref(c, src, m * es);
      if (rc)
        return step_fail(r, rc, c);
      continue;
    }
    void *slot;
    int rc = c->ops->send_acquire(c, &slot);
    if (rc)
      return step_fail(r, rc, c);
    memcpy(slot, src, m * es);
    if (keep && out_ptr(r, st->send_chunk, off) != src)
      copy_out(r, out_ptr(r, st->send_chunk, off), slot, m * es);
    c->ops->send_commit(c, m * es);
  }
  return 0;
}

static int recv_segment(run_t *r, const baton__step_t *st, baton__conn_t *in, baton__conn_t *fwd,
                        size_t off, size_t m) {
  const void *slot;
  size_t bytes, es = r->a->elsize;
  int rc = in->ops->recv_acquire(in, &slot, &bytes);
  if (rc)
    return step_fail(r, rc, in);
  if (bytes != m * es) {
    snprintf(in->why, sizeof in->why,
             "rank %d sent %zu bytes where %zu were expected: do all "
             "ranks call this collective with the same count and dtype?",
             in->peer, bytes, m * es);
    return step_fail(r, BATON_EPROTO, in);
  }
  /* A segment that is both kept and forwarded is written once, into the
   * output, when the next transport can send from the caller's memory
   * (TCP): that saves copying it through a slot. */
  int by_ref = fwd && st->keep && fwd->ops->send_ref;
  void *dst = NULL;
  if (fwd && !by_ref && (rc = fwd->ops->send_acquire(fwd, &dst)) != 0)
    return step_fail(r, rc, fwd);
  if (!fwd || by_ref)
    dst = out_ptr(r, st->recv_chunk, off);
  if (st->recv_op == BATON__RECV_REDUCE)
    r->reduce(dst, slot,
              st->recv_with == BATON__FROM_INPUT ? in_ptr(r, st->recv_chunk, off)
                                                 : out_ptr(r, st->recv_chunk, off),
              m);
  else if (fwd)
    memcpy(dst, slot, m * es);
  else
    copy_out(r, dst, slot, m * es);
  if (r->a->op == BATON_AVG && st->finish)
    baton__reduce_div(dst, m, r->a->dtype, r->comm->size);
  if (by_ref && (rc = fwd->ops->send_ref(fwd, dst, m * es)) != 0)
    return step_fail(r, rc, fwd);
  if (fwd && !by_ref) {
    fwd->ops->send_commit(fwd, m * es);
    if (st->keep)
      copy_out(r, out_ptr(r, st->recv_chunk, off), dst, m * es);
  }
  in->ops->recv_release(in);
  return 0;
}

static int recv_step(run_t *r, const baton__step_t *st, const baton__step_t *next) {
  baton__conn_t *in = baton__conn_from(r->comm, st->recv_peer);
  baton__conn_t *fwd = st->forward ? baton__conn_to(r->comm, next->send_peer) : NULL;
  size_t n = piece_len(r, st->recv_chunk);
  for (size_t off = 0; off < n; off += r->seg) {
    size_t m = n - off < r->seg ? n - off : r->seg;
    int rc = recv_segment(r, st, in, fwd, off, m);
    if (rc)
      return rc;
  }
  return 0;
}

/* ---- Messages of several chunks (the stream described at the top). */

static int chunk_at(const run_t *r, int first, int i) { return (first + i) % r->comm->size; }

/* Copies the pieces of chunks [first, first + n) from INPUT to WORK. */
static void keep_local(run_t *r, int first, int n) {
  for (int i = 0; i < n; i++) {
    int c = chunk_at(r, first, i);
    size_t len = piece_len(r, c);
    const char *src = in_ptr(r, c, 0);
    char *dst = out_ptr(r, c, 0);
    if (len && dst != src)
      copy_out(r, dst, src, len * r->a->elsize);
  }
}

/* Sends the pieces of the step's chunks as one stream. Neighbouring
 * pieces that touch in memory are sent as one run. */
static int send_stream(run_t *r, const baton__step_t *st) {
  baton__conn_t *c = baton__conn_to(r->comm, st->send_peer);
  size_t es = r->a->elsize, segb = r->seg * es;
  void *slot = NULL;
  size_t filled = 0;
  if (st->send_keep && st->send_from == BATON__FROM_INPUT)
    keep_local(r, st->send_chunk, st->send_n);
  for (int i = 0; i < st->send_n;) {
    int ch = chunk_at(r, st->send_chunk, i);
    const char *run = st->send_from == BATON__FROM_INPUT ? in_ptr(r, ch, 0) : out_ptr(r, ch, 0);
    size_t bytes = piece_len(r, ch) * es;
    for (i++; i < st->send_n; i++) { /* grow the run while the next piece follows on */
      int nx = chunk_at(r, st->send_chunk, i);
      const char *p = st->send_from == BATON__FROM_INPUT ? in_ptr(r, nx, 0) : out_ptr(r, nx, 0);
      size_t b = piece_len(r, nx) * es;
      if (b && p != run + bytes)
        break;
      bytes += b;
    }
    for (size_t off = 0; off < bytes;) {
      int rc;
      if (c->ops->send_ref) {
        size_t m = bytes - off < segb ? bytes - off : segb;
        if ((rc = c->ops->send_ref(c, run + off, m)) != 0)
          return step_fail(r, rc, c);
        off += m;
        continue;
      }
      if (!slot && (rc = c->ops->send_acquire(c, &slot)) != 0)
        return step_fail(r, rc, c);
      size_t m = bytes - off < segb - filled ? bytes - off : segb - filled;
      memcpy((char *)slot + filled, run + off, m);
      filled += m, off += m;
      if (filled == segb) {
        c->ops->send_commit(c, filled);
        slot = NULL, filled = 0;
      }
    }
  }
  if (slot)
    c->ops->send_commit(c, filled);
  return 0;
}

/* Receives the step's chunks as one stream and copies or combines each
 * segment into the pieces it covers. */
static int recv_stream(run_t *r, const baton__step_t *st) {
  baton__conn_t *in = baton__conn_from(r->comm, st->recv_peer);
  size_t es = r->a->elsize, total = 0;
  for (int i = 0; i < st->recv_n; i++)
    total += piece_len(r, chunk_at(r, st->recv_chunk, i)) * es;
  int i = 0;
  size_t at = 0; /* bytes of chunk i's piece done */
  for (size_t got = 0; got < total;) {
    const void *slot;
    size_t bytes;
    int rc = in->ops->recv_acquire(in, &slot, &bytes);
    if (rc)
      return step_fail(r, rc, in);
    if (bytes == 0 || bytes > total - got || bytes % es) {
      snprintf(in->why, sizeof in->why,
               "rank %d sent a segment of %zu bytes where at most %zu "
               "were left: do all ranks call this collective with the same arguments?",
               in->peer, bytes, total - got);
      return step_fail(r, BATON_EPROTO, in);
    }
    for (size_t used = 0; used < bytes;) {
      int ch = chunk_at(r, st->recv_chunk, i);
      size_t len = piece_len(r, ch) * es;
      if (at == len) {
        i++, at = 0;
        continue;
      }
      size_t m = len - at < bytes - used ? len - at : bytes - used;
      char *dst = out_ptr(r, ch, at / es);
      const char *src = (const char *)slot + used;
      if (st->recv_op == BATON__RECV_REDUCE)
        r->reduce(dst, src, st->recv_with == BATON__FROM_INPUT ? in_ptr(r, ch, at / es) : dst,
                  m / es);
      else
        copy_out(r, dst, src, m);
      if (r->a->op == BATON_AVG && st->finish)
        baton__reduce_div(dst, m / es, r->a->dtype, r->comm->size);
      used += m, at += m;
    }
    got += bytes;
    in->ops->recv_release(in);
  }
  return 0;
}

/* The bytes [*lo, *hi) that the current pieces of chunks [first, first + n)
 * span, in INPUT or WORK; empty (lo == hi) when they hold nothing. */
static void run_span(const run_t *r, int first, int n, int input, uintptr_t *lo, uintptr_t *hi) {
  *lo = UINTPTR_MAX, *hi = 0;
  for (int i = 0; i < n; i++) {
    int c = chunk_at(r, first, i);
    size_t len = piece_len(r, c) * r->a->elsize;
    uintptr_t p = (uintptr_t)(input ? in_ptr(r, c, 0) : out_ptr(r, c, 0));
    if (len && p < *lo)
      *lo = p;
    if (len && p + len > *hi)
      *hi = p + len;
  }
  if (*hi == 0)
    *lo = 0;
}

/* A step that receives into the memory it has just sent from (recursive
 * doubling's allreduce: both partners exchange the whole buffer) must not
 * write it while a transport that sends from the caller's memory (TCP
 * send_ref) may still be reading it: it waits for the send to leave first.
 * The message fits in half the peer's slots, so the wait cannot deadlock. */
static int flush_overlap(run_t *r, const baton__step_t *st) {
  baton__conn_t *c = baton__conn_to(r->comm, st->send_peer);
  if (!c->ops->send_ref || !c->ops->flush)
    return 0;
  uintptr_t slo, shi, rlo, rhi;
  run_span(r, st->send_chunk, st->send_n, st->send_from == BATON__FROM_INPUT, &slo, &shi);
  run_span(r, st->recv_chunk, st->recv_n, 0, &rlo, &rhi);
  int rc = slo < rhi && rlo < shi ? c->ops->flush(c) : 0;
  return rc ? step_fail(r, rc, c) : 0;
}

static int run_round(run_t *r) {
  const baton__sched_t *s = &r->comm->sched;
  for (int i = 0; i < s->nsteps; i++) {
    const baton__step_t *st = &s->steps[i];
    r->step = st;
    if (r->comm->trace)
      baton__trace_step_begin(r->comm->trace, i);
    int fed = i > 0 && s->steps[i - 1].forward;
    int rc = 0;
    if (st->send_peer < 0 && st->send_keep)
      keep_local(r, st->send_chunk, st->send_n);
    else if (st->send_peer >= 0 && !fed)
      rc = r->ring ? send_local(r, st) : send_stream(r, st);
    if (rc == 0 && !r->ring && st->send_peer >= 0 && st->recv_peer >= 0)
      rc = flush_overlap(r, st);
    if (rc == 0 && st->recv_peer >= 0)
      rc = r->ring ? recv_step(r, st, i + 1 < s->nsteps ? &s->steps[i + 1] : NULL)
                   : recv_stream(r, st);
    if (rc)
      return rc;
    if (r->comm->trace)
      baton__trace_step_end(r->comm->trace, i);
  }
  return 0;
}

int baton__exec(baton_comm_t *comm, const baton__exec_args_t *a) {
  run_t r = {
      .comm = comm, .a = a, .scratch = comm->work, .reduce = baton__reduce_get(a->dtype, a->op)};
  int window = comm->params.shm_slots / 2; /* segments a message may hold */
  r.ring = strcmp(comm->sched.algo, "ring") == 0;
  if (r.ring) {
    /* One segment size for every connection: a received segment may be
     * forwarded on another transport. */
    r.seg = comm->slot_bytes / a->elsize;
    r.piece = r.seg * (size_t)window;
  } else {
    /* Segments small enough for every connection; a message of up to N
     * chunks fits in half a channel. The same on every rank, as the pieces
     * must be. */
    r.seg = comm->stream_slot_bytes / a->elsize;
    r.piece = r.seg * (size_t)window / (size_t)comm->size;
    r.piece = r.piece ? r.piece : 1;
  }
  size_t maxlen = 0;
  for (int c = 0; c < comm->size; c++)
    maxlen = comm->len[c] > maxlen ? comm->len[c] : maxlen;
  /* In place, the output lines were just read and are still cached: plain
   * stores win there (measured: 7.3 against 6.7 GB/s at 128 MiB, N=2). */
  r.stream =
      a->out != a->in && maxlen * a->elsize * (size_t)comm->size >= comm->params.stream_bytes;
  int rc = 0;
  for (r.round_start = 0; r.round_start < maxlen && rc == 0; r.round_start += r.piece)
    rc = run_round(&r);
  /* A transport that buffers (TCP) must not keep the last bytes back while
   * the caller goes off to compute. */
  for (int p = 0; p < comm->size && rc == 0; p++) {
    baton__conn_t *c = comm->to[p];
    if (c && c->ops->flush && (rc = c->ops->flush(c)) != 0)
      rc = baton__fail(comm, rc, "%s #%llu (%s): %s", baton__coll_name(comm->sched.coll),
                       (unsigned long long)comm->seq, comm->sched.algo, c->why);
  }
#if defined(__SSE2__)
  if (r.stream)
    _mm_sfence();
#endif
  return rc;
}

size_t baton__sched_work_bytes(const baton_comm_t *comm, size_t elsize) {
  const baton__sched_t *s = &comm->sched;
  size_t most = 0;
  for (int i = 0; i < s->nsteps; i++) {
    const baton__step_t *st = &s->steps[i];
    /* WORK is touched by a kept receive, a send from WORK or a local copy;
     * a send fed by the previous step's forward touches nothing. */
    int fed = i > 0 && s->steps[i - 1].forward;
    int runs[2][2] = {{st->recv_chunk, st->recv_peer >= 0 && st->keep ? st->recv_n : 0},
                      {st->send_chunk, !fed && (st->send_from == BATON__FROM_WORK || st->send_keep)
                                           ? st->send_n
                                           : 0}};
    for (int k = 0; k < 2; k++)
      for (int j = 0; j < runs[k][1]; j++) {
        int c = (runs[k][0] + j) % comm->size;
        size_t end = (comm->work_off[c] + comm->len[c]) * elsize;
        if (comm->out_off[c] == BATON__NO_OUT && comm->len[c] && end > most)
          most = end;
      }
  }
  return most;
}

int baton__work_reserve(baton_comm_t *comm, size_t bytes) {
  if (bytes <= comm->work_bytes)
    return 0;
  if (bytes > comm->params.scratch_bytes)
    return BATON_ENOMEM;
  /* Grown by doubling and faulted in at once, so that a run of calls of
   * one size pays for its scratch memory only the first time. */
  size_t want = comm->work_bytes ? comm->work_bytes : 1 << 20;
  while (want < bytes)
    want *= 2;
  want = want > comm->params.scratch_bytes ? bytes : want;
  void *p =
      mmap(NULL, want, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (p == MAP_FAILED)
    return BATON_ENOMEM;
  if (comm->work)
    munmap(comm->work, comm->work_bytes);
  comm->work = p;
  comm->work_bytes = want;
  return 0;
}

const char *baton__coll_name(baton__coll_t coll) {
  static const char *const names[] = {"allreduce",  "reduce_scatter",  "allgather", "broadcast",
                                      "reduce",     "alltoall",        "gather",    "scatter",
                                      "allgatherv", "reduce_scatterv", "barrier"};
  _Static_assert(sizeof names / sizeof names[0] == BATON__COLL_COUNT, "a name per collective");
  return coll < BATON__COLL_COUNT ? names[coll] : "?";
}

const char *baton__phase_name(baton__phase_t phase) {
  static const char *const names[] = {
      "fold",      "reduce_scatter", "reduce",    "gather", "exchange",
      "allgather", "scatter",        "broadcast", "unfold", "flat"};
  _Static_assert(sizeof names / sizeof names[0] == BATON__PHASE_COUNT, "a name per phase");
  return (unsigned)phase < BATON__PHASE_COUNT ? names[phase] : "?";
}
