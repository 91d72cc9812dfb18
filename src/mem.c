/*
 * mem.c - registered memory (baton_mem_alloc): buffers that every rank of a
 * host maps, so that the direct algorithm (coll/direct.c, exec_direct.c)
 * reads the peers' inputs and writes their outputs where they lie, with no
 * staging copy through the shared segment.
 *
 * An allocation is collective over a communicator whose ranks share one
 * host. Each rank creates a shared-memory file of its own size, faults its
 * pages in (MAP_POPULATE: a first touch must never happen in a collective),
 * and shows the file's name in its mailbox; at the host's rendezvous every
 * rank maps every other rank's file, and at a second one, once all have,
 * each unlinks its own, so nothing is left behind if the job is killed.
 * Allocations are numbered in the order they are made, the same on every
 * rank; a call's buffers are named to the peers by that number and an
 * offset (exec_direct.c).
 *
 * A free is local: it unmaps this rank's own memory, while its mappings of
 * the peers' buffers of that number stay until every rank has freed its
 * own. The ranks say which numbers they have freed at the next allocation
 * (and a communicator's destruction unmaps the peers' memory), so a peer's
 * buffer that a rank still shows is always mapped by every other rank.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "comm.h"
#include "mem.h"

struct baton__region {
  uint32_t id;      /* 1 + its number among the communicator's allocations */
  int mine;         /* this rank's own memory is still mapped (not freed) */
  char *base;       /* this rank's own memory */
  size_t bytes;     /* as asked */
  char **peer;      /* per rank: its memory of this number, mapped here; NULL: none */
  size_t *peer_len; /* and its bytes */
  size_t *map_len;  /* the mapped length (pages) of each, for munmap */
};

/* What a rank shows in its mailbox at an allocation's two rendezvous. */
#define FREED_MAX 64
typedef struct {
  int32_t rc;     /* BATON_OK, or why this rank failed */
  uint32_t id;    /* the allocation's number, the same on every rank */
  uint64_t bytes; /* this rank's size */
  char name[48];  /* its shared-memory file */
  char why[160];  /* when rc != 0 */
  uint32_t nfreed;
  uint32_t freed[FREED_MAX]; /* numbers this rank freed whose peers are still mapped */
} mem_msg_t;
_Static_assert(sizeof(mem_msg_t) <= BATON__SHOW_BYTES, "a mailbox holds an allocation's message");

