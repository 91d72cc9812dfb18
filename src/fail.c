/*
 * fail.c - how a failure travels: baton__fail records it and, when it
 * breaks the communicator, poisons every transport (and, with TCP, leaves
 * the cause in the store for ranks whose connections broke first);
 * baton__comm_begin refuses calls on a broken communicator (or one whose
 * parent failed); the watch that every wait checks; baton_comm_abort,
 * which a signal handler may call; and the last error, which any thread
 * may read while another records a failure.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "comm.h"
#include "p2p.h"

static int breaks_comm(int rc) {
  /* ENOMEM reaches baton__fail only from a collective that has begun (its
   * scratch memory): the peers wait for this rank's part, so they must be
   * told rather than left to time out. */
  return rc == BATON_EREMOTE || rc == BATON_ETIMEDOUT || rc == BATON_EPROTO ||
         rc == BATON_EMISMATCH || rc == BATON_EABORTED || rc == BATON_ESYS || rc == BATON_ENOMEM;
}

_Atomic unsigned baton__failures;

void baton__set_error(baton_comm_t *comm, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  pthread_mutex_lock(&comm->err_mu);
  int back = !atomic_load_explicit(&comm->err_shown, memory_order_relaxed);
  vsnprintf(comm->last_error[back], sizeof comm->last_error[back], fmt, ap);
  atomic_store_explicit(&comm->err_shown, back, memory_order_release);
  pthread_mutex_unlock(&comm->err_mu);
  va_end(ap);
}

const char *baton_comm_last_error(const baton_comm_t *comm) {
  if (!comm)
    return "comm is NULL";
  return comm->last_error[atomic_load_explicit(&comm->err_shown, memory_order_acquire)];
}

/* Where a message quotes another rank's failure: the first ": rank N: ". */
static const char *relayed_cause(const char *msg) {
  for (const char *p = strstr(msg, ": rank "); p; p = strstr(p + 1, ": rank ")) {
    const char *q = p + 7;
    if (*q < '0' || *q > '9')
      continue;
    while (*q >= '0' && *q <= '9')
      q++;
    if (q[0] == ':' && q[1] == ' ')
      return p + 2;
  }
  return NULL;
}

/* A connection broke with no word from the peer: perhaps a rank failed for
 * a reason of its own and published it in the store (baton__fail). Waits
 * for that a moment; returns its code with the cause appended to msg, or rc. */
static int explain(baton_comm_t *comm, int rc, char *msg, size_t msglen) {
  char val[BATON__ERRLEN + 16], err[128];
  size_t len = 0;
  if (baton__store_get(comm->store, "abort", val, sizeof val - 1, &len, 0.15, err, sizeof err))
    return rc;
  val[len < sizeof val ? len : sizeof val - 1] = '\0';
  int code = 0, off = 0;
  if (sscanf(val, "%d %n", &code, &off) != 1 || code >= 0 || code < -100 || off <= 0)
    return rc;
  size_t used = strlen(msg);
  snprintf(msg + used, msglen - used, "; the cause: %s", val + off);
  return code;
}

/* Some rank is reached other than through this host's memory (TCP): its
 * failures may show there only as a broken connection. */
int baton__reaches_other_hosts(const baton_comm_t *comm) {
  return comm->nnet > (comm->host_net ? 1 : 0);
}

/* Publishes comm's failure, once: the message first, then the code.
 * Returns -1 where another thread published one first, else whether the
 * failure is this rank's own (not relayed from another rank). */
static int break_comm(baton_comm_t *comm, int rc, const char *msg) {
  if (atomic_exchange(&comm->fatal_claimed, 1))
    return -1;
  /* A failure relayed from another rank ("... rank R: cause") is passed
   * on as its cause, so that messages do not nest along the ring; a
   * parent's failure is passed on whole, so that it still says so. */
  const char *cause = strstr(msg, BATON__PARENT_FAILED) ? NULL : relayed_cause(msg);
  if (cause)
    snprintf(comm->fatal_msg, sizeof comm->fatal_msg, "%s", cause);
  else
    snprintf(comm->fatal_msg, sizeof comm->fatal_msg, "rank %d: %.400s", comm->rank, msg);
  atomic_store_explicit(&comm->fatal_rc, rc, memory_order_release);
  atomic_fetch_add_explicit(&baton__failures, 1, memory_order_release); /* for its children */
  return cause == NULL;
}

