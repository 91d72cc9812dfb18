/*
 * exec_direct.c - the executor's steps of the direct algorithm (direct.c):
 * registered buffers read and written where they lie.
 *
 * direct-arrive shows this rank's buffers to the others in its mailbox, as
 * an allocation's number and an offset (mem.c), and meets them at the
 * host's rendezvous. If every rank's buffers are registered (and, for
 * allgatherv, every rank's displacements agree: displs_digest), each maps
 * every peer's INPUT and output from what they showed, checked against the
 * memory that peer registered. If some rank's are not, every rank saw the
 * same messages, so all of them decide alike: an allgather, alltoall or
 * broadcast (baton__algo_by_cma) where every rank found at set-up that it
 * reaches the others through the kernel (BATON_CMA, shm.h) copies by
 * process_vm_readv and process_vm_writev between the buffers where they
 * lie in each process, each copy one system call of the whole chunk (its
 * steps read or write this rank's own output or input, so one end of
 * every copy is here); any other call meets once more (nobody reuses the
 * mailboxes before all have read them) and runs the staged algorithm the
 * selection picks without direct (baton__call_restage).
 *
 * A round works on one piece of each chunk (baton__direct_piece): a
 * reduction combines the inputs' pieces into scratch that stays in the
 * cache, then copies it to each output that needs it, with non-temporal
 * stores for large buffers; so each input byte is read from memory once
 * and each output byte written once. direct-done, in the last round, is the
 * second rendezvous: no rank returns while another still reads its input
 * or writes its output.
 */
#include <stdio.h>
#include <stdlib.h>
#include <errno.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "exec.h"
#include "mem.h"
#include "select.h"

/* What a rank shows at direct-arrive. */
typedef struct {
  uint32_t ok;            /* every buffer the call needs of it is registered */
  uint32_t in_id, out_id; /* their allocations (0: the call needs none) */
  uint32_t cma;           /* it reads every peer through the kernel (shm.h) */
  uint64_t in_off, out_off;
  uint64_t in_addr, out_addr; /* where INPUT and output lie in its process */
  uint64_t displs;            /* displs_digest */
  int32_t pid;
  uint32_t local_can;                 /* it can take a peer's file descriptor (mem_local.c) */
  baton__local_t in_local, out_local; /* local memory (seq 0: not) */
} shown_t;
_Static_assert(sizeof(shown_t) <= BATON__SHOW_BYTES, "a mailbox holds what a rank shows");

/* Half the L1 data cache, so that the piece a reduction leaves in scratch
 * is still there when it is copied out (measured at N=2, 128 MiB on a
 * 32 KiB L1: 16 KiB pieces 1.1-1.3x faster than 64 KiB ones); never more
 * than the pair channels' segment (BATON_PAIR_SEGMENT_BYTES), which the
 * tests shrink to make many rounds. */
size_t baton__direct_piece(const baton_comm_t *comm, size_t elsize) {
  static size_t l1;
  if (!l1) {
    long got = sysconf(_SC_LEVEL1_DCACHE_SIZE);
    l1 = got >= 4096 && got <= (1L << 24) ? (size_t)got : 32 << 10;
  }
  size_t bytes = l1 / 2 < comm->stream_slot_bytes ? l1 / 2 : comm->stream_slot_bytes;
  size_t n = bytes / elsize;
  return n ? n : 1;
}

static shown_t *shown(const baton__call_t *c, int rank) {
  const baton__net_t *host = c->comm->host_net;
  return host->ops->mailbox(host->impl, rank, c->rendezvous);
}

/* allgatherv's displacements are each rank's own (baton.h), and a peer's
 * output is written here where this rank's say its blocks lie: so only
 * where every rank's agree. A digest of them (of the blocks that hold
 * anything) shows that; two different layouts share one with a chance of
 * about 2^-64. 0 for every other collective, whose layout the call's
 * arguments fix. */
static uint64_t displs_digest(const baton__call_args_t *a, int n) {
  if (a->coll != BATON__COLL_ALLGATHERV)
    return 0;
  uint64_t h = baton__mix64((uint64_t)n);
  for (int q = 0; q < n; q++)
    if (a->counts[q])
      h = baton__mix64(h ^ baton__mix64((uint64_t)q << 48 ^ a->displs[q]));
  return h;
}

