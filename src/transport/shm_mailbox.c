/*
 * shm_mailbox.c - the segment of the shared-memory transport and the
 * host's rendezvous.
 *
 * The host's lowest rank creates one shared-memory file at init, sized for
 * the host's ranks, fills its header and publishes its name through the store;
 * the others map it, and once all have, rank 0 unlinks it so nothing is left
 * behind even if the job is killed. Every page is faulted in at init
 * (MAP_POPULATE): a first touch costs ~12 us per 4 KiB page on these virtual
 * machines, which must never happen inside a collective.
 *
 * The ranks of one host are numbered by local index (ascending global
 * rank). After the header come each rank's lines (pid, current call, its
 * count in the fan-out stream), two sets of mailboxes (calls alternate
 * between them), the channels (shm_channel.c) and the fan-out area. A
 * rendezvous marks this rank arrived in its mailbox and waits for the
 * others' marks; the header's poison is how a failure reaches every rank
 * of the host.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "shm_impl.h"

/* ----------------------------------------------------------- rendezvous */

static mailbox_hdr_t *mailbox_hdr(baton__shm_t *s, int rank, uint32_t call) {
  return (mailbox_hdr_t *)((char *)s->base + ranks_bytes(s->size) +
                           ((size_t)(call & 1) * (size_t)s->size + (size_t)rank) *
                               s->hdr->mailbox_bytes);
}

void *baton__shm_mailbox(void *impl, int rank, uint32_t call) {
  baton__shm_t *s = impl;
  return (char *)mailbox_hdr(s, rank, call) + MAILBOX_DATA;
}

size_t baton__shm_mailbox_bytes(const void *impl) {
  const baton__shm_t *s = impl;
  return s->hdr->flat_bytes;
}

/* ---------------------------------------------------- the fan-out stream */

/* The area at the end of the segment holds the host's fan-out stream: flat's
 * broadcast past a mailbox puts its pieces there one after the other, the
 * root writing each into place g % nslots and the others copying it out.
 * Every rank counts the pieces it has done in its third line: the writer of
 * piece g waits until every other rank has done piece g - nslots (so its
 * place is free), a reader until the writer has put piece g. The pieces of
 * successive broadcasts, whatever their roots, run on in one numbering
 * (exec.c), so no broadcast waits for the one before it to drain. */
size_t baton__shm_fan_bytes(const void *impl) {
  const baton__shm_t *s = impl;
  return s->hdr->slot_bytes;
}

static void *fan_place(baton__shm_t *s, uint32_t g) {
  size_t area = fan_bytes(s->hdr->nslots, s->hdr->slot_bytes);
  return (char *)s->base + s->bytes - area + (size_t)(g % s->hdr->nslots) * s->hdr->slot_bytes;
}

/* Until local rank q's count reaches target; why says who and what
 * otherwise. */
static int fan_wait(baton__shm_t *s, int q, uint32_t target, double timeout_s, char *why,
                    size_t whylen) {
  rank_slot_t *r = &s->hdr->ranks[q];
  int rank = s->local[q];
  if (reached_soon(s, &r->fan, target))
    return 0;
  pid_t pid = atomic_load_explicit(&r->pid, memory_order_relaxed);
  int rc = baton__shm_wait_for(s, &r->fan, target, &r->fan_waiting, pid, timeout_s);
  if (rc && s->watched)
    snprintf(why, whylen, "%s", s->why);
  else if (rc == BATON_EREMOTE)
    snprintf(why, whylen, "rank %d (pid %d) died", rank, (int)pid);
  else if (rc)
    snprintf(why, whylen, "rank %d did not finish its piece %u in %.0f s", rank,
             (unsigned)(target - 1), timeout_s);
  return rc;
}

int baton__shm_fan_put(void *impl, uint32_t g, void **piece, double timeout_s, char *why,
                       size_t whylen) {
  baton__shm_t *s = impl;
  for (int q = 0; q < s->size; q++) {
    int rc = q == s->rank ? 0 : fan_wait(s, q, g - s->hdr->nslots + 1, timeout_s, why, whylen);
    if (rc)
      return rc;
  }
  *piece = fan_place(s, g);
  return 0;
}

int baton__shm_fan_get(void *impl, int writer, uint32_t g, const void **piece, double timeout_s,
                       char *why, size_t whylen) {
  baton__shm_t *s = impl;
  int rc = fan_wait(s, local_index(s, writer), g + 1, timeout_s, why, whylen);
  *piece = rc ? NULL : fan_place(s, g);
  return rc;
}

