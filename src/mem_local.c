/*
 * mem_local.c - local memory (baton_mem_alloc_local): buffers one process
 * allocates alone, which its peers on the host map when a call uses them.
 *
 * Registered memory (mem.c) is collective, so that every rank maps every
 * rank's allocation at once. A framework's allocator cannot be: each
 * process allocates on its own, in no common order. So each block here is
 * a memfd of its own, kept open; a call shows the peers the block's
 * number (unique in this process), its file descriptor, inode and size,
 * and a peer that has not mapped that block yet takes a copy of the
 * descriptor with pidfd_getfd (Linux 5.6; it asks the same permission as
 * process_vm_readv, which the shared segment's set-up probes: BATON_CMA)
 * and maps it. The mappings are kept, per communicator, keyed by rank and
 * block number, so a block that is used again costs nothing more.
 *
 * A free returns the block to this process's pool, to be handed out again
 * for an allocation of the same size class (four classes to a power of
 * two), so that the peers' mappings of it stay good: a training loop's
 * tensors come and go at the same sizes. Past an eighth of the machine's
 * memory in free blocks, a freed block goes back to the system; a peer
 * that still maps it keeps those pages until it evicts the mapping (past
 * MAPS_MAX blocks or a quarter of the memory mapped by a communicator) or
 * its communicator ends, and never reads them again, since block numbers
 * are not reused.
 */
#include <errno.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "comm.h"
#include "mem.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif

typedef struct {
  char *base;
  size_t len;   /* mapped: the size class */
  size_t bytes; /* as asked by the block's current holder */
  int fd;
  uint64_t seq, ino;
  int busy;
} block_t;

static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;
static block_t *blocks;
static int nblocks, blocks_cap;
static uint64_t next_seq;
static size_t free_bytes;
/* In a child made by fork(): where the blocks start that the parent (or
 * an earlier ancestor) held at the fork, which the child's tensors may
 * still use. baton_mem_is_local counts them, so that an allocator never
 * gives them to another free(); baton_mem_free_local refuses them. */
static void **inherited;
static int ninherited;

/* In a child made by fork(): the parent's blocks would stay shared with
 * it (the memory is a shared file), so each is mapped again in place,
 * privately: the child's writes make copies of their pages, as after any
 * fork, and never reach the parent (pages it has not written still show
 * what the parent writes). They are the parent's to hand out, so the
 * child's pool starts empty, its frees of them are refused (the torch
 * allocator's deleter then leaves them mapped), the ones held are listed
 * in `inherited`, and its descriptors of them are closed. The lock may
 * have been held by another thread of the parent: it starts anew. */
static void forked_child(void) {
  void **held = malloc((size_t)(ninherited + nblocks) * sizeof *held);
  int nheld = 0;
  for (int i = 0; held && i < ninherited; i++)
    held[nheld++] = inherited[i];
  for (int i = 0; i < nblocks; i++) {
    (void)mmap(blocks[i].base, blocks[i].len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_FIXED,
               blocks[i].fd, 0);
    close(blocks[i].fd);
    if (held && blocks[i].busy)
      held[nheld++] = blocks[i].base;
  }
  free(inherited);
  inherited = held, ninherited = nheld;
  blocks = NULL; /* the array stays the parent's copy: left, not freed mid-reset */
  nblocks = blocks_cap = 0;
  free_bytes = 0;
  pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
  pool_mu = fresh;
}

static void on_fork(void) { pthread_atfork(NULL, NULL, forked_child); }

/* What one communicator maps of its peers' blocks. */
struct baton__lmap {
  int rank;
  uint64_t seq;
  char *base;
  size_t len;
  uint64_t used; /* the latest call that used it (its number) */
};
#define MAPS_MAX 256

/* Pages, then four classes to a power of two past 64 KiB, so that a
 * tensor of about the same size takes a block back from the pool. */