/* Bytes of INPUT (input) or of the output a layout uses. */
static size_t extent(const baton__layout_t *l, int n, size_t es, int input) {
  size_t most = 0;
  for (int ch = 0; ch < n; ch++) {
    size_t off = input ? l->in_off[ch] : l->out_off[ch], len = input ? l->in_len[ch] : l->len[ch];
    if (off != BATON__NO_OUT && len && (off + len) * es > most)
      most = (off + len) * es;
  }
  return most;
}

/* The per-rank tables (call.h), and room for one rank's layout. */
static int tables(baton__call_t *c, baton__layout_t *l) {
  size_t n = (size_t)c->comm->size;
  if (!c->peer_in) {
    char *m = calloc(1, 2 * n * sizeof(char *) + (2 * n * n + 6 * n) * sizeof(size_t) +
                            n * sizeof(int32_t));
    if (!m)
      return -1;
    c->peer_in = (char **)m;
    c->peer_out = c->peer_in + n;
    c->peer_in_off = (size_t *)(c->peer_out + n);
    c->peer_out_off = c->peer_in_off + n * n;
    c->peer_pid = (int32_t *)(c->peer_out_off + n * n + 6 * n);
  }
  size_t *t = c->peer_out_off + n * n;
  *l = (baton__layout_t){t, t + n, t + 2 * n, t + 3 * n, t + 4 * n, t + 5 * n};
  return 0;
}

/* The number of the oldest call not yet finished, c's or an earlier one:
 * the peers' local blocks that calls from it on use stay mapped. The
 * caller's thread issues and finishes calls while the progress thread runs
 * this one, so the list is read under the lock. */
static uint64_t oldest_live(const baton__call_t *c) {
  baton__progress_lock(c->comm);
  const baton__call_t *oldest = c->comm->live_first; /* in issue order */
  uint64_t keep = oldest && oldest->seq < c->seq ? oldest->seq : c->seq;
  baton__progress_unlock(c->comm);
  return keep;
}

/* Rank q's buffers, mapped here: its layout from the call's arguments
 * (every rank knows them; alltoallv, whose it does not, is not served),
 * its mapping from what it showed. */
static int map_rank(baton__call_t *c, const baton__step_t *st, int q, uint64_t keep,
                    baton__layout_t *l) {
  const baton__call_args_t *a = &c->args;
  int n = c->comm->size;
  baton__layout_args_t la = {.coll = a->coll,
                             .rank = q,
                             .size = n,
                             .root = a->root == BATON__NO_ROOT ? 0 : a->root,
                             .count = a->count,
                             .counts = a->counts,
                             .displs = a->displs};
  baton__layout_fill(l, &la);
  memcpy(c->peer_in_off + (size_t)q * (size_t)n, l->in_off, (size_t)n * sizeof(size_t));
  memcpy(c->peer_out_off + (size_t)q * (size_t)n, l->out_off, (size_t)n * sizeof(size_t));
  if (q == c->comm->rank) {
    c->peer_in[q] = (char *)c->in;
    c->peer_out[q] = c->out;
    return 0;
  }
  const shown_t *s = shown(c, q);
  if (c->direct_cma) { /* addresses in q's process, for the kernel's copies */
    c->peer_in[q] = (char *)(uintptr_t)s->in_addr;
    c->peer_out[q] = (char *)(uintptr_t)s->out_addr;
    c->peer_pid[q] = s->pid;
    return 0;
  }
  size_t need[2] = {extent(l, n, c->elsize, 1), extent(l, n, c->elsize, 0)};
  uint32_t id[2] = {s->in_id, s->out_id};
  uint64_t off[2] = {s->in_off, s->out_off};
  const baton__local_t *local[2] = {&s->in_local, &s->out_local};
  char *base[2] = {NULL, NULL};
  for (int k = 0; k < 2; k++) {
    size_t bytes = 0;
    if (!need[k])
      continue;
    if (local[k]->seq) { /* local memory: mapped here the first time */
      char why[200];
      base[k] = baton__mem_local_peer(c->comm, q, s->pid, local[k], c->seq, keep, why, sizeof why);
      if (!base[k])
        return baton__step_fail(c, st, BATON_ESYS, why);
      if (local[k]->off > local[k]->len || local[k]->len - local[k]->off < need[k]) {
        snprintf(why, sizeof why,
                 "rank %d shows its %s as %zu bytes at %llu of its local block %llu, which has "
                 "%llu",
                 q, k ? "output" : "input", need[k], (unsigned long long)local[k]->off,
                 (unsigned long long)local[k]->seq, (unsigned long long)local[k]->len);
        return baton__step_fail(c, st, BATON_EPROTO, why);
      }
      base[k] += local[k]->off;
      continue;
    }
    base[k] = baton__mem_peer(c->comm, q, id[k], &bytes);
    if (!base[k] || off[k] > bytes || bytes - off[k] < need[k]) {
      char why[160];
      snprintf(why, sizeof why,
               "rank %d shows its %s as %zu bytes at %llu of registered memory #%u, which %s", q,
               k ? "output" : "input", need[k], (unsigned long long)off[k], id[k],
               base[k] ? "is not that large" : "this rank does not map");
      return baton__step_fail(c, st, BATON_EPROTO, why);
    }
    base[k] += off[k];
  }
  c->peer_in[q] = base[0];
  c->peer_out[q] = base[1];
  return 0;
}

