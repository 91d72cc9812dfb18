/*
 * shm.c - the shared-memory transport, for ranks on one host.
 *
 * The host's lowest rank creates one shared-memory file at init, sized for
 * the host's ranks, fills its header and publishes its name through the store;
 * the others map it, and once all have, rank 0 unlinks it so nothing is left
 * behind even if the job is killed. Every page is faulted in at init
 * (MAP_POPULATE): a first touch costs ~12 us per 4 KiB page on these virtual
 * machines, which must never happen inside a collective.
 *
 * The ranks of one host are numbered by local index (ascending global
 * rank). The file holds one channel per local rank i, carrying data from it
 * to its successor on the ring when that successor is on this host too,
 * then a smaller channel for every other ordered pair of local ranks (slots
 * of BATON_PAIR_SEGMENT_BYTES), for the algorithms that talk to any rank.
 * A channel is a ring of `nslots` slots of
 * `slot_bytes` each and two counters: `head` (slots committed by the sender)
 * and `tail` (slots released by the receiver). Each side writes only its own
 * counter, so no locks are needed. Slots stay small enough to live in cache,
 * so the bytes that pass through them rarely reach DRAM.
 *
 * Waiting spins for BATON_SPIN_US, then sleeps on a futex on the counter it
 * waits for. The other side issues FUTEX_WAKE only when the sleeper has
 * raised its flag, so the fast path makes no system call. When ranks
 * outnumber cores, spinning only steals the core the peer needs, so the spin
 * is cut short. Sleeps are sliced so the waiter notices a dead peer (by pid)
 * or the timeout.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "shm.h"

#define SHM_MAGIC 0x6d68736e6f746162ull /* "batonshm" */
#define CACHELINE 64

typedef struct {
  _Atomic uint32_t head;         /* written by the sender */
  _Atomic uint32_t recv_waiting; /* the receiver sleeps on head */
  char pad0[CACHELINE - 8];
  _Atomic uint32_t tail;         /* written by the receiver */
  _Atomic uint32_t send_waiting; /* the sender sleeps on tail */
  char pad1[CACHELINE - 8];
  /* then slot_meta_t meta[nslots], padded to a cache line, then the slots */
} chan_ctrl_t;

typedef struct {
  uint64_t len;
  baton__sig_t sig; /* the sender's call */
} slot_meta_t;

/* A rank's two lines. The first holds its pid, written once at init and
 * read by every wait of its peers. The second holds the call it is in,
 * published at the start of every collective under a sequence lock (`ver`
 * odd while it changes) so that a rank waiting on a peer can see a local
 * rank that went another way (another algorithm, another call) and fail
 * instead of waiting. They must not share a line: a peer reading the pid
 * on every rendezvous would pull in the line its owner has just written,
 * one cache-line transfer more per call (0.2 us of a 0.7 us allreduce of
 * 8 bytes between two cores here). */
typedef struct {
  _Atomic int32_t pid;
  char pad0[CACHELINE - 4];
  _Atomic uint32_t ver;
  baton__sig_t call;
  char pad1[CACHELINE - 8 - sizeof(baton__sig_t)];
} rank_slot_t;
_Static_assert(sizeof(rank_slot_t) == 2 * CACHELINE, "rank_slot_t is two cache lines");

/* A mailbox starts with its owner's arrival flag, in the same cache line as
 * the first bytes of data: a peer that sees the flag already holds a tiny
 * message, so a small rendezvous costs one cache-line transfer per peer. */
typedef struct {
  _Atomic uint32_t call;    /* last rendezvous its owner arrived at */
  _Atomic uint32_t waiting; /* a peer sleeps on `call` */
  baton__sig_t sig;         /* the call its owner made */
} mailbox_hdr_t;
#define MAILBOX_DATA 32

typedef struct {
  uint64_t magic;
  uint32_t nranks, nslots;
  uint64_t slot_bytes, total_bytes, mailbox_bytes; /* mailbox: header + data */
  uint64_t pair_slot_bytes;
  char pad0[CACHELINE - 48];
  _Atomic int32_t abort_claim; /* the first rank that fails takes it */
  _Atomic int32_t abort_rc;    /* then writes the message, then the code */
  char abort_msg[CACHELINE * 8 - 8];
  rank_slot_t ranks[]; /* nranks, then 2 * nranks mailboxes */
} shm_header_t;

