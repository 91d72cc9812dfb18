/*
 * split.c - communicators made from communicators: baton_comm_split and
 * baton_comm_dup.
 *
 * A split is these steps, those over the parent with its public
 * collectives:
 *  1. an allgather of every rank's (color, key): each rank then knows its
 *     group, its rank in it (by key, then by rank in the parent) and,
 *     from the parent's tables, which of its peers share its memory;
 *  2. the child's preparation, which touches no peer: knobs, tables and a
 *     client of the parent's store of its own, every key prefixed with the
 *     child's id, so no two communicators' keys ever meet;
 *  3. an allreduce of the outcome over the parent, so that a rank that
 *     could not prepare never leaves its group waiting for it;
 *  4. the set-up among the group's ranks only (bootstrap.c's steps after
 *     the ranks and hosts are known: ring, connections, barrier);
 *  5. an allreduce of the outcome again, so that either every rank has its
 *     new communicator or every rank returns an error, and no rank leaves
 *     the split (and perhaps destroys the communicator whose process serves
 *     the store) while another group still sets up through the store.
 *
 * The child's id is the parent's id mixed with the parent's count of
 * splits and the color: the same on every rank of a group, different for
 * every group, without a message. The store server's process holds the
 * server once more for each communicator of its own made from it
 * (baton__store_hold), so the server lives until the last of them is
 * destroyed.
 *
 * The family. A child is linked to its parent until one of the two is
 * destroyed, and fails when the parent fails on this rank (a lost peer, a
 * timeout, a mismatch, baton_comm_abort): its checks (the start of every
 * call, the watch of every wait, the point-to-point passes) look up its
 * living ancestors and fail with the first failure found, named as the
 * parent's. A parent destroyed after failing leaves its failure with its
 * children; one destroyed normally leaves them on their own. The links are
 * under one lock of the process, taken by the checks only when some
 * communicator anywhere has failed since the child last looked
 * (baton__failures); it guards the links and the ancestors' memory (a
 * destroy unlinks first), and nothing else is taken under it. An abort,
 * from a signal handler too, is only flags and that count's increment,
 * which the checks read.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"

static uint64_t child_id(const baton_comm_t *parent, uint32_t serial, int color) {
  return baton__mix64(parent->id + baton__mix64((uint64_t)serial << 32 | (uint32_t)color));
}

typedef struct {
  int key, prank;
} member_t;

static int by_key(const void *a, const void *b) {
  const member_t *x = a, *y = b;
  if (x->key != y->key)
    return x->key < y->key ? -1 : 1;
  return (x->prank > y->prank) - (x->prank < y->prank);
}

/* What init learns from the environment, taken from the parent: the knobs
 * (and BATON_ALGO's table), the secret, the store (and the server, where this process has it), the
 * host of every member. */
static int adopt_parent(baton_comm_t *c, const baton_comm_t *parent, const int *prank, char *err,
                        size_t errlen) {
  c->params = parent->params;
  memcpy(c->forced, parent->forced, sizeof c->forced);
  c->params.rank = c->rank;
  c->params.size = c->size;
  if (c->params.trace[0]) { /* the parent's files keep the parent's steps */
    size_t len = strlen(c->params.trace);
    if (len + 18 > sizeof c->params.trace) {
      snprintf(err, errlen, "BATON_TRACE is too long for the name of a split's trace");
      return BATON_EUSAGE;
    }
    snprintf(c->params.trace + len, sizeof c->params.trace - len, ".%016llx",
             (unsigned long long)c->id);
  }
  c->secret = parent->secret;
  c->server = baton__store_hold(parent->server);
  char prefix[BATON__STORE_PREFIX_MAX + 1];
  snprintf(prefix, sizeof prefix, "c%016llx/", (unsigned long long)c->id);
  int rc = baton__store_open_child(parent->store, prefix, &c->store, err, errlen);
  if (rc || (rc = baton__comm_tables(c, err, errlen)) != 0)
    return rc;
  /* Locality is the parent's: group[r] is the lowest child rank that
   * shares r's memory, as learn_hosts would have found it, and each rank
   * keeps its NUMA node. */
  for (int r = 0; r < c->size; r++) {
    memcpy(c->hosts[r], parent->hosts[prank[r]], sizeof c->hosts[r]);
    c->node[r] = parent->node[prank[r]];
    c->group[r] = r;
    for (int q = 0; q < r; q++)
      if (parent->group[prank[q]] == parent->group[prank[r]]) {
        c->group[r] = c->group[q];
        break;
      }
  }
  return BATON_OK;
}

/* ", split 2 of 0123456789abcdef, color 1, parent ranks 3 1 2" */
static void describe(char *buf, size_t cap, const baton_comm_t *parent, uint32_t serial, int color,
                     const int *prank, int n) {
  size_t off = (size_t)snprintf(buf, cap, ", split %u of %016llx, color %d, parent ranks", serial,
                                (unsigned long long)parent->id, color);
  for (int r = 0; r < n && off < cap; r++) {
    if (off + 16 > cap && r < n - 1) {
      snprintf(buf + off, cap - off, " ...");
      break;
    }
    off += (size_t)snprintf(buf + off, cap - off, " %d", prank[r]);
  }
}