/* Whether [p, p + bytes) is registered memory (*id, *off) or, with
 * BATON_MEM_LOCAL, local memory (*local). */
static int locate(baton_comm_t *comm, const void *p, size_t bytes, uint32_t *id, size_t *off,
                  baton__local_t *local) {
  return baton__mem_find(comm, p, bytes, id, off) ||
         (comm->params.mem_local && baton__mem_local_find(p, bytes, local));
}

static int meet(baton__call_t *c, const baton__step_t *st, uint32_t rendezvous) {
  const baton__net_t *host = c->comm->host_net;
  char why[BATON__ERRLEN];
  int rc = host->ops->arrive(host->impl, rendezvous, &c->sig, c->comm->params.timeout_s, why,
                             sizeof why);
  return rc ? baton__step_fail(c, st, rc, why) : 0;
}

int baton__direct_arrive(baton__call_t *c, const baton__step_t *st) {
  if (c->x.round_start)
    return 0;
  baton_comm_t *comm = c->comm;
  int n = comm->size;
  baton__layout_t l;
  if (tables(c, &l) != 0)
    return baton__step_fail(c, st, BATON_ENOMEM, "out of memory for the peers' buffers");
  size_t in_bytes = extent(&c->layout, n, c->elsize, 1);
  size_t out_bytes = extent(&c->layout, n, c->elsize, 0);
  shown_t *mine = shown(c, comm->rank);
  size_t in_off = 0, out_off = 0;
  uint32_t in_id = 0, out_id = 0;
  baton__local_t in_local = {0}, out_local = {0};
  int ok = (!in_bytes || locate(comm, c->in, in_bytes, &in_id, &in_off, &in_local)) &&
           (!out_bytes || locate(comm, c->out, out_bytes, &out_id, &out_off, &out_local));
  *mine = (shown_t){.ok = (uint32_t)ok,
                    .in_id = in_id,
                    .out_id = out_id,
                    .cma = (uint32_t)comm->cma,
                    .in_off = in_off,
                    .out_off = out_off,
                    .in_addr = (uint64_t)(uintptr_t)c->in,
                    .out_addr = (uint64_t)(uintptr_t)c->out,
                    .displs = displs_digest(&c->args, n),
                    .pid = (int32_t)getpid(),
                    .local_can = (uint32_t)(comm->params.mem_local && baton__mem_local_can()),
                    .in_local = in_local,
                    .out_local = out_local};
  int rc = meet(c, st, c->rendezvous);
  int cma = comm->params.cma && baton__algo_by_cma(c->args.coll), same = 1, local = 0, can = 1;
  for (int q = 0; q < n && !rc; q++) {
    const shown_t *s = shown(c, q);
    ok = ok && s->ok == 1;
    cma = cma && s->cma == 1;
    same = same && s->displs == mine->displs;
    local = local || s->in_local.seq || s->out_local.seq;
    can = can && s->cma == 1 && s->local_can == 1; /* the kernel lets each reach the others */
  }
  if (rc)
    return rc;
  if (local && !can) /* some rank's local memory, which not every rank can map */
    ok = 0;
  if (!same) /* every rank sees some differ: all go staged */
    ok = cma = 0;
  /* Registered everywhere: mapped. Else by the kernel where every rank
   * can, one round of whole chunks; else staged. */
  c->direct_cma = !ok && cma;
  c->x.seg = c->x.piece =
      c->direct_cma ? (c->x.maxlen ? c->x.maxlen : 1) : baton__direct_piece(comm, c->elsize);
  if (!ok && !cma) {
    /* All saw it: all take the staged path, once all have read what was
     * shown. The second rendezvous says so; a staged flat takes it as its
     * own (its mailboxes are the other set). */
    const baton__algo_t *staged =
        baton__select_staged(comm, c->args.coll, c->args.count, c->elsize);
    if (!(staged->traits & BATON__ALGO_MAILBOX) && (rc = meet(c, st, c->rendezvous + 1)) != 0)
      return rc;
    if (same)
      baton__log_info(COLL, "%s #%llu: not every rank's buffers are registered%s: staged, %s",
                      c->args.name, (unsigned long long)c->seq,
                      baton__algo_by_cma(c->args.coll) ? " nor reached by CMA" : "", staged->name);
    else
      baton__log_info(COLL, "%s #%llu: the ranks' displacements differ: staged, %s", c->args.name,
                      (unsigned long long)c->seq, staged->name);
    rc = baton__call_restage(c, staged);
    return rc ? rc : BATON__DIRECT_RESTAGED;
  }
  uint64_t keep = comm->params.mem_local ? oldest_live(c) : c->seq;
  for (int q = 0; q < n && !rc; q++)
    rc = map_rank(c, st, q, keep, &l);
  return rc;
}

