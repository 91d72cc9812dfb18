/*
 * shm_channel.c - the slot channels of the shared-memory transport.
 *
 * The segment (shm_mailbox.c) holds one channel per local rank i, carrying
 * data from it to its successor on the ring when that successor is on this
 * host too, then a smaller channel for every other ordered pair of local
 * ranks (slots of BATON_PAIR_SEGMENT_BYTES), for the algorithms that talk to
 * any rank. A channel is a ring of `nslots` slots of `slot_bytes` each and
 * two counters: `head` (slots committed by the sender) and `tail` (slots
 * released by the receiver). Each side writes only its own counter, so no
 * locks are needed. Slots stay small enough to live in cache, so the bytes
 * that pass through them rarely reach DRAM.
 *
 * Waiting spins for BATON_SPIN_US, then sleeps on a futex on the counter it
 * waits for. The other side issues FUTEX_WAKE only when the sleeper has
 * raised its flag, so the fast path makes no system call. When ranks
 * outnumber cores, spinning only steals the core the peer needs, so the spin
 * is cut short. Sleeps are sliced so the waiter notices a dead peer (by pid)
 * or the timeout.
 */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "shm_impl.h"

/* Channels 0..size-1 are the ring's; then the pairs, see pair_chan(). */
static char *chan_base(baton__shm_t *s, int pos) {
  size_t ring = align_up(chan_bytes(s->hdr->nslots, s->hdr->slot_bytes), 4096);
  size_t pair = align_up(chan_bytes(s->hdr->nslots, s->hdr->pair_slot_bytes), 4096);
  char *b = (char *)s->base + header_bytes(s->size, s->hdr->mailbox_bytes);
  if (pos < s->size)
    return b + (size_t)pos * ring;
  return b + (size_t)s->size * ring + (size_t)(pos - s->size) * pair;
}

/* The channel from local rank i to local rank j != i. */
static int pair_chan(const baton__shm_t *s, int i, int j) {
  return s->size + i * (s->size - 1) + (j < i ? j : j - 1);
}

static void chan_bind(baton__shm_t *s, chan_t *ch, int pos) {
  char *b = chan_base(s, pos);
  ch->ctrl = (chan_ctrl_t *)b;
  ch->meta = (slot_meta_t *)(b + sizeof(chan_ctrl_t));
  ch->slots = b + sizeof(chan_ctrl_t) + align_up(s->hdr->nslots * sizeof(slot_meta_t), CACHELINE);
  ch->nslots = s->hdr->nslots;
  ch->count = 0;
  ch->shm = s;
}

/* ------------------------------------------------------------- waiting */

/* A process that has died but not been reaped (a zombie) still answers
 * kill(pid, 0), so its state is read too. */
int baton__shm_peer_alive(pid_t pid) {
  if (pid <= 0)
    return 1;
  if (kill(pid, 0) != 0)
    return errno != ESRCH;
  char path[64], buf[256];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  if (!f)
    return 1;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char *close_paren = strrchr(buf, ')');
  return !(close_paren && close_paren[1] == ' ' &&
           (close_paren[2] == 'Z' || close_paren[2] == 'X'));
}

/* Waits until *word >= target (mod 2^32). `peer` is re-checked on every
 * sleep slice, and so is the communicator's watch. Returns 0,
 * BATON_EREMOTE, BATON_ETIMEDOUT (the caller formats the message) or the
 * watch's code with its reason in s->why. */
int baton__shm_wait_for(baton__shm_t *s, _Atomic uint32_t *word, uint32_t target,
                        _Atomic uint32_t *flag, pid_t peer, double timeout_s) {
  s->watched = 0;
  if (reached_soon(s, word, target))
    return 0;
  double start = baton__now(), spin_end = start + s->spin_s;
  /* None when oversubscribed: even one round of 64 pauses (10.5 ns each on
   * this VM's Xeon) made an 8-byte allreduce of 3 ranks 2.1 us, not 1.3. */
  while (s->spin_s > 0) {
    for (int i = 0; i < 64; i++) {
      if (reached(word, target))
        return 0;
      baton__cpu_relax();
    }
    if (baton__now() >= spin_end)
      break;
  }
  /* With more ranks than cores the rank we wait for may be queued behind us
   * on this core: hand it the core, for BATON_YIELD_US (4 times at least),
   * before paying for a sleep. Alone on its core a waiter loses nothing by
   * it; a sleeper costs its waker a FUTEX_WAKE and itself a wake-up, which
   * on this VM made an 8-byte allreduce of 3 ranks on 2 cores take 9-12 us
   * where yielding took about 2 (docs/performance.md, issue 20 part 2). */
  if (s->oversubscribed) {
    double yield_end = baton__now() + s->yield_s;
    for (int i = 0;; i++) {
      sched_yield();
      if (reached(word, target))
        return 0;
      if (i >= 3 && baton__now() >= yield_end)
        break;
    }
  }
  const struct timespec slice = {0, 20 * 1000 * 1000};
  for (;;) {
    atomic_store_explicit(flag, 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_seq_cst);
    uint32_t seen = atomic_load_explicit(word, memory_order_acquire);
    if ((int32_t)(seen - target) >= 0)
      return 0;
    futex(word, FUTEX_WAIT, seen, &slice);
    if (reached(word, target))
      return 0;
    /* The watch first: a failure published by a peer that then exited
     * explains more than its exit. */
    int rc = s->watch ? s->watch->check(s->watch->ctx, s->why, sizeof s->why) : 0;
    if (rc) {
      s->watched = 1;
      return rc;
    }
    if (!baton__shm_peer_alive(peer))
      return BATON_EREMOTE;
    if (baton__now() - start > timeout_s)
      return BATON_ETIMEDOUT;
  }
}

