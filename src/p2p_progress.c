/*
 * p2p_progress.c - what moves point-to-point messages and what breaks
 * them: passes over the lanes, the driver that runs them (a waiting caller
 * or the point-to-point thread), timeouts, and the failures that end every
 * message in flight.
 *
 * Progress. The state of every lane is under one lock. Whoever waits drives
 * it: a caller in baton_wait (or a blocking send or recv) runs passes over
 * the lanes itself, so a ping-pong never involves another thread; while
 * messages are in flight and nobody waits (the caller computes, or is in a
 * collective), the communicator's point-to-point thread does, started by
 * the first i-call. A pass never waits (the transports' `ready`); between
 * idle passes the driver spins for BATON_SPIN_US, then sleeps in slices
 * that grow to a millisecond. Every 10 ms of idling the pass also checks
 * that peers live and that nothing was aborted.
 *
 * Failures. A lost or silent peer, a malformed frame, an abort: every
 * message in flight fails with the code, the transports are poisoned so
 * that the peers' messages fail too, and later calls fail at once. A
 * mismatch fails only the two messages.
 */
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>

#include "p2p_impl.h"

/* ------------------------------------------------------------- failures */

void baton__p2p_break(baton__p2p_t *p, int rc, const char *fmt, ...) {
  if (p->fatal)
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(p->fatal_msg, sizeof p->fatal_msg, fmt, ap);
  va_end(ap);
  p->fatal = rc;
  baton__log_warn(COLL, "point-to-point: %s: %s", baton_err_name(rc), p->fatal_msg);
  baton_comm_t *comm = p->comm;
  for (int r = 0; r < comm->size; r++) {
    peer_t *q = &p->peers[r];
    for (p2p_op_t *op = q->sends; op; op = op->next)
      baton__p2p_op_fail(p, op, rc, "%s: %s", baton__p2p_label(op), p->fatal_msg);
    for (p2p_op_t *op = q->recvs; op; op = op->next)
      baton__p2p_op_fail(p, op, rc, "%s: %s", baton__p2p_label(op), p->fatal_msg);
    for (msg_t *m = q->msgs; m; m = m->next)
      if (m->recv)
        baton__p2p_op_fail(p, m->recv, rc, "%s: %s", baton__p2p_label(m->recv), p->fatal_msg);
  }
  char msg[BATON__ERRLEN];
  snprintf(msg, sizeof msg, "rank %d: %.400s", comm->rank, p->fatal_msg);
  for (int i = 0; i < p->nnet; i++)
    p->net[i].ops->poison(p->net[i].impl, rc, msg);
}

/* ------------------------------------------------------------- passes */

/* Whether this rank waits for anything of q's: then a deep pass checks
 * that q lives. */
static int waits_on(const peer_t *q) {
  if (q->sends || q->recvs)
    return 1;
  for (const msg_t *m = q->msgs; m; m = m->next)
    if (m->recv)
      return 1;
  return 0;
}

/* Whether q's lane has frames this rank wants to send, or bytes still to
 * leave: then a sleeper waits for room on it too. */
static int to_push(const peer_t *q) {
  if (q->ctrl.n || q->dirty || q->raw_op)
    return 1;
  for (const p2p_op_t *op = q->sends; op; op = op->next)
    if (op->state == S_HDR || op->state == S_STREAM)
      return 1;
  return 0;
}

int baton__p2p_watch(baton__p2p_t *p) {
  baton_comm_t *comm = p->comm;
  if (atomic_load_explicit(&comm->abort_requested, memory_order_acquire)) {
    baton__p2p_break(p, BATON_EABORTED, "baton_comm_abort was called on rank %d", comm->rank);
    return BATON_EABORTED;
  }
  int rc = atomic_load_explicit(&comm->fatal_rc, memory_order_acquire);
  if (rc) {
    baton__p2p_break(p, rc, "the communicator failed: %.400s", comm->fatal_msg);
    return rc;
  }
  char why[BATON__ERRLEN];
  if (comm->from_split && (rc = baton__family_check(comm, why, sizeof why)) != 0)
    baton__p2p_break(p, rc, "%s", why);
  return rc;
}