int baton__fail(baton_comm_t *comm, int rc, const char *fmt, ...) {
  char msg[BATON__ERRLEN];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  baton__log_warn(COLL, "%s: %s", baton_err_name(rc), msg);
  if (rc == BATON_EREMOTE && !comm->fatal_rc && comm->store && !relayed_cause(msg) &&
      !strstr(msg, BATON__PARENT_FAILED)) /* a parent's failure says its cause */
    rc = explain(comm, rc, msg, sizeof msg);
  baton__set_error(comm, "%s", msg);
  if (breaks_comm(rc) && !comm->fatal_rc) {
    int own = break_comm(comm, rc, msg);
    for (int i = 0; own >= 0 && i < comm->nnet; i++)
      comm->net[i].ops->poison(comm->net[i].impl, rc, comm->fatal_msg);
    if (own > 0 && baton__reaches_other_hosts(comm)) {
      /* Also where any rank can read it, for a rank whose connections broke
       * before the abort frames reached it (see explain()). */
      char val[BATON__ERRLEN + 16], err[128];
      int n = snprintf(val, sizeof val, "%d %s", rc, comm->fatal_msg);
      baton__store_set(comm->store, "abort", val, (size_t)n + 1, err, sizeof err);
    }
  }
  return rc;
}

int baton__comm_begin(baton_comm_t *comm, const char *name) {
  char why[BATON__ERRLEN];
  int rc = comm->fatal_rc;
  /* The cheap part of the watch only (two loads of lines nobody writes
   * while all is well); the rest runs while a wait lasts. */
  if (!rc && atomic_load_explicit(&comm->abort_requested, memory_order_relaxed)) {
    snprintf(why, sizeof why, "baton_comm_abort was called on rank %d", comm->rank);
    rc = BATON_EABORTED;
  } else if (!rc && comm->host_net) {
    rc = comm->host_net->ops->check(comm->host_net->impl, why, sizeof why);
  }
  if (!rc && comm->from_split)
    rc = baton__family_check(comm, why, sizeof why);
  if (rc && !comm->fatal_rc)
    return baton__fail(comm, rc, "%s #%llu: %s", name, (unsigned long long)comm->seq, why);
  if (rc)
    baton__set_error(comm, "%s #%llu: this communicator failed earlier: %.440s", name,
                     (unsigned long long)comm->seq, comm->fatal_msg);
  return rc;
}

/* The watch every wait checks: an abort on this rank, a failure that a
 * rank of this host published, or (shared memory, while this rank works
 * through a schedule) a rank that entered a rendezvous with another call
 * under the same collective number. */
int baton__comm_check(void *ctx, char *why, size_t whylen) {
  baton_comm_t *c = ctx;
  if (atomic_load_explicit(&c->abort_requested, memory_order_acquire)) {
    snprintf(why, whylen, "baton_comm_abort was called on rank %d", c->rank);
    return BATON_EABORTED;
  }
  /* Every transport when there are several, so that one keeps moving (and
   * its failures show) while a rank waits on the other; a lone transport
   * sees its own failures in its wait, and only the host's poison, cheap
   * and perhaps from a rank that failed elsewhere, is read again. */
  int rc = c->from_split ? baton__family_check(c, why, whylen) : 0;
  for (int i = 0; !rc && i < c->nnet; i++)
    if (c->nnet > 1 || &c->net[i] == c->host_net)
      rc = c->net[i].ops->check(c->net[i].impl, why, whylen);
  if (!rc && c->host_net && c->seq > 0) {
    baton__sig_t call = baton__sig_call(&c->sig); /* the others publish their calls */
    rc = c->host_net->ops->peek(c->host_net->impl, c->shm_calls + 1, &call, why, whylen);
  }
  return rc;
}

/* Text and a decimal into p, without stdio (not async-signal-safe); each
 * returns the characters written. */
static size_t put_text(char *p, const char *s) {
  size_t n = 0;
  for (; s[n]; n++)
    p[n] = s[n];
  return n;
}

static size_t put_decimal(char *p, unsigned v) {
  char d[10];
  size_t n = 0;
  do
    d[n++] = (char)('0' + v % 10);
  while ((v /= 10) != 0);
  for (size_t i = 0; i < n; i++)
    p[i] = d[n - 1 - i];
  return n;
}

int baton_comm_abort(baton_comm_t *comm) {
  if (!comm)
    return BATON_EINVAL;
  /* Only atomic stores, plain stores to the stack and system calls (each
   * transport's shutdown is async-signal-safe): safe from another thread or
   * a signal handler, and it never waits. */
  atomic_store_explicit(&comm->abort_requested, 1, memory_order_release);
  atomic_fetch_add_explicit(&baton__failures, 1,
                            memory_order_release); /* lock-free: for children */
  char msg[64];
  size_t n = put_text(msg, "rank ");
  n += put_decimal(msg + n, (unsigned)comm->rank);
  n += put_text(msg + n, " called baton_comm_abort");
  msg[n] = '\0';
  for (int i = 0; i < comm->nnet; i++)
    comm->net[i].ops->shutdown(comm->net[i].impl, BATON_EABORTED, msg);
  baton__p2p_shutdown(comm, BATON_EABORTED, msg);
  return BATON_OK;
}