static int wait_failed(baton__conn_t *c, chan_t *ch, int rc, const char *what) {
  if (ch->shm->watched)
    snprintf(c->why, sizeof c->why, "%s", ch->shm->why);
  else if (rc == BATON_EREMOTE)
    snprintf(c->why, sizeof c->why, "rank %d (pid %d) died while this rank waited %s", c->peer,
             (int)ch->peer_pid, what);
  else
    snprintf(c->why, sizeof c->why, "rank %d sent nothing for %.3g s while this rank waited %s",
             c->peer, c->timeout_s, what);
  return rc;
}

/* ------------------------------------------------------- the transport */

static int shm_send_acquire(baton__conn_t *c, void **slot) {
  chan_t *ch = c->impl;
  int rc = baton__shm_wait_for(ch->shm, &ch->ctrl->tail, ch->count - ch->nslots + 1,
                               &ch->ctrl->send_waiting, ch->peer_pid, c->timeout_s);
  if (rc)
    return wait_failed(c, ch, rc, "for a free slot to send into");
  *slot = ch->slots + (size_t)(ch->count % ch->nslots) * c->slot_bytes;
  return 0;
}

static int shm_send_commit(baton__conn_t *c, size_t bytes) {
  chan_t *ch = c->impl;
  slot_meta_t *m = &ch->meta[ch->count % ch->nslots];
  m->len = bytes;
  m->sig = *c->sig;
  ch->count++;
  atomic_store_explicit(&ch->ctrl->head, ch->count, memory_order_release);
  wake(&ch->ctrl->head, &ch->ctrl->recv_waiting, ch->wake_all);
  return 0;
}

static int shm_recv_acquire(baton__conn_t *c, const void **slot, size_t *bytes) {
  chan_t *ch = c->impl;
  int rc = baton__shm_wait_for(ch->shm, &ch->ctrl->head, ch->count + 1, &ch->ctrl->recv_waiting,
                               ch->peer_pid, c->timeout_s);
  if (rc)
    return wait_failed(c, ch, rc, "for data");
  const slot_meta_t *m = &ch->meta[ch->count % ch->nslots];
  if ((rc = baton__sig_check(c->sig, &m->sig, c->self, c->peer, c->why, sizeof c->why)) != 0)
    return rc;
  *slot = ch->slots + (size_t)(ch->count % ch->nslots) * c->slot_bytes;
  *bytes = m->len;
  return 0;
}

static int shm_recv_release(baton__conn_t *c) {
  chan_t *ch = c->impl;
  ch->count++;
  atomic_store_explicit(&ch->ctrl->tail, ch->count, memory_order_release);
  wake(&ch->ctrl->tail, &ch->ctrl->send_waiting, ch->wake_all);
  return 0;
}

static int shm_ready(baton__conn_t *c, int sending, int deep) {
  chan_t *ch = c->impl;
  baton__shm_t *s = ch->shm;
  if (sending ? reached(&ch->ctrl->tail, ch->count - ch->nslots + 1)
              : reached(&ch->ctrl->head, ch->count + 1))
    return 1;
  if (!deep)
    return 0;
  int rc = atomic_load_explicit(&s->hdr->abort_rc, memory_order_acquire);
  if (rc) {
    snprintf(c->why, sizeof c->why, "%.380s", s->hdr->abort_msg);
    return rc;
  }
  s->watched = 0;
  if (!baton__shm_peer_alive(ch->peer_pid))
    return wait_failed(c, ch, BATON_EREMOTE, sending ? "to send to it" : "for its message");
  return 0;
}

