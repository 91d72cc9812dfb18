/*
 * shm_impl.h - what the two files of the shared-memory transport share: the
 * layout of the segment (header, rank lines, mailboxes, channels), the
 * transport's state, and the waiting primitives (futex, spin, peer checks)
 * that both the slot channels and the rendezvous use.
 */
#ifndef BATON_SHM_IMPL_H
#define BATON_SHM_IMPL_H

#include <linux/futex.h>
#include <limits.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <sys/types.h>
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
  uint32_t pad_pid;
  /* Where this rank keeps a word of its own memory, and its value: the
   * peers read it through the kernel at set-up (baton__shm_cma). */
  uint64_t probe_addr, probe_value;
  char pad0[CACHELINE - 24];
  _Atomic uint32_t ver;
  baton__sig_t call;
  char pad1[CACHELINE - 8 - sizeof(baton__sig_t)];
  /* The third: how many pieces of the host's fan-out stream it has done
   * (put, or copied out), which the others wait for (shm_mailbox.c). */
  _Atomic uint32_t fan;
  _Atomic uint32_t fan_waiting; /* a peer sleeps on `fan` */
  char pad2[CACHELINE - 8];
} rank_slot_t;
_Static_assert(sizeof(rank_slot_t) == 3 * CACHELINE, "rank_slot_t is three cache lines");

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
  uint64_t flat_bytes; /* the mailboxes' room for flat: BATON_FLAT_BYTES of the creator */
  char pad0[CACHELINE - 56];
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
  int wake_all;   /* several may sleep on this channel: wake every one */
  pid_t peer_pid;
  baton__shm_t *shm;
} chan_t;

struct baton__shm {
  void *base;
  size_t bytes;
  int rank, size; /* this rank's index among the host's ranks, and their number */
  int *local;     /* global rank of each local index */
  shm_header_t *hdr;
  double spin_s;      /* 0 when oversubscribed */
  double yield_s;     /* BATON_YIELD_US: how long an oversubscribed waiter yields */
  int oversubscribed; /* more ranks than cores */
  uint64_t probe;     /* the word the peers read to learn that CMA reaches this rank */
  int cma;            /* this rank reads every peer's memory by process_vm_readv */
  const baton__watch_t *watch;
  char why[384]; /* the watch's reason */
  int watched;   /* the last failed wait was ended by the watch */
  chan_t send_chan, recv_chan;
  baton__conn_t send_conn, recv_conn;
  chan_t *pair_send_chan, *pair_recv_chan; /* per local index */
  baton__conn_t *pair_send, *pair_recv;
};

static inline size_t align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

static inline size_t chan_bytes(uint32_t nslots, size_t slot_bytes) {
  return sizeof(chan_ctrl_t) + align_up(nslots * sizeof(slot_meta_t), CACHELINE) +
         (size_t)nslots * slot_bytes;
}

static inline size_t ranks_bytes(int size) {
  return align_up(sizeof(shm_header_t) + (size_t)size * sizeof(rank_slot_t), CACHELINE);
}

static inline size_t header_bytes(int size, size_t mailbox_bytes) {
  return align_up(ranks_bytes(size) + 2 * (size_t)size * mailbox_bytes, 4096);
}

/* The fan-out area after the channels: nslots pieces of slot_bytes. */
static inline size_t fan_bytes(uint32_t nslots, size_t slot_bytes) {
  return align_up((size_t)nslots * slot_bytes, 4096);
}

static inline long futex(_Atomic uint32_t *addr, int op, uint32_t val, const struct timespec *ts) {
  return syscall(SYS_futex, addr, op, val, ts, NULL, 0);
}

/* ThreadSanitizer does not model fences; GCC says so (-Wtsan) where one is
 * inlined, as wake is since shm.c was split. The TSan build checks the
 * rest of this file as before, when wake stood out of line. */
#if defined(__SANITIZE_THREAD__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wtsan"
#endif
static inline void wake(_Atomic uint32_t *word, _Atomic uint32_t *flag, int all) {
  atomic_thread_fence(memory_order_seq_cst);
  if (atomic_load_explicit(flag, memory_order_relaxed)) {
    atomic_store_explicit(flag, 0, memory_order_relaxed);
    futex(word, FUTEX_WAKE, all ? INT_MAX : 1, NULL);
  }
}
#if defined(__SANITIZE_THREAD__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

