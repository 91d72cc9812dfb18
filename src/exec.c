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
 * The steps that move messages are in exec_stream.c; the mailbox steps,
 * the step dispatch and the order of calls in flight are here.
 *
 * Where bytes land is decided in one place, work_ptr() (exec.h): the
 * caller's output where this rank has the chunk in its output, else the
 * call's scratch.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "exec.h"

int baton__step_fail(baton__call_t *c, const baton__step_t *st, int rc, const char *why) {
  return baton__fail(c->comm, rc, "%s #%llu (%s, %s step %d): %s", c->args.name,
                     (unsigned long long)c->seq, c->algo->name,
                     baton__phase_name((baton__phase_t)st->phase), st->step, why);
}

/* ---- The mailboxes (one round: offsets are the chunks' whole lengths). */

int baton__flat_fits(const baton_comm_t *comm, baton__coll_t coll, size_t count, size_t elsize) {
  const baton__net_t *host = comm->host_net;
  if (!host || !comm->one_host || count == 0)
    return 0;
  if (coll == BATON__COLL_BROADCAST && host->ops->fan_bytes) /* past a mailbox: fanned */
    return host->ops->fan_bytes(host->impl) >= elsize;
  size_t in_count = coll == BATON__COLL_REDUCE_SCATTER ? count * (size_t)comm->size : count;
  return in_count * elsize <= host->ops->mailbox_bytes(host->impl);
}

double baton__flat_room(const baton_comm_t *comm) {
  const baton__net_t *host = comm->host_net;
  return host && comm->one_host && host->ops->fan_bytes
             ? (double)host->ops->mailbox_bytes(host->impl)
             : 0;
}

/* A flat call that is a broadcast past a mailbox (x.fan, set by
 * baton__exec_prepare) takes the host's fan-out stream (transport.h) a
 * piece a round instead: the root
 * puts each piece once and every other rank copies it out, N copies of
 * the buffer where a chain or a tree makes 2(N-1), and no rank waits for
 * more than the pieces in flight. The first round's rendezvous compares
 * the ranks' calls, and places the call's pieces in the stream: the next
 * ones after the last broadcast's, which every rank has done by then. */
static uint32_t fan_round(const baton__call_t *c) {
  return (uint32_t)(c->x.round_start / c->x.piece);
}

static int fan_put(baton__call_t *c, const baton__step_t *st) {
  baton_comm_t *comm = c->comm;
  const baton__net_t *host = comm->host_net;
  double timeout = comm->params.timeout_s;
  char why[BATON__ERRLEN];
  uint32_t r = fan_round(c);
  if (r == 0) {
    int rc = host->ops->arrive(host->impl, c->rendezvous, &c->sig, timeout, why, sizeof why);
    if (rc)
      return baton__step_fail(c, st, rc, why);
    size_t rounds = c->x.maxlen / c->x.piece + (c->x.maxlen % c->x.piece != 0);
    c->fan_base = comm->fan_pieces;
    comm->fan_pieces += (uint32_t)rounds;
  }
  if (st->n == 0) /* not the root: nothing to put */
    return 0;
  void *piece;
  uint32_t g = c->fan_base + r;
  int rc = host->ops->fan_put(host->impl, g, &piece, timeout, why, sizeof why);
  if (rc)
    return baton__step_fail(c, st, rc, why);
  memcpy(piece, in_ptr(c, st->chunk, 0), piece_len(c, st->chunk) * c->elsize);
  host->ops->fan_done(host->impl, g);
  return 0;
}

static int fan_get(baton__call_t *c, const baton__step_t *st) {
  baton_comm_t *comm = c->comm;
  const baton__net_t *host = comm->host_net;
  char why[BATON__ERRLEN];
  const void *piece;
  uint32_t g = c->fan_base + fan_round(c);
  int rc = host->ops->fan_get(host->impl, st->recv_peer, g, &piece, comm->params.timeout_s, why,
                              sizeof why);
  if (rc)
    return baton__step_fail(c, st, rc, why);
  /* Plain stores: streamed as the chain's copies out are, N=4 on 2 cores
   * ran 1.1x slower at 16 MiB and level at 128 MiB. */
  memcpy(work_ptr(c, st->chunk, 0), piece, piece_len(c, st->chunk) * c->elsize);
  host->ops->fan_done(host->impl, g);
  return 0;
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
    return baton__step_fail(c, st, BATON_EUSAGE, "the message does not fit in a mailbox");
  memcpy(box_ptr(c, c->comm->rank, first), in_ptr(c, first, 0), n * c->elsize);
  return 0;
}