int baton__direct_done(baton__call_t *c, const baton__step_t *st) {
  if (c->x.round_start + c->x.piece < c->x.maxlen)
    return 0;
#if defined(__SSE2__)
  /* Streaming stores into the peers' outputs are weakly ordered: without a
   * fence a peer could pass the rendezvous (a plain release store here) and
   * read its output before they land (test_coll -n 2 --registered all
   * BATON_STREAM_BYTES=0 saw a gather's result differ, then match). */
  if (c->x.stream)
    _mm_sfence();
#endif
  return meet(c, st, c->rendezvous + 1);
}

/* This round's piece of chunk ch: its offset in the chunk and its
 * elements; a slice step takes only this rank's N-th of the chunk. */
static size_t piece_at(const baton__call_t *c, const baton__step_t *st, int ch, size_t *off) {
  size_t len = c->layout.len[ch];
  *off = c->x.round_start;
  if (st->slice) {
    int n = c->comm->size, me = c->comm->rank;
    *off += baton__chunk_off(len, n, me);
    len = baton__chunk_len(len, n, me);
  }
  return piece_of(c, len);
}

static char *in_of(const baton__call_t *c, int q, int ch, size_t off) {
  size_t at = c->peer_in_off[(size_t)q * (size_t)c->comm->size + (size_t)ch];
  return c->peer_in[q] + (at + off) * c->elsize;
}

static char *out_of(const baton__call_t *c, int q, int ch, size_t off) {
  size_t at = c->peer_out_off[(size_t)q * (size_t)c->comm->size + (size_t)ch];
  return c->peer_out[q] + (at + off) * c->elsize;
}

/* The ranks [*first, *last) whose outputs a step to `to` writes: `to`'s,
 * or every rank's. */
static void outputs_of(const baton__call_t *c, int to, int *first, int *last) {
  *first = to == BATON__ALL_RANKS ? 0 : to;
  *last = to == BATON__ALL_RANKS ? c->comm->size : to + 1;
}

/* The piece to rank `to`'s output, or to every rank's; with plain
 * stores where `plain` (the outputs are cached), else as the call says. */
static void put(const baton__call_t *c, int to, int ch, size_t off, const char *src, size_t k,
                int plain) {
  int first, last;
  outputs_of(c, to, &first, &last);
  for (int q = first; q < last; q++) {
    char *dst = out_of(c, q, ch, off);
    if (dst == src)
      continue;
    if (plain)
      memcpy(dst, src, k * c->elsize);
    else
      baton__copy_out(c, dst, src, k * c->elsize);
  }
}

/* One copy by the kernel between this process and rank q's: from q's
 * memory at `there` into `here` (readv), or the other way. The kernel
 * copies in pieces; a short count is a peer whose buffer is not as large
 * as the call says, or gone. */
