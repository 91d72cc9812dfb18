/*
 * p2p.c - point-to-point messages: baton_send, baton_recv, baton_isend,
 * baton_irecv, their requests' wait and test, and the set-up and teardown
 * of their connections. The frames and matching are p2p_lane.c's, the
 * passes, the thread and the failures p2p_progress.c's (the overview of
 * each is at its top), the types p2p_impl.h's.
 *
 * Connections. Every communicator has, beside the collectives', one lane
 * each way between every pair of ranks: a pair channel of a shared-memory
 * segment of its own inside a host, a TCP connection of its own between
 * hosts (the transports' own set-up, under other store keys). So messages
 * never queue behind a collective's, nor a collective behind them, and the
 * two may run in different threads.
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "call.h"
#include "p2p_impl.h"

/* ---------------------------------------------------------------- calls */

static int check_args(baton_comm_t *comm, const char *name, const void *buf, size_t count,
                      baton_dtype_t dtype, int peer, int tag) {
  size_t elsize = baton_dtype_size(dtype);
  if (elsize == 0)
    return baton__fail(comm, BATON_EINVAL, "%s: unknown dtype %d", name, (int)dtype);
  if (peer < 0 || peer >= comm->size)
    return baton__fail(comm, BATON_EINVAL, "%s: peer %d is outside [0, %d)", name, peer,
                       comm->size);
  if (peer == comm->rank)
    return baton__fail(comm, BATON_EINVAL, "%s: peer %d is this rank; a rank cannot message itself",
                       name, peer);
  if (tag < 0)
    return baton__fail(comm, BATON_EINVAL, "%s: tag %d is negative; tags are >= 0", name, tag);
  if (count > SIZE_MAX / elsize)
    return baton__fail(comm, BATON_EINVAL, "%s: count %zu of %s overflows", name, count,
                       baton_dtype_name(dtype));
  if (count && !buf)
    return baton__fail(comm, BATON_EINVAL, "%s: the buffer is NULL for %zu elements", name, count);
  return 0;
}

/* A new message in its lane's queue (a receive matched at once when its
 * message is there); with `async`, the thread is started to move it. NULL
 * when out of memory. The caller holds comm->busy. */
static p2p_op_t *submit(baton__p2p_t *p, int sending, void *buf, size_t count, baton_dtype_t dtype,
                        int peer, int tag, int async) {
  p2p_op_t *op = calloc(1, sizeof *op);
  if (!op)
    return NULL;
  *op = (p2p_op_t){.kind = BATON__REQ_P2P,
                   .comm = p->comm,
                   .sending = sending,
                   .peer = peer,
                   .tag = tag,
                   .state = sending ? S_HDR : R_POSTED,
                   .buf = buf,
                   .count = count,
                   .bytes = count * baton_dtype_size(dtype),
                   .dtype = dtype,
                   .last = baton__now()};
  pthread_mutex_lock(&p->mu);
  p->pending++;
  int rc = p->fatal ? p->fatal : baton__p2p_watch(p);
  if (rc) {
    baton__p2p_op_fail(p, op, rc, "%s: point-to-point failed earlier: %s", baton__p2p_label(op),
                       p->fatal_msg);
  } else {
    peer_t *q = &p->peers[peer];
    if (sending)
      op->id = q->next_send++;
    p2p_op_t **tail = sending ? &q->sends : &q->recvs;
    int matched = 0;
    for (msg_t *m = q->msgs; !sending && m; m = m->next)
      if (!m->recv && !m->discard && m->tag == tag) {
        if (baton__p2p_match(p, q, op, m, op->last))
          baton__p2p_break(p, BATON_ENOMEM, "out of memory for a frame to rank %d", peer);
        matched = 1;
        break;
      }
    if (!matched) {
      while (*tail)
        tail = &(*tail)->next;
      *tail = op;
    }
    if (async && p->pending > 0 && (rc = baton__p2p_start_thread(p)) == 0)
      pthread_cond_signal(&p->work);
    if (rc)
      baton__p2p_break(p, rc, "%s: cannot start the point-to-point thread", baton__p2p_label(op));
  }
  pthread_mutex_unlock(&p->mu);
  return op;
}