static size_t size_class(size_t bytes) {
  size_t len = baton__page_up(bytes);
  if (len <= (64u << 10))
    return len;
  size_t top = (size_t)1 << (63 - __builtin_clzll((unsigned long long)len));
  size_t step = top / 4;
  return (len + step - 1) / step * step;
}

/* The most blocks (file descriptors) the pool may hold: a quarter of the
 * process's, so that it never takes the ones the program needs. */
static int fd_budget(void) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
    return 256;
  return (int)(rl.rlim_cur / 4);
}

static size_t keep_limit(void) {
  long pages = sysconf(_SC_PHYS_PAGES);
  return pages > 0 ? (size_t)pages * (size_t)sysconf(_SC_PAGESIZE) / 8 : (size_t)1 << 30;
}

static void release(block_t *b) {
  munmap(b->base, b->len);
  close(b->fd);
}

/* rc, with its reason where baton_last_init_error() shows it. */
__attribute__((format(printf, 2, 3))) static int fail(int rc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(baton__init_error, sizeof baton__init_error, fmt, ap);
  va_end(ap);
  return rc;
}

/* A new block of len bytes, mapped and faulted in: 0, or an error. */
static int block_new(size_t len, block_t *b) {
  int fd = memfd_create("baton-local", MFD_CLOEXEC);
  if (fd < 0)
    return fail(errno == EMFILE || errno == ENFILE ? BATON_ENOMEM : BATON_ESYS,
                "baton_mem_alloc_local: memfd_create of %zu bytes failed: %s", len,
                strerror(errno));
  struct stat st;
  if (ftruncate(fd, (off_t)len) != 0 || fstat(fd, &st) != 0) {
    int e = errno;
    close(fd);
    return fail(BATON_ENOMEM, "baton_mem_alloc_local: sizing to %zu bytes failed: %s", len,
                strerror(e));
  }
  void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (p == MAP_FAILED) {
    int e = errno;
    close(fd);
    return fail(BATON_ENOMEM, "baton_mem_alloc_local: mmap of %zu bytes failed: %s", len,
                strerror(e));
  }
  baton__prefault_write(p, len, 0);
  *b = (block_t){.base = p, .len = len, .fd = fd, .ino = (uint64_t)st.st_ino};
  return 0;
}

int baton_mem_alloc_local(size_t bytes, void **ptr) {
  if (!ptr)
    return fail(BATON_EINVAL, "baton_mem_alloc_local: ptr is NULL");
  *ptr = NULL;
  if (bytes == 0)
    return fail(BATON_EINVAL, "baton_mem_alloc_local: bytes is 0");
  size_t len = size_class(bytes);
  pthread_once(&fork_once, on_fork);
  pthread_mutex_lock(&pool_mu);
  for (int i = 0; i < nblocks; i++)
    if (!blocks[i].busy && blocks[i].len == len) {
      blocks[i].busy = 1;
      blocks[i].bytes = bytes;
      free_bytes -= len;
      *ptr = blocks[i].base;
      pthread_mutex_unlock(&pool_mu);
      return BATON_OK;
    }
  int rc = BATON_OK;
  if (nblocks >= fd_budget()) {
    rc = fail(BATON_ENOMEM,
              "baton_mem_alloc_local: the pool holds %d blocks, a quarter of this process's file "
              "descriptors (RLIMIT_NOFILE), one a block",
              nblocks);
  } else if (nblocks == blocks_cap) {
    int cap = blocks_cap ? 2 * blocks_cap : 16;
    block_t *t = realloc(blocks, (size_t)cap * sizeof *t);
    if (!t)
      rc = fail(BATON_ENOMEM, "baton_mem_alloc_local: out of memory");
    else
      blocks = t, blocks_cap = cap;
  }
  block_t b;
  if (rc == BATON_OK && (rc = block_new(len, &b)) == BATON_OK) {
    b.busy = 1;
    b.bytes = bytes;
    b.seq = ++next_seq;
    blocks[nblocks++] = b;
    *ptr = b.base;
  }
  pthread_mutex_unlock(&pool_mu);
  return rc;
}

