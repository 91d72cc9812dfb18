/* mem.h - registered memory (mem.c): this rank's own, and its mappings of
 * the peers' memory of the same allocation. */
#ifndef BATON_MEM_H
#define BATON_MEM_H

#include <stddef.h>
#include <stdint.h>

#include "baton.h"

typedef struct baton__region baton__region_t;

/* Whether [p, p + bytes) lies in this rank's registered memory that peers
 * map: its allocation's number (*id, from 1) and offset. */
int baton__mem_find(const baton_comm_t *comm, const void *p, size_t bytes, uint32_t *id,
                    size_t *off);
/* Rank `rank`'s memory of allocation `id`, mapped here, and its bytes;
 * NULL when this rank maps none. */
char *baton__mem_peer(const baton_comm_t *comm, int rank, uint32_t id, size_t *bytes);
/* Writes every page of a new mapping once (mem.c); `live`: its owner may
 * be writing it, so each write is an atomic add of 0. */
void baton__prefault_write(char *p, size_t len, int live);
/* n rounded up to whole pages. */
size_t baton__page_up(size_t n);

/* What a rank shows of a buffer in local memory (mem_local.c): its block's
 * number in its process, the offset in it, the block's mapped bytes and
 * inode, and the block's file descriptor there. */
typedef struct {
  uint64_t seq, off, len, ino;
  int32_t fd, pad;
} baton__local_t;
/* Whether [p, p + bytes) lies in one local block of this process. */
int baton__mem_local_find(const void *p, size_t bytes, baton__local_t *out);
/* Whether this kernel lets a process take another's file descriptor. */
int baton__mem_local_can(void);
/* Rank `rank`'s (process `pid`) block *b, mapped here for call number
 * `tick`: its base, mapped the first time a call uses it and kept; NULL
 * and why when it cannot be. No mapping that a call numbered keep_from or
 * later has used is given up to make room. */
char *baton__mem_local_peer(baton_comm_t *comm, int rank, int pid, const baton__local_t *b,
                            uint64_t tick, uint64_t keep_from, char *why, size_t whylen);
/* Unmaps the peers' blocks and closes their pidfds (baton__comm_free). */
void baton__mem_local_forget(baton_comm_t *comm);
/* Unmaps everything (baton__comm_free). */
void baton__mem_free_all(baton_comm_t *comm);

#endif /* BATON_MEM_H */