/* Posts a message; with req NULL, waits for it too. */
static int post(baton_comm_t *comm, int sending, void *buf, size_t count, baton_dtype_t dtype,
                int peer, int tag, baton_request_t **req) {
  const char *name =
      sending ? (req ? "baton_isend" : "baton_send") : (req ? "baton_irecv" : "baton_recv");
  if (req)
    *req = NULL;
  if (!comm)
    return BATON_EINVAL;
  int rc = check_args(comm, name, buf, count, dtype, peer, tag);
  if (rc)
    return rc;
  baton__p2p_t *p = comm->p2p;
  if (!p)
    return baton__fail(comm, BATON_EUSAGE, "%s: point-to-point is not set up", name);
  int idle = 0;
  if (!atomic_compare_exchange_strong(&comm->busy, &idle, 1))
    return baton__fail(comm, BATON_EUSAGE,
                       "%s: another thread is in a call on this communicator; calls on one "
                       "communicator must come from one thread at a time",
                       name);
  p2p_op_t *op = submit(p, sending, buf, count, dtype, peer, tag, req != NULL);
  if (!op) {
    atomic_store(&comm->busy, 0);
    return baton__fail(comm, BATON_ENOMEM, "%s: out of memory", name);
  }
  if (req) {
    *req = (baton_request_t *)op;
    atomic_store(&comm->busy, 0);
    return BATON_OK;
  }
  int done;
  rc = baton__p2p_wait_until((baton_request_t *)op, INFINITY, &done);
  atomic_store(&comm->busy, 0);
  return rc;
}

int baton_send(const void *buf, size_t count, baton_dtype_t dtype, int peer, int tag,
               baton_comm_t *comm) {
  return post(comm, 1, (void *)buf, count, dtype, peer, tag, NULL);
}

int baton_recv(void *buf, size_t count, baton_dtype_t dtype, int peer, int tag,
               baton_comm_t *comm) {
  return post(comm, 0, buf, count, dtype, peer, tag, NULL);
}

int baton_isend(const void *buf, size_t count, baton_dtype_t dtype, int peer, int tag,
                baton_comm_t *comm, baton_request_t **req) {
  if (!req)
    return BATON_EINVAL;
  return post(comm, 1, (void *)buf, count, dtype, peer, tag, req);
}

int baton_irecv(void *buf, size_t count, baton_dtype_t dtype, int peer, int tag, baton_comm_t *comm,
                baton_request_t **req) {
  if (!req)
    return BATON_EINVAL;
  return post(comm, 0, buf, count, dtype, peer, tag, req);
}

/* The op's status, its error in the communicator's last error; frees it. */
static int retire(p2p_op_t *op) {
  int rc = op->status;
  if (rc) {
    baton__set_error(op->comm, "%s", op->why);
    baton__log_warn(COLL, "%s: %s", baton_err_name(rc), op->why);
  }
  free(op);
  return rc;
}

/* After a caller's pass: bytes still to leave (an ACK this rank owes, a
 * blocking call's last ACK behind a full socket) or messages in flight
 * become the thread's, which is woken for them. Messages in flight are the
 * thread's only when it runs already (i-forms start it): a program of
 * blocking calls waits for its messages one after the other in this
 * thread, and a thread started between them would only contend with it.
 * Called with p->mu held. */
static void hand_over(baton__p2p_t *p) {
  if ((p->pending > 0 || p->dirty || p->owed) && baton__p2p_start_thread(p) == 0)
    pthread_cond_signal(&p->work);
}

int baton__p2p_wait_until(baton_request_t *req, double until, int *done) {
  p2p_op_t *op = (p2p_op_t *)req;
  baton__p2p_t *p = op->comm->p2p;
  pthread_mutex_lock(&p->mu);
  p->waiters++;
  baton__p2p_drive(p, op, until);
  p->waiters--;
  *done = op->state == OP_DONE;
  hand_over(p);
  pthread_mutex_unlock(&p->mu);
  return *done ? retire(op) : BATON_OK;
}