/* Step 2a, which touches no peer: the child with its knobs, store client
 * and tables, or an error. */
static int prepare_child(baton_comm_t *parent, const int *prank, int n, int me, int color,
                         uint32_t serial, baton_comm_t **out, char *err, size_t errlen) {
  baton_comm_t *c = baton__comm_new();
  if (!c) {
    snprintf(err, errlen, "out of memory");
    return BATON_ENOMEM;
  }
  c->rank = me;
  c->size = n;
  c->id = child_id(parent, serial, color);
  int rc = adopt_parent(c, parent, prank, err, errlen);
  if (rc != BATON_OK) {
    baton__comm_free(c, 0);
    return rc;
  }
  *out = c;
  return BATON_OK;
}

/* Step 1's result: this rank's group in the new order; the count. */
static int group_of(const int32_t *all, int size, int color, int *prank) {
  member_t *m = malloc((size_t)size * sizeof *m);
  int n = 0;
  if (!m)
    return -1;
  for (int r = 0; r < size; r++)
    if (all[2 * r] == color)
      m[n++] = (member_t){all[2 * r + 1], r};
  qsort(m, (size_t)n, sizeof *m, by_key);
  for (int i = 0; i < n; i++)
    prank[i] = m[i].prank;
  free(m);
  return n;
}

/* The worst outcome over the parent's ranks, with the lowest rank that had
 * it; 0 when every rank has what it asked for. *arc: the allreduce's own
 * code (the parent failed meanwhile). */
static int agree(baton_comm_t *comm, int rc, int *who, int *arc) {
  int64_t mine = rc < 0 ? (int64_t)((uint64_t)(int64_t)rc << 32 | (uint32_t)comm->rank) : 0,
          worst = 0;
  *arc = baton_allreduce(&mine, &worst, 1, BATON_INT64, BATON_MIN, comm);
  *who = (int)(uint32_t)((uint64_t)worst & 0xffffffffu);
  return *arc ? *arc : worst < 0 ? (int)(worst >> 32) : 0;
}

/* Step 2 and 3 for one rank of the parent: child is this rank's prepared
 * child or NULL (BATON_SPLIT_NONE, or rc says why not). The first agreement
 * comes before any rank connects, so that a rank that could not even
 * prepare (its store connection, its memory, its BATON_TRACE) never leaves
 * its group waiting in the set-up for it until BATON_TIMEOUT. */
static int set_up(baton_comm_t *comm, baton_comm_t **child, int rc, const char *origin, char *err,
                  size_t errlen) {
  int who, arc, worst = agree(comm, rc, &who, &arc), connected = 0;
  if (worst == 0 && *child) {
    rc = baton__comm_connect(*child, origin, err, errlen);
    connected = rc == BATON_OK;
    if (rc != BATON_OK) {
      baton__comm_free(*child, 0);
      *child = NULL;
    }
  }
  if (worst == 0)
    worst = agree(comm, rc, &who, &arc);
  if (worst == 0)
    return BATON_OK;
  if (*child) {
    /* Every rank discards its new communicator: abort tells its peers, so
     * none waits in destroy's barrier for a rank that has left. */
    if (connected) {
      baton_comm_abort(*child);
      baton_comm_destroy(*child);
    } else {
      baton__comm_free(*child, 0);
    }
    *child = NULL;
  }
  if (arc != BATON_OK)
    return arc; /* the parent failed during the split; its error says how */
  if (rc == BATON_OK)
    snprintf(err, errlen,
             "rank %d of this communicator could not set up its new one (%s); every rank's new "
             "communicator is discarded",
             who, baton_err_name(worst));
  return rc != BATON_OK ? rc : worst;
}