size_t baton__page_up(size_t n) {
  size_t pg = (size_t)sysconf(_SC_PAGESIZE);
  return (n + pg - 1) / pg * pg;
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

/* Every page of a new mapping, ready to be written without a fault or a
 * trap in a collective. MAP_POPULATE maps a shared file's pages for
 * reading only, so MADV_POPULATE_WRITE maps them for writing; and on
 * virtual machines with shadow page tables (this project's: the first
 * store through a mapping to each page still cost 5 us, 170 ms for 128
 * MiB, after both) the first store to each page traps too, so each page
 * is written once here, with what it holds. A plain store is safe while
 * nobody can have written the page (new memory, whose owner writes it
 * only once the allocation has returned); `live` memory, which its owner
 * may be writing (mem_local.c's peers' blocks), gets an atomic add of 0,
 * which is a write to the page and changes nothing. */
void baton__prefault_write(char *p, size_t len, int live) {
  (void)madvise(p, len, MADV_POPULATE_WRITE); /* Linux 5.14; else the stores fault */
  size_t pg = (size_t)sysconf(_SC_PAGESIZE);
  for (size_t off = 0; off < len; off += pg) {
    if (live) {
      (void)__atomic_fetch_add((uint64_t *)(void *)(p + off), 0, __ATOMIC_RELAXED);
    } else {
      volatile char *b = p + off;
      *b = *b;
    }
  }
}

static void region_unmap(baton_comm_t *comm, baton__region_t *r) {
  for (int q = 0; r->peer && q < comm->size; q++)
    if (r->peer[q] && q != comm->rank)
      munmap(r->peer[q], r->map_len[q]);
  if (r->mine && r->base)
    munmap(r->base, baton__page_up(r->bytes));
  free(r->peer);
  free(r->peer_len);
  free(r->map_len);
  memset(r, 0, sizeof *r);
}

/* The communicator's end: the peers' memory is unmapped, this rank's own
 * that was not freed stays mapped, as plain memory, for the arrays a
 * caller still holds (Python's comm.empty) until the process exits. */
void baton__mem_free_all(baton_comm_t *comm) {
  for (int i = 0; i < comm->nregions; i++)
    if (comm->regions[i].id) {
      comm->regions[i].mine = 0;
      region_unmap(comm, &comm->regions[i]);
    }
  free(comm->regions);
  comm->regions = NULL;
  comm->nregions = 0;
  baton__mem_local_forget(comm);
}

/* An empty slot of the table, grown when full. */
static baton__region_t *region_new(baton_comm_t *comm) {
  for (int i = 0; i < comm->nregions; i++)
    if (!comm->regions[i].id)
      return &comm->regions[i];
  int n = comm->nregions ? 2 * comm->nregions : 4;
  baton__region_t *t = realloc(comm->regions, (size_t)n * sizeof *t);
  if (!t)
    return NULL;
  memset(t + comm->nregions, 0, (size_t)(n - comm->nregions) * sizeof *t);
  comm->regions = t;
  baton__region_t *r = &t[comm->nregions];
  comm->nregions = n;
  return r;
}

static baton__region_t *region_by_id(const baton_comm_t *comm, uint32_t id) {
  for (int i = 0; id && i < comm->nregions; i++)
    if (comm->regions[i].id == id)
      return &comm->regions[i];
  return NULL;
}

int baton__mem_find(const baton_comm_t *comm, const void *p, size_t bytes, uint32_t *id,
                    size_t *off) {
  const char *c = p;
  for (int i = 0; c && i < comm->nregions; i++) {
    const baton__region_t *r = &comm->regions[i];
    if (r->id && r->mine && c >= r->base && bytes <= r->bytes &&
        (size_t)(c - r->base) <= r->bytes - bytes) {
      *id = r->id;
      *off = (size_t)(c - r->base);
      return 1;
    }
  }
  return 0;
}

char *baton__mem_peer(const baton_comm_t *comm, int rank, uint32_t id, size_t *bytes) {
  const baton__region_t *r = region_by_id(comm, id);
  if (!r || !r->peer || !r->peer[rank])
    return NULL;
  *bytes = r->peer_len[rank];
  return r->peer[rank];
}

/* ---- Allocation */

static mem_msg_t *msg_of(baton_comm_t *comm, int rank, uint32_t rendezvous) {
  const baton__net_t *host = comm->host_net;
  return host->ops->mailbox(host->impl, rank, rendezvous);
}

/* The numbers this rank freed and still maps from its peers: what its
 * message says, to be unmapped once every rank says the same. */
static void freed_list(baton_comm_t *comm, mem_msg_t *m) {
  m->nfreed = 0;
  for (int i = 0; i < comm->nregions && m->nfreed < FREED_MAX; i++)
    if (comm->regions[i].id && !comm->regions[i].mine)
      m->freed[m->nfreed++] = comm->regions[i].id;
}

static int lists(const mem_msg_t *m, uint32_t id) {
  for (uint32_t k = 0; k < m->nfreed && k < FREED_MAX; k++)
    if (m->freed[k] == id)
      return 1;
  return 0;
}

/* After the first rendezvous: numbers every rank has freed are unmapped. */
static void reclaim(baton_comm_t *comm, uint32_t rendezvous) {
  for (int i = 0; i < comm->nregions; i++) {
    baton__region_t *r = &comm->regions[i];
    if (!r->id || r->mine)
      continue;
    int all = 1;
    for (int q = 0; q < comm->size && all; q++)
      all = lists(msg_of(comm, q, rendezvous), r->id);
    if (all)
      region_unmap(comm, r);
  }
}

static int map_peer(baton__region_t *r, int q, const mem_msg_t *m, char *why, size_t whylen) {
  char name[sizeof m->name];
  memcpy(name, m->name, sizeof name);
  name[sizeof name - 1] = '\0';
  int fd = shm_open(name, O_RDWR, 0);
  if (fd < 0) {
    snprintf(why, whylen, "shm_open(%s) of rank %d's memory failed: %s", name, q, strerror(errno));
    return BATON_ESYS;
  }
  struct stat st;
  size_t len = baton__page_up((size_t)m->bytes);
  if (fstat(fd, &st) != 0 || (size_t)st.st_size != len) {
    snprintf(why, whylen, "rank %d's memory %s has %lld bytes, its message says %zu", q, name,
             (long long)st.st_size, len);
    close(fd);
    return BATON_EPROTO;
  }
  void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  close(fd);
  if (p == MAP_FAILED) {
    snprintf(why, whylen, "mapping rank %d's %zu bytes failed: %s", q, len, strerror(errno));
    return BATON_ESYS;
  }
  baton__prefault_write(p, len, 0);
  r->peer[q] = p;
  r->peer_len[q] = (size_t)m->bytes;
  r->map_len[q] = len;
  return 0;
}

/* This rank's own memory: a shared-memory file (named in *name), or
 * anonymous memory when no peer maps it. */
static int map_own(baton_comm_t *comm, baton__region_t *r, int shared, char *name, size_t namelen,
                   char *why, size_t whylen) {
  size_t len = baton__page_up(r->bytes);
  if (!shared) {
    void *p =
        mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (p == MAP_FAILED) {
      snprintf(why, whylen, "mmap of %zu bytes failed: %s", len, strerror(errno));
      return BATON_ENOMEM;
    }
    r->base = p;
    return 0;
  }
  snprintf(name, namelen, "/baton-mem-%d-%llx-%u", (int)getpid(), (unsigned long long)comm->id,
           r->id);
  int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0) {
    snprintf(why, whylen, "shm_open(%s) failed: %s", name, strerror(errno));
    return BATON_ESYS;
  }
  int rc = 0;
  void *p = MAP_FAILED;
  if (ftruncate(fd, (off_t)len) != 0) {
    snprintf(why, whylen, "sizing %s to %zu bytes failed: %s (is /dev/shm full?)", name, len,
             strerror(errno));
    rc = BATON_ENOMEM;
  } else if ((p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0)) ==
             MAP_FAILED) {
    snprintf(why, whylen, "mmap of %zu bytes of %s failed: %s", len, name, strerror(errno));
    rc = BATON_ENOMEM;
  }
  close(fd);
  if (rc) {
    shm_unlink(name);
    name[0] = '\0';
    return rc;
  }
  baton__prefault_write(p, len, 0);
  r->base = p;
  return 0;
}

