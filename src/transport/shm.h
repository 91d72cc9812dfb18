/* shm.h - set-up and rendezvous of the shared-memory transport (shm_*.c). */
#ifndef BATON_SHM_H
#define BATON_SHM_H

#include "internal.h"
#include "transport.h"

typedef struct baton__shm baton__shm_t;

/* The rest of the instance is reached only through baton__shm_fabric
 * (transport.h): connections, watch, poison (its check reads it), destroy,
 * and the host's rendezvous with its mailboxes (shm_impl.h). */

/* Collective over the `size` ranks of one host, listed in `local` in
 * ascending order (mailboxes and rendezvous use the index into it): the
 * first creates the shared memory and publishes its name in the store under
 * `key`. This rank gets a send channel to its ring successor `next` and a
 * receive channel from its predecessor `prev` when they are in `local`. */
/* Whether this rank, at set-up, read every other rank of the host's
 * memory through the kernel (process_vm_readv, "cross-memory attach"): the
 * ranks are processes of one PID namespace that may trace each other. Each
 * rank's own finding; a call that relies on it asks every rank (direct's
 * arrival, exec_direct.c). */
int baton__shm_cma(const baton__shm_t *s);
int baton__shm_setup(baton__store_t *st, const char *key, int rank, const int *local, int size,
                     int next, int prev, const baton__params_t *p, baton__shm_t **out, char *err,
                     size_t errlen);
#endif /* BATON_SHM_H */