int baton_comm_split(baton_comm_t *comm, int color, int key, baton_comm_t **newcomm) {
  if (newcomm)
    *newcomm = NULL;
  if (!comm || !newcomm || (color < 0 && color != BATON_SPLIT_NONE)) {
    if (comm)
      baton__set_error(comm, "baton_comm_split: %s",
                       !newcomm ? "newcomm is NULL" : "color is neither >= 0 nor BATON_SPLIT_NONE");
    return BATON_EINVAL;
  }
  int32_t mine[2] = {color, key}, *all = malloc(2 * (size_t)comm->size * sizeof *all);
  int *prank = malloc((size_t)comm->size * sizeof *prank);
  if (!all || !prank) {
    free(all), free(prank);
    return baton__fail(comm, BATON_ENOMEM, "baton_comm_split: out of memory for %d ranks",
                       comm->size);
  }
  int rc = baton_allgather(mine, all, 2, BATON_INT32, comm);
  if (rc != BATON_OK) { /* a failed parent: its error, already in last_error */
    free(all), free(prank);
    return rc;
  }
  uint32_t serial = comm->splits++;
  char err[BATON__ERRLEN] = "", origin[600] = "";
  baton_comm_t *child = NULL;
  int n = color == BATON_SPLIT_NONE ? 0 : group_of(all, comm->size, color, prank), me = 0;
  while (me < n && prank[me] != comm->rank)
    me++;
  if (n < 0) {
    snprintf(err, sizeof err, "out of memory");
    rc = BATON_ENOMEM;
  } else if (n > 0) {
    describe(origin, sizeof origin, comm, serial, color, prank, n);
    rc = prepare_child(comm, prank, n, me, color, serial, &child, err, sizeof err);
  } else {
    baton__log_info(INIT, "split %u of %016llx: BATON_SPLIT_NONE, no new communicator here", serial,
                    (unsigned long long)comm->id);
  }
  free(all), free(prank);
  rc = set_up(comm, &child, rc, origin, err, sizeof err);
  if (rc != BATON_OK && err[0]) {
    baton__set_error(comm, "baton_comm_split: color %d, rank %d of %d: %.400s", color, me, n, err);
    baton__log_warn(INIT, "%s: %s", baton_err_name(rc), baton_comm_last_error(comm));
  }
  if (child)
    baton__family_link(comm, child);
  *newcomm = child;
  return rc;
}

int baton_comm_dup(baton_comm_t *comm, baton_comm_t **newcomm) {
  return baton_comm_split(comm, 0, comm ? comm->rank : 0, newcomm);
}

/* ---------------------------------------------------------------- family */

static pthread_mutex_t family_mu = PTHREAD_MUTEX_INITIALIZER;

void baton__family_link(baton_comm_t *parent, baton_comm_t *child) {
  pthread_mutex_lock(&family_mu);
  child->parent = parent;
  child->next_sibling = parent->children;
  parent->children = child;
  child->from_split = 1;
  /* One less than the count: the first check looks, whatever failed before. */
  atomic_store(&child->failures_seen, atomic_load(&baton__failures) - 1);
  pthread_mutex_unlock(&family_mu);
}

/* a's own failure, or the one its destroyed parent left it; under the lock. */
static int failure_of(const baton_comm_t *a, const char **msg, char *buf, size_t len) {
  int rc = atomic_load_explicit(&a->fatal_rc, memory_order_acquire);
  if (rc) {
    *msg = a->fatal_msg;
  } else if (atomic_load_explicit(&a->abort_requested, memory_order_acquire)) {
    snprintf(buf, len, "rank %d: baton_comm_abort was called on it", a->rank);
    *msg = buf, rc = BATON_EABORTED;
  } else if (a->parent_rc) {
    *msg = a->parent_msg, rc = a->parent_rc;
  }
  return rc;
}

/* The first failure up comm's living ancestors, described; under the lock. */
static int ancestors_failure(const baton_comm_t *comm, char *why, size_t whylen) {
  if (comm->parent_rc) {
    snprintf(why, whylen, "%s", comm->parent_msg);
    return comm->parent_rc;
  }
  int level = 1;
  for (const baton_comm_t *a = comm->parent; a; a = a->parent, level++) {
    char buf[64];
    const char *msg = NULL;
    int rc = failure_of(a, &msg, buf, sizeof buf);
    if (rc) {
      snprintf(why, whylen, BATON__PARENT_FAILED " %016llx%s failed (%.400s)",
               (unsigned long long)a->id, level == 1 ? "" : ", an ancestor,", msg);
      return rc;
    }
  }
  return 0;
}

int baton__family_check(baton_comm_t *comm, char *why, size_t whylen) {
  unsigned now = atomic_load_explicit(&baton__failures, memory_order_acquire);
  if (now == atomic_load_explicit(&comm->failures_seen, memory_order_relaxed))
    return 0;
  pthread_mutex_lock(&family_mu);
  int rc = ancestors_failure(comm, why, whylen);
  pthread_mutex_unlock(&family_mu);
  /* A failure found stays found (a parent's failure is for good): only
   * nothing found is remembered. */
  if (!rc)
    atomic_store_explicit(&comm->failures_seen, now, memory_order_relaxed);
  return rc;
}

void baton__family_unlink(baton_comm_t *comm) {
  pthread_mutex_lock(&family_mu);
  for (baton_comm_t *ch = comm->children, *next; ch; ch = next) {
    next = ch->next_sibling;
    /* A failure of this one or of its ancestors stays with the children. */
    if (!ch->parent_rc)
      ch->parent_rc = ancestors_failure(ch, ch->parent_msg, sizeof ch->parent_msg);
    ch->parent = NULL;
    ch->next_sibling = NULL;
  }
  comm->children = NULL;
  if (comm->parent)
    for (baton_comm_t **l = &comm->parent->children; *l; l = &(*l)->next_sibling)
      if (*l == comm) {
        *l = comm->next_sibling;
        break;
      }
  comm->parent = NULL;
  pthread_mutex_unlock(&family_mu);
}