int baton__p2p_test(baton_request_t *req, int *done) {
  p2p_op_t *op = (p2p_op_t *)req;
  baton__p2p_t *p = op->comm->p2p;
  pthread_mutex_lock(&p->mu);
  if (op->state != OP_DONE)
    baton__p2p_pass(p, 0, baton__now());
  *done = op->state == OP_DONE;
  /* A pass here may have matched a message whose ACK is still owed: left
   * to nobody, the sender would wait for it forever. */
  hand_over(p);
  pthread_mutex_unlock(&p->mu);
  return *done ? retire(op) : BATON_OK;
}

/* ---------------------------------------------------------------- set-up */

/* The lanes' segment: pair channels only, with no ring channel worth the
 * name and no mailboxes. */
static int connect_shm(baton__p2p_t *p, baton_comm_t *c, baton__params_t *pp, char *err,
                       size_t errlen) {
  int n = c->size, nlocal = 0, rc = 0;
  int tcp_only = strcmp(c->params.transport, "tcp") == 0;
  int *local = calloc((size_t)n, sizeof *local);
  if (!local)
    return BATON_ENOMEM;
  for (int r = 0; r < n; r++)
    if (c->group[r] == c->group[c->rank] && (!tcp_only || r == c->rank))
      local[nlocal++] = r;
  if (nlocal > 1) {
    char key[32];
    snprintf(key, sizeof key, "p2p.shm.%d", c->group[c->rank]);
    baton__shm_t *shm = NULL;
    rc = baton__shm_setup(c->store, key, c->rank, local, nlocal, -1, -1, pp, &shm, err, errlen);
    if (rc == 0) {
      p->net[p->nnet++] = (baton__net_t){&baton__shm_fabric, shm};
      for (int r = 0; r < n; r++)
        if (r != c->rank && !p->peers[r].out) {
          p->peers[r].out = baton__shm_fabric.conn_to(shm, r);
          p->peers[r].in = baton__shm_fabric.conn_from(shm, r);
        }
    }
  }
  free(local);
  return rc;
}

static int connect_tcp(baton__p2p_t *p, baton_comm_t *c, baton__params_t *pp, char *err,
                       size_t errlen) {
  int n = c->size, nremote = 0, rc;
  int *remote = calloc((size_t)n, sizeof *remote);
  if (!remote)
    return BATON_ENOMEM;
  for (int r = 0; r < n; r++)
    if (r != c->rank && !p->peers[r].out)
      remote[nremote++] = r;
  if (nremote == 0) {
    free(remote);
    return 0;
  }
  char ip[64];
  if ((rc = baton__pick_local_ip(c->params.socket_ifname, baton__store_host(c->store), ip,
                                 sizeof ip, err, errlen)) == 0) {
    baton__tcp_args_t a = {.rank = c->rank,
                           .size = n,
                           .comm_id = c->id ^ 0x7032707032707032ull,
                           .sig = &p->sig,
                           .to = remote,
                           .from = remote,
                           .nto = nremote,
                           .nfrom = nremote,
                           .local_ip = ip,
                           .hosts = c->hosts,
                           .secret = &c->secret,
                           .key = "p2p.tcp"};
    baton__tcp_t *tcp = NULL;
    if ((rc = baton__tcp_setup(c->store, &a, pp, &tcp, err, errlen)) == 0) {
      p->net[p->nnet++] = (baton__net_t){&baton__tcp_fabric, tcp};
      for (int i = 0; i < nremote; i++) {
        p->peers[remote[i]].out = baton__tcp_fabric.conn_to(tcp, remote[i]);
        p->peers[remote[i]].in = baton__tcp_fabric.conn_from(tcp, remote[i]);
      }
    }
  }
  free(remote);
  return rc;
}