/* One of the allocation's rendezvous, its number taken by the caller. */
static int meet(baton_comm_t *comm, uint32_t rendezvous, const baton__sig_t *sig) {
  const baton__net_t *host = comm->host_net;
  char why[BATON__ERRLEN];
  int rc = host->ops->arrive(host->impl, rendezvous, sig, comm->params.timeout_s, why, sizeof why);
  return rc ? baton__fail(comm, rc, "baton_mem_alloc: %s", why) : 0;
}

/* The first rank whose message failed, or -1. */
static int failed_rank(baton_comm_t *comm, uint32_t rendezvous) {
  for (int q = 0; q < comm->size; q++)
    if (msg_of(comm, q, rendezvous)->rc)
      return q;
  return -1;
}

/* A failure every rank of the allocation agrees on (the system's answer
 * to one of them): the communicator goes on, only this call failed. */
static int refuse(baton_comm_t *comm, int rc, int rank, const char *why) {
  baton__set_error(comm, "baton_mem_alloc: rank %d: %s", rank, why);
  baton__log_warn(COLL, "%s: %s", baton_err_name(rc), baton_comm_last_error(comm));
  return rc;
}

static int fail_from(baton_comm_t *comm, uint32_t rendezvous, int q) {
  mem_msg_t *m = msg_of(comm, q, rendezvous);
  char why[sizeof m->why];
  memcpy(why, m->why, sizeof why);
  why[sizeof why - 1] = '\0';
  return refuse(comm, m->rc, q, why);
}