static int cma_copy(baton__call_t *c, const baton__step_t *st, int q, int readv, char *here,
                    char *there, size_t bytes) {
  while (bytes) {
    struct iovec l = {here, bytes}, r = {there, bytes};
    ssize_t n = readv ? process_vm_readv((pid_t)c->peer_pid[q], &l, 1, &r, 1, 0)
                      : process_vm_writev((pid_t)c->peer_pid[q], &l, 1, &r, 1, 0);
    if (n <= 0) {
      /* ESRCH: the peer is gone; EFAULT: its buffer is not where, or as
       * large as, it showed. */
      int e = n < 0 ? errno : EFAULT;
      char why[192];
      snprintf(why, sizeof why, "%s %zu bytes %s rank %d (pid %d) by the kernel: %s",
               readv ? "reading" : "writing", bytes, readv ? "of" : "into", q, (int)c->peer_pid[q],
               n < 0 ? strerror(e) : "nothing moved");
      return baton__step_fail(c, st,
                              e == ESRCH    ? BATON_EREMOTE
                              : e == EFAULT ? BATON_EPROTO
                                            : BATON_ESYS,
                              why);
    }
    here += n, there += n, bytes -= (size_t)n;
  }
  return 0;
}

/* direct-copy by CMA: the step reads into this rank's output (alltoall)
 * or writes this rank's input into the others' (allgather, at the
 * displacements every rank has alike, which allgatherv's need not be: it
 * is staged); a copy between two other ranks is not one of direct's. */
static int cma_put(baton__call_t *c, const baton__step_t *st, int ch, int from, int src_ch) {
  int me = c->comm->rank, first, last;
  size_t off, bytes = piece_at(c, st, ch, &off) * c->elsize;
  if (!bytes)
    return 0;
  char *src = in_of(c, from, src_ch, off);
  outputs_of(c, st->send_peer, &first, &last);
  for (int q = first; q < last; q++) {
    char *dst = out_of(c, q, ch, off);
    int rc = 0;
    if (q == me && from == me) {
      if (dst != src) /* streaming where the call is large, as the staged copies out */
        baton__copy_out(c, dst, src, bytes);
    } else if (q == me) {
      rc = cma_copy(c, st, from, 1, dst, src, bytes);
    } else if (from == me) {
      rc = cma_copy(c, st, q, 0, src, dst, bytes);
    } else {
      char why[96];
      snprintf(why, sizeof why, "a copy from rank %d to rank %d, neither of them this one", from,
               q);
      rc = baton__step_fail(c, st, BATON_EINTERNAL, why);
    }
    if (rc)
      return rc;
  }
  return 0;
}

/* Whether every output a reduction of chunk ch writes is the input it has
 * just read, in place on every rank it writes to: then the lines are in
 * this core's cache, and plain stores write them back where streaming
 * ones were slower (N=2 allreduce of 128 MiB in place: 12.7-13.0 ms fused
 * and streaming, 9.7-9.9 fused and plain; through the scratch 18.8 and
 * 11.1-11.5). */
static int over_inputs(const baton__call_t *c, int to, int ch, size_t off) {
  int first, last;
  outputs_of(c, to, &first, &last);
  for (int q = first; q < last; q++)
    if (out_of(c, q, ch, off) != in_of(c, q, ch, off))
      return 0;
  return 1;
}

/* Elements [off, off + k) of chunk ch reduced through the scratch piece,
 * then copied to the output(s), plainly where `plain`. */
static void reduce_through(baton__call_t *c, const baton__step_t *st, int ch, size_t off, size_t k,
                           int plain) {
  int n = c->comm->size;
  char *t = c->work; /* a piece, in the cache */
  c->x.reduce(t, in_of(c, 0, ch, off), in_of(c, 1, ch, off), k);
  for (int q = 2; q < n; q++)
    c->x.reduce(t, t, in_of(c, q, ch, off), k);
  if (st->finish && c->args.op == BATON_AVG)
    baton__reduce_div(t, k, c->args.dtype, n);
  put(c, st->send_peer, ch, off, t, k, plain);
}

/* A piece of chunk ch reduced in one pass where a fused kernel applies
 * (reduce_stream.c); the elements it leaves, at either end, and every
 * piece it does not take go through the scratch. */