static int mailbox_put(baton__call_t *c, int i) {
  const baton__step_t *st = &c->sched.steps[i];
  baton_comm_t *comm = c->comm;
  if (c->x.fan)
    return fan_put(c, st);
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
  return rc ? baton__step_fail(c, st, rc, why) : 0;
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
    return baton__send_run(c, st);
  case BATON__STEP_RECV_COPY:
  case BATON__STEP_RECV_REDUCE:
    return baton__recv_run(c, st);
  case BATON__STEP_RECV_REDUCE_SEND:
  case BATON__STEP_RECV_REDUCE_COPY_SEND:
  case BATON__STEP_RECV_COPY_SEND:
    return baton__recv_forward(c, st);
  case BATON__STEP_COPY:
    baton__copy_run(c, st);
    return 0;
  case BATON__STEP_MAILBOX_PUT:
    return mailbox_put(c, i);
  case BATON__STEP_MAILBOX_COPY:
  case BATON__STEP_MAILBOX_REDUCE:
    if (c->x.fan)
      return fan_get(c, st);
    /* After the put, so the mailboxes are known. */
    return c->one_span[i] >= 0 ? read_span(c, st, c->one_span[i], c->span_elems[i])
                               : for_each_box_span(c, i, 0, read_span);
  case BATON__STEP_DIRECT_ARRIVE:
    return baton__direct_arrive(c, st);
  case BATON__STEP_DIRECT_REDUCE:
    return baton__direct_reduce(c, st);
  case BATON__STEP_DIRECT_COPY:
    return baton__direct_copy(c, st);
  case BATON__STEP_DIRECT_DONE:
    return baton__direct_done(c, st);
  default:
    return baton__step_fail(c, st, BATON_EINTERNAL, "a step of unknown kind");
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
    const baton__net_t *host = comm->host_net;
    c->x.fan = (c->algo->traits & BATON__ALGO_MAILBOX) && c->args.coll == BATON__COLL_BROADCAST &&
               host && host->ops->fan_bytes &&
               c->x.maxlen * es > host->ops->mailbox_bytes(host->impl);
    if (c->x.fan) { /* a fan-out piece a round */
      size_t room = host->ops->fan_bytes(host->impl) / es;
      c->x.seg = c->x.piece = c->x.maxlen < room ? c->x.maxlen : room;
    } else if (c->algo->traits & BATON__ALGO_MAILBOX) {
      c->x.seg = c->x.piece = c->x.maxlen ? c->x.maxlen : 1;
    } else if (c->algo->traits & BATON__ALGO_REGISTERED) {
      c->x.seg = c->x.piece = baton__direct_piece(comm, es);
    } else if (c->algo->traits & BATON__ALGO_RING_LINKS) {
      /* One segment size for every connection: a received segment may be
       * passed on over another transport. */
      c->x.seg = comm->slot_bytes / es;
      c->x.piece = c->x.seg * window;
    } else {
      /* Segments small enough for every connection; a message of up to N
       * chunks (of one, BATON__ALGO_ONE_BLOCK) fits in half a channel. The
       * same on every rank, as the pieces must be. */
      size_t share = c->algo->traits & BATON__ALGO_ONE_BLOCK ? 1 : (size_t)comm->size;
      c->x.seg = comm->stream_slot_bytes / es;
      c->x.piece = c->x.seg * window / share;
      c->x.piece = c->x.piece ? c->x.piece : 1;
    }
    c->planned.big = c->x.maxlen * es * (size_t)comm->size >= comm->params.stream_bytes;
    c->planned.prepared_elsize = es;
    c->x.per_block = c->args.coll == BATON__COLL_ALLTOALLV;
  }
  /* In place, the output lines were just read and are still cached: plain
   * stores win there (measured: 7.3 against 6.7 GB/s at 128 MiB, N=2).
   * Direct decides per piece instead (exec_direct.c, over_inputs): in
   * place its copies go into other ranks' buffers, not read here, and only
   * its reductions write over what they read. */
  c->x.stream = (c->out != c->in || (c->algo->traits & BATON__ALGO_REGISTERED)) && c->planned.big;
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
  /* A direct call may yet hand itself to a staged algorithm that uses
   * every connection (exec_direct.c): a later call waits for all of it. */
  for (int p = 0; (c->algo->traits & BATON__ALGO_REGISTERED) && p < c->comm->size; p++)
    c->last_send[p] = c->last_recv[p] = c->sched.nsteps - 1;
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
  if (rc == BATON__DIRECT_RESTAGED) /* a new schedule, from its first step */
    return BATON__EXEC_MORE;
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
      if (rc == BATON__DIRECT_RESTAGED) /* a new schedule, from its first step */
        rc = 0, i = -1;
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