/* The block handed out at ptr, under the lock; -1 when none is. */
static int held_at(const void *ptr) {
  for (int i = 0; ptr && i < nblocks; i++)
    if (blocks[i].base == ptr && blocks[i].busy)
      return i;
  return -1;
}

int baton_mem_is_local(const void *ptr) {
  pthread_mutex_lock(&pool_mu);
  int is = ptr && held_at(ptr) >= 0;
  for (int i = 0; ptr && i < ninherited && !is; i++)
    is = inherited[i] == ptr;
  pthread_mutex_unlock(&pool_mu);
  return is;
}

int baton_mem_free_local(void *ptr) {
  if (!ptr)
    return BATON_OK;
  pthread_mutex_lock(&pool_mu);
  int i = held_at(ptr);
  if (i >= 0) {
    block_t *b = &blocks[i];
    b->busy = 0;
    if (free_bytes + b->len > keep_limit()) {
      release(b);
      blocks[i] = blocks[--nblocks];
    } else {
      free_bytes += b->len;
    }
    pthread_mutex_unlock(&pool_mu);
    return BATON_OK;
  }
  pthread_mutex_unlock(&pool_mu);
  return fail(BATON_EINVAL,
              "baton_mem_free_local: %p is not memory that baton_mem_alloc_local returned (or it "
              "was freed already)",
              ptr);
}

int baton__mem_local_find(const void *p, size_t bytes, baton__local_t *out) {
  const char *c = p;
  int found = 0;
  pthread_mutex_lock(&pool_mu);
  for (int i = 0; c && i < nblocks && !found; i++) {
    const block_t *b = &blocks[i];
    if (b->busy && c >= b->base && bytes <= b->bytes && (size_t)(c - b->base) <= b->bytes - bytes) {
      *out = (baton__local_t){
          .seq = b->seq, .off = (uint64_t)(c - b->base), .len = b->len, .ino = b->ino, .fd = b->fd};
      found = 1;
    }
  }
  pthread_mutex_unlock(&pool_mu);
  return found;
}

/* Whether this kernel lets a process take another's descriptor: checked
 * once on this process itself (the permission is the one BATON_CMA's probe
 * checks between the ranks). */
int baton__mem_local_can(void) {
  static int known, can;
  if (__atomic_load_n(&known, __ATOMIC_ACQUIRE))
    return can;
  int pfd = (int)syscall(SYS_pidfd_open, getpid(), 0), got = -1;
  if (pfd >= 0) {
    got = (int)syscall(SYS_pidfd_getfd, pfd, pfd, 0);
    close(pfd);
  }
  if (got >= 0)
    close(got);
  can = got >= 0;
  __atomic_store_n(&known, 1, __ATOMIC_RELEASE);
  return can;
}

static int pidfd_of(baton_comm_t *comm, int rank, int pid, char *why, size_t whylen) {
  if (!comm->pidfds) {
    comm->pidfds = malloc((size_t)comm->size * sizeof *comm->pidfds);
    if (!comm->pidfds) {
      snprintf(why, whylen, "out of memory");
      return -1;
    }
    for (int q = 0; q < comm->size; q++)
      comm->pidfds[q] = -1;
  }
  if (comm->pidfds[rank] < 0) {
    comm->pidfds[rank] = (int)syscall(SYS_pidfd_open, pid, 0);
    if (comm->pidfds[rank] < 0)
      snprintf(why, whylen, "pidfd_open of rank %d (pid %d) failed: %s", rank, pid,
               strerror(errno));
  }
  return comm->pidfds[rank];
}

/* Room for one more mapping of len bytes: past MAPS_MAX blocks or a
 * quarter of the machine's memory mapped, the mappings used longest ago
 * are unmapped first, never one that a call from keep_from on (one not
 * finished) has used; then the table grown if full. */