static void reduce_piece(baton__call_t *c, const baton__step_t *st, int ch, size_t off, size_t k) {
  int n = c->comm->size, to = st->send_peer, first, last;
  int plain = over_inputs(c, to, ch, off);
  size_t head = 0, done = 0;
  outputs_of(c, to, &first, &last);
  if (c->comm->params.fused && n <= BATON__REDUCE_STREAM_MAX) {
    char *dst[BATON__REDUCE_STREAM_MAX];
    const char *src[BATON__REDUCE_STREAM_MAX];
    for (int q = first; q < last; q++)
      dst[q - first] = out_of(c, q, ch, off);
    for (int q = 0; q < n; q++)
      src[q] = in_of(c, q, ch, off);
    done = baton__reduce_stream(c->args.dtype, c->args.op, c->elsize, dst, last - first, src, n, k,
                                c->x.stream && !plain, &head);
  }
  if (!done) {
    reduce_through(c, st, ch, off, k, plain);
    return;
  }
  if (head)
    reduce_through(c, st, ch, off, head, plain);
  if (head + done < k)
    reduce_through(c, st, ch, off + head + done, k - head - done, plain);
}

int baton__direct_reduce(baton__call_t *c, const baton__step_t *st) {
  for (int i = 0; i < st->n; i++) {
    int ch = chunk_at(c, st->chunk, i);
    size_t off, k = piece_at(c, st, ch, &off);
    if (k)
      reduce_piece(c, st, ch, off, k);
  }
  return 0;
}

/* A broadcast by the kernel: each rank copies a share, so that every core
 * copies at once. The root writes the last `tail` elements into each
 * peer's output while each peer reads the rest from the root's input.
 * With its output its input the root has nothing else to copy, and tail
 * is 1/N of the buffer: (N-1)/N each. Out of place it also copies its
 * input into its own output, which a core does faster than a copy across
 * two processes (r, rank 0's ratio of the two, the same on every rank),
 * so it takes (1 - r)/N of each peer's: with r = 1/2, N=2, a quarter.
 * (N=2, 32 MiB, in place, two processes: one process_vm_readv of the
 * whole buffer 5.3 ms, split in two 1.6 ms; docs/performance.md.) */
static int cma_broadcast(baton__call_t *c, const baton__step_t *st, int ch) {
  int me = c->comm->rank, root = st->recv_peer, n = c->comm->size;
  size_t off, k = piece_at(c, st, ch, &off), es = c->elsize;
  if (!k)
    return 0;
  int in_place = in_of(c, root, ch, off) == out_of(c, root, ch, off);
  double r = baton__select_copy_ratio(c->comm);
  r = r > 0 && r < 1 ? r : 1;
  size_t tail = in_place ? k / (size_t)n : (size_t)((double)k * (1 - r) / n), head = k - tail;
  if (me != root)
    return cma_copy(c, st, root, 1, out_of(c, me, ch, off), in_of(c, root, ch, off), head * es);
  if (!in_place)
    baton__copy_out(c, out_of(c, me, ch, off), in_of(c, me, ch, off), k * es);
  char *in = in_of(c, me, ch, off + head); /* the root's share, the same for every peer */
  for (int q = 0; q < n && tail; q++) {
    int rc = q == me ? 0 : cma_copy(c, st, q, 0, in, out_of(c, q, ch, off + head), tail * es);
    if (rc)
      return rc;
  }
  return 0;
}

int baton__direct_copy(baton__call_t *c, const baton__step_t *st) {
  /* alltoall: output chunk `from` is INPUT chunk `to` of the sender. */
  int alltoall = c->args.coll == BATON__COLL_ALLTOALL;
  if (c->direct_cma && c->args.coll == BATON__COLL_BROADCAST)
    return cma_broadcast(c, st, chunk_at(c, st->chunk, 0));
  for (int i = 0; i < st->n; i++) {
    int ch = chunk_at(c, st->chunk, i);
    if (c->direct_cma) {
      int rc = cma_put(c, st, ch, st->recv_peer, alltoall ? st->send_peer : ch);
      if (rc)
        return rc;
      continue;
    }
    size_t off, k = piece_at(c, st, ch, &off);
    if (k)
      put(c, st->send_peer, ch, off, in_of(c, st->recv_peer, alltoall ? st->send_peer : ch, off), k,
          0);
  }
  return 0;
}
