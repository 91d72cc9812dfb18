/*
 * p2p.h - point-to-point messages (p2p.c, p2p_lane.c, p2p_progress.c;
 * their shared types in p2p_impl.h): baton_send, baton_recv and their
 * i-forms, on connections of their own beside the collectives'. What the
 * rest of the library calls.
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
/* Frees the connections and the state; after baton__p2p_stop. clean: as
 * the transports' destroy (transport.h). */
void baton__p2p_free(baton_comm_t *comm, int clean);

/* baton_wait, baton_wait_for and baton_test of a point-to-point request. */
/* Drives req until it is done (*done = 1, its status returned, req freed)
 * or baton__now() reaches `until` (*done = 0, BATON_OK): INFINITY waits. */
int baton__p2p_wait_until(baton_request_t *req, double until, int *done);
int baton__p2p_test(baton_request_t *req, int *done);

#endif /* BATON_P2P_H */