/* Gives up on ops that have waited past BATON_TIMEOUT. */
static void timeouts(baton__p2p_t *p, double now) {
  for (int r = 0; r < p->comm->size && !p->fatal; r++) {
    peer_t *q = &p->peers[r];
    p2p_op_t *late = NULL;
    for (p2p_op_t *op = q->sends; op && !late; op = op->next)
      late = op->state != OP_DONE && now - op->last > p->timeout_s ? op : NULL;
    for (p2p_op_t *op = q->recvs; op && !late; op = op->next)
      late = now - op->last > p->timeout_s ? op : NULL;
    for (msg_t *m = q->msgs; m && !late; m = m->next)
      late = m->recv && now - m->recv->last > p->timeout_s ? m->recv : NULL;
    if (late)
      baton__p2p_break(p, BATON_ETIMEDOUT, "%s, %zu elements: rank %d %s for %.3g s",
                       baton__p2p_label(late), late->count, r,
                       late->sending ? (late->moved ? "took no more of it" : "did not receive it")
                                     : "sent nothing for it",
                       p->timeout_s);
  }
}

int baton__p2p_pass(baton__p2p_t *p, int deep, double now) {
  if (p->fatal)
    return 0;
  if (deep && baton__p2p_watch(p))
    return 1;
  int moved = 0, dirty = 0;
  for (int r = 0; r < p->comm->size && !p->fatal; r++) {
    peer_t *q = &p->peers[r];
    if (!q->in)
      continue;
    /* Every incoming lane, asked for or not: a message taken off it (kept
     * until a receive matches it) keeps the lane from filling up. */
    int rc = baton__p2p_pull_lane(p, r, deep && waits_on(q), now);
    if (rc < 0) {
      if (!p->fatal)
        baton__p2p_break(p, rc, "%s", q->in->why);
      break;
    }
    moved += rc;
    if (q->sends || q->ctrl.n || q->dirty) {
      if ((rc = baton__p2p_push_lane(p, q, deep, now)) < 0) {
        if (!p->fatal)
          baton__p2p_break(p, rc, "%s", q->out->why);
        break;
      }
      moved += rc;
    }
    dirty += q->dirty;
  }
  p->dirty = p->fatal ? 0 : dirty;
  if (deep)
    timeouts(p, now);
  return moved;
}

/* ------------------------------------------------------------ driving */

/* Sleeps without the lock until a lane this rank waits on can move:
 * shared-memory lanes on their futexes (the peers' commits wake them;
 * several at once with futex_waitv, else for `s` seconds); sockets in
 * ppoll, up to the next deep pass; a mix of the two for `s` seconds. */
