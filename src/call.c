/*
 * call.c - the life of one call (call.h): the pool of call objects, and
 * everything between a checked public call and its first step: its
 * number and signature, its algorithm, its layout and schedule, its
 * scratch; and after its last step, its trace lines.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "call.h"
#include "comm.h"

/* ---- The pool. */

static void call_free(baton__call_t *c) {
  free(c->sched.steps);
  free(c->layout_mem);
  free(c->last_send);
  free(c->one_span);
  free(c->span_elems);
  free(c->t0);
  free(c->t1);
  free(c->peer_in);
  if (c->work)
    munmap(c->work, c->work_bytes);
  free(c);
}

static baton__call_t *call_new(baton_comm_t *comm) {
  baton__call_t *c = calloc(1, sizeof *c);
  if (!c)
    return NULL;
  size_t n = (size_t)comm->size, cap = (size_t)baton__max_steps(comm->size);
  c->comm = comm;
  c->sched.cap = (int)cap;
  c->sched.steps = calloc(cap, sizeof *c->sched.steps);
  c->layout_mem = calloc(6 * n, sizeof *c->layout_mem);
  c->last_send = calloc(2 * n, sizeof *c->last_send);
  c->last_recv = c->last_send ? c->last_send + n : NULL;
  c->one_span = calloc(cap, sizeof *c->one_span);
  c->span_elems = calloc(cap, sizeof *c->span_elems);
  if (comm->trace) {
    c->t0 = calloc(cap, sizeof *c->t0);
    c->t1 = calloc(cap, sizeof *c->t1);
  }
  if (!c->sched.steps || !c->layout_mem || !c->last_send || !c->one_span || !c->span_elems ||
      (comm->trace && (!c->t0 || !c->t1))) {
    call_free(c);
    return NULL;
  }
  c->layout = (baton__layout_t){.in_off = c->layout_mem,
                                .out_off = c->layout_mem + n,
                                .work_off = c->layout_mem + 2 * n,
                                .box_off = c->layout_mem + 3 * n,
                                .len = c->layout_mem + 4 * n,
                                .in_len = c->layout_mem + 5 * n};
  c->next_all = comm->calls_all;
  comm->calls_all = c;
  return c;
}

int baton__calls_init(baton_comm_t *comm) {
  baton__call_t *c = call_new(comm); /* the one every blocking call uses */
  if (!c)
    return BATON_ENOMEM;
  comm->calls_free = c;
  return BATON_OK;
}

void baton__calls_free(baton_comm_t *comm) {
  for (baton__call_t *c = comm->calls_all, *next; c; c = next) {
    next = c->next_all;
    call_free(c);
  }
  comm->calls_all = comm->calls_free = NULL;
}

static baton__call_t *call_get(baton_comm_t *comm) {
  baton__call_t *c = comm->calls_free;
  if (c)
    comm->calls_free = c->next_free;
  else if (!(c = call_new(comm)))
    return NULL;
  c->next_free = NULL;
  return c;
}

/* In issue order, from issue to finish. */
static void live_add(baton__call_t *c) {
  baton_comm_t *comm = c->comm;
  c->prev_live = comm->live_last;
  c->next_live = NULL;
  if (comm->live_last)
    comm->live_last->next_live = c;
  else
    comm->live_first = c;
  comm->live_last = c;
}

static void live_remove(baton__call_t *c) {
  baton_comm_t *comm = c->comm;
  if (c->prev_live)
    c->prev_live->next_live = c->next_live;
  else if (comm->live_first == c)
    comm->live_first = c->next_live;
  if (c->next_live)
    c->next_live->prev_live = c->prev_live;
  else if (comm->live_last == c)
    comm->live_last = c->prev_live;
  c->prev_live = c->next_live = NULL;
}

static void call_put(baton__call_t *c) {
  live_remove(c);
  c->next_free = c->comm->calls_free;
  c->comm->calls_free = c;
}

/* ---- Scratch. */

/* Makes c->work hold at least `bytes`, pre-faulted; BATON_ENOMEM when it
 * cannot or when that passes BATON_SCRATCH_BYTES. Grown by doubling and
 * faulted in at once, so that a run of calls of one size pays for its
 * scratch memory only the first time. */