static int shm_arm(baton__conn_t *c, int sending, baton__sleep_t *z) {
  chan_t *ch = c->impl;
  _Atomic uint32_t *word = sending ? &ch->ctrl->tail : &ch->ctrl->head;
  _Atomic uint32_t *flag = sending ? &ch->ctrl->send_waiting : &ch->ctrl->recv_waiting;
  uint32_t target = sending ? ch->count - ch->nslots + 1 : ch->count + 1;
  atomic_store_explicit(flag, 1, memory_order_relaxed);
  atomic_thread_fence(memory_order_seq_cst);
  z->word = word, z->flag = flag;
  z->seen = atomic_load_explicit(word, memory_order_acquire);
  return (int32_t)(z->seen - target) >= 0;
}

static void shm_sleep(const baton__sleep_t *z, double timeout_s) {
  struct timespec ts = {(time_t)timeout_s, (long)((timeout_s - (double)(time_t)timeout_s) * 1e9)};
  futex(z->word, FUTEX_WAIT, z->seen, &ts);
}

/* futex_waitv (Linux 5.16): one sleep on the words of several channels,
 * each woken by its own peer's commit. */
static int shm_sleep_many(const baton__sleep_t *z, int n, double timeout_s) {
#if defined(SYS_futex_waitv) && defined(FUTEX_32)
  struct futex_waitv w[FUTEX_WAITV_MAX];
  if (n > FUTEX_WAITV_MAX)
    return -1;
  for (int i = 0; i < n; i++)
    w[i] = (struct futex_waitv){.val = z[i].seen, .uaddr = (uintptr_t)z[i].word, .flags = FUTEX_32};
  struct timespec at;
  clock_gettime(CLOCK_MONOTONIC, &at);
  at.tv_nsec += (long)(timeout_s * 1e9);
  at.tv_sec += at.tv_nsec / 1000000000L, at.tv_nsec %= 1000000000L;
  if (syscall(SYS_futex_waitv, w, (unsigned)n, 0u, &at, CLOCK_MONOTONIC) < 0 && errno == ENOSYS)
    return -1;
  return 0;
#else
  (void)z, (void)n, (void)timeout_s;
  return -1;
#endif
}

const baton__transport_t baton__shm_transport = {
    .name = "shm",
    .send_acquire = shm_send_acquire,
    .send_commit = shm_send_commit,
    .recv_acquire = shm_recv_acquire,
    .recv_release = shm_recv_release,
    .ready = shm_ready,
    .arm = shm_arm,
    .sleep = shm_sleep,
    .sleep_many = shm_sleep_many,
};

/* ------------------------------------------------------------ binding */

/* Channel i carries data from local rank i to its successor on the ring,
 * when that successor is on this host too. */
static void bind_conn(baton__shm_t *s, baton__conn_t *c, chan_t *ch, int chan, int peer,
                      const baton__params_t *p) {
  chan_bind(s, ch, chan);
  c->ops = &baton__shm_transport;
  c->peer = peer;
  c->timeout_s = p->timeout_s;
  c->impl = ch;
  ch->wake_all = p->shm_wake_all;
  ch->peer_pid = atomic_load(&s->hdr->ranks[local_index(s, peer)].pid);
}

void baton__shm_bind_conns(baton__shm_t *s, int next, int prev, const baton__params_t *p) {
  if (next >= 0 && local_index(s, next) >= 0)
    bind_conn(s, &s->send_conn, &s->send_chan, s->rank, next, p);
  if (prev >= 0 && local_index(s, prev) >= 0)
    bind_conn(s, &s->recv_conn, &s->recv_chan, local_index(s, prev), prev, p);
  for (int j = 0; j < s->size; j++) {
    if (j == s->rank)
      continue;
    bind_conn(s, &s->pair_send[j], &s->pair_send_chan[j], pair_chan(s, s->rank, j), s->local[j], p);
    bind_conn(s, &s->pair_recv[j], &s->pair_recv_chan[j], pair_chan(s, j, s->rank), s->local[j], p);
    s->pair_send[j].slot_bytes = s->pair_recv[j].slot_bytes = s->hdr->pair_slot_bytes;
  }
}

/* The channel to / from any other local rank: the ring's towards the ring
 * neighbour, a pair channel otherwise; NULL when `peer` is not local. */
baton__conn_t *baton__shm_conn_to(void *impl, int peer) {
  baton__shm_t *s = impl;
  int j = local_index(s, peer);
  if (j < 0 || j == s->rank)
    return NULL;
  return s->send_conn.ops && s->send_conn.peer == peer ? &s->send_conn : &s->pair_send[j];
}

baton__conn_t *baton__shm_conn_from(void *impl, int peer) {
  baton__shm_t *s = impl;
  int j = local_index(s, peer);
  if (j < 0 || j == s->rank)
    return NULL;
  return s->recv_conn.ops && s->recv_conn.peer == peer ? &s->recv_conn : &s->pair_recv[j];
}
