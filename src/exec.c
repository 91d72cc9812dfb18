/*
 * exec.c - the executor: runs one call's schedule (schedule.h) over the
 * transports, one step at a time.
 *
 * The data is processed in rounds: in each round every chunk advances by
 * one `piece`, and the whole schedule runs on those pieces. A piece is at
 * most half a channel's worth of segments, divided by N for the algorithms
 * whose messages carry several chunks (one piece of each), so that every
 * message of a round fits in half a channel: a rank that sends before it
 * receives never waits on a peer that does the same, and a recv-*-send
 * step, which holds the incoming slot while it waits for an outgoing one,
 * leaves the pipeline room to flow. The mailbox algorithm runs in one
 * round: a mailbox holds the whole message.
 *
 * A message is a stream: the pieces of its run one after the other, cut
 * into segments that may straddle chunks; the receiver walks the same
 * pieces as the segments arrive. Pieces that lie next to each other in
 * memory go out as one, so a small message is one segment whatever the
 * number of chunks. The *_SEND kinds (one chunk) pass each segment on as
 * it arrives: reduced or copied straight from the incoming slot into the
 * outgoing one.
 *
 * Where bytes land is decided in one place, work_ptr(): the caller's
 * output where this rank has the chunk in its output, else the call's
 * scratch.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "call.h"
#include "comm.h"

/* Copies into the caller's output. For buffers far larger than the caches,
 * non-temporal stores skip reading each destination line before writing it
 * (a quarter of the memory traffic) and leave the caches to the slots. */