static int work_reserve(baton__call_t *c, size_t bytes) {
  size_t limit = c->comm->params.scratch_bytes;
  if (bytes <= c->work_bytes)
    return 0;
  if (bytes > limit)
    return BATON_ENOMEM;
  size_t want = c->work_bytes ? c->work_bytes : 1 << 20;
  while (want < bytes)
    want *= 2;
  want = want > limit ? bytes : want;
  void *p =
      mmap(NULL, want, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (p == MAP_FAILED)
    return BATON_ENOMEM;
  if (c->work)
    munmap(c->work, c->work_bytes);
  c->work = p;
  c->work_bytes = want;
  return 0;
}

/* Bytes of scratch the schedule needs: the WORK of the chunks this rank
 * has no output for, wherever a step lands bytes or sends from WORK. */
static size_t sched_work_bytes(const baton__call_t *c) {
  const baton__layout_t *l = &c->layout;
  size_t most = 0;
  for (int i = 0; i < c->sched.nsteps; i++) {
    const baton__step_t *st = &c->sched.steps[i];
    int touches = (baton__step_does(st->kind) & BATON__DOES_LAND) ||
                  (st->kind == BATON__STEP_SEND && st->src == BATON__FROM_WORK);
    for (int j = 0; touches && j < st->n; j++) {
      int ch = baton__run_chunk(st->chunk, j, c->comm->size);
      size_t end = (l->work_off[ch] + l->len[ch]) * c->elsize;
      if (l->out_off[ch] == BATON__NO_OUT && l->len[ch] && end > most)
        most = end;
    }
  }
  return most;
}

/* ---- Issue. */

/* The algorithm of a barrier: the host's rendezvous where every rank
 * shares this one's memory, else a one-byte allgather on the ring. */
static const baton__algo_t *barrier_algo(const baton_comm_t *comm) {
  unsigned want = comm->one_host && comm->host_net ? BATON__ALGO_MAILBOX : 0;
  int n;
  const baton__algo_t *all = baton__algos(&n);
  for (int i = 0; i < n; i++)
    if ((all[i].traits & (BATON__ALGO_MAILBOX | BATON__ALGO_RING_LINKS)) ==
            (want | BATON__ALGO_RING_LINKS) &&
        (all[i].colls & (1u << BATON__COLL_ALLGATHER)))
      return &all[i];
  return NULL;
}

/* Whether chunk b follows chunk a both in the mailbox and in INPUT (input)
 * or in WORK: the output, or the scratch. */
static int follows(const baton__layout_t *l, int a, int b, int input) {
  size_t none = BATON__NO_OUT;
  if (l->box_off[b] != l->box_off[a] + l->len[a])
    return 0;
  if (input)
    return l->in_off[a] != none && l->in_off[b] == l->in_off[a] + l->len[a];
  if (l->out_off[a] == none || l->out_off[b] == none)
    return l->out_off[a] == none && l->out_off[b] == none &&
           l->work_off[b] == l->work_off[a] + l->len[a];
  return l->out_off[b] == l->out_off[a] + l->len[a];
}

/* one_span of every mailbox step (call.h). */
static void find_spans(baton__call_t *c) {
  const baton__layout_t *l = &c->layout;
  int size = c->comm->size;
  for (int i = 0; i < c->sched.nsteps; i++) {
    const baton__step_t *st = &c->sched.steps[i];
    int first = -1, last = -1, one = baton__step_does(st->kind) & BATON__DOES_MAILBOX;
    size_t elems = 0;
    for (int j = 0; one && j < st->n; j++) {
      int ch = baton__run_chunk(st->chunk, j, size);
      if (!l->len[ch])
        continue;
      if (last >= 0 && !follows(l, last, ch, st->kind == BATON__STEP_MAILBOX_PUT))
        one = 0;
      first = first < 0 ? ch : first, last = ch;
      elems += l->len[ch];
    }
    c->one_span[i] = one && first >= 0 ? first : -1;
    c->span_elems[i] = elems;
  }
}

/* The call's layout and schedule. */
static int plan(baton__call_t *c) {
  baton_comm_t *comm = c->comm;
  const baton__call_args_t *a = &c->args;
  int barrier = a->coll == BATON__COLL_BARRIER;
  baton__coll_t coll = barrier ? BATON__COLL_ALLGATHER : a->coll;
  int root = a->root == BATON__NO_ROOT ? 0 : a->root;
  int same = c->planned.valid && c->planned.algo == c->algo && c->planned.coll == a->coll &&
             c->planned.count == a->count && c->planned.root == root && !a->counts;
  if (same)
    return 0;
  c->planned.valid = 0;
  baton__layout_args_t la = {.coll = coll,
                             .rank = comm->rank,
                             .size = comm->size,
                             .root = root,
                             .count = a->count,
                             .counts = a->counts,
                             .displs = a->displs,
                             .send_counts = a->send_counts,
                             .send_displs = a->send_displs,
                             .halves = c->algo && (c->algo->traits & BATON__ALGO_HALVES)};
  baton__layout_fill(&c->layout, &la);
  if (comm->size == 1)
    return 0;
  baton__build_t b = {.coll = coll,
                      .rank = comm->rank,
                      .size = comm->size,
                      .count = a->count,
                      .root = root,
                      .order = comm->order,
                      .host = comm->host};
  if (baton__schedule_build(&c->sched, c->algo, &b) != 0)
    return baton__fail(comm, BATON_EINTERNAL, "%s: %s could not build its schedule on %d ranks",
                       a->name, c->algo->name, comm->size);
  c->planned.algo = c->algo, c->planned.coll = a->coll, c->planned.count = a->count;
  c->planned.root = root, c->planned.valid = !a->counts;
  c->planned.maxlen = 0;
  for (int ch = 0; ch < comm->size; ch++) {
    size_t most =
        c->layout.len[ch] > c->layout.in_len[ch] ? c->layout.len[ch] : c->layout.in_len[ch];
    c->planned.maxlen = most > c->planned.maxlen ? most : c->planned.maxlen;
  }
  /* alltoallv runs its first round even with nothing to move: its empty
   * blocks still go out, to be checked (exec.c). */
  if (a->coll == BATON__COLL_ALLTOALLV && c->planned.maxlen == 0)
    c->planned.maxlen = 1;
  c->planned.work_elsize = 0;     /* found again by place() */
  c->planned.prepared_elsize = 0; /* and by baton__exec_prepare */
  find_spans(c);
  return 0;
}

/* Scratch for WORK, then the staged input past it; INPUT and output. */
static int place(baton__call_t *c) {
  const baton__call_args_t *a = &c->args;
  if (c->planned.work_elsize != c->elsize) {
    c->planned.work_bytes = sched_work_bytes(c);
    c->planned.work_elsize = c->elsize;
  }
  if (c->algo->traits & BATON__ALGO_REGISTERED) /* a piece of the result, in the cache */
    c->planned.work_bytes = baton__direct_piece(c->comm, c->elsize) * c->elsize;
  size_t work = c->planned.work_bytes, stage_at = (work + 63) & ~(size_t)63;
  size_t own = a->coll == BATON__COLL_BARRIER ? (size_t)c->comm->size : 0;
  size_t need = stage_at + a->stage + own;
  if (need && work_reserve(c, need) != 0)
    return baton__fail(c->comm, BATON_ENOMEM,
                       "%s: %s needs %zu bytes of scratch memory%s, more than "
                       "BATON_SCRATCH_BYTES allows or the system gives",
                       a->name, c->algo->name, need,
                       a->stage ? " (in place: a copy of the input)" : "");
  c->in = a->sendbuf;
  c->out = a->recvbuf;
  if (a->stage) {
    memcpy(c->work + stage_at, a->sendbuf, a->stage);
    c->in = c->work + stage_at;
  }
  if (own) { /* the barrier's bytes: one per rank, past everything else */
    c->out = c->work + stage_at + a->stage;
    c->out[c->comm->rank] = 1;
    c->in = c->out + c->comm->rank;
  }
  return 0;
}

/* The call as every rank must see it. alltoallv's count differs between
 * ranks, so the call carries none; each message carries its block's
 * (exec.c). */
static baton__sig_t sig_of(const baton__call_t *c) {
  const baton__call_args_t *a = &c->args;
  if (a->coll == BATON__COLL_BARRIER)
    return (baton__sig_t){.seq = c->seq, .root = -1, .coll = BATON__COLL_BARRIER};
  if (a->coll == BATON__COLL_ALLTOALLV)
    return (baton__sig_t){.seq = c->seq,
                          .root = -1,
                          .coll = BATON__COLL_ALLTOALLV,
                          .dtype = (uint8_t)a->dtype,
                          .algo = (uint8_t)baton__algo_id(c->algo)};
  return (baton__sig_t){.seq = c->seq,
                        .count = a->count,
                        .root = a->root == BATON__NO_ROOT ? -1 : a->root,
                        .coll = (uint8_t)a->coll,
                        .dtype = (uint8_t)a->dtype,
                        .op = a->op == BATON_OP_COUNT ? 0 : (uint8_t)a->op,
                        .algo = (uint8_t)baton__algo_id(c->algo)};
}

/* Whether the call exchanges anything: alltoallv talks to every peer
 * whatever its counts, as the peers check them. */
static int talks(const baton__call_args_t *a) {
  return a->count > 0 || a->coll == BATON__COLL_ALLTOALLV;
}

static const baton__algo_t *choose(baton_comm_t *comm, const baton__call_args_t *a, size_t es) {
  if (a->coll == BATON__COLL_BARRIER)
    return comm->size > 1 ? barrier_algo(comm) : NULL;
  /* baton__select only returns an algorithm that serves the collective
   * (NULL when none of this build does). alltoallv's count differs between
   * ranks, which must all choose the same: it is chosen for by its dtype
   * alone. */
  return baton__select(comm, a->coll, a->coll == BATON__COLL_ALLTOALLV ? 0 : a->count, es);
}

/* Whether a call's plan may serve the next equal call: not where the
 * input or output is placed anew every call (the v-variants' counts, a
 * staged input, the barrier's bytes) or the call is a setup's. */
static int reusable(const baton__call_args_t *a) {
  return !a->counts && !a->stage && !a->setup && a->coll != BATON__COLL_BARRIER;
}

/* Whether args ask exactly what c ran last (a training loop's or a
 * benchmark's run of equal calls): its algorithm (the selection depends
 * on nothing else), signature but for the number, schedule, layout,
 * scratch and segments all stay as they are. */
static int repeats(const baton__call_t *c, const baton__call_args_t *a) {
  const baton__call_args_t *p = &c->args;
  return c->repeatable && reusable(a) && c->mem_gen == c->comm->mem_gen && a->coll == p->coll &&
         a->count == p->count && a->dtype == p->dtype && a->op == p->op && a->root == p->root &&
         a->sendbuf == p->sendbuf && a->recvbuf == p->recvbuf;
}

/* The call's first rendezvous number: flat takes one, direct two (its
 * arrival and its end). */
static uint32_t take_rendezvous(baton_comm_t *comm, const baton__algo_t *algo) {
  if (algo->traits & BATON__ALGO_MAILBOX)
    return ++comm->shm_calls;
  if (algo->traits & BATON__ALGO_REGISTERED)
    return (comm->shm_calls += 2) - 1;
  return 0;
}

/* The algorithm, number and signature of a call; 0, or no algorithm. */
static int number(baton_comm_t *comm, baton__call_t *c, const baton__call_args_t *args, int again) {
  c->status = BATON_OK;
  c->state = BATON__CALL_ISSUED;
  if (again) {
    c->args.name = args->name;
    c->sig.seq = c->seq = ++comm->seq;
    c->rendezvous = take_rendezvous(comm, c->algo);
    return 0;
  }
  size_t es = baton_dtype_size(args->dtype);
  const baton__algo_t *algo = choose(comm, args, es);
  if (!algo && comm->size > 1 && talks(args)) /* before the sequence number moves */
    return baton__fail(comm, BATON_EUSAGE, "%s: no algorithm of this build serves %s", args->name,
                       args->name);
  c->args = *args;
  c->elsize = es;
  c->algo = algo;
  c->seq = args->setup ? 0 : ++comm->seq;
  c->sig = sig_of(c);
  int runs = comm->size > 1 && talks(args);
  c->rendezvous = runs ? take_rendezvous(comm, algo) : 0;
  c->mem_gen = comm->mem_gen;
  return 0;
}

/* The layout, schedule, scratch and rounds of a new call; for a repeated
 * one only the rounds start again. */
static int lay_out(baton__call_t *c, int again) {
  const baton__call_args_t *args = &c->args;
  int rc = 0;
  if (again) {
    c->x.round_start = 0;
    c->x.next = 0;
    c->x.done = c->sched.nsteps == 0 || c->x.maxlen == 0;
  } else if (c->comm->size == 1 || !talks(args)) { /* nothing to send: done when its turn comes */
    c->sched.nsteps = 0;
    c->planned.valid = 0;
    c->x = (struct baton__exec_place){.done = 1, .local = args->count > 0};
    if (c->x.local)
      plan(c); /* the layout, for the copy of size 1 */
  } else if (!(rc = plan(c)) && !(rc = place(c))) {
    baton__exec_prepare(c);
    c->peers_known = 0;
    c->repeatable = reusable(args) && c->planned.valid;
  }
  if (!rc && c->t0)
    for (int i = 0; i < c->sched.cap; i++)
      c->t0[i] = c->t1[i] = -1;
  return rc;
}

int baton__call_issue(baton_comm_t *comm, const baton__call_args_t *args, baton__call_t **out) {
  *out = NULL;
  baton__progress_lock(comm);
  baton__call_t *c = call_get(comm);
  baton__progress_unlock(comm);
  if (!c)
    return baton__fail(comm, BATON_ENOMEM, "%s: out of memory for the call", args->name);
  int again = repeats(c, args);
  c->repeatable = 0; /* until it is planned again */
  int rc = number(comm, c, args, again);
  if (!rc && comm->host_net) /* the host's other ranks compare it with theirs while they wait */
    comm->host_net->ops->publish(comm->host_net->impl, &c->sig);
  if (!rc && !(rc = baton__comm_begin(comm, args->name)) && args->coll != BATON__COLL_BARRIER)
    baton__log_info(COLL, "%s #%llu: count %zu %s %s, algo %s", args->name,
                    (unsigned long long)c->seq, args->count, baton_dtype_name(args->dtype),
                    args->op == BATON_OP_COUNT ? "-" : baton_op_name(args->op),
                    comm->size == 1 || !c->algo ? "local" : c->algo->name);
  if (!rc) {
    c->repeatable = again;
    rc = lay_out(c, again);
  }
  baton__progress_lock(comm);
  if (rc)
    call_put(c);
  else
    live_add(c);
  baton__progress_unlock(comm);
  *out = rc ? NULL : c;
  return rc;
}

/* A direct call some rank of which has buffers that are not registered
 * (exec_direct.c) runs `algo` instead, the selection's pick without
 * registered memory, planned and placed as for a new call. Every rank of
 * the call does the same, from what all of them showed, so the signature
 * the ranks compare still names direct. */
int baton__call_restage(baton__call_t *c, const baton__algo_t *algo) {
  const baton__call_args_t *a = &c->args;
  if (!algo || (algo->traits & BATON__ALGO_REGISTERED))
    return baton__fail(c->comm, BATON_EINTERNAL, "%s: no staged algorithm serves it", a->name);
  c->algo = algo;
  c->rendezvous = algo->traits & BATON__ALGO_MAILBOX ? c->rendezvous + 1 : 0;
  /* c->sig keeps direct: a rank that has restaged may meet a peer that has
   * not yet, and both must still read as the same call. */
  c->repeatable = 0;
  int rc = plan(c);
  if (!rc)
    rc = place(c);
  if (rc)
    return rc;
  baton__exec_prepare(c);
  c->peers_known = 0;
  if (c->t0)
    for (int i = 0; i < c->sched.cap; i++)
      c->t0[i] = c->t1[i] = -1;
  return 0;
}

/* ---- Finish. */

static void trace_end(const baton__call_t *c) {
  const baton__call_args_t *a = &c->args;
  baton__trace_call_t t = {.seq = c->seq,
                           .coll = a->coll,
                           .algo = c->algo->name,
                           .dtype = baton_dtype_name(a->dtype),
                           .count = a->count,
                           .root = a->root == BATON__NO_ROOT ? -1 : a->root,
                           .elsize = c->elsize,
                           .sched = &c->sched,
                           .len = c->layout.len,
                           .host = c->comm->host[c->comm->rank],
                           .t0 = c->t0,
                           .t1 = c->t1,
                           .rc = c->status};
  baton__trace_end(c->comm->trace, &t);
}

int baton__call_finish(baton__call_t *c) {
  int rc = c->status;
  if (rc)
    c->repeatable = 0;
  if (c->comm->trace && c->sched.nsteps && c->args.coll != BATON__COLL_BARRIER)
    trace_end(c);
  call_put(c);
  return rc;
}
