/*
 * p2p.h - point-to-point messages (p2p.c): baton_send, baton_recv and their
 * i-forms, on connections of their own beside the collectives'.
 */
#ifndef BATON_P2P_H
#define BATON_P2P_H

#include "comm.h"

typedef struct baton__p2p baton__p2p_t;

/* Collective, at the end of a communicator's set-up: the point-to-point
 * connections to every other rank (shared memory inside the host, TCP
 * beyond it, as the collectives' are), and the matching state. */
int baton__p2p_connect(baton_comm_t *comm, char *err, size_t errlen);
/* Stops the progress thread; messages still in flight complete with
 * BATON_EABORTED and are freed. Returns how many there were. */
int baton__p2p_stop(baton_comm_t *comm);
/* Tells the peers, without waiting (async-signal-safe): baton_comm_abort. */
void baton__p2p_shutdown(baton_comm_t *comm, int rc, const char *msg);
/* Frees the connections and the state; after baton__p2p_stop. */
void baton__p2p_free(baton_comm_t *comm);

/* A message of a collective built on the lanes (alltoallv.c), tag -1
 * (messages of one pair and tag match in order, and the ranks make their
 * collectives in one order): a request for baton__p2p_wait, with the
 * thread started when `async`. The caller holds comm->busy and has checked
 * the arguments; BATON_ENOMEM, or OK with *req (perhaps already failed,
 * when point-to-point broke earlier). */
int baton__p2p_submit(baton_comm_t *comm, int sending, void *buf, size_t count, baton_dtype_t dtype,
                      int peer, const char *coll, int async, baton_request_t **req);

/* baton_wait and baton_test of a point-to-point request, and of the
 * messages of one alltoallv (alltoallv.c). */
int baton__p2p_wait(baton_request_t *req);
int baton__p2p_test(baton_request_t *req, int *done);
int baton__group_wait(baton_request_t *req);
int baton__group_test(baton_request_t *req, int *done);

#endif /* BATON_P2P_H */