static struct baton__lmap *map_slot(baton_comm_t *comm, size_t len, uint64_t keep_from) {
  size_t most = keep_limit() * 2;
  while (comm->nlmaps >= MAPS_MAX || comm->lmapped + len > most) {
    int old = -1;
    for (int i = 0; i < comm->nlmaps; i++)
      if (comm->lmaps[i].used < keep_from &&
          (old < 0 || comm->lmaps[i].used < comm->lmaps[old].used))
        old = i;
    if (old < 0)
      break; /* all of them in use */
    munmap(comm->lmaps[old].base, comm->lmaps[old].len);
    comm->lmapped -= comm->lmaps[old].len;
    comm->lmaps[old] = comm->lmaps[--comm->nlmaps];
  }
  if (comm->nlmaps == comm->lmaps_cap) {
    int cap = comm->lmaps_cap ? 2 * comm->lmaps_cap : 8;
    struct baton__lmap *t = realloc(comm->lmaps, (size_t)cap * sizeof *t);
    if (!t)
      return NULL;
    comm->lmaps = t, comm->lmaps_cap = cap;
  }
  return &comm->lmaps[comm->nlmaps++];
}

char *baton__mem_local_peer(baton_comm_t *comm, int rank, int pid, const baton__local_t *b,
                            uint64_t tick, uint64_t keep_from, char *why, size_t whylen) {
  for (int i = 0; i < comm->nlmaps; i++) {
    struct baton__lmap *m = &comm->lmaps[i];
    if (m->rank == rank && m->seq == b->seq) {
      if (m->len != b->len) {
        snprintf(why, whylen,
                 "rank %d shows its local block %llu as %llu bytes, mapped here as %zu", rank,
                 (unsigned long long)b->seq, (unsigned long long)b->len, m->len);
        return NULL;
      }
      m->used = tick > m->used ? tick : m->used;
      return m->base;
    }
  }
  int pfd = pidfd_of(comm, rank, pid, why, whylen);
  if (pfd < 0)
    return NULL;
  int fd = (int)syscall(SYS_pidfd_getfd, pfd, b->fd, 0);
  if (fd < 0) {
    snprintf(why, whylen,
             "pidfd_getfd of rank %d's local block %llu (its descriptor %d) failed: %s", rank,
             (unsigned long long)b->seq, b->fd, strerror(errno));
    return NULL;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || (uint64_t)st.st_ino != b->ino || (uint64_t)st.st_size != b->len) {
    snprintf(why, whylen,
             "rank %d's descriptor %d is not the local block it shows (inode %llu, %llu bytes)",
             rank, b->fd, (unsigned long long)b->ino, (unsigned long long)b->len);
    close(fd);
    return NULL;
  }
  void *p = mmap(NULL, b->len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  int e = errno;
  close(fd);
  if (p == MAP_FAILED) {
    snprintf(why, whylen, "mapping rank %d's local block of %llu bytes failed: %s", rank,
             (unsigned long long)b->len, strerror(e));
    return NULL;
  }
  struct baton__lmap *m = map_slot(comm, b->len, keep_from);
  if (!m) {
    munmap(p, b->len);
    snprintf(why, whylen, "out of memory");
    return NULL;
  }
  baton__prefault_write(p, b->len, 1);
  *m = (struct baton__lmap){.rank = rank, .seq = b->seq, .base = p, .len = b->len, .used = tick};
  comm->lmapped += b->len;
  return p;
}

void baton__mem_local_forget(baton_comm_t *comm) {
  for (int i = 0; i < comm->nlmaps; i++)
    munmap(comm->lmaps[i].base, comm->lmaps[i].len);
  free(comm->lmaps);
  comm->lmaps = NULL;
  comm->nlmaps = comm->lmaps_cap = 0;
  comm->lmapped = 0;
  for (int q = 0; comm->pidfds && q < comm->size; q++)
    if (comm->pidfds[q] >= 0)
      close(comm->pidfds[q]);
  free(comm->pidfds);
  comm->pidfds = NULL;
}
