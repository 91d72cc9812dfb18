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
/* Unmaps everything (baton__comm_free). */
void baton__mem_free_all(baton_comm_t *comm);

#endif /* BATON_MEM_H */
