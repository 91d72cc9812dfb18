/* shm.h - set-up and rendezvous of the shared-memory transport (shm_*.c). */
#ifndef BATON_SHM_H
#define BATON_SHM_H

#include "internal.h"
#include "transport.h"

typedef struct baton__shm baton__shm_t;

/* The rest of the instance is reached through baton__shm_fabric
 * (transport.h): connections, watch, poison (its check reads it), destroy.
 * The rendezvous below is in the table too; these names stay for the
 * callers that use them directly (coll.c, coll/flat.c). */

/* Collective over the `size` ranks of one host, listed in `local` in
 * ascending order (mailboxes and rendezvous use the index into it): the
 * first creates the shared memory and publishes its name in the store under
 * `key`. This rank gets a send channel to its ring successor `next` and a
 * receive channel from its predecessor `prev` when they are in `local`. */
int baton__shm_setup(baton__store_t *st, const char *key, int rank, const int *local, int size,
                     int next, int prev, const baton__params_t *p, baton__shm_t **out, char *err,
                     size_t errlen);
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

#endif /* BATON_SHM_H */