void baton__shm_fan_done(void *impl, uint32_t g) {
  baton__shm_t *s = impl;
  rank_slot_t *me = &s->hdr->ranks[s->rank];
  atomic_store_explicit(&me->fan, g + 1, memory_order_release);
  wake(&me->fan, &me->fan_waiting, 1); /* the writer's: every other rank may sleep on it */
}

/* A mailbox holds flat's message, and at least BATON__SHOW_BYTES for what
 * registered memory shows (mem.c, exec_direct.c) whatever BATON_FLAT_BYTES. */
static size_t mailbox_of(const baton__params_t *p) {
  size_t data = p->flat_bytes > BATON__SHOW_BYTES ? p->flat_bytes : BATON__SHOW_BYTES;
  return align_up(MAILBOX_DATA + data, CACHELINE);
}

/* After a failed wait: which ranks have not arrived, and is one dead. */
static int missing_ranks(baton__shm_t *s, uint32_t call, int rc, char *why, size_t whylen) {
  size_t off = 0;
  why[0] = '\0';
  for (int r = 0; r < s->size; r++) {
    if (reached(&mailbox_hdr(s, r, call)->call, call))
      continue;
    pid_t pid = atomic_load_explicit(&s->hdr->ranks[r].pid, memory_order_relaxed);
    if (rc == BATON_EREMOTE && !baton__shm_peer_alive(pid)) {
      snprintf(why, whylen, "rank %d (pid %d) died before arriving", s->local[r], (int)pid);
      return rc;
    }
    if (off < whylen)
      off += (size_t)snprintf(why + off, whylen - off, "%srank %d",
                              off ? ", " : "still waiting for ", s->local[r]);
  }
  return rc;
}