typedef struct {
  chan_ctrl_t *ctrl;
  slot_meta_t *meta;
  char *slots;
  uint32_t nslots;
  uint32_t count; /* our copy of our own counter */
  pid_t peer_pid;
  baton__shm_t *shm;
} chan_t;

struct baton__shm {
  void *base;
  size_t bytes;
  int rank, size; /* this rank's index among the host's ranks, and their number */
  int *local;     /* global rank of each local index */
  shm_header_t *hdr;
  double spin_s;
  int oversubscribed; /* more ranks than cores */
  const baton__watch_t *watch;
  char why[384]; /* the watch's reason */
  int watched;   /* the last failed wait was ended by the watch */
  chan_t send_chan, recv_chan;
  baton__conn_t send_conn, recv_conn;
  chan_t *pair_send_chan, *pair_recv_chan; /* per local index */
  baton__conn_t *pair_send, *pair_recv;
};

static size_t align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

static size_t chan_bytes(uint32_t nslots, size_t slot_bytes) {
  return sizeof(chan_ctrl_t) + align_up(nslots * sizeof(slot_meta_t), CACHELINE) +
         (size_t)nslots * slot_bytes;
}

static size_t ranks_bytes(int size) {
  return align_up(sizeof(shm_header_t) + (size_t)size * sizeof(rank_slot_t), CACHELINE);
}

static size_t header_bytes(int size, size_t mailbox_bytes) {
  return align_up(ranks_bytes(size) + 2 * (size_t)size * mailbox_bytes, 4096);
}

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

static long futex(_Atomic uint32_t *addr, int op, uint32_t val, const struct timespec *ts) {
  return syscall(SYS_futex, addr, op, val, ts, NULL, 0);
}

static void wake(_Atomic uint32_t *word, _Atomic uint32_t *flag, int all) {
  atomic_thread_fence(memory_order_seq_cst);
  if (atomic_load_explicit(flag, memory_order_relaxed)) {
    atomic_store_explicit(flag, 0, memory_order_relaxed);
    futex(word, FUTEX_WAKE, all ? INT_MAX : 1, NULL);
  }
}

static int reached(_Atomic uint32_t *word, uint32_t target) {
  return (int32_t)(atomic_load_explicit(word, memory_order_acquire) - target) >= 0;
}

/* A few polls before anything else: a peer that arrives within a fraction
 * of a microsecond, the usual case when each rank has a core, costs no
 * clock reads (25 ns each here, three per wait otherwise). With more ranks
 * than cores the peer is more likely waiting for this core: one look. */
static int reached_soon(const baton__shm_t *s, _Atomic uint32_t *word, uint32_t target) {
  for (int i = 0; i < 32 && !s->oversubscribed; i++) {
    if (reached(word, target))
      return 1;
    __builtin_ia32_pause();
  }
  return reached(word, target);
}

/* A process that has died but not been reaped (a zombie) still answers
 * kill(pid, 0), so its state is read too. */
