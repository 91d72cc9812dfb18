/* shm.h - set-up of the shared-memory transport (see shm.c). */
#ifndef BATON_SHM_H
#define BATON_SHM_H

#include "internal.h"
#include "transport.h"

typedef struct baton__shm baton__shm_t;

/* Collective over the ranks of one host: rank 0 creates the shared memory
 * and publishes its name in the store; the ring `order` decides which
 * channels this rank sends and receives on. */
int baton__shm_setup(baton__store_t *st, int rank, int size, const int *order,
                     const baton__params_t *p, baton__shm_t **out, char *err,
                     size_t errlen);
baton__conn_t *baton__shm_send_conn(baton__shm_t *s);
baton__conn_t *baton__shm_recv_conn(baton__shm_t *s);
/* Returns once all ranks have entered; why names the missing ranks. */
int baton__shm_barrier(baton__shm_t *s, double timeout_s, char *why, size_t whylen);
void baton__shm_destroy(baton__shm_t *s);

#endif /* BATON_SHM_H */