static void nap(baton__p2p_t *p, double s) {
  int n = 0, shm_busy = 0, nl = 0, armable = 1;
  /* Each sleeper its own: the thread and waiters sleep at once. */
  struct pollfd pfd[2 * p->comm->size];
  baton__conn_t *lane[2 * p->comm->size];
  int sending[2 * p->comm->size];
  for (int r = 0; r < p->comm->size; r++) {
    peer_t *q = &p->peers[r];
    if (q->in && waits_on(q))
      lane[nl] = q->in, sending[nl++] = 0, armable &= q->in->ops->arm != NULL;
    if (q->in && to_push(q))
      lane[nl] = q->out, sending[nl++] = 1, armable &= q->out->ops->arm != NULL;
  }
  /* Shared-memory lanes only: sleep where their peers wake this rank the
   * moment one moves (the futex of each, or all of them at once), not for
   * a fixed time. */
  if (nl > 0 && armable) {
    baton__sleep_t z[nl];
    for (int i = 0; i < nl; i++)
      if (lane[i]->ops->arm(lane[i], sending[i], &z[i]))
        return; /* it moved meanwhile */
    pthread_mutex_unlock(&p->mu);
    if (nl == 1)
      lane[0]->ops->sleep(&z[0], 0.01);
    else if (lane[0]->ops->sleep_many(z, nl, 0.01) != 0) {
      struct timespec ts = {0, (long)(s * 1e9)};
      nanosleep(&ts, NULL);
    }
    pthread_mutex_lock(&p->mu);
    return;
  }
  for (int r = 0; r < p->comm->size; r++) {
    peer_t *q = &p->peers[r];
    if (!q->in)
      continue;
    short ev_in = 0, ev_out = 0;
    int fin = q->in->ops->poll_fd ? q->in->ops->poll_fd(q->in, &ev_in) : -1;
    int fout = q->out->ops->poll_fd ? q->out->ops->poll_fd(q->out, &ev_out) : -1;
    int busy = waits_on(q) || q->ctrl.n || q->dirty;
    if (fin < 0 || fout < 0) {
      shm_busy |= busy;
      continue;
    }
    pfd[n++] = (struct pollfd){fin, ev_in, 0};
    if (q->sends || q->ctrl.n || q->dirty)
      pfd[n++] = (struct pollfd){fout, (short)(ev_out | POLLOUT), 0};
  }
  if (!shm_busy && n > 0)
    s = 0.01;
  struct timespec ts = {0, (long)(s * 1e9)};
  pthread_mutex_unlock(&p->mu);
  if (n > 0)
    ppoll(pfd, (nfds_t)n, &ts, NULL);
  else
    nanosleep(&ts, NULL);
  pthread_mutex_lock(&p->mu);
}

void baton__p2p_drive(baton__p2p_t *p, const p2p_op_t *op, double until) {
  double now = baton__now(), idle_since = now, backoff = 10e-6;
  /* A waiter also sends what it owes before it leaves: the ACK of the
   * receive it matched is what its peer's send waits for. The clock is
   * read every 16th pass: at 25 ns a read it was a third of a spinning
   * waiter's time. */
  for (unsigned k = 1; op ? (op->state != OP_DONE || (p->owed && !p->fatal)) && now < until
                          : (p->pending > 0 || p->dirty || p->owed) && !p->waiters && !p->stop;
       k++) {
    if (k % 16 == 0)
      now = baton__now();
    int deep = now - p->last_deep > 0.01;
    if (deep)
      p->last_deep = now;
    int moved = baton__p2p_pass(p, deep, now);
    if (moved || p->fatal) {
      idle_since = now, backoff = 10e-6;
      continue;
    }
    if (now - idle_since < (op ? p->wait_spin_s : p->spin_s)) {
      /* Past BATON_SPIN_US a waiter polls between yields: alone on its
       * core it loses nothing, and a peer that shares the core (another
       * process took the other) runs at once instead of after the spin. */
      if (p->oversubscribed || now - idle_since >= p->spin_s) {
        pthread_mutex_unlock(&p->mu);
        sched_yield();
        pthread_mutex_lock(&p->mu);
      }
      continue;
    }
    nap(p, backoff);
    backoff = backoff < 1e-3 ? backoff * 2 : 1e-3;
    now = baton__now();
  }
}

static void *thread_main(void *arg) {
  baton__p2p_t *p = arg;
  baton__log_rank = p->comm->rank;
  pthread_setname_np(pthread_self(), "baton-p2p");
  pthread_mutex_lock(&p->mu);
  while (!p->stop) {
    if ((p->pending == 0 && !p->dirty && !p->owed) || p->waiters)
      pthread_cond_wait(&p->work, &p->mu);
    else
      baton__p2p_drive(p, NULL, INFINITY);
  }
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

int baton__p2p_start_thread(baton__p2p_t *p) {
  if (p->has_thread)
    return 0;
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int rc = pthread_create(&p->thread, NULL, thread_main, p);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc)
    return BATON_ESYS;
  p->has_thread = 1;
  baton__log_info(INIT, "point-to-point thread started for the messages in flight");
  return 0;
}