static inline int reached(_Atomic uint32_t *word, uint32_t target) {
  return (int32_t)(atomic_load_explicit(word, memory_order_acquire) - target) >= 0;
}

/* A few polls before anything else: a peer that arrives within a fraction
 * of a microsecond, the usual case when each rank has a core, costs no
 * clock reads (25 ns each here, three per wait otherwise). With more ranks
 * than cores the peer is more likely waiting for this core: one look. */
static inline int reached_soon(const baton__shm_t *s, _Atomic uint32_t *word, uint32_t target) {
  for (int i = 0; i < 32 && !s->oversubscribed; i++) {
    if (reached(word, target))
      return 1;
    baton__cpu_relax();
  }
  return reached(word, target);
}

static inline int local_index(const baton__shm_t *s, int rank) {
  for (int i = 0; i < s->size; i++)
    if (s->local[i] == rank)
      return i;
  return -1;
}

/* shm_channel.c */
/* A process that has died but not been reaped (a zombie) still answers
 * kill(pid, 0), so its state is read too. */
int baton__shm_peer_alive(pid_t pid);
/* Waits until *word >= target (mod 2^32). `peer` is re-checked on every
 * sleep slice, and so is the communicator's watch. Returns 0,
 * BATON_EREMOTE, BATON_ETIMEDOUT (the caller formats the message) or the
 * watch's code with its reason in s->why. */
int baton__shm_wait_for(baton__shm_t *s, _Atomic uint32_t *word, uint32_t target,
                        _Atomic uint32_t *flag, pid_t peer, double timeout_s);
/* Binds this rank's channels once the segment is mapped: the ring's towards
 * `next` and from `prev` where they are local, and the pairs. */
void baton__shm_bind_conns(baton__shm_t *s, int next, int prev, const baton__params_t *p);
/* baton__shm_fabric's connections (shm_channel.c; the table is in shm_mailbox.c). */
baton__conn_t *baton__shm_conn_to(void *s, int peer);
baton__conn_t *baton__shm_conn_from(void *s, int peer);

/* The rendezvous, behind baton__shm_fabric's arrive, peek, publish,
 * mailbox and mailbox_bytes. */
/* Rendezvous number `call` (1 is taken by set-up, then 2, 3, ...): marks
 * this rank arrived and returns once all have; why names missing ranks. A
 * rank's writes to its mailbox before arriving are visible to all after. */
int baton__shm_arrive(void *s, uint32_t call, const baton__sig_t *sig, double timeout_s, char *why,
                      size_t whylen);
/* With sig: each rank leaves its call's signature in its mailbox and, once
 * all have arrived, compares them all (BATON_EMISMATCH). */
/* While waiting elsewhere: a rank that arrived at rendezvous `call` for
 * the same collective number as sig but with another call is a mismatch. */
int baton__shm_peek(void *s, uint32_t call, const baton__sig_t *sig, char *why, size_t whylen);
/* Leaves this rank's current call where the host's other ranks can see it
 * (baton__shm_peek compares it with theirs while they wait). */
void baton__shm_publish(void *s, const baton__sig_t *sig);
/* Each rank's mailbox for a call; calls alternate between two sets, so a
 * rank may fill the next call's mailbox while others still read this one. */
void *baton__shm_mailbox(void *s, int rank, uint32_t call);
size_t baton__shm_mailbox_bytes(const void *s);
/* The fan-out stream, behind baton__shm_fabric's fan_* (shm_mailbox.c). */
size_t baton__shm_fan_bytes(const void *s);
int baton__shm_fan_put(void *s, uint32_t g, void **piece, double timeout_s, char *why,
                       size_t whylen);
int baton__shm_fan_get(void *s, int writer, uint32_t g, const void **piece, double timeout_s,
                       char *why, size_t whylen);
void baton__shm_fan_done(void *s, uint32_t g);

#endif /* BATON_SHM_IMPL_H */