int baton__shm_arrive(void *impl, uint32_t call, const baton__sig_t *sig, double timeout_s,
                      char *why, size_t whylen) {
  baton__shm_t *s = impl;
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
    int rc = baton__shm_wait_for(s, &h->call, call, &h->waiting, pid, left > 0 ? left : 0);
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

void baton__shm_publish(void *impl, const baton__sig_t *sig) {
  baton__shm_t *s = impl;
  rank_slot_t *me = &s->hdr->ranks[s->rank];
  uint32_t v = atomic_load_explicit(&me->ver, memory_order_relaxed);
  atomic_store_explicit(&me->ver, v + 1, memory_order_relaxed);
  atomic_thread_fence(memory_order_release);
  me->call = *sig;
  atomic_store_explicit(&me->ver, v + 2, memory_order_release);
}

int baton__shm_peek(void *impl, uint32_t call, const baton__sig_t *sig, char *why, size_t whylen) {
  baton__shm_t *s = impl;
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

/* A failure every rank of this host must learn: the first code sticks.
 * Only atomic operations and plain stores, so baton_comm_abort may call it
 * from a signal handler (a handler that interrupts this rank's own poison
 * finds the claim taken and returns). */
static void shm_poison(void *impl, int rc, const char *msg) {
  baton__shm_t *s = impl;
  int32_t none = 0;
  if (!atomic_compare_exchange_strong(&s->hdr->abort_claim, &none, 1))
    return;
  /* The message first and the code last: a reader that sees the code sees
   * the message. */
  size_t n = 0;
  for (; msg[n] && n < sizeof s->hdr->abort_msg - 1; n++)
    s->hdr->abort_msg[n] = msg[n];
  s->hdr->abort_msg[n] = '\0';
  atomic_store_explicit(&s->hdr->abort_rc, rc, memory_order_release);
}

/* The poison, if any (0 while none), with its message. */
static int shm_check(void *impl, char *why, size_t whylen) {
  baton__shm_t *s = impl;
  int rc = atomic_load_explicit(&s->hdr->abort_rc, memory_order_acquire);
  if (rc)
    snprintf(why, whylen, "%s", s->hdr->abort_msg);
  return rc;
}

/* The communicator's watch, checked on every sleep slice. */
static void shm_watch(void *impl, const baton__watch_t *watch) {
  baton__shm_t *s = impl;
  s->watch = watch;
}

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
  s->hdr->mailbox_bytes = mailbox_of(p);
  s->hdr->flat_bytes = align_up(MAILBOX_DATA + p->flat_bytes, CACHELINE) - MAILBOX_DATA;
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

static void free_pairs(baton__shm_t *s) {
  free(s->pair_send_chan);
  free(s->pair_recv_chan);
  free(s->pair_send);
  free(s->pair_recv);
}

/* A value no other process holds at that address by chance: a rank
 * whose pid names another process (another PID namespace) reads
 * something else there, or nothing. */
static uint64_t probe_value(const baton__shm_t *s) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  uint64_t x = ((uint64_t)getpid() << 32) ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^
               (uint64_t)(uintptr_t)s;
  x ^= x >> 33, x *= 0xff51afd7ed558ccdull, x ^= x >> 33; /* a mix, so no field stands out */
  return x | 1;
}

/* After the set-up rendezvous: every peer's probe word read through the
 * kernel. 1 when all came back right; else 0, and why. */
static int probe_peers(const baton__shm_t *s, char *why, size_t whylen) {
  for (int i = 0; i < s->size; i++) {
    if (i == s->rank)
      continue;
    const rank_slot_t *peer = &s->hdr->ranks[i];
    uint64_t got = 0;
    struct iovec here = {&got, sizeof got};
    struct iovec there = {(void *)(uintptr_t)peer->probe_addr, sizeof got};
    ssize_t n = process_vm_readv((pid_t)atomic_load(&peer->pid), &here, 1, &there, 1, 0);
    if (n != (ssize_t)sizeof got || got != peer->probe_value) {
      snprintf(why, whylen, "no (rank %d, pid %d: %s)", s->local[i], (int)atomic_load(&peer->pid),
               n < 0 ? strerror(errno) : "another process's memory");
      return 0;
    }
  }
  return 1;
}

int baton__shm_cma(const baton__shm_t *s) { return s->cma; }

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
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  s->oversubscribed = cpus > 0 && size > cpus;
  /* More ranks than cores: a spinning waiter holds the core its peer may
   * need; it yields instead (baton__shm_wait_for). */
  s->spin_s = s->oversubscribed ? 0 : p->spin_us * 1e-6;
  s->yield_s = p->yield_us * 1e-6;
  s->send_conn.slot_bytes = s->recv_conn.slot_bytes = p->segment_bytes / CACHELINE * CACHELINE;
  s->bytes =
      header_bytes(size, mailbox_of(p)) +
      (size_t)size * align_up(chan_bytes((uint32_t)p->shm_slots, s->send_conn.slot_bytes), 4096) +
      (size_t)size * (size_t)(size - 1) *
          align_up(chan_bytes((uint32_t)p->shm_slots, pair_slot_bytes(p)), 4096) +
      fan_bytes((uint32_t)p->shm_slots, s->send_conn.slot_bytes);
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
  s->probe = probe_value(s);
  s->hdr->ranks[s->rank].probe_addr = (uint64_t)(uintptr_t)&s->probe;
  s->hdr->ranks[s->rank].probe_value = s->probe;
  /* Every rank has mapped the file once it has arrived here, so rank 0 can
   * unlink it: from then on it disappears with the last process. */
  if ((rc = baton__shm_arrive(s, 1, NULL, p->timeout_s, err, errlen)) != 0)
    goto fail_unmap;
  if (s->rank == 0)
    shm_unlink(name);
  char cma_why[160] = "off (BATON_CMA=0)";
  s->cma = p->cma && probe_peers(s, cma_why, sizeof cma_why);
  baton__shm_bind_conns(s, next, prev, p);
  char wait[96];
  if (s->oversubscribed)
    snprintf(wait, sizeof wait, "more ranks than cores: a waiter yields %.0f us, no spin",
             s->yield_s * 1e6);
  else
    snprintf(wait, sizeof wait, "spin %.0f us", s->spin_s * 1e6);
  baton__log_info(SHM,
                  "shared memory %s: %zu bytes, %d channels of %u slots x %zu bytes; %s; the "
                  "peers' memory by the kernel (CMA): %s",
                  name, s->bytes, size, s->hdr->nslots, s->send_conn.slot_bytes, wait,
                  s->cma ? "yes" : cma_why);
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

static void shm_destroy(void *impl, int clean) {
  baton__shm_t *s = impl;
  (void)clean;
  munmap(s->base, s->bytes);
  free_pairs(s);
  free(s->local);
  free(s);
}

/* The waiters of this host sleep in slices that check the watch, which
 * sees the abort: the poison is all there is to do. */
static void shm_shutdown(void *impl, int rc, const char *msg) { shm_poison(impl, rc, msg); }

const baton__fabric_t baton__shm_fabric = {
    .name = "shm",
    .conn_to = baton__shm_conn_to,
    .conn_from = baton__shm_conn_from,
    .watch = shm_watch,
    .check = shm_check,
    .poison = shm_poison,
    .shutdown = shm_shutdown,
    .destroy = shm_destroy,
    .arrive = baton__shm_arrive,
    .peek = baton__shm_peek,
    .publish = baton__shm_publish,
    .mailbox = baton__shm_mailbox,
    .mailbox_bytes = baton__shm_mailbox_bytes,
    .fan_bytes = baton__shm_fan_bytes,
    .fan_put = baton__shm_fan_put,
    .fan_get = baton__shm_fan_get,
    .fan_done = baton__shm_fan_done,
};