static int peer_alive(pid_t pid) {
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
static int wait_for(baton__shm_t *s, _Atomic uint32_t *word, uint32_t target,
                    _Atomic uint32_t *flag, pid_t peer, double timeout_s) {
  s->watched = 0;
  if (reached_soon(s, word, target))
    return 0;
  double start = baton__now(), spin_end = start + s->spin_s;
  do {
    for (int i = 0; i < 64; i++) {
      if (reached(word, target))
        return 0;
      __builtin_ia32_pause();
    }
  } while (baton__now() < spin_end);
  /* With more ranks than cores the rank we wait for may be queued behind us
   * on this core: hand it the core a few times before paying for a sleep. */
  for (int i = 0; s->oversubscribed && i < 4; i++) {
    sched_yield();
    if (reached(word, target))
      return 0;
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
    if (!peer_alive(peer))
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
  int rc = wait_for(ch->shm, &ch->ctrl->tail, ch->count - ch->nslots + 1, &ch->ctrl->send_waiting,
                    ch->peer_pid, c->timeout_s);
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
  wake(&ch->ctrl->head, &ch->ctrl->recv_waiting, 0);
  return 0;
}

static int shm_recv_acquire(baton__conn_t *c, const void **slot, size_t *bytes) {
  chan_t *ch = c->impl;
  int rc = wait_for(ch->shm, &ch->ctrl->head, ch->count + 1, &ch->ctrl->recv_waiting, ch->peer_pid,
                    c->timeout_s);
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
  wake(&ch->ctrl->tail, &ch->ctrl->send_waiting, 0);
  return 0;
}

const baton__transport_t baton__shm_transport = {
    .name = "shm",
    .send_acquire = shm_send_acquire,
    .send_commit = shm_send_commit,
    .recv_acquire = shm_recv_acquire,
    .recv_release = shm_recv_release,
};

/* ----------------------------------------------------------- rendezvous */

static mailbox_hdr_t *mailbox_hdr(baton__shm_t *s, int rank, uint32_t call) {
  return (mailbox_hdr_t *)((char *)s->base + ranks_bytes(s->size) +
                           ((size_t)(call & 1) * (size_t)s->size + (size_t)rank) *
                               s->hdr->mailbox_bytes);
}

void *baton__shm_mailbox(baton__shm_t *s, int rank, uint32_t call) {
  return (char *)mailbox_hdr(s, rank, call) + MAILBOX_DATA;
}

size_t baton__shm_mailbox_bytes(const baton__shm_t *s) {
  return s->hdr->mailbox_bytes - MAILBOX_DATA;
}

/* After a failed wait: which ranks have not arrived, and is one dead. */
static int missing_ranks(baton__shm_t *s, uint32_t call, int rc, char *why, size_t whylen) {
  size_t off = 0;
  why[0] = '\0';
  for (int r = 0; r < s->size; r++) {
    if (reached(&mailbox_hdr(s, r, call)->call, call))
      continue;
    pid_t pid = atomic_load_explicit(&s->hdr->ranks[r].pid, memory_order_relaxed);
    if (rc == BATON_EREMOTE && !peer_alive(pid)) {
      snprintf(why, whylen, "rank %d (pid %d) died before arriving", s->local[r], (int)pid);
      return rc;
    }
    if (off < whylen)
      off += (size_t)snprintf(why + off, whylen - off, "%srank %d",
                              off ? ", " : "still waiting for ", s->local[r]);
  }
  return rc;
}

int baton__shm_arrive(baton__shm_t *s, uint32_t call, const baton__sig_t *sig, double timeout_s,
                      char *why, size_t whylen) {
  mailbox_hdr_t *mine = mailbox_hdr(s, s->rank, call);
  if (sig)
    mine->sig = *sig;
  atomic_store_explicit(&mine->call, call, memory_order_release);
  wake(&mine->call, &mine->waiting, 1);
  double deadline = 0; /* read the clock only once someone has to be waited for */
  for (int r = 0; r < s->size; r++) {
    mailbox_hdr_t *h = mailbox_hdr(s, r, call);
    if (r == s->rank || reached_soon(s, &h->call, call))
      continue;
    pid_t pid = atomic_load_explicit(&s->hdr->ranks[r].pid, memory_order_relaxed);
    if (deadline == 0)
      deadline = baton__now() + timeout_s;
    double left = deadline - baton__now();
    int rc = wait_for(s, &h->call, call, &h->waiting, pid, left > 0 ? left : 0);
    if (rc && s->watched) {
      snprintf(why, whylen, "%s", s->why);
      return rc;
    }
    if (rc)
      return missing_ranks(s, call, rc, why, whylen);
  }
  /* Every rank reads every signature, so all of them see a mismatch. */
  for (int r = 0; r < s->size && sig; r++) {
    if (r == s->rank)
      continue;
    int rc = baton__sig_check(sig, &mailbox_hdr(s, r, call)->sig, s->local[s->rank], s->local[r],
                              why, whylen);
    if (rc)
      return rc;
  }
  return 0;
}

void baton__shm_publish(baton__shm_t *s, const baton__sig_t *sig) {
  rank_slot_t *me = &s->hdr->ranks[s->rank];
  uint32_t v = atomic_load_explicit(&me->ver, memory_order_relaxed);
  atomic_store_explicit(&me->ver, v + 1, memory_order_relaxed);
  atomic_thread_fence(memory_order_release);
  me->call = *sig;
  atomic_store_explicit(&me->ver, v + 2, memory_order_release);
}

int baton__shm_peek(baton__shm_t *s, uint32_t call, const baton__sig_t *sig, char *why,
                    size_t whylen) {
  for (int r = 0; r < s->size; r++) { /* the calls the local ranks are in */
    rank_slot_t *them = &s->hdr->ranks[r];
    uint32_t v = atomic_load_explicit(&them->ver, memory_order_acquire);
    if (r == s->rank || (v & 1))
      continue;
    baton__sig_t theirs = them->call;
    atomic_thread_fence(memory_order_acquire);
    if (atomic_load_explicit(&them->ver, memory_order_relaxed) != v || theirs.seq != sig->seq)
      continue;
    int rc = baton__sig_check(sig, &theirs, s->local[s->rank], s->local[r], why, whylen);
    if (rc)
      return rc;
  }
  for (int r = 0; r < s->size; r++) {
    mailbox_hdr_t *h = mailbox_hdr(s, r, call);
    if (r == s->rank || !reached(&h->call, call) || h->sig.seq != sig->seq)
      continue;
    int rc = baton__sig_check(sig, &h->sig, s->local[s->rank], s->local[r], why, whylen);
    if (rc)
      return rc;
  }
  return 0;
}

void baton__shm_poison(baton__shm_t *s, int rc, const char *msg) {
  int32_t none = 0;
  if (!s || !atomic_compare_exchange_strong(&s->hdr->abort_claim, &none, 1))
    return;
  /* The message first and the code last: a reader that sees the code sees
   * the message. */
  snprintf(s->hdr->abort_msg, sizeof s->hdr->abort_msg, "%s", msg);
  atomic_store_explicit(&s->hdr->abort_rc, rc, memory_order_release);
}

int baton__shm_poisoned(baton__shm_t *s, char *why, size_t whylen) {
  int rc = s ? atomic_load_explicit(&s->hdr->abort_rc, memory_order_acquire) : 0;
  if (rc)
    snprintf(why, whylen, "%s", s->hdr->abort_msg);
  return rc;
}

void baton__shm_watch(baton__shm_t *s, const baton__watch_t *watch) { s->watch = watch; }

/* ---------------------------------------------------------------- setup */

static int map_file(int fd, size_t bytes, void **base, char *err, size_t errlen) {
  *base = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (*base == MAP_FAILED) {
    snprintf(err, errlen, "mmap of %zu bytes of shared memory failed: %s", bytes, strerror(errno));
    return BATON_ESYS;
  }
  return 0;
}

/* Pair channels never have larger slots than the ring's. */
static size_t pair_slot_bytes(const baton__params_t *p) {
  size_t b = p->pair_segment_bytes < p->segment_bytes ? p->pair_segment_bytes : p->segment_bytes;
  return b / CACHELINE * CACHELINE;
}

static int create_file(baton__shm_t *s, const baton__params_t *p, char *name, size_t namelen,
                       char *err, size_t errlen) {
  snprintf(name, namelen, "/baton-%d-%08lx", (int)getpid(),
           (unsigned long)(baton__now() * 1e9) & 0xffffffffUL);
  int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0) {
    snprintf(err, errlen, "shm_open(%s) failed: %s", name, strerror(errno));
    return BATON_ESYS;
  }
  int rc = BATON_ESYS;
  if (ftruncate(fd, (off_t)s->bytes) != 0) {
    snprintf(err, errlen, "sizing shared memory %s to %zu bytes failed: %s (is /dev/shm full?)",
             name, s->bytes, strerror(errno));
    goto fail_unlink;
  }
  if ((rc = map_file(fd, s->bytes, &s->base, err, errlen)) != 0)
    goto fail_unlink;
  close(fd);
  s->hdr = s->base;
  s->hdr->nranks = (uint32_t)s->size;
  s->hdr->nslots = (uint32_t)p->shm_slots;
  s->hdr->slot_bytes = s->send_conn.slot_bytes;
  s->hdr->pair_slot_bytes = pair_slot_bytes(p);
  s->hdr->total_bytes = s->bytes;
  s->hdr->mailbox_bytes = align_up(MAILBOX_DATA + p->flat_bytes, CACHELINE);
  s->hdr->magic = SHM_MAGIC;
  return 0;
fail_unlink:
  shm_unlink(name);
  close(fd);
  return rc;
}

static int open_file(baton__shm_t *s, const baton__params_t *p, const char *name, char *err,
                     size_t errlen) {
  int fd = shm_open(name, O_RDWR, 0);
  if (fd < 0) {
    snprintf(err, errlen, "shm_open(%s) failed: %s; are all ranks on one host?", name,
             strerror(errno));
    return BATON_ESYS;
  }
  struct stat st;
  int rc = BATON_ESYS;
  if (fstat(fd, &st) != 0 || (size_t)st.st_size != s->bytes) {
    snprintf(err, errlen,
             "shared memory %s has %lld bytes, this rank expects %zu: do all ranks "
             "use the same BATON_SEGMENT_BYTES and BATON_SHM_SLOTS?",
             name, (long long)st.st_size, s->bytes);
    goto fail_close;
  }
  if ((rc = map_file(fd, s->bytes, &s->base, err, errlen)) != 0)
    goto fail_close;
  s->hdr = s->base;
  if (s->hdr->magic != SHM_MAGIC || s->hdr->nranks != (uint32_t)s->size ||
      s->hdr->slot_bytes != s->send_conn.slot_bytes || s->hdr->nslots != (uint32_t)p->shm_slots ||
      s->hdr->pair_slot_bytes != pair_slot_bytes(p)) {
    snprintf(err, errlen,
             "shared memory %s does not match this rank's settings "
             "(size %d, segment %zu bytes)",
             name, s->size, s->send_conn.slot_bytes);
    rc = BATON_EUSAGE;
    munmap(s->base, s->bytes);
    s->base = NULL;
  }
fail_close:
  close(fd);
  return rc;
}

static int local_index(const baton__shm_t *s, int rank) {
  for (int i = 0; i < s->size; i++)
    if (s->local[i] == rank)
      return i;
  return -1;
}

/* Channel i carries data from local rank i to its successor on the ring,
 * when that successor is on this host too. */
static void bind_conn(baton__shm_t *s, baton__conn_t *c, chan_t *ch, int chan, int peer,
                      const baton__params_t *p) {
  chan_bind(s, ch, chan);
  c->ops = &baton__shm_transport;
  c->peer = peer;
  c->timeout_s = p->timeout_s;
  c->impl = ch;
  ch->peer_pid = atomic_load(&s->hdr->ranks[local_index(s, peer)].pid);
}

static void bind_conns(baton__shm_t *s, int next, int prev, const baton__params_t *p) {
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

static double spin_seconds(const baton__params_t *p, int size) {
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  /* More ranks than cores: a spinning waiter holds the core its peer needs. */
  if (cpus > 0 && size > cpus)
    return p->spin_us < 2 ? p->spin_us * 1e-6 : 2e-6;
  return p->spin_us * 1e-6;
}

static void free_pairs(baton__shm_t *s) {
  free(s->pair_send_chan);
  free(s->pair_recv_chan);
  free(s->pair_send);
  free(s->pair_recv);
}

int baton__shm_setup(baton__store_t *st, const char *key, int rank, const int *local, int size,
                     int next, int prev, const baton__params_t *p, baton__shm_t **out, char *err,
                     size_t errlen) {
  baton__shm_t *s = calloc(1, sizeof *s);
  int *copy = calloc((size_t)size, sizeof *copy);
  if (!s || !copy) {
    free(s), free(copy);
    snprintf(err, errlen, "out of memory");
    return BATON_ENOMEM;
  }
  memcpy(copy, local, (size_t)size * sizeof *copy);
  s->local = copy;
  s->size = size;
  s->rank = local_index(s, rank);
  s->spin_s = spin_seconds(p, size);
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  s->oversubscribed = cpus > 0 && size > cpus;
  s->send_conn.slot_bytes = s->recv_conn.slot_bytes = p->segment_bytes / CACHELINE * CACHELINE;
  s->bytes =
      header_bytes(size, align_up(MAILBOX_DATA + p->flat_bytes, CACHELINE)) +
      (size_t)size * align_up(chan_bytes((uint32_t)p->shm_slots, s->send_conn.slot_bytes), 4096) +
      (size_t)size * (size_t)(size - 1) *
          align_up(chan_bytes((uint32_t)p->shm_slots, pair_slot_bytes(p)), 4096);
  s->pair_send_chan = calloc((size_t)size, sizeof(chan_t));
  s->pair_recv_chan = calloc((size_t)size, sizeof(chan_t));
  s->pair_send = calloc((size_t)size, sizeof(baton__conn_t));
  s->pair_recv = calloc((size_t)size, sizeof(baton__conn_t));
  if (!s->pair_send_chan || !s->pair_recv_chan || !s->pair_send || !s->pair_recv) {
    snprintf(err, errlen, "out of memory");
    free_pairs(s);
    free(s->local);
    free(s);
    return BATON_ENOMEM;
  }
  char name[64];
  size_t len = 0;
  int rc;
  if (s->rank == 0) {
    if ((rc = create_file(s, p, name, sizeof name, err, errlen)) != 0)
      goto fail_free;
    rc = baton__store_set(st, key, name, strlen(name) + 1, err, errlen);
  } else {
    rc = baton__store_get(st, key, name, sizeof name, &len, p->timeout_s, err, errlen);
    if (rc == 0 && (len == 0 || name[len - 1] != '\0')) {
      snprintf(err, errlen, "rank 0 published a malformed shared-memory name");
      rc = BATON_EPROTO;
    }
    if (rc == 0)
      rc = open_file(s, p, name, err, errlen);
  }
  if (rc != 0)
    goto fail_unmap;
  atomic_store(&s->hdr->ranks[s->rank].pid, (int32_t)getpid());
  /* Every rank has mapped the file once it has arrived here, so rank 0 can
   * unlink it: from then on it disappears with the last process. */
  if ((rc = baton__shm_arrive(s, 1, NULL, p->timeout_s, err, errlen)) != 0)
    goto fail_unmap;
  if (s->rank == 0)
    shm_unlink(name);
  bind_conns(s, next, prev, p);
  baton__log_info(SHM,
                  "shared memory %s: %zu bytes, %d channels of %u slots x %zu bytes, spin %.0f us",
                  name, s->bytes, size, s->hdr->nslots, s->send_conn.slot_bytes, s->spin_s * 1e6);
  *out = s;
  return 0;
fail_unmap:
  if (s->rank == 0 && s->base)
    shm_unlink(name);
  if (s->base)
    munmap(s->base, s->bytes);
fail_free:
  free_pairs(s);
  free(s->local);
  free(s);
  return rc;
}

baton__conn_t *baton__shm_send_conn(baton__shm_t *s) {
  return s && s->send_conn.ops ? &s->send_conn : NULL;
}
baton__conn_t *baton__shm_recv_conn(baton__shm_t *s) {
  return s && s->recv_conn.ops ? &s->recv_conn : NULL;
}

baton__conn_t *baton__shm_conn_to(baton__shm_t *s, int peer) {
  int j = s ? local_index(s, peer) : -1;
  if (j < 0 || j == s->rank)
    return NULL;
  return s->send_conn.ops && s->send_conn.peer == peer ? &s->send_conn : &s->pair_send[j];
}
baton__conn_t *baton__shm_conn_from(baton__shm_t *s, int peer) {
  int j = s ? local_index(s, peer) : -1;
  if (j < 0 || j == s->rank)
    return NULL;
  return s->recv_conn.ops && s->recv_conn.peer == peer ? &s->recv_conn : &s->pair_recv[j];
}

void baton__shm_destroy(baton__shm_t *s) {
  if (!s)
    return;
  munmap(s->base, s->bytes);
  free_pairs(s);
  free(s->local);
  free(s);
}