int baton_mem_alloc(baton_comm_t *comm, size_t bytes, void **ptr) {
  if (!comm || !ptr)
    return BATON_EINVAL;
  *ptr = NULL;
  if (bytes == 0)
    return baton__fail(comm, BATON_EINVAL, "baton_mem_alloc: bytes is 0");
  if (comm->live_first)
    return baton__fail(comm, BATON_EUSAGE,
                       "baton_mem_alloc: requests are in flight on the communicator; an "
                       "allocation is collective and must come between calls");
  int shared = comm->one_host && comm->host_net && comm->size > 1;
  baton__region_t *r = region_new(comm);
  if (!r)
    return baton__fail(comm, BATON_ENOMEM, "baton_mem_alloc: out of memory");
  r->id = ++comm->mem_allocs;
  r->bytes = bytes;
  r->mine = 1;
  char name[sizeof((mem_msg_t *)0)->name] = "", why[160] = "";
  int rc = map_own(comm, r, shared, name, sizeof name, why, sizeof why);
  if (!shared) { /* local: nobody else maps it, and calls on it are staged */
    if (rc) {
      r->mine = 0, r->base = NULL;
      region_unmap(comm, r);
      comm->mem_allocs--;
      return refuse(comm, rc, comm->rank, why);
    }
    *ptr = r->base;
    return 0;
  }
  if (!rc) {
    r->peer = calloc((size_t)comm->size, sizeof *r->peer);
    r->peer_len = calloc((size_t)comm->size, sizeof *r->peer_len);
    r->map_len = calloc((size_t)comm->size, sizeof *r->map_len);
    if (!r->peer || !r->peer_len || !r->map_len) {
      rc = BATON_ENOMEM;
      snprintf(why, sizeof why, "out of memory");
    } else {
      r->peer[comm->rank] = r->base;
      r->peer_len[comm->rank] = bytes;
    }
  }
  if (rc && r->base) {
    munmap(r->base, baton__page_up(bytes));
    r->base = NULL;
  }
  /* The allocation's signature: a number of the communicator's calls, so
   * that a rank in another call meets a mismatch, not this message. */
  baton__sig_t sig = {
      .seq = ++comm->seq, .count = UINT64_MAX, .root = -1, .coll = BATON__COLL_BARRIER};
  uint32_t first = ++comm->shm_calls, second = ++comm->shm_calls;
  mem_msg_t *m = msg_of(comm, comm->rank, first);
  memset(m, 0, sizeof *m);
  m->rc = rc, m->id = r->id, m->bytes = bytes;
  snprintf(m->name, sizeof m->name, "%s", name);
  snprintf(m->why, sizeof m->why, "%s", why);
  freed_list(comm, m);
  int met = meet(comm, first, &sig);
  for (int q = 0; !met && q < comm->size; q++) {
    mem_msg_t *theirs = msg_of(comm, q, first);
    if (q == comm->rank || theirs->rc || rc)
      continue;
    if (theirs->id != r->id) {
      rc = BATON_EPROTO;
      snprintf(why, sizeof why, "rank %d allocates number %u, this rank number %u", q, theirs->id,
               r->id);
    } else {
      rc = map_peer(r, q, theirs, why, sizeof why);
    }
  }
  /* Read now: once past the second rendezvous, a rank may already write
   * its next message where this one was. */
  int bad_first = met ? -1 : failed_rank(comm, first);
  char why_first[sizeof m->why] = "";
  int rc_first = 0;
  if (bad_first >= 0) {
    mem_msg_t *b = msg_of(comm, bad_first, first);
    rc_first = b->rc;
    memcpy(why_first, b->why, sizeof why_first - 1);
  }
  if (!met)
    reclaim(comm, first);
  m = msg_of(comm, comm->rank, second);
  memset(m, 0, sizeof *m);
  m->rc = rc;
  snprintf(m->why, sizeof m->why, "%s", why);
  if (!met)
    met = meet(comm, second, &sig);
  if (name[0]) /* every rank has mapped it, or failed: nobody opens it again */
    shm_unlink(name);
  /* Every rank sees every rank's two messages: all fail together, with
   * the first failure's reason. */
  int bad_second = met || bad_first >= 0 ? -1 : failed_rank(comm, second);
  if (met || bad_first >= 0 || bad_second >= 0) {
    int ret = met              ? met
              : bad_first >= 0 ? refuse(comm, rc_first, bad_first, why_first)
                               : fail_from(comm, second, bad_second);
    region_unmap(comm, r); /* its number stays taken, on every rank */
    return ret;
  }
  comm->mem_gen++;
  *ptr = r->base;
  return 0;
}

int baton_mem_free(baton_comm_t *comm, void *ptr) {
  if (!comm)
    return BATON_EINVAL;
  if (!ptr)
    return 0;
  for (int i = 0; i < comm->nregions; i++) {
    baton__region_t *r = &comm->regions[i];
    if (!r->id || !r->mine || r->base != ptr)
      continue;
    if (comm->live_first)
      return baton__fail(comm, BATON_EUSAGE,
                         "baton_mem_free: requests are in flight on the communicator; free "
                         "registered memory once they have completed");
    munmap(r->base, baton__page_up(r->bytes));
    r->mine = 0;
    r->base = NULL;
    if (r->peer)
      r->peer[comm->rank] = NULL;
    if (!r->peer) /* local memory: nothing of a peer to keep */
      region_unmap(comm, r);
    return 0;
  }
  return baton__fail(comm, BATON_EINVAL,
                     "baton_mem_free: %p is not memory that baton_mem_alloc returned on this "
                     "communicator (or it was freed already)",
                     ptr);
}