static void copy_out(const baton__call_t *c, void *dst, const void *src, size_t n) {
#if defined(__SSE2__)
  if (c->x.stream) {
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

/* Chunk i of the run from `first` (both below N): no division on the
 * data path. */
static int chunk_at(const baton__call_t *c, int first, int i) {
  return baton__run_chunk(first, i, c->comm->size);
}

/* Elements of the current round's piece of a chunk `len` long. */
static size_t piece_of(const baton__call_t *c, size_t len) {
  size_t at = c->x.round_start;
  if (len <= at)
    return 0;
  return len - at < c->x.piece ? len - at : c->x.piece;
}

/* Of chunk's piece in WORK, and in INPUT (the same but for alltoallv). */
static size_t piece_len(const baton__call_t *c, int chunk) {
  return piece_of(c, c->layout.len[chunk]);
}
static size_t in_piece_len(const baton__call_t *c, int chunk) {
  return piece_of(c, c->layout.in_len[chunk]);
}

/* WORK of a chunk (schedule.h): the output, or scratch where there is none. */
static char *work_ptr(const baton__call_t *c, int chunk, size_t off) {
  const baton__layout_t *l = &c->layout;
  size_t at = c->x.round_start + off;
  if (l->out_off[chunk] == BATON__NO_OUT)
    return c->work + (l->work_off[chunk] + at) * c->elsize;
  return c->out + (l->out_off[chunk] + at) * c->elsize;
}

static const char *in_ptr(const baton__call_t *c, int chunk, size_t off) {
  return c->in + (c->layout.in_off[chunk] + c->x.round_start + off) * c->elsize;
}

static const char *src_ptr(const baton__call_t *c, const baton__step_t *st, int chunk, size_t off) {
  return st->src == BATON__FROM_INPUT ? in_ptr(c, chunk, off) : work_ptr(c, chunk, off);
}

static int fail_at(baton__call_t *c, const baton__step_t *st, int rc, const char *why) {
  return baton__fail(c->comm, rc, "%s #%llu (%s, %s step %d): %s", c->args.name,
                     (unsigned long long)c->seq, c->algo->name,
                     baton__phase_name((baton__phase_t)st->phase), st->step, why);
}

static int conn_fail(baton__call_t *c, const baton__step_t *st, int rc, baton__conn_t *conn) {
  return fail_at(c, st, rc, conn->why);
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

static int send_run(baton__call_t *c, const baton__step_t *st) {
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
    copy_out(c, dst, msg, bytes);
  if (st->finish && c->args.op == BATON_AVG)
    baton__reduce_div(dst, bytes / es, c->args.dtype, c->comm->size);
}

static int recv_run(baton__call_t *c, const baton__step_t *st) {
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
      copy_out(c, work_ptr(c, st->chunk, off), dst, m * es);
  }
  in->ops->recv_release(in);
  return 0;
}

static int recv_forward(baton__call_t *c, const baton__step_t *st) {
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

static void copy_run(baton__call_t *c, const baton__step_t *st) {
  for (int i = 0; i < st->n; i++) {
    int ch = chunk_at(c, st->chunk, i);
    size_t len = piece_len(c, ch);
    const char *src = in_ptr(c, ch, 0);
    char *dst = work_ptr(c, ch, 0);
    if (len && dst != src)
      copy_out(c, dst, src, len * c->elsize);
  }
}

/* ---- The mailboxes (one round: offsets are the chunks' whole lengths). */

int baton__flat_fits(const baton_comm_t *comm, baton__coll_t coll, size_t count, size_t elsize) {
  const baton__net_t *host = comm->host_net;
  if (!host || !comm->one_host || count == 0)
    return 0;
  size_t in_count = coll == BATON__COLL_REDUCE_SCATTER ? count * (size_t)comm->size : count;
  return in_count * elsize <= host->ops->mailbox_bytes(host->impl);
}

/* The host's mailboxes, found once: they stay where they are for the
 * communicator's life, one set for odd rendezvous and one for even. */
static void learn_boxes(baton_comm_t *comm) {
  const baton__net_t *host = comm->host_net;
  for (int set = 0; set < 2; set++)
    for (int r = 0; r < comm->size; r++)
      comm->boxes[set * comm->size + r] = host->ops->mailbox(host->impl, r, (uint32_t)set);
  comm->box_room = host->ops->mailbox_bytes(host->impl);
  comm->boxes_known = 1;
}

static char *box_ptr(const baton__call_t *c, int rank, int chunk) {
  const baton_comm_t *comm = c->comm;
  char *box = comm->boxes[(c->rendezvous & 1) * (uint32_t)comm->size + (uint32_t)rank];
  return box + c->layout.box_off[chunk] * c->elsize;
}

/* Calls fn on the run's chunks merged into spans that lie together both in
 * the mailboxes and in INPUT (input) or WORK: a small message is one copy
 * or one reduction whatever the number of chunks. */
typedef int (*box_fn)(baton__call_t *c, const baton__step_t *st, int first, size_t n);
static int for_each_box_span(baton__call_t *c, int i_step, int input, box_fn fn) {
  const baton__step_t *st = &c->sched.steps[i_step];
  const baton__layout_t *l = &c->layout;
  if (c->one_span[i_step] >= 0) /* found with the schedule */
    return fn(c, st, c->one_span[i_step], c->span_elems[i_step]);
  int first = -1;
  size_t n = 0, box_end = 0;
  const char *end = NULL;
  for (int i = 0; i < st->n; i++) {
    int ch = chunk_at(c, st->chunk, i);
    if (!l->len[ch])
      continue;
    const char *p = input ? in_ptr(c, ch, 0) : work_ptr(c, ch, 0);
    if (first >= 0 && p == end && l->box_off[ch] == box_end) {
      n += l->len[ch];
    } else {
      int rc = first >= 0 ? fn(c, st, first, n) : 0;
      if (rc)
        return rc;
      first = ch, n = l->len[ch];
    }
    end = p + l->len[ch] * c->elsize;
    box_end = l->box_off[ch] + l->len[ch];
  }
  return first >= 0 ? fn(c, st, first, n) : 0;
}

static int put_span(baton__call_t *c, const baton__step_t *st, int first, size_t n) {
  if ((c->layout.box_off[first] + n) * c->elsize > c->comm->box_room)
    return fail_at(c, st, BATON_EUSAGE, "the message does not fit in a mailbox");
  memcpy(box_ptr(c, c->comm->rank, first), in_ptr(c, first, 0), n * c->elsize);
  return 0;
}

static int mailbox_put(baton__call_t *c, int i) {
  const baton__step_t *st = &c->sched.steps[i];
  baton_comm_t *comm = c->comm;
  if (!comm->boxes_known)
    learn_boxes(comm);
  int rc = c->one_span[i] >= 0 ? put_span(c, st, c->one_span[i], c->span_elems[i])
                               : for_each_box_span(c, i, 1, put_span);
  if (rc)
    return rc;
  char why[BATON__ERRLEN];
  const baton__net_t *host = comm->host_net;
  rc = host->ops->arrive(host->impl, c->rendezvous, &c->sig, comm->params.timeout_s, why,
                         sizeof why);
  return rc ? fail_at(c, st, rc, why) : 0;
}

/* WORK = the span of rank recv_peer's mailbox (MAILBOX_COPY), or of every
 * rank's combined in rank order, so that all ranks compute the same bits. */
static int read_span(baton__call_t *c, const baton__step_t *st, int first, size_t n) {
  char *dst = work_ptr(c, first, 0);
  if (st->kind == BATON__STEP_MAILBOX_COPY) {
    memcpy(dst, box_ptr(c, st->recv_peer, first), n * c->elsize);
    return 0;
  }
  int size = c->comm->size;
  c->x.reduce(dst, box_ptr(c, 0, first), box_ptr(c, 1, first), n);
  for (int q = 2; q < size; q++)
    c->x.reduce(dst, dst, box_ptr(c, q, first), n);
  if (st->finish && c->args.op == BATON_AVG)
    baton__reduce_div(dst, n, c->args.dtype, size);
  return 0;
}

/* ---- One step. */

/* The bytes [*lo, *hi) that the current pieces of a step's run span, in
 * INPUT or WORK; empty (lo == hi) when they hold nothing. */
static void run_span(const baton__call_t *c, const baton__step_t *st, int input, uintptr_t *lo,
                     uintptr_t *hi) {
  *lo = UINTPTR_MAX, *hi = 0;
  for (int i = 0; i < st->n; i++) {
    int ch = chunk_at(c, st->chunk, i);
    size_t len = (input ? in_piece_len(c, ch) : piece_len(c, ch)) * c->elsize;
    uintptr_t p = (uintptr_t)(input ? in_ptr(c, ch, 0) : work_ptr(c, ch, 0));
    if (len && p < *lo)
      *lo = p;
    if (len && p + len > *hi)
      *hi = p + len;
  }
  if (*hi == 0)
    *lo = 0;
}

/* A receive that lands where the SEND just before it took its bytes
 * (recursive doubling's allreduce: both partners exchange the whole
 * buffer) must not write them while a transport that sends from the
 * caller's memory (TCP send_ref) may still be reading: it waits for the
 * send to leave first. The message fits in half the peer's slots, so the
 * wait cannot deadlock. */
static int flush_overlap(baton__call_t *c, const baton__step_t *sent, const baton__step_t *st) {
  baton__conn_t *conn = baton__conn_to(c->comm, sent->send_peer);
  if (!conn->ops->send_ref || !conn->ops->flush)
    return 0;
  uintptr_t slo, shi, rlo, rhi;
  run_span(c, sent, sent->src == BATON__FROM_INPUT, &slo, &shi);
  run_span(c, st, 0, &rlo, &rhi);
  int rc = slo < rhi && rlo < shi ? conn->ops->flush(conn) : 0;
  return rc ? conn_fail(c, st, rc, conn) : 0;
}

static int run_step(baton__call_t *c, int i) {
  const baton__step_t *st = &c->sched.steps[i];
  unsigned does = baton__step_does(st->kind);
  if (i > 0 && (does & BATON__DOES_RECV) && (does & BATON__DOES_LAND) &&
      c->sched.steps[i - 1].kind == BATON__STEP_SEND) {
    int rc = flush_overlap(c, &c->sched.steps[i - 1], st);
    if (rc)
      return rc;
  }
  switch (st->kind) {
  case BATON__STEP_SEND:
    return send_run(c, st);
  case BATON__STEP_RECV_COPY:
  case BATON__STEP_RECV_REDUCE:
    return recv_run(c, st);
  case BATON__STEP_RECV_REDUCE_SEND:
  case BATON__STEP_RECV_REDUCE_COPY_SEND:
  case BATON__STEP_RECV_COPY_SEND:
    return recv_forward(c, st);
  case BATON__STEP_COPY:
    copy_run(c, st);
    return 0;
  case BATON__STEP_MAILBOX_PUT:
    return mailbox_put(c, i);
  case BATON__STEP_MAILBOX_COPY:
  case BATON__STEP_MAILBOX_REDUCE:
    /* After the put, so the mailboxes are known. */
    return c->one_span[i] >= 0 ? read_span(c, st, c->one_span[i], c->span_elems[i])
                               : for_each_box_span(c, i, 0, read_span);
  default:
    return fail_at(c, st, BATON_EINTERNAL, "a step of unknown kind");
  }
}

/* After the last round: a transport that buffers (TCP) must not keep the
 * last bytes back while the caller goes off to compute. */
static int complete(baton__call_t *c) {
  baton_comm_t *comm = c->comm;
  int rc = 0;
  if (!comm->flushers_known) { /* the connections that buffer, found once */
    comm->nflushers = 0;
    for (int p = 0; p < comm->size; p++)
      if (comm->to[p] && comm->to[p]->ops->flush)
        comm->flushers[comm->nflushers++] = comm->to[p];
    comm->flushers_known = 1;
  }
  for (int k = 0; k < comm->nflushers && rc == 0; k++) {
    baton__conn_t *conn = comm->flushers[k];
    if ((rc = conn->ops->flush(conn)) != 0)
      rc = baton__fail(comm, rc, "%s #%llu (%s): %s", c->args.name, (unsigned long long)c->seq,
                       c->algo->name, conn->why);
  }
#if defined(__SSE2__)
  if (c->x.stream)
    _mm_sfence();
#endif
  return rc;
}

/* Rounds and segments: found once for a run of equal calls (the plan and
 * the element size decide them), the rest per call. */
void baton__exec_prepare(baton__call_t *c) {
  baton_comm_t *comm = c->comm;
  size_t es = c->elsize, window = (size_t)comm->params.shm_slots / 2;
  baton_op_t op = c->args.op == BATON_OP_COUNT ? BATON_SUM : c->args.op;
  if (!c->x.reduce || c->x.reduce_dtype != c->args.dtype || c->x.reduce_op != op) {
    c->x.reduce = baton__reduce_get(c->args.dtype, op);
    c->x.reduce_dtype = c->args.dtype, c->x.reduce_op = op;
  }
  if (c->planned.prepared_elsize != es) {
    c->x.maxlen = c->planned.maxlen;
    if (c->algo->traits & BATON__ALGO_MAILBOX) {
      c->x.seg = c->x.piece = c->x.maxlen ? c->x.maxlen : 1;
    } else if (c->algo->traits & BATON__ALGO_RING_LINKS) {
      /* One segment size for every connection: a received segment may be
       * passed on over another transport. */
      c->x.seg = comm->slot_bytes / es;
      c->x.piece = c->x.seg * window;
    } else {
      /* Segments small enough for every connection; a message of up to N
       * chunks fits in half a channel. The same on every rank, as the
       * pieces must be. */
      c->x.seg = comm->stream_slot_bytes / es;
      c->x.piece = c->x.seg * window / (size_t)comm->size;
      c->x.piece = c->x.piece ? c->x.piece : 1;
    }
    c->planned.big = c->x.maxlen * es * (size_t)comm->size >= comm->params.stream_bytes;
    c->planned.prepared_elsize = es;
    c->x.per_block = c->args.coll == BATON__COLL_ALLTOALLV;
  }
  /* In place, the output lines were just read and are still cached: plain
   * stores win there (measured: 7.3 against 6.7 GB/s at 128 MiB, N=2). */
  c->x.stream = c->out != c->in && c->planned.big;
  c->x.round_start = 0;
  c->x.next = 0;
  c->x.done = c->sched.nsteps == 0 || c->x.maxlen == 0;
}

/* ---- Calls in flight: the connections in issue order (call.h). */

static void learn_peers(baton__call_t *c) {
  for (int p = 0; p < c->comm->size; p++)
    c->last_send[p] = c->last_recv[p] = -1;
  c->last_mailbox = -1;
  for (int i = 0; i < c->sched.nsteps; i++) {
    const baton__step_t *st = &c->sched.steps[i];
    unsigned does = baton__step_does(st->kind);
    if (does & BATON__DOES_SEND)
      c->last_send[st->send_peer] = i;
    if (does & BATON__DOES_RECV)
      c->last_recv[st->recv_peer] = i;
    if (does & BATON__DOES_MAILBOX)
      c->last_mailbox = i;
  }
  c->peers_known = 1;
}

/* Whether earlier call e has run its last step numbered `last`. */
static int past(baton__call_t *e, int last) {
  if (e->x.done || last < 0)
    return 1;
  return e->x.round_start + e->x.piece >= e->x.maxlen && e->x.next > last;
}

/* Whether step st of c may run: no earlier call in flight still has a
 * message on a connection it uses, or a mailbox step. */
static int ready(baton__call_t *c, const baton__step_t *st) {
  unsigned does = baton__step_does(st->kind);
  if (!(does & (BATON__DOES_SEND | BATON__DOES_RECV | BATON__DOES_MAILBOX)))
    return 1;
  for (baton__call_t *e = c->comm->live_first; e && e != c; e = e->next_live) {
    if (e->x.done)
      continue;
    if (!e->peers_known)
      learn_peers(e);
    if (((does & BATON__DOES_SEND) && !past(e, e->last_send[st->send_peer])) ||
        ((does & BATON__DOES_RECV) && !past(e, e->last_recv[st->recv_peer])) ||
        ((does & BATON__DOES_MAILBOX) && !past(e, e->last_mailbox)))
      return 0;
  }
  return 1;
}

/* Size 1: each chunk from the input to the output, where they differ. */
static void run_local(baton__call_t *c) {
  const baton__layout_t *l = &c->layout;
  size_t es = c->elsize;
  for (int r = 0; r < c->comm->size; r++) {
    if (!l->len[r] || l->in_off[r] == BATON__NO_OUT || l->out_off[r] == BATON__NO_OUT)
      continue;
    const char *src = (const char *)c->args.sendbuf + l->in_off[r] * es;
    char *dst = (char *)c->args.recvbuf + l->out_off[r] * es;
    if (src != dst)
      memmove(dst, src, l->len[r] * es);
    if (c->args.dtype == BATON_BOOL && c->args.op != BATON_OP_COUNT) /* no kernel made it */
      baton__reduce_bool_normalize(dst, l->len[r]);
  }
  c->x.local = 0;
}

/* One step; `interleaved`: earlier calls may still be running (their
 * steps interleaved with this one's), so check the connections' order. */
static int step(baton__call_t *c, int interleaved) {
  if (c->x.local)
    run_local(c);
  if (c->x.done)
    return c->status;
  int i = c->x.next;
  if (c->comm->fatal_rc) { /* another call broke the communicator */
    c->status = c->comm->fatal_rc;
    c->x.done = 1;
    return c->status;
  }
  if (interleaved && c->prev_live && !ready(c, &c->sched.steps[i]))
    return BATON__EXEC_WAITING;
  c->comm->sig = c->sig; /* what the transports stamp and check */
  if (c->t0 && c->t0[i] < 0)
    c->t0[i] = baton__now();
  int rc = run_step(c, i);
  if (c->t1)
    c->t1[i] = baton__now();
  if (rc == 0 && ++c->x.next == c->sched.nsteps) {
    c->x.next = 0;
    c->x.round_start += c->x.piece;
    if (c->x.round_start < c->x.maxlen)
      return BATON__EXEC_MORE;
    rc = complete(c);
    c->x.done = 1;
  }
  if (rc) {
    c->status = rc;
    c->x.done = 1;
  }
  return c->x.done ? c->status : BATON__EXEC_MORE;
}

int baton__exec_step(baton__call_t *c) { return step(c, 1); }

/* The whole call in this thread, every earlier call run to its end: the
 * checks of baton__exec_step once, then the steps, round after round. */
int baton__exec(baton__call_t *c) {
  if (c->x.local)
    run_local(c);
  if (c->x.done)
    return c->status;
  int rc = c->comm->fatal_rc; /* another call broke the communicator */
  c->comm->sig = c->sig;      /* what the transports stamp and check */
  while (rc == 0) {
    for (int i = c->x.next; i < c->sched.nsteps && rc == 0; i++) {
      if (c->t0 && c->t0[i] < 0)
        c->t0[i] = baton__now();
      rc = run_step(c, i);
      if (c->t1)
        c->t1[i] = baton__now();
    }
    c->x.next = 0;
    c->x.round_start += c->x.piece;
    if (rc == 0 && c->x.round_start >= c->x.maxlen) {
      rc = complete(c);
      break;
    }
  }
  c->status = rc;
  c->x.done = 1;
  return rc;
}