int baton__p2p_connect(baton_comm_t *c, char *err, size_t errlen) {
  baton__p2p_t *p = calloc(1, sizeof *p);
  if (!p || !(p->peers = calloc((size_t)c->size, sizeof *p->peers))) {
    free(p);
    snprintf(err, errlen, "out of memory for point-to-point");
    return BATON_ENOMEM;
  }
  p->comm = c;
  c->p2p = p;
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->work, NULL);
  p->sig = (baton__sig_t){.root = -1};
  p->eager = c->params.p2p_eager_bytes;
  p->timeout_s = c->params.timeout_s;
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  p->oversubscribed = cpus > 0 && c->size > cpus;
  p->spin_s = (p->oversubscribed ? 2 : c->params.spin_us) * 1e-6;
  if (c->size == 1)
    return 0;
  /* The lanes' slots: the pair channels' size everywhere, one socket. */
  baton__params_t pp = c->params;
  pp.segment_bytes = pp.pair_segment_bytes;
  pp.flat_bytes = 0;
  pp.nsocks = 1;
  pp.shm_wake_all = 1; /* the thread and a caller may sleep on one lane at once */
  int rc = connect_shm(p, c, &pp, err, errlen);
  if (rc == 0)
    rc = connect_tcp(p, c, &pp, err, errlen);
  if (rc)
    return rc;
  /* Over sockets a reply takes tens of microseconds: poll them as long as
   * the collectives' TCP waits do before sleeping. */
  for (int i = 0; i < p->nnet; i++)
    if (p->net[i].ops == &baton__tcp_fabric && !p->oversubscribed &&
        c->params.tcp_spin_us * 1e-6 > p->spin_s)
      p->spin_s = c->params.tcp_spin_us * 1e-6;
  p->wait_spin_s =
      p->oversubscribed || c->params.spin_us == 0 || p->spin_s > 200e-6 ? p->spin_s : 200e-6;
  for (int r = 0; r < c->size; r++) {
    baton__conn_t *k[2] = {p->peers[r].out, p->peers[r].in};
    for (int i = 0; i < 2; i++)
      if (k[i])
        k[i]->sig = &p->sig, k[i]->self = c->rank;
  }
  return 0;
}

int baton__p2p_stop(baton_comm_t *comm) {
  baton__p2p_t *p = comm->p2p;
  if (!p)
    return 0;
  pthread_mutex_lock(&p->mu);
  int left = p->pending;
  p->stop = 1;
  pthread_cond_broadcast(&p->work);
  pthread_mutex_unlock(&p->mu);
  if (p->has_thread)
    pthread_join(p->thread, NULL);
  p->has_thread = 0;
  /* What is still in flight is the caller's no more: freed here. */
  for (int r = 0; r < comm->size; r++) {
    peer_t *q = &p->peers[r];
    for (p2p_op_t *op = q->sends, *next; op; op = next)
      next = op->next, free(op);
    for (p2p_op_t *op = q->recvs, *next; op; op = next)
      next = op->next, free(op);
    for (msg_t *m = q->msgs; m; m = m->next)
      if (m->recv)
        free(m->recv), m->recv = NULL;
    q->sends = q->recvs = NULL;
  }
  return left;
}

void baton__p2p_shutdown(baton_comm_t *comm, int rc, const char *msg) {
  baton__p2p_t *p = comm->p2p;
  for (int i = 0; p && i < p->nnet; i++)
    p->net[i].ops->shutdown(p->net[i].impl, rc, msg);
}

void baton__p2p_free(baton_comm_t *comm, int clean) {
  baton__p2p_t *p = comm->p2p;
  if (!p)
    return;
  baton__p2p_stop(comm);
  for (int i = 0; i < p->nnet; i++)
    p->net[i].ops->destroy(p->net[i].impl, clean);
  for (int r = 0; r < comm->size; r++) {
    while (p->peers[r].msgs)
      baton__p2p_msg_free(&p->peers[r], p->peers[r].msgs);
    free(p->peers[r].ctrl.f);
  }
  pthread_cond_destroy(&p->work);
  pthread_mutex_destroy(&p->mu);
  free(p->peers);
  free(p);
  comm->p2p = NULL;
}
